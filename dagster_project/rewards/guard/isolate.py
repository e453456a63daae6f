"""The parent side: run one candidate file in its own process and judge what came back.

``run_candidate(task, source)`` writes the source to a private folder, draws the job's
secrets (phase seeds, call counts, unseen shapes, which timed calls are spot-checked) from
``secrets`` at run time, starts ``guard.child`` in a new session with a fixed environment
(no ``CUDA_LAUNCH_BLOCKING``, no ``PYTHON*`` hooks, a fresh Triton cache, one BLAS thread),
reads its token-tagged messages from a dedicated pipe while timing each phase with its
own clock, kills the whole session afterwards and then, with numpy only, checks every
snapshot: type, dtype, shape, strides, aliasing, finiteness, tolerance against the float64
reference computed here, child clock against parent wall clock, device events against
wall clock. The verdict names the first defence that failed. With ``baseline`` (the
before_code) the child also times the baseline after every timed call, and
``details["paired_speedup"]`` is the median of the per-call ratios: a speedup measured in
one process at one moment, which drift between processes cannot fake.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checks import Expected, check_meta, compare, contiguous_strides, timing_consistent
from .tasks import TASKS, Task, reference

#: Seconds a candidate run may take in all (phases, compile, imports).
DEFAULT_TIMEOUT_S = 180.0
#: Environment variables the child keeps from the parent (everything else is dropped).
KEEP_ENV = ("PATH", "HOME", "LANG", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "TRITON_INTERPRET")
#: glibc's heap in the child (guard 1.6.0): never trimmed, arrays under 32 MiB (glibc's
#: most) from the heap. The judge holds every checked output to its phase's end and
#: touches the heap those outputs will take beforehand (``backends.reserve``), so a timed
#: call's output lands on pages already mapped instead of faulting fresh ones in on the
#: clock; the candidate and the baseline timed beside it run under the same heap.
MALLOC_ENV = {"MALLOC_TRIM_THRESHOLD_": str(2**40), "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20)}
#: Device events may not be shorter than this share of the wall clock of a call (minus
#: ``EVENT_SLACK_US`` of launch and synchronisation): the rest ran off the timed stream.
MIN_EVENT_SHARE = 0.5
EVENT_SLACK_US = 30.0
#: The process's CPU time of a call may not exceed its wall time by more than this factor
#: plus 0.5 ms (one thread: CPU time <= wall time); more means the wall clock was slowed.
MAX_CPU_OVER_WALL = 1.2


@dataclass
class RunResult:
    """A candidate's verdict: ``ok``, else the ``defence`` that fired and ``reason``;
    ``t_us`` is the median wall-clock time per timed call (device-synchronised)."""

    ok: bool
    defence: str = ""
    reason: str = ""
    t_us: float | None = None
    event_us: float | None = None
    rel_err: float | None = None
    wall_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


def _repo_root() -> str:
    return str(Path(__file__).resolve().parents[3])


def child_env(cache_dir: str) -> dict[str, str]:
    """The candidate's environment: a few variables kept, the rest fixed here."""
    env = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
    path = os.pathsep.join(p for p in (_repo_root(), os.environ.get("PYTHONPATH", "")) if p)
    env.update(
        PYTHONPATH=path,
        PYTHONNOUSERSITE="1",
        PYTHONDONTWRITEBYTECODE="1",
        TRITON_CACHE_DIR=cache_dir,
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        **MALLOC_ENV,
    )
    return env


def make_plan(task: Task, rng: secrets.SystemRandom | None = None) -> dict[str, Any]:
    """Per-phase calls: shape and seed (fresh per phase and call). Every call of the check,
    timed and reval phases is checked (guard 1.6.0: the child snapshots them all; ``snap``
    only says so here). The unseen shapes are drawn by class, so a gate on a shape class
    meets its class every run: the check phase always has one ``M`` that is a power of two
    and one that is odd, the reval phase one drawn from the whole range (1.5.0 drew all
    three from the range, and heldout3's ``pow2-gate``, wrong only on power-of-two shapes,
    met one in about one run of ten)."""
    r = rng or secrets.SystemRandom()

    def seed() -> int:
        return r.randrange(1, 2**62)

    n_timed = task.timed_calls + r.randrange(0, 4)
    warm = [list(task.warmup[i % len(task.warmup)]) for i in range(2 + r.randrange(0, 3))]
    pow2, odd, anyone = unseen_shapes(task, r)
    return {
        "warmup": [{"shape": s, "seed": seed()} for s in warm],
        "check": [
            {"shape": s, "seed": seed(), "snap": True} for s in (list(task.timed), pow2, odd)
        ],
        "timed": [
            {"shape": list(task.timed), "seed": seed(), "snap": True} for _ in range(n_timed)
        ],
        "reval": [{"shape": s, "seed": seed(), "snap": True} for s in (list(task.timed), anyone)],
    }


