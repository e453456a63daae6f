"""The measurement oracle on the device: real compile, correctness and device time of the
kernels simulated H100 sessions wrote (issue 36).

``prepare`` (here, with the project): regenerates the kernelinfer H100 sessions (default
seed, the shipped generator), and writes the questions to ``.oracle/`` (git-ignored,
carried): each distinct rendered source at its session's shape and dtype, keyed by
``oracle.answer_key``. Tier 1 is every session's baseline and best kernel, sessions taken
round-robin over ops (a cut-off run keeps the most ops); tier 2 the other distinct ok
kernels, round-robin over sessions. Sessions whose tensors plus their own allocations do
not fit the card (``sim.memory``) are left out: their steps are runtime errors, not
questions. That is ``--order tier``; the default ``--order coverage`` (issue 36, 36o) asks
first where an answer teaches the code model most: one kernel of every (op, impl, rung) no
timed answer covers yet, then the one missing kernel of sessions whose baseline or best
alone lacks an answer (each one more tier session), then the other sessions' baseline and
best, then a second kernel of each new rung, then the tier order's other steps.
``prepare`` prints the plan's coverage at a few cut-offs beside the tier order's, since a
device call is cut off by its budget.

``run`` (device: stdlib, torch, triton, numpy; the references of
``benchmarks/device/sim_verify_rungs.py`` and ``benchmarks/device/gpu_calibrate.py``):
compiles the CUDA
sources with the prompt's flags (``nvcc -O3 -std=c++17 -arch=sm_90a``, as a shared library)
on a thread pool, checks every case in watched worker processes in priority order (a fault
or hang costs one case) against an fp32 / PyTorch reference fed data *of the session's
dtype* (every output and every buffer updated in place), then times the correct ones in ONE
worker (nothing else on the GPU): CUDA-graph replay of ~2 ms of calls cycling input sets
whose total exceeds 3x L2 (``gpu_calibrate._time``: median of 5-30 replays, IQR spread),
kernels slower than 20 ms per call eagerly with CUDA events, 3-5 calls, the L2 flushed
before each::

    PYTHONUNBUFFERED=1 python3 benchmarks/device/sim_oracle.py run --out $OUT --budget 300

``collect`` (here) writes ``dagster_project/sim/data/measured/h100_answers.csv``::

    .venv/bin/python benchmarks/device/sim_oracle.py collect --run <files_at>
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import queue
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "device"))
SRC_DIR = ROOT / ".oracle"
PREFIX = "@@RESULT "
COMMAND = "PYTHONUNBUFFERED=1 python3 benchmarks/device/sim_oracle.py run --out $OUT"

# ======================================================================================
# prepare (here)
# ======================================================================================


def _session_questions(sess: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """(tier-1 questions: baseline and best; tier-2: the other ok steps) of a session."""
    from dagster_project.sim.oracle import question

    ran = ("ok", "unverified")
    t1, t2 = [], []
    best = sess["best"]["step"]
    if sess["trace"][0]["status"] in ran:
        t1.append(question(sess, 0, "baseline"))
    if best not in (None, 0):
        t1.append(question(sess, best, "best"))
    for i, tr in enumerate(sess["trace"]):
        if i not in (0, best) and tr["status"] in ran:
            t2.append(question(sess, i, "step"))
    return t1, t2


#: One session's (tier-1, tier-2) questions.
Session = tuple[list[Any], list[Any]]


def _risky(q: dict[str, Any]) -> bool:
    """A step in a parameter region the issue names as untested by its rung's evidence:
    a 2-CTA cluster, or split-K with a tile taller than the problem."""
    p, s = q["params"], q["shape"]
    if p.get("cluster_m", 1) > 1:
        return True
    split = p.get("split_k", p.get("SPLIT_K", 1)) or 1
    bm = p.get("BM", p.get("BLOCK_M", 0)) or 0
    return bool(split > 1 and "M" in s and bm > s["M"])


def _sessions(gpu: str) -> tuple[list[tuple[list[Any], list[Any]]], int, int]:
    """(the sessions' (tier-1, tier-2) questions round-robin over ops, ops, left out)."""
    from dagster_project.sim.hardware import get_gpu
    from dagster_project.sim.kernelinfer import build_tasks, simulate_session
    from dagster_project.sim.memory import fits_memory, footprint_bytes
    from dagster_project.sim.ops import get_op

    card = get_gpu(gpu)
    by_op: dict[str, list[tuple[list[Any], list[Any]]]] = {}
    skipped = 0
    for t in (t for t in build_tasks()[0] if t.gpu == gpu):
        t1, t2 = _session_questions(simulate_session(t))
        tensors = get_op(t.op).bytes(t.shape, t.dtype)
        fits = all(
            fits_memory(footprint_bytes(tensors, q["code"], t.impl, t.shape), card.mem_gb)
            for q in t1
        )
        if not fits or len(t1) < 2:
            skipped += 1
            continue
        by_op.setdefault(t.op, []).append((t1, t2))
    rounds = max(len(v) for v in by_op.values())
    ordered = [
        by_op[name][i] for i in range(rounds) for name in sorted(by_op) if i < len(by_op[name])
    ]
    return ordered, len(by_op), skipped


def _order(
    sessions: list[tuple[list[Any], list[Any]]], limit: int, done: frozenset[str] = frozenset()
) -> list[Any]:
    """Tier 1 (baseline, best), then the risky-region steps, then the other steps
    round-robin over sessions (seeded shuffle within each). Questions in ``done`` (a final
    shipped answer) are left out, so each call spends its device time on new questions."""
    sessions = [
        ([q for q in t1 if q["key"] not in done], [q for q in t2 if q["key"] not in done])
        for t1, t2 in sessions
    ]
    order: list[Any] = [q for t1, _ in sessions for q in t1]
    order += [q for _, t2 in sessions for q in t2 if _risky(q)]
    rng = random.Random(36)
    tails = [[q for q in t2 if not _risky(q)] for _, t2 in sessions]
    for t in tails:
        rng.shuffle(t)
    while any(tails) and len(order) < limit:
        order += [t.pop() for t in tails if t]
    return order[:limit]


def _answer_rows(gpu: str) -> list[dict[str, str]]:
    """The shipped answers measured on ``gpu``'s card (none when no file exists)."""
    from dagster_project.sim.oracle import answers_path

    path = answers_path(gpu)
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _answered(gpu: str) -> frozenset[str]:
    """Keys with a final shipped answer measured on ``gpu``'s card: a failure, or ok and
    timed (an ok answer left untimed by a timing-harness failure is asked again)."""
    return frozenset(r["key"] for r in _answer_rows(gpu) if r["status"] != "ok" or r["ms"])


Rung = tuple[str, str, str]


def _rung(q: dict[str, Any]) -> Rung:
    """(op, impl, rung tag) of a question: what the code model's offsets are kept by."""
    return (q["op"], q["impl"], q["variant"])


def _timed(gpu: str) -> tuple[frozenset[str], frozenset[Rung]]:
    """(keys, rungs) of the ok, timed answers on ``gpu``'s card: the kernels the code model
    is fitted on, and the (op, impl, rung) they give a measured neighbour."""
    rows = [r for r in _answer_rows(gpu) if r["status"] == "ok" and r["ms"]]
    return frozenset(r["key"] for r in rows), frozenset(_rung(r) for r in rows)


#: Kernels per uncovered (op, impl, rung): the first gives the rung an offset at all and
#: comes first; the second checks it, after every session's baseline and best.
NEW_RUNG_KERNELS = 2


def _new_rungs(sessions: list[Session], covered: frozenset[Rung]) -> list[list[Any]]:
    """Per rung no timed answer covers, its first ``NEW_RUNG_KERNELS`` distinct kernels
    (rungs round-robin over ops in first-seen order; within a rung a session's baseline or
    best first, then risky-region steps, then the rest)."""
    by_rung: dict[Rung, list[Any]] = {}
    for rank in range(3):
        for t1, t2 in sessions:
            pick = t1 if rank == 0 else [q for q in t2 if _risky(q) == (rank == 1)]
            for q in pick:
                got = by_rung.setdefault(_rung(q), [])
                if _rung(q) not in covered and q["key"] not in {g["key"] for g in got}:
                    got.append(q)
    by_op: dict[str, list[Rung]] = {}
    for r, qs in by_rung.items():
        if qs:
            by_op.setdefault(r[0], []).append(r)
    depth = max(map(len, by_op.values()), default=0)
    rungs = [rs[i] for i in range(depth) for rs in by_op.values() if i < len(rs)]
    return [by_rung[r][:NEW_RUNG_KERNELS] for r in rungs]


def _one_short(
    sessions: list[Session], planned: set[str], timed: frozenset[str], done: frozenset[str]
) -> list[Any]:
    """Per session whose baseline or best alone has neither a timed answer nor a place in
    the plan (the other one has either, and neither failed), that kernel: one answer more
    puts the session in the measured tier."""
    out = []
    for t1, _t2 in sessions:
        if any(q["key"] in done and q["key"] not in timed for q in t1):
            continue  # a failed baseline or best never enters the tier
        missing = [q for q in t1 if q["key"] not in timed and q["key"] not in planned]
        if len(missing) == 1:
            planned.add(missing[0]["key"])
            out.append(missing[0])
    return out


def _coverage_order(
    sessions: list[Session],
    limit: int,
    done: frozenset[str] = frozenset(),
    timed: frozenset[str] = frozenset(),
    covered: frozenset[Rung] = frozenset(),
) -> list[Any]:
    """Coverage first: a kernel of every (op, impl, rung) with no timed answer
    (``covered``: the rungs that have one), then the sessions one answer short of the tier
    (``timed``: keys answered ok with a time), then the other sessions' baseline and best,
    then a second kernel of each new rung, then ``_order``'s risky-region and other steps.
    Questions in ``done`` are left out, as in ``_order``."""
    todo = [
        ([q for q in t1 if q["key"] not in done], [q for q in t2 if q["key"] not in done])
        for t1, t2 in sessions
    ]
    rungs = _new_rungs(todo, covered)
    order = [qs[0] for qs in rungs]
    planned = {q["key"] for q in order}
    order += _one_short(sessions, planned, timed, done)
    order += [q for t1, _ in todo for q in t1 if q["key"] not in planned]
    planned |= {q["key"] for q in order}
    for qs in rungs:
        order += [q for q in qs[1:] if q["key"] not in planned]
        planned |= {q["key"] for q in qs}
    order += [q for q in _order(todo, limit + len(planned)) if q["key"] not in planned]
    return order[:limit]


#: Plan lengths the coverage summary is printed at (a device call stops at its budget:
#: about 0.8 s of oracle time per kernel).
CUTOFFS = (100, 200, 300)


def _coverage(
    plan: list[Any], sessions: list[Session], timed: frozenset[str], covered: frozenset[Rung]
) -> dict[int, tuple[int, int, int]]:
    """Per cut-off n (and the whole plan): (rungs newly covered, sessions newly with both
    baseline and best answered, ops newly covered) if the first n questions all come back
    ok and timed."""
    out = {}
    tier0 = sum(all(q["key"] in timed for q in t1) for t1, _ in sessions)
    ops0 = {r[0] for r in covered}
    for n in (*[c for c in CUTOFFS if c < len(plan)], len(plan)):
        keys = timed | {q["key"] for q in plan[:n]}
        rungs = covered | {_rung(q) for q in plan[:n]}
        tier = sum(all(q["key"] in keys for q in t1) for t1, _ in sessions)
        out[n] = (len(rungs - covered), tier - tier0, len({r[0] for r in rungs} - ops0))
    return out


def _print_coverage(
    gpu: str, sessions: list[Session], plans: dict[str, list[Any]], limit: int
) -> None:
    timed, covered = _timed(gpu)
    every = {_rung(q) for t1, t2 in sessions for q in (*t1, *t2)}
    tier = sum(all(q["key"] in timed for q in t1) for t1, _ in sessions)
    print(
        f"coverage now: {len(every & covered)} of {len(every)} (op, impl, rung) of these "
        f"sessions' kernels have a timed answer; {tier} sessions have baseline and best timed"
    )
    for name, plan in plans.items():
        cells = [
            f"first {n}: +{r} rungs, +{o} ops, +{t} tier sessions"
            for n, (r, t, o) in _coverage(plan, sessions, timed, covered).items()
        ]
        print(f"  {name:8s} order: " + "; ".join(cells))


def _plans(gpu: str, sessions: list[Session], limit: int) -> dict[str, list[Any]]:
    """The question order of each ``--order`` over the same sessions and answers."""
    done = _answered(gpu)
    timed, covered = _timed(gpu)
    return {
        "coverage": _coverage_order(sessions, limit, done, timed, covered),
        "tier": _order(sessions, limit, done),
    }


def prepare(out: Path, gpu: str, limit: int, order: str = "coverage") -> None:
    sys.path.insert(0, str(ROOT))
    if out.exists():
        shutil.rmtree(out)
    (out / "src").mkdir(parents=True)
    sessions, n_ops, skipped = _sessions(gpu)
    plans = _plans(gpu, sessions, limit)
    _print_coverage(gpu, sessions, plans, limit)
    cases: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for q in plans[order]:
        use = [q["session_id"], q["step"], q["role"]]
        code = q.pop("code")
        if q["key"] in seen:
            cases[seen[q["key"]]]["uses"].append(use)
            continue
        rel = f"src/{len(cases):05d}_{q['op']}.{'cu' if q['impl'] == 'cuda' else 'py'}"
        (out / rel).write_text(code)
        seen[q["key"]] = len(cases)
        cases.append({**q, "id": len(cases), "file": rel, "gpu": gpu, "uses": [use]})
    (out / "manifest.json").write_text(json.dumps(cases))
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    n1 = sum(1 for c in cases if c["role"] != "step")
    print(
        f"{len(sessions)} sessions over {n_ops} ops ({skipped} left out: over memory or "
        f"no best); {len(cases)} questions ({n1} baseline/best) in {order} order, "
        f"{size / 2**20:.1f} MiB"
    )


# ======================================================================================
# run (device)
# ======================================================================================


def _stamps() -> dict[str, str]:
    import torch
    import triton

    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    name, _, driver = smi.partition(",")
    nvcc = subprocess.run([_nvcc(), "--version"], capture_output=True, text=True).stdout
    return {
        "device": name.strip(),
        "driver": driver.strip(),
        "nvcc": nvcc.strip().splitlines()[-1] if nvcc.strip() else "?",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _nvcc() -> str:
    for cand in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and Path(cand).exists():
            return cand
    return "nvcc"


def _compile(c: dict[str, Any], src: Path, build: Path, libdir: str | None) -> dict[str, Any]:
    """The prompt's flags (``-O3 -std=c++17 -arch=sm_90a``) building a shared library."""
    lib = build / f"lib{c['id']:05d}.so"
    cmd = [_nvcc(), "-O3", "-std=c++17", "-arch=sm_90a", "-shared", "-Xcompiler", "-fPIC"]
    cmd += [str(src / c["file"]), "-o", str(lib)]
    if libdir:
        cmd += [f"-L{libdir}", "-lcuda"]
    if os.environ.get("SIM_ORACLE_FAKE"):
        cmd = ["sleep", "0.05"]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=200)
        ok, err = p.returncode == 0, p.stderr
    except subprocess.TimeoutExpired:
        ok, err = False, "nvcc timeout (200 s)"
    except OSError as ex:
        ok, err = False, f"nvcc did not start: {ex}"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower()] or lines
    return {
        "id": c["id"],
        "lib": str(lib) if ok else "",
        "compile_s": round(time.time() - t0, 1),
        "compile_log": " | ".join(errs[:3])[:300],
    }


