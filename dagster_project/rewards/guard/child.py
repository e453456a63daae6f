"""The judge inside the candidate's process: ``python -m dagster_project.rewards.guard.child``.

Order matters and is the defence: the job (seeds, counts, shapes, token, result fd) is
read from stdin, the backend is built and every identity it must trust (clocks, device
timers, synchronisation, numeric modes, thread and process counts, the environment) is
captured, and only then is the candidate file loaded. Each phase then runs with inputs
generated from the parent's phase seed:

* ``warmup``  a random number of calls on seen shapes, not checked;
* ``check``   the timed shape and unseen shapes, each call's inputs and output snapshot;
* ``timed``   fresh inputs per call (generated, L2 flushed, outside the timed region),
  wall clock around a device-wide synchronisation plus device events, and a snapshot of
  *every* call's inputs and output, taken outside the timed region; where the job names a
  ``baseline`` file (the before_code), each timed call is followed by one timed call of
  the baseline on inputs from the same seed, so the parent can compare the two in the
  same process at the same moment (guard 1.3.0: a machine's speed drifts between
  processes by more than the reward's no-gain band);
* ``reval``   re-validation after timing, on the timed shape and another unseen one.

Every call of ``check``, ``timed`` and ``reval`` is snapshotted and its output held to the
phase's end (``CHECKED_PHASES``; the plan's ``snap`` flags are not read). Guard 1.6.0:
until 1.5.0 the parent checked two timed calls it drew at random, so an exploit that cheated
on a fraction of the timed calls (every 3rd, or every call after the N-th) escaped with
the chance that neither spot landed on a cheating call (heldout3's ``arena-rotating``
escaped one of two reruns). A call the judge times is now a call the judge checks, through
the same code path, so telling checked calls from timed ones gains nothing. The outputs the
judge holds are allocated where the candidate allocates them; ``reserve`` warms the
allocator once, before the candidate loads, with as much as the largest phase holds, so
that holding them never makes a timed call wait for fresh memory, and the baseline's
outputs are held as well, so both halves of a pair allocate alike.

After every phase: identities unchanged, numeric modes unchanged, no new threads or
child processes, environment unchanged, persisting L2 still 0, inputs of checked calls
unchanged (mutation), held outputs unchanged (a reused or lazily filled buffer); which two
held outputs share a buffer, if any, goes to the parent (1.6.0: an arena of views, each a
later call's memory, is refused even when the later call happened to write the same
values). The parent compares snapshots with its own reference; this process never holds
the oracle. Messages go to an inherited pipe, tagged with the job's token; stdout is not
read. The process ends with ``os._exit(0)`` once the last message is written, so nothing
the candidate registered can run after it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import types
from collections.abc import Callable
from typing import Any

from .backends import (
    NumpyBackend,
    TorchBackend,
    backend,
    child_processes,
    os_threads,
    process_hooks,
)
from .tasks import EPS, TASKS, Task

#: Phases whose every call is snapshotted, checked by the parent and held (guard 1.6.0).
CHECKED_PHASES = ("check", "timed", "reval")


class Violation(Exception):
    """A defence fired inside the child: ``defence`` names it."""

    def __init__(self, defence: str, reason: str) -> None:
        super().__init__(reason)
        self.defence = defence
        self.reason = reason


class Judge:
    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.fd = int(job["result_fd"])
        self.token = str(job["token"])
        self.task: Task = TASKS[job["task"]]
        self.out_dir = str(job["out_dir"])
        self.be: NumpyBackend | TorchBackend = backend(self.task.backend)
        self.clock = self.be.clock
        self.ids = self.be.identities()
        self.modes = self.be.modes()
        self.hooks = process_hooks()
        self.env = dict(os.environ)
        self.threads = os_threads()
        self.children = child_processes()
        self.held: list[tuple[Any, Any, str]] = []
        self.files = 0

    # -- channel --------------------------------------------------------------------
    def send(self, **msg: Any) -> None:
        data = (json.dumps({"token": self.token, **msg}) + "\n").encode()
        while data:
            n = os.write(self.fd, data)
            data = data[n:]

    def save(self, arr: Any, tag: str) -> dict[str, str]:
        import numpy as np

        self.files += 1
        path = os.path.join(self.out_dir, f"{self.files:04d}_{tag}.npy")
        np.save(path, np.ascontiguousarray(arr), allow_pickle=False)
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        return {"path": path, "sha256": digest}

    # -- candidate ------------------------------------------------------------------
    def load(self, key: str = "candidate") -> Callable[..., Any]:
        path = str(self.job[key])
        spec = importlib.util.spec_from_file_location(f"{key}_kernel", path)
        if spec is None or spec.loader is None:
            raise Violation("candidate_error", f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = getattr(module, self.task.entry, None)
        if type(fn) is not types.FunctionType:
            raise Violation("candidate_error", f"{self.task.entry} is not a plain function")
        return fn

    # -- invariants -----------------------------------------------------------------
    def verify(self, phase: str) -> None:
        for name, (owner, attr, value) in self.ids.items():
            if getattr(owner, attr, None) is not value:
                raise Violation("timer_identity", f"{name} replaced during {phase}")
        if self.be.modes() != self.modes:
            raise Violation("numeric_mode", f"numeric modes changed during {phase}")
        if process_hooks() != self.hooks:
            raise Violation("environment", f"profile/trace hook, timer or signal set in {phase}")
        if os_threads() > self.threads or child_processes() > self.children:
            raise Violation("threads", f"new threads or processes during {phase}")
        if dict(os.environ) != self.env:
            raise Violation("environment", f"environment changed during {phase}")
        if self.be.persisting_l2() not in (None, 0, self.be.l2_base):
            raise Violation("persisting_l2", f"persisting-L2 limit set during {phase}")
        for obj, snap, tag in self.held:
            if not _equal(self.be.host(obj), snap):
                raise Violation("reused_buffer", f"output {tag} changed after it was returned")

    def shared_outputs(self) -> list[str] | None:
        """The first two outputs held in a phase that share a buffer (``None``: each
        call's output is its caller's own). Guard 1.6.0; ``shares_buffer`` compares whole
        allocations, so disjoint views of one arena count as shared. Reported with the
        phase, not raised: the parent judges the outputs' values first, so a cache that
        returns one wrong array twice is still named by what is wrong with it."""
        held = self.held
        for i in range(1, len(held)):
            for j in range(i):
                if self.be.shares_buffer(held[i][0], held[j][0]):
                    return [held[j][2], held[i][2]]
        return None

    # -- one call -------------------------------------------------------------------
    def call(
        self, fn: Callable[..., Any], inputs: dict[str, Any], snap: bool, tag: str
    ) -> dict[str, Any]:
        """One call; with ``snap`` its inputs (before) and output (after) go to the parent."""
        record: dict[str, Any] = {"tag": tag}
        before = {k: self.be.host(v) for k, v in inputs.items()} if snap else {}
        self.be.flush_l2()
        self.be.sync()
        start, end = self.be.new_event(), self.be.new_event()
        c0, t0 = self.be.cpu_clock(), self.clock()
        self.be.record(start)
        out = fn(inputs["x"], inputs["w"], inputs["W"], EPS)
        self.be.record(end)
        self.be.sync()
        record["wall_s"] = self.clock() - t0
        record["cpu_s"] = self.be.cpu_clock() - c0
        if os_threads() > self.threads:  # alive at return: work continuing off the clock
            raise Violation("threads", f"a thread outlived call {tag}")
        if process_hooks() != self.hooks:  # a hook or armed timer could finish it off the clock
            raise Violation("environment", f"profile/trace hook, timer or signal set by {tag}")
        record["event_s"] = _ms_to_s(self.be.elapsed_ms(start, end))
        if snap:
            self._snapshot(record, out, inputs, before, tag)
        return record

    def _snapshot(
        self,
        record: dict[str, Any],
        out: Any,
        inputs: dict[str, Any],
        before: dict[str, Any],
        tag: str,
    ) -> None:
        meta = self.be.describe(out, inputs)
        record["meta"] = meta
        for key, value in inputs.items():
            if not _equal(self.be.host(value), before[key]):
                raise Violation("input_mutation", f"input {key} changed by call {tag}")
        record["inputs"] = {k: self.save(v, f"{tag}_{k}") for k, v in before.items()}
        if not meta.get("exact_type"):
            return
        host = self.be.host(out)
        record["output"] = self.save(host, f"{tag}_out")
        self.held.append((out, host, tag))

    def baseline_call(
        self, fn: Callable[..., Any], shape: tuple[int, int, int], seed: int, keep: list[Any]
    ) -> float:
        """Seconds of one call of the trusted baseline, timed like the candidate's (the
        output is not checked: the baseline is the before_code the parent also runs). Its
        output goes to ``keep``, held to the phase's end like the candidate's."""
        inputs = self.be.inputs(shape, seed)
        self.be.flush_l2()
        self.be.sync()
        t0 = self.clock()
        out = fn(inputs["x"], inputs["w"], inputs["W"], EPS)
        self.be.sync()
        took = float(self.clock() - t0)
        keep.append(out)
        return took

    # -- phases ---------------------------------------------------------------------
    def phase(
        self,
        name: str,
        fn: Callable[..., Any],
        plan: list[dict[str, Any]],
        base_fn: Callable[..., Any] | None = None,
    ) -> None:
        checked = name in CHECKED_PHASES
        shapes = [_shape(item) for item in plan]
        self.send(event="phase_start", phase=name)
        t0 = self.clock()
        records = []
        keep: list[Any] = []
        for i, (item, shape) in enumerate(zip(plan, shapes, strict=True)):
            inputs = self.be.inputs(shape, int(item["seed"]))
            rec = self.call(fn, inputs, checked, f"{name}{i}")
            rec["shape"] = list(shape)
            if base_fn is not None:
                rec["base_wall_s"] = self.baseline_call(base_fn, shape, int(item["seed"]), keep)
            records.append(rec)
            keep.append(inputs)  # alive to the phase's end: no address is reused within it
        total = self.clock() - t0
        self.verify(name)
        shared = self.shared_outputs()
        self.held.clear()
        keep.clear()
        self.send(event="phase_end", phase=name, total_s=total, calls=records, shared=shared)

    def run(self) -> None:
        # once, before any candidate code: as much memory as the largest phase holds
        largest = max(self.job["plan"].values(), key=len)
        self.be.reserve([_shape(item) for item in largest], 2 if self.job.get("baseline") else 1)
        self.send(event="ready", threads=self.threads, modes=self.modes, l2=self.be.l2_base)
        base_fn = self.load("baseline") if self.job.get("baseline") else None
        fn = self.load()  # after the baseline: the candidate never sees it half-loaded
        self.verify("import")
        for name in ("warmup", "check", "timed", "reval"):
            paired = base_fn if name in ("warmup", "timed") else None  # warm-up warms it
            self.phase(name, fn, self.job["plan"][name], paired)
        self.send(event="done", persisting_l2=self.be.persisting_l2())


def _shape(item: dict[str, Any]) -> tuple[int, int, int]:
    m, k, n = item["shape"]
    return int(m), int(k), int(n)


def _ms_to_s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def _equal(a: Any, b: Any) -> bool:
    import numpy as np

    return bool(a.shape == b.shape and np.array_equal(a, b, equal_nan=True))


def main() -> None:
    job = json.loads(sys.stdin.read())
    judge: Judge | None = None
    try:
        judge = Judge(job)
        judge.run()
    except Violation as exc:
        if judge is not None:
            judge.send(event="violation", defence=exc.defence, reason=exc.reason)
    except BaseException as exc:  # noqa: BLE001 - the candidate's error, reported
        if judge is not None:
            reason = f"{type(exc).__name__}: {str(exc)[:300]}"
            judge.send(event="violation", defence="candidate_error", reason=reason)
    os._exit(0)


if __name__ == "__main__":
    main()