def unseen_shapes(task: Task, r: secrets.SystemRandom) -> list[list[int]]:
    """Three shapes the warm-up and timed calls never use: a power-of-two ``M``, an odd
    ``M`` and one from the whole range, in ``task.unseen_m``."""
    seen = {s[0] for s in task.warmup} | {task.timed[0]}
    lo, hi = task.unseen_m
    free = [m for m in range(lo, hi) if m not in seen]
    classes = (
        [m for m in free if m & (m - 1) == 0],
        [m for m in free if m % 2],
        free,
    )
    return [list(task.unseen_shape(r.choice(ms or free))) for ms in classes]


class _Channel:
    """Reads the child's token-tagged lines from the pipe, stamping each phase with the
    parent's clock; lines without the token are ignored (and counted)."""

    def __init__(self, fd: int, token: str) -> None:
        self.fd, self.token = fd, token
        self.buf = b""
        self.messages: list[dict[str, Any]] = []
        self.stamps: dict[tuple[str, str], float] = {}
        self.forged = 0

    def pump(self, deadline: float, proc: subprocess.Popen[bytes] | None = None) -> bool:
        """Read until EOF or ``deadline``; ``False`` on timeout. With ``proc``: also stop once
        the child has exited and nothing is left to read, so a process it forked that holds
        the pipe open (EOF never comes) cannot hold the judge until the deadline; the
        leftover process is found and killed by ``_kill_session``."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.2 if proc else 1.0))
            if not ready:
                if proc is not None and proc.poll() is not None:
                    return True
                continue
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return True
            self.buf += chunk
            self._lines()

    def _lines(self) -> None:
        now = time.monotonic()
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                self.forged += 1
                continue
            if not isinstance(msg, dict) or msg.get("token") != self.token:
                self.forged += 1
                continue
            self.messages.append(msg)
            if msg.get("event") in ("phase_start", "phase_end"):
                self.stamps[(str(msg["event"]), str(msg["phase"]))] = now


def _kill_session(proc: subprocess.Popen[bytes]) -> bool:
    """Kill the child's whole session; ``True`` if anything besides the child was alive."""
    leftover = False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if proc.poll() is not None:
            os.killpg(proc.pid, 0)  # raises if the group is empty
            leftover = True
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.wait(timeout=10)
    return leftover


def run_candidate(
    task_name: str,
    source: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    plan: Any = None,
    baseline: str | None = None,
) -> RunResult:
    """Run ``source`` (a module defining the task's entry) in its own process and judge it;
    ``baseline``: a trusted file (the before_code) timed beside it (see the module doc)."""
    task = TASKS[task_name]
    with tempfile.TemporaryDirectory(prefix="guard-") as tmp:
        root = Path(tmp)
        for sub in ("cand", "out", "cwd", "triton"):
            (root / sub).mkdir(mode=0o700)
        cand = root / "cand" / "candidate.py"
        cand.write_text(source)
        base_file = root / "cand" / "baseline.py"
        if baseline is not None:
            base_file.write_text(baseline)
        token = secrets.token_hex(16)
        read_fd, write_fd = os.pipe()
        job = {
            "task": task.name,
            "candidate": str(cand),
            "token": token,
            "result_fd": write_fd,
            "out_dir": str(root / "out"),
            "plan": plan or make_plan(task),
            "baseline": str(base_file) if baseline is not None else None,
        }
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "dagster_project.rewards.guard.child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(write_fd,),
            cwd=root / "cwd",
            env=child_env(str(root / "triton")),
            start_new_session=True,
        )
        os.close(write_fd)
        chan = _Channel(read_fd, token)
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
            finished = chan.pump(started + timeout_s, proc)
        finally:
            os.close(read_fd)
            leftover = _kill_session(proc)
        stderr = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
        result = judge(task, chan, finished=finished, leftover=leftover)
        result.wall_s = time.monotonic() - started
        result.details.setdefault("stderr_tail", stderr[-500:])
        return result


def judge(task: Task, chan: _Channel, *, finished: bool, leftover: bool) -> RunResult:
    """The verdict from the child's messages (pure apart from reading snapshot files)."""
    events = {m.get("event"): m for m in chan.messages}
    if "violation" in events:
        v = events["violation"]
        return RunResult(False, str(v.get("defence")), str(v.get("reason")))
    if not finished:
        return RunResult(False, "timeout", "the candidate did not finish in time")
    if "done" not in events:
        why = "the process ended without the judge's verdict (exit, crash or kill)"
        return RunResult(False, "no_verdict", why, details={"forged_lines": chan.forged})
    if leftover:
        return RunResult(False, "threads", "a process of the candidate outlived it")
    phases = {m["phase"]: m for m in chan.messages if m.get("event") == "phase_end"}
    for name in ("check", "timed", "reval"):
        verdict = _check_phase(task, name, phases.get(name))
        if verdict is not None:
            return verdict
    for name in ("check", "timed", "reval"):
        shared = phases[name].get("shared")
        if shared:  # after the values: a wrong array returned twice is named by its values
            why = f"outputs {shared[0]} and {shared[-1]} of {name} share a buffer"
            return RunResult(False, "reused_buffer", why)
    result = _timing(chan, phases)
    result.details["persisting_l2"] = events["done"].get("persisting_l2")
    result.details["threads"] = events.get("ready", {}).get("threads")
    return result