class _Pool:
    """Cases in priority order, handed out as they become ready (CUDA: once built)."""

    def __init__(self, ids: list[int], ready: Callable[[int], bool], deadline: float) -> None:
        self.ids, self.ready, self.deadline = list(ids), ready, deadline
        self.lock = threading.Lock()

    def take(self) -> int | None:
        while time.time() < self.deadline:
            with self.lock:
                if not self.ids:
                    return None
                for i, cid in enumerate(self.ids):
                    if self.ready(cid):
                        return self.ids.pop(i)
            time.sleep(0.1)
        return None


class _Slot:
    """One watched worker process: feeds it case ids, reads its results, replaces it after a
    fault or a hang (the case it was on is recorded as such)."""

    def __init__(self, mode: str, args: Any, wid: int, results: Path, log: Path) -> None:
        self.mode, self.args, self.wid, self.results, self.log = mode, args, wid, results, log
        self.proc: Any = None
        self.q: queue.Queue[str] = queue.Queue()

    def _start(self) -> None:
        cmd = [sys.executable, str(Path(__file__).resolve()), "worker", "--mode", self.mode]
        cmd += ["--src", self.args.src, "--libs", self.args.libs_file]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log.open("a"),
            text=True,
            bufsize=1,
        )
        self.q = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc, self.q), daemon=True).start()

    @staticmethod
    def _read(proc: Any, q: queue.Queue[str]) -> None:
        for line in proc.stdout:
            if line.startswith(PREFIX):
                q.put(line[len(PREFIX) :])
        q.put("")

    def run(self, pool: _Pool, timeout: float) -> None:
        while (cid := pool.take()) is not None:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            assert self.proc is not None and self.proc.stdin is not None
            try:
                self.proc.stdin.write(f"{cid}\n")
                self.proc.stdin.flush()
                line = self.q.get(timeout=timeout)
            except (queue.Empty, BrokenPipeError, OSError):
                line = None
            if line:
                rec = json.loads(line)
                _append(self.results, rec)
                if rec.get("fatal"):
                    self._kill()
                continue
            status = "timeout" if line is None else "fault"
            code = self.proc.poll()
            self._kill()
            _append(
                self.results,
                {"id": cid, "status": status, "error": f"worker {status} (exit {code})"},
            )
            self.proc = None
        self._kill()

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def _append(path: Path, rec: dict[str, Any]) -> None:
    with path.open("a") as fh:
        fh.write(json.dumps(rec) + "\n")


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for ln in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            out.append(json.loads(ln))
    return out


def run(args: argparse.Namespace) -> None:
    import gpu_calibrate as gc

    t0 = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    src = Path(args.src)
    cases = json.loads((src / "manifest.json").read_text())
    by_id = {c["id"]: c for c in cases}
    stamps = _stamps() if not os.environ.get("SIM_ORACLE_FAKE") else {"device": "fake"}
    print("stamps:", json.dumps(stamps), flush=True)
    (out / "stamps.json").write_text(json.dumps(stamps))
    build = Path("/tmp/oracle_build")
    build.mkdir(parents=True, exist_ok=True)
    libdir = gc._libcuda_dir() if not os.environ.get("SIM_ORACLE_FAKE") else None
    libs: dict[int, dict[str, Any]] = {}
    args.libs_file = str(build / "libs.json")
    lock = threading.Lock()

    def built(res: dict[str, Any]) -> None:
        with lock:
            libs[res["id"]] = res
            Path(args.libs_file + ".tmp").write_text(json.dumps(libs))
            os.replace(args.libs_file + ".tmp", args.libs_file)
            _append(out / "compile.jsonl", res)

    Path(args.libs_file).write_text("{}")
    cpool = ThreadPoolExecutor(max_workers=args.compile_jobs)
    for c in cases:
        if c["impl"] == "cuda":
            cpool.submit(_compile, c, src, build, libdir).add_done_callback(
                lambda f: built(f.result())
            )

    def ready(cid: int) -> bool:
        return by_id[cid]["impl"] == "triton" or cid in libs

    verify_dead = t0 + args.budget * args.verify_share
    results = out / "verify.jsonl"
    pool = _Pool([c["id"] for c in cases], ready, verify_dead)
    work = Path("/tmp/oracle_work")
    work.mkdir(exist_ok=True)
    slots = [_Slot("verify", args, i, results, work / f"w{i}.log") for i in range(args.workers)]
    ths = [threading.Thread(target=s.run, args=(pool, args.case_timeout)) for s in slots]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    cpool.shutdown(wait=False, cancel_futures=True)
    res = {r["id"]: r for r in _records(results)}
    print(f"[{time.time() - t0:5.0f}s] verified {len(res)}/{len(cases)}", flush=True)
    # timing: one worker, nothing else on the GPU, in priority order
    ok = [c["id"] for c in cases if res.get(c["id"], {}).get("status") == "ok"]
    tpool = _Pool(ok, lambda _c: True, t0 + args.budget)
    _Slot("time", args, 99, out / "timing.jsonl", work / "t.log").run(tpool, args.case_timeout)
    tim = _records(out / "timing.jsonl")
    print(f"[{time.time() - t0:5.0f}s] timed {sum('ms' in r for r in tim)}/{len(ok)}", flush=True)
    _summary(cases, res, tim)
    for log in sorted(work.glob("*.log")):
        tail = log.read_text().splitlines()[-3:]
        if tail:
            print(f"--- {log.name}: " + " / ".join(tail)[:400])
    (out / "logs.txt").write_text(
        "\n".join(f"== {p.name}\n{p.read_text()[-4000:]}" for p in sorted(work.glob("*.log")))
    )
    sys.stdout.flush()
    os._exit(0)