def _check_phase(task: Task, name: str, phase: dict[str, Any] | None) -> RunResult | None:
    if phase is None:
        return RunResult(False, "no_verdict", f"phase {name} missing")
    for call in phase.get("calls") or []:
        if "meta" not in call:
            continue
        shape = tuple(call["shape"])
        out_shape = (shape[0], shape[2])
        expected = Expected(
            "numpy.ndarray" if task.backend == "numpy" else "torch.Tensor",
            task.dtype,
            out_shape,
            contiguous_strides(out_shape),
        )
        verdict = check_meta(call["meta"], expected)
        try:
            if verdict.ok:
                verdict = compare(_load(call["output"]), _reference(call["inputs"]), task.dtype)
        except (ValueError, OSError, KeyError) as exc:
            return RunResult(False, "snapshot_integrity", f"{name} call {call['tag']}: {exc}")
        if not verdict.ok:
            where = f"{name} call {call['tag']} (M={shape[0]})"
            return RunResult(False, verdict.defence, f"{where}: {verdict.reason}", None)
    return None


def _load(ref: dict[str, str]) -> Any:
    import numpy as np

    data = Path(ref["path"]).read_bytes()
    if hashlib.sha256(data).hexdigest() != ref["sha256"]:
        raise ValueError(f"snapshot {ref['path']} changed after it was written")
    return np.load(ref["path"], allow_pickle=False)


def _reference(inputs: dict[str, dict[str, str]]) -> Any:
    return reference({k: _load(v) for k, v in inputs.items()})


def _timing(chan: _Channel, phases: dict[str, dict[str, Any]]) -> RunResult:
    timed = phases["timed"]
    calls = timed.get("calls") or []
    walls = [float(c["wall_s"]) for c in calls]
    events = [c.get("event_s") for c in calls]
    start = chan.stamps.get(("phase_start", "timed"))
    end = chan.stamps.get(("phase_end", "timed"))
    if start is not None and end is not None:
        total = float(timed.get("total_s") or 0.0)
        why = timing_consistent(sum(walls), total - sum(walls), end - start)
        if why is not None:
            return RunResult(False, "wall_clock", why)
    t_us = statistics.median(walls) * 1e6
    cpus = [float(c["cpu_s"]) for c in calls if c.get("cpu_s") is not None]
    if cpus:
        cpu_us = statistics.median(cpus) * 1e6
        if cpu_us > MAX_CPU_OVER_WALL * t_us + 500.0:
            why = f"CPU time {cpu_us:.1f} us per call exceeds the wall clock's {t_us:.1f} us"
            return RunResult(False, "wall_clock", why + ": the judge's clock was slowed")
    ev_us: float | None = None
    if all(e is not None for e in events) and events:
        ev_us = statistics.median(float(e) for e in events if e is not None) * 1e6
        if ev_us > t_us * 1.05 + 5.0:
            return RunResult(False, "wall_clock", f"device time {ev_us:.1f} us > wall {t_us:.1f}")
        if ev_us < MIN_EVENT_SHARE * t_us - EVENT_SLACK_US:
            why = f"device events {ev_us:.1f} us cover under half the wall time {t_us:.1f} us"
            return RunResult(False, "wall_clock", why + ": work ran off the timed stream")
    ordered = sorted(walls)
    lo, hi = ordered[len(ordered) // 10], ordered[(len(ordered) * 9) // 10]
    spread = round((hi - lo) * 1e6 / t_us, 4) if t_us else None
    details: dict[str, Any] = {"calls": len(walls), "spread": spread}
    details["paired_speedup"] = paired_speedup(calls)
    return RunResult(True, t_us=t_us, event_us=ev_us, details=details)


def paired_speedup(calls: list[dict[str, Any]]) -> float | None:
    """Median over timed calls of baseline time / candidate time, each pair timed back to
    back in the candidate's process (``None`` without a baseline). Both halves of a pair
    see the same machine: the same core, frequency and neighbours' load."""
    ratios = [
        float(c["base_wall_s"]) / float(c["wall_s"])
        for c in calls
        if c.get("base_wall_s") is not None and float(c["wall_s"]) > 0
    ]
    return statistics.median(ratios) if ratios else None