def _summary(cases: list[dict[str, Any]], res: dict[int, Any], tim: list[dict[str, Any]]) -> None:
    table: dict[tuple[str, str], dict[str, int]] = {}
    for c in cases:
        r = res.get(c["id"])
        if r is None:
            continue
        k = (c["op"], c["impl"])
        st = r.get("status", "?")
        table.setdefault(k, {})[st] = table.setdefault(k, {}).get(st, 0) + 1
    for k in sorted(table):
        print(f"{k[0]:22s} {k[1]:6s} " + " ".join(f"{s}={n}" for s, n in sorted(table[k].items())))
    bad = [(c["op"], c["variant"], res[c["id"]]) for c in cases if c["id"] in res]
    bad = [(o, v, r) for o, v, r in bad if r.get("status") != "ok"]
    print(f"not ok: {len(bad)}")
    for o, v, r in bad[:40]:
        print("  ", o, v, r.get("status"), str(r.get("error", r.get("max_rel_err", "")))[:90])
    print(f"timed: {sum(1 for r in tim if 'ms' in r)}")


# ======================================================================================
# worker (device)
# ======================================================================================


def _fake_worker(args: argparse.Namespace) -> None:
    """``SIM_ORACLE_FAKE=1``: the driver's plumbing without a GPU (tests): id % 7 == 3
    hangs, id % 11 == 5 dies, the rest answer."""
    for line in sys.stdin:
        cid = int(line.strip())
        if cid % 7 == 3:
            time.sleep(60)
        if cid % 11 == 5:
            os._exit(3)
        rec = {"id": cid, "status": "ok", "max_rel_err": 1e-3, "check": "fake"}
        if args.mode == "time":
            rec.update(status="timed", ms=0.01 * (cid + 1), spread_pct=1.0, n_timed=5)
        print(PREFIX + json.dumps(rec), flush=True)
    os._exit(0)


def worker(args: argparse.Namespace) -> None:
    import ctypes

    if os.environ.get("SIM_ORACLE_FAKE"):
        _fake_worker(args)

    import torch

    with contextlib.suppress(OSError):
        ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
    src = Path(args.src)
    cases = {c["id"]: c for c in json.loads((src / "manifest.json").read_text())}
    dev = torch.device("cuda")
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=dev)
    for line in sys.stdin:
        cid = int(line.strip())
        c = cases[cid]
        libs = {int(k): v for k, v in json.loads(Path(args.libs).read_text()).items()}
        torch.manual_seed(cid)
        rec: dict[str, Any] = {"id": cid}
        t0 = time.perf_counter()
        try:
            _one(c, rec, libs, torch, dev, src, args.mode, flush)
        except Exception as ex:  # noqa: BLE001 - one case must not lose the rest
            rec.update(status="error", error=f"{type(ex).__name__}: {ex}"[:400])
            rec["trace"] = traceback.format_exc()[-600:]
            try:
                torch.cuda.synchronize()
                torch.zeros(1, device=dev).add_(1).item()
            except Exception:  # noqa: BLE001 - a poisoned context
                rec["status"], rec["fatal"] = "fault", True
            if args.mode == "time":
                # a failed graph capture can leave the process's generator in capture
                # state, failing every later case: start the next case in a fresh worker
                rec["fatal"] = True
        rec["seconds"] = round(time.perf_counter() - t0, 2)
        print(PREFIX + json.dumps(rec), flush=True)
        if rec.get("fatal"):
            os._exit(3)
        torch.cuda.empty_cache()
    os._exit(0)


def _load(c: dict[str, Any], src: Path, libs: dict[int, Any]) -> Any:
    import ctypes
    import importlib.util

    if c["impl"] == "triton":
        spec = importlib.util.spec_from_file_location(f"cand{c['id']}", src / c["file"])
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return getattr(mod, c["op"])
    lib = libs.get(c["id"], {}).get("lib")
    if not lib:
        raise RuntimeError("library did not build")
    fn = getattr(ctypes.CDLL(lib), f"launch_{c['op']}")
    fn.restype = ctypes.c_int
    return fn


_ACT = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
#: Ops whose ``fp8`` dtype makes the tensors the setup fills in the activation dtype e4m3
#: (the renders' ``act_t``): fed fp16 data they would read half of each value.
_FP8_ACT = ("paged_kv_copy",)


def _act(c: dict[str, Any], torch: Any) -> Any:
    """The activation dtype the setup must fill tensors with: the session's own."""
    if c["dtype"] == "fp8" and c["op"] in _FP8_ACT:
        return torch.float8_e4m3fn
    return getattr(torch, _ACT.get(c["dtype"], "float16"))


def _dtype_fix(c: dict[str, Any], e: Any, torch: Any) -> None:
    """Tensors a setup writes in fp16 that the session's dtype makes e4m3 (the MoE weight)."""
    if c["dtype"] == "fp8" and c["op"] == "moe_grouped_gemm":
        e.d["w"] = e.d["w"].to(torch.float8_e4m3fn)


def _harness(c: dict[str, Any], fn: Any, torch: Any, dev: Any, src: Path) -> Any:
    """(run once, check(out), timing callables) at the case's shape, fed data of its dtype."""
    import gpu_calibrate as gc
    import sim_verify_rungs as svr

    harness = svr.ALIASES.get(c["op"], c["op"])
    if harness in svr.CALIB_OPS:
        make, call, check = gc._op_harness({**c, "op": harness}, torch, dev)
        d, _ = make()

        def sets() -> list[Callable[[], Any]]:
            many, _n = gc._input_sets(make, torch)
            return [lambda dd=dd: call(c["impl"], fn, dd) for dd in many]

        return (lambda: call(c["impl"], fn, d)), (lambda out: check(d, out)), sets
    act = _act(c, torch)
    setup = svr._OWN_SETUPS[c["op"]]
    code = (src / c["file"]).read_text()

    def build(restore: bool) -> tuple[Any, Any, Any, int]:
        e = svr._OwnCase(torch, dev, act)
        ref = setup(c, e)
        _dtype_fix(c, e, torch)
        pristine = dict(e.d)
        if restore:
            pristine = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in e.d.items()}
        else:
            e.inplace = []
        if c["impl"] == "cuda":
            runner = svr._cuda_runner(e, fn, svr._cuda_params(code, c["op"]), pristine)
        else:
            runner = svr._triton_runner(e, fn, svr._triton_params(code, c["op"]), pristine)
        nbytes = sum(v.numel() * v.element_size() for v in e.d.values() if hasattr(v, "numel"))
        return e, ref, (runner, pristine), nbytes

    e, ref, (runner, pristine), nbytes = build(True)

    def check(got: Any) -> Any:
        if c["op"] in ("nucleus_sample", "minp_sample"):
            return svr._sampling_check(c["op"], pristine, got)
        return svr._reference_check(e, ref(pristine), got)

    def sets() -> list[Callable[[], Any]]:
        n = _rotation_sets(c["op"], e.d, nbytes, gc.L2_ROTATE_BYTES)
        free, _total = torch.cuda.mem_get_info()
        n = max(1, min(n, int(free * 0.4 // max(nbytes, 1))))
        return [build(False)[2][0] for _ in range(n)]

    return runner, check, sets


def _rotation_sets(op: str, d: dict[str, Any], nbytes: int, l2_rotate: int) -> int:
    """How many input sets a timing replay cycles so that it touches ``l2_rotate`` bytes
    (capped at 64; the caller caps by free memory too). The bytes a call touches are what
    it allocates, except for a gather: it reads only the rows its ids hit, so a table far
    larger than L2 still leaves those rows warm when one set is replayed (36r: the first
    H100 tier timed embedding_gather at 1.33x spec bandwidth that way). A gather touches
    about the rest of its inputs twice over (rows read ~ output written); every set is a
    fresh build, so each draws its own ids."""
    touched = nbytes
    if op == "embedding_gather":
        sizes = sorted(v.numel() * v.element_size() for v in d.values() if hasattr(v, "numel"))
        touched = 2 * (nbytes - sizes[-1]) if sizes else nbytes
    return max(1, min(64, -(-l2_rotate // max(touched, 1))))


def _one(
    c: dict[str, Any],
    rec: dict[str, Any],
    libs: dict[int, Any],
    torch: Any,
    dev: Any,
    src: Path,
    mode: str,
    flush: Any,
) -> None:
    rec["stage"] = "load"
    fn = _load(c, src, libs)
    rec["stage"] = "setup"
    run_once, check, sets = _harness(c, fn, torch, dev, src)
    if mode == "verify":
        rec["stage"] = "first call"
        out = run_once()
        torch.cuda.synchronize()
        rec["stage"] = "check"
        rel, ok, note = check(out)
        rec.update(max_rel_err=float(rel), check=note, status="ok" if ok else "wrong_result")
        rec.pop("stage")
        return
    rec["stage"] = "timing"
    rec.update(_time(sets(), torch, flush))
    rec["status"] = "timed"
    rec.pop("stage")


def _time(runners: list[Callable[[], Any]], torch: Any, flush: Any) -> dict[str, Any]:
    """Device time per call: graph replay over the rotated input sets (``gpu_calibrate``),
    or, for calls slower than 20 ms, eager calls timed with events after an L2 flush."""
    import statistics

    import gpu_calibrate as gc

    runners[0]()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    runners[0]()
    e.record()
    torch.cuda.synchronize()
    est = s.elapsed_time(e)
    if est < 20.0:
        med, spread, n, how = gc._time(lambda f: f(), runners, torch)
        return {"ms": med, "spread_pct": spread, "n_timed": n, "timing": f"{how} replay"}
    ts = []
    for i in range(3 if est > 50 else 5):
        flush.zero_()
        s.record()
        runners[i % len(runners)]()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    med = statistics.median(ts)
    spread = round(100 * (ts[-1] - ts[0]) / med, 2)
    return {"ms": med, "spread_pct": spread, "n_timed": len(ts), "timing": "events, L2 flushed"}


# ======================================================================================
# collect (here)
# ======================================================================================


def _status(c: dict[str, Any], r: dict[str, Any] | None, cp: dict[str, Any]) -> str | None:
    """The answer's status; None when the run says nothing about the kernel (not reached,
    or a harness failure: ``oracle.HARNESS_FAILURES``)."""
    from dagster_project.sim.oracle import HARNESS_FAILURES

    if cp and not cp.get("lib"):
        return "compile_error"
    if r is None:
        return None
    status = str(r.get("status", "error"))
    if status in ("error", "fault") and any(h in (r.get("error") or "") for h in HARNESS_FAILURES):
        return None
    if (
        status == "error"
        and r.get("stage") == "first call"
        and "CompilationError" in str(r.get("error"))
    ):
        return "compile_error"  # Triton compiles at the first call
    return status


def _timing_harness_failure(t: dict[str, Any]) -> bool:
    """A timing record whose error is the harness's (``oracle.TIMING_HARNESS_FAILURES``)."""
    from dagster_project.sim.oracle import TIMING_HARNESS_FAILURES

    return any(h in str(t.get("error") or "") for h in TIMING_HARNESS_FAILURES)


def _row(
    c: dict[str, Any],
    r: dict[str, Any] | None,
    cp: dict[str, Any],
    t: dict[str, Any],
    status: str,
    stamps: dict[str, str],
    gpu: str,
) -> dict[str, Any]:
    from dagster_project.sim.oracle import ORACLE_VERSION, answer_key, code_sha

    code = (Path(c["_root"]) / c["file"]).read_text()
    r = r or {}
    return {
        "key": answer_key(code, c["shape"], c["dtype"], gpu),
        "op": c["op"],
        "impl": c["impl"],
        "variant": c["variant"],
        "dtype": c["dtype"],
        "shape": json.dumps(c["shape"], separators=(",", ":")),
        "params": json.dumps(c["params"], sort_keys=True, separators=(",", ":")),
        "status": status,
        "max_rel_err": f"{r['max_rel_err']:.3g}" if "max_rel_err" in r else "",
        "check": r.get("check", ""),
        "error": (r.get("error") or "").replace("\n", " ")[:160],
        "ms": f"{t['ms']:.5g}" if "ms" in t else "",
        "spread_pct": t.get("spread_pct", ""),
        "n_timed": t.get("n_timed", ""),
        "timing": t.get("timing", "") if "ms" in t else "",
        "compile_s": cp.get("compile_s", ""),
        "compile_log": re.sub(r"\S*/\.oracle/src/", "", cp.get("compile_log") or "")[:160],
        **{k: stamps.get(k, "") for k in ("device", "driver", "nvcc", "torch", "triton")},
        "oracle_version": ORACLE_VERSION,
        "measured_at": stamps.get("measured_at", ""),
        "uses": " ".join(f"{sid}@{step}:{role}" for sid, step, role in c["uses"]),
        "code_sha": code_sha(code),
    }


def collect(run_dir: Path, manifest: Path, gpu: str) -> None:
    """Answers keyed by the GPU that measured them (``gpu``: the card the run's stamps
    name, whatever GPU the sessions were rendered for)."""
    sys.path.insert(0, str(ROOT))
    from dagster_project.sim.oracle import ANSWER_FIELDS, answers_path

    cases = [{**c, "_root": str(manifest.parent)} for c in json.loads(manifest.read_text())]
    stamps = json.loads((run_dir / "stamps.json").read_text())
    want = {"h100": "H100", "h200": "H200"}[gpu]
    if want not in stamps.get("device", ""):
        raise SystemExit(f"the run measured on {stamps.get('device')!r}, not an {want}")
    comp = {r["id"]: r for r in _records(run_dir / "compile.jsonl")}
    res = {r["id"]: r for r in _records(run_dir / "verify.jsonl")}
    tim = {r["id"]: r for r in _records(run_dir / "timing.jsonl")}
    rows, dropped = [], 0
    for c in cases:
        r, cp, t = res.get(c["id"]), comp.get(c["id"], {}), tim.get(c["id"], {})
        status = _status(c, r, cp)
        if status is None:
            dropped += r is not None
            continue
        if status == "ok" and t and "ms" not in t and not _timing_harness_failure(t):
            status = str(t.get("status", "error"))  # ran correctly once, then failed timing
        rows.append(_row(c, r, cp, t, status, stamps, gpu))
    path = answers_path(gpu)
    path.parent.mkdir(parents=True, exist_ok=True)
    old: list[dict[str, str]] = []
    if path.exists():
        keys = {r["key"] for r in rows}
        with path.open(newline="") as fh:
            old = [r for r in csv.DictReader(fh) if r["key"] not in keys]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(ANSWER_FIELDS))
        w.writeheader()
        w.writerows(sorted(old + rows, key=lambda r: r["key"]))
    print(
        f"wrote {len(old) + len(rows)} answers to {path.relative_to(ROOT)} "
        f"({dropped} harness failures dropped)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--out", type=Path, default=SRC_DIR)
    p.add_argument("--gpu", default="h100")
    p.add_argument("--limit", type=int, default=900)
    p.add_argument(
        "--order",
        choices=("coverage", "tier"),
        default="coverage",
        help="coverage: unmeasured rungs first (36o); tier: the order before it",
    )
    r = sub.add_parser("run")
    r.add_argument("--out", default=os.environ.get("OUT", "oracle_out"))
    r.add_argument("--src", default=str(SRC_DIR))
    r.add_argument("--budget", type=float, default=300.0)
    r.add_argument("--verify-share", type=float, default=0.6)
    r.add_argument("--workers", type=int, default=6)
    r.add_argument("--compile-jobs", type=int, default=14)
    r.add_argument("--case-timeout", type=float, default=30.0)
    w = sub.add_parser("worker")
    w.add_argument("--mode", choices=("verify", "time"), required=True)
    w.add_argument("--src", required=True)
    w.add_argument("--libs", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--run", type=Path, required=True)
    c.add_argument("--manifest", type=Path, default=SRC_DIR / "manifest.json")
    c.add_argument("--gpu", default="h100")
    a = ap.parse_args()
    if a.cmd == "prepare":
        prepare(a.out, a.gpu, a.limit, a.order)
    elif a.cmd == "run":
        run(a)
    elif a.cmd == "worker":
        worker(a)
    else:
        collect(a.run, a.manifest, a.gpu)


if __name__ == "__main__":
    main()
