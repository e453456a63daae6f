"""Execute the simulator's rungs on the H200: is each (op, impl, rung, arch family) correct?

``prepare`` (here) renders, for every op with a reference below, every CUDA and Triton rung
with random valid launch parameters:

* for the Hopper family (sm_90a) rendered for the H200 at 3 shapes the op's own sampler
  draws (the smallest of 16 draws, so naive rungs finish);
* for the other families one render each for the A100 (sm_80), the A10 (sm_86) and the
  RTX 5090 (sm_120a) at the smallest shape. Those GPUs are not here, so their CUDA renders
  are built as PTX for their own virtual arch (``compute_80``/``compute_86``) and the H200's
  driver compiles that PTX at load: the arch's own code path, executed. The 5090's renders
  are built for ``compute_90`` (its feature set minus FP4 MMA is a subset of Hopper's); an
  FP4 render cannot run here and is never claimed verified.

and writes them with a manifest into ``.verify/`` (git-ignored; carried to the device).
``--ops a,b`` renders only those ops. References: the 7 calibration ops through
``gpu_calibrate.py``, 20 ops below, and 12 more in ``benchmarks/device/verify_refs/`` (one module
per op family: attention, quantised GEMM/GEMV, MoE/scan/conv).

``run`` (device: python3 with torch and triton; nothing of the project is imported except
``benchmarks/device/gpu_calibrate.py``'s reference harness for the 7 calibration ops) compiles the
CUDA renders in a thread pool, then checks every case against an fp32 / PyTorch reference
in watched worker processes (a fault or hang costs one case), then times the sm_90a cases
that were correct (CUDA events over graph-free replays, median). Results go to
``$OUT/verify.jsonl``::

    PYTHONUNBUFFERED=1 python3 benchmarks/device/sim_verify_rungs.py run --out $OUT

``collect`` (here) writes the committed
``dagster_project/sim/data/verification/h200_rung_exec.csv``::

    .venv/bin/python benchmarks/device/sim_verify_rungs.py collect --run <dir with verify.jsonl>
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import ctypes
import functools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "device"))
from verify_refs import SETUPS as MORE_SETUPS  # noqa: E402 - needs the path above
from verify_refs.attention import heads_first_gqa  # noqa: E402

SRC_DIR = ROOT / ".verify"
OUT_CSV = ROOT / "dagster_project" / "sim" / "data" / "verification" / "h200_rung_exec.csv"
COMMAND = "PYTHONUNBUFFERED=1 python3 benchmarks/device/sim_verify_rungs.py run --out $OUT"

#: Ops whose reference is h18's calibration harness (benchmarks/device/gpu_calibrate.py).
CALIB_OPS = (
    "rmsnorm",
    "gemm_fp16",
    "gemv_fp16",
    "flash_decode",
    "topk_sample",
    "swiglu_act",
    "logits_softmax",
)
#: Ops with the same math and launch signature as a calibration op.
ALIASES = {"gemm_splitk_fp16": "gemm_fp16", "gemm_persistent_fp16": "gemm_fp16"}
#: Ops with a reference in this file.
OWN_OPS = (
    "embedding_gather",
    "moe_scatter",
    "moe_combine",
    "kv_append",
    "paged_kv_copy",
    "conv1d_causal",
    "rope",
    "kv_int8_quant",
    "int8_gemv",
    "fp8_gemv",
    "int8_gemm",
    "fp8_gemm",
    "fp8_gemm_persistent",
    "swa_decode",
    "flash_prefill",
    "cross_attn",
    "chunked_prefill",
    "nucleus_sample",
    "minp_sample",
    "mamba_step",
)
#: Ops with a reference in ``benchmarks/device/verify_refs/`` (one module per op family).
MORE_OPS = tuple(MORE_SETUPS)
#: (GPU rendered for, arch family, nvcc -gencode for its CUDA renders, shapes).
FAMILIES = (
    ("h200", "sm_90a", "arch=compute_90a,code=sm_90a", 3),
    ("a100", "sm_80", "arch=compute_80,code=compute_80", 1),
    ("a10", "sm_86", "arch=compute_86,code=compute_86", 1),
    ("rtx_5090", "sm_120", "arch=compute_90,code=compute_90", 1),
)
#: Per-case footprint cap for the chosen shapes (inputs + outputs), bytes.
MAX_BYTES = 3 * 2**30


# ======================================================================================
# prepare (here)
# ======================================================================================


def _shapes(op: Any, n: int) -> list[dict[str, int]]:
    """``n`` distinct shapes the op's sampler draws, smallest ideal traffic first."""
    rng = random.Random(f"verify-{op.name}")
    seen: dict[str, dict[str, int]] = {}
    for _ in range(64):
        s = op.sample(rng)
        seen.setdefault(json.dumps(s, sort_keys=True), s)
    dt = _dtype(op)
    pool = sorted(seen.values(), key=lambda s: op.bytes(s, dt))
    pool = [s for s in pool if op.bytes(s, dt) <= MAX_BYTES] or pool[:1]
    step = max(1, len(pool) // (2 * n))
    return [pool[min(len(pool) - 1, i * step)] for i in range(n)]


def _dtype(op: Any) -> str:
    return "bf16" if "bf16" in op.dtypes and op.dtypes[0] == "fp32" else op.dtypes[0]


def prepare(out: Path, styles: bool = False, ops: set[str] | None = None) -> None:
    """Render the cases. ``styles``: instead of the 1.6.0 renders, every structure of
    ``styles`` other than 1.6.0's, for the rungs verified with the 1.6.0 structure (where a
    structure needs its own evidence before renders may use it), each in a random author's
    voice, at the same shapes and params. ``ops``: only these ops (default: every op with
    a reference)."""
    sys.path.insert(0, str(ROOT))
    from dagster_project.sim.hardware import get_gpu
    from dagster_project.sim.ops import get_op
    from dagster_project.sim.variants import ladder

    if out.exists():
        shutil.rmtree(out)
    (out / "src").mkdir(parents=True)
    cases: list[dict[str, Any]] = []
    for name in (*CALIB_OPS, *ALIASES, *OWN_OPS, *MORE_OPS):
        if ops is not None and name not in ops:
            continue
        op = get_op(name)
        dt = _dtype(op)
        shapes = _shapes(op, 3)
        for gpu_id, family, gencode, n_shapes in FAMILIES:
            gpu = get_gpu(gpu_id)
            # Triton JIT-compiles for the GPU it runs on, so another GPU's Triton render
            # executed here says nothing more about that GPU than the H200's does
            for impl in ("cuda", "triton") if family == "sm_90a" else ("cuda",):
                for v in ladder(op.family, impl):
                    for si, shape in enumerate(shapes[:n_shapes]):
                        where = _Where(name, gpu_id, family, gencode, impl, si)
                        _prepare_case(out, cases, where, op, gpu, dt, shape, v, styles)
    (out / "manifest.json").write_text(json.dumps(cases))
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    by: dict[str, int] = {}
    for c in cases:
        by[f"{c['family']}/{c['impl']}"] = by.get(f"{c['family']}/{c['impl']}", 0) + 1
    print(f"wrote {len(cases)} cases ({size / 2**20:.1f} MiB) to {out}: {by}")


class _Where(NamedTuple):
    """Which render a case is: the op's name, the GPU and family, the impl, the shape's index."""

    name: str
    gpu_id: str
    family: str
    gencode: str
    impl: str
    si: int


def _prepare_case(
    out: Path,
    cases: list[dict[str, Any]],
    where: _Where,
    op: Any,
    gpu: Any,
    dt: str,
    shape: dict[str, int],
    v: Any,
    styles: bool,
) -> None:
    """One (op, GPU, rung, shape): draw its launch parameters, render it (or its other
    structures), and write each render with its manifest entry."""
    from dagster_project.sim import GENERATOR_VERSION

    params, feats = _pick_params(where, op, gpu, dt, shape, v)
    if params is None:
        return  # the rung cannot run on this family (compile error)
    if "fp4_mma" in feats:
        return  # no FP4 MMA on Hopper: never executed, never verified
    for key, code in _renders(where, op, gpu, dt, shape, v, params, styles):
        ext = "cu" if where.impl == "cuda" else "py"
        rel = f"src/{len(cases):04d}_{where.name}_{v.tag}.{ext}"
        (out / rel).write_text(code)
        cases.append(
            {
                "id": len(cases),
                "structure": key,
                "op": where.name,
                "harness": ALIASES.get(where.name, where.name),
                "impl": where.impl,
                "variant": v.tag,
                "gpu": where.gpu_id,
                "family": where.family,
                "gencode": where.gencode,
                "dtype": dt,
                "shape": shape,
                "params": params,
                "file": rel,
                "generator_version": GENERATOR_VERSION,
            }
        )


def _pick_params(
    where: _Where, op: Any, gpu: Any, dt: str, shape: dict[str, int], v: Any
) -> tuple[Any, Any]:
    """Random valid launch parameters: the first of a seeded shuffle that uses only the
    GPU's features and fits its shared memory; ``None`` when none of 300 does."""
    from dagster_project.sim.kernels import plan
    from dagster_project.sim.variants import features_used, iter_params

    feats = features_used(v, op, dt, {})
    rng = random.Random(f"{where.name}-{where.gpu_id}-{v.tag}-{where.si}")
    pool = iter_params(v, op, dt)
    rng.shuffle(pool)
    params = None
    for p in pool[:300]:
        f = features_used(v, op, dt, p)
        if any(x not in gpu.features for x in f):
            continue
        if plan(op, shape, dt, gpu, v, p).smem > gpu.smem_per_block_optin:
            continue
        params, feats = p, f
        break
    return params, feats


def _renders(
    where: _Where,
    op: Any,
    gpu: Any,
    dt: str,
    shape: dict[str, int],
    v: Any,
    params: Any,
    styles: bool,
) -> list[tuple[str, str]]:
    """(structure, code) of the case: the 1.6.0 render, or with ``styles`` each other
    structure that changes a verified rung, in a seeded author's voice."""
    from dagster_project.sim.codegen import render_candidate
    from dagster_project.sim.styles import Style, structures, style_for_seed, with_structure
    from dagster_project.sim.verification import rung_status

    name, gpu_id, si = where.name, where.gpu_id, where.si
    variants_of_case: list[tuple[str, str]] = []
    if not styles:
        code = render_candidate(op, gpu, dt, shape, v, params, style=Style.base())
        variants_of_case.append(("", code))
    elif rung_status(name, where.impl, v.tag, where.family).verified:
        base = render_candidate(op, gpu, dt, shape, v, params, style=Style.base())
        for key in structures(where.impl)[1:]:
            bare = with_structure(Style.base(), key)
            if (
                render_candidate(op, gpu, dt, shape, v, params, style=bare, gate_structure=False)
                == base
            ):
                continue  # the structure does not touch this rung
            voice = style_for_seed(f"verify/{name}/{gpu_id}/{v.tag}/{si}/{key}")
            code = render_candidate(
                op,
                gpu,
                dt,
                shape,
                v,
                params,
                style=with_structure(voice, key),
                gate_structure=False,
            )
            variants_of_case.append((key, code))
    return variants_of_case


# ======================================================================================
# run (device)
# ======================================================================================


def _nvcc() -> str:
    for cand in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and Path(cand).exists():
            return cand
    raise RuntimeError("nvcc not found")


def _smi() -> str:
    try:
        return subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"unavailable: {e}"


def _libcuda_dir() -> str | None:
    """Where libcuda.so is for ``-lcuda`` (the TMA rungs encode tensor maps through it)."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "device"))
    import gpu_calibrate  # h18's device helpers

    return gpu_calibrate._libcuda_dir()


def _compile(c: dict[str, Any], src: Path, build: Path) -> dict[str, Any]:
    lib = build / f"lib{c['id']:04d}.so"
    cmd = [
        _nvcc(),
        "-O3",
        "-std=c++17",
        f"-gencode={c['gencode']}",
        "-shared",
        "-Xcompiler",
        "-fPIC",
        str(src / c["file"]),
        "-o",
        str(lib),
    ]
    libdir = _libcuda_dir()
    if libdir:
        cmd += [f"-L{libdir}", "-lcuda"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        ok, err = p.returncode == 0, p.stderr
    except subprocess.TimeoutExpired:
        ok, err = False, "nvcc timeout"
    errs = [ln for ln in err.splitlines() if "error" in ln.lower()][:3]
    return {"lib": str(lib) if ok else "", "compile_error": " | ".join(errs)[:300]}


def run(args: argparse.Namespace) -> None:
    t0 = time.time()
    deadline = t0 + args.budget
    src = Path(args.src)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    build = Path("/tmp/verify_build")
    build.mkdir(parents=True, exist_ok=True)
    work = Path("/tmp/verify_work")  # logs and progress files: $OUT takes 8 files at most
    work.mkdir(parents=True, exist_ok=True)
    cases = json.loads((src / "manifest.json").read_text())
    env = _run_env(t0)
    print("env:", json.dumps(env), flush=True)
    (out / "env.json").write_text(json.dumps(env))
    # sm_90a first, then the other families: a cut-off run keeps the Hopper evidence
    order = sorted(cases, key=lambda c: (c["family"] != "sm_90a", c["impl"] != "cuda", c["id"]))
    pool = ThreadPoolExecutor(max_workers=args.compile_jobs)
    futs = {c["id"]: pool.submit(_compile, c, src, build) for c in order if c["impl"] == "cuda"}
    libs: dict[int, dict[str, Any]] = {}
    # worker queues: Triton cases first (no compile wait), CUDA cases as their libraries land
    tri = [c["id"] for c in order if c["impl"] == "triton"]
    cu = [c["id"] for c in order if c["impl"] == "cuda"]
    drv = _Drivers(src, work / "libs.json", out / "verify.jsonl", work, deadline, t0)
    _phase(drv, args.workers, tri, 40.0, f"{len(tri)} Triton cases")
    by_id = {c["id"]: c for c in cases}
    for fams, label in ((("sm_90a",), "sm_90a"), (("sm_80", "sm_86", "sm_120"), "other families")):
        ids = [cid for cid in cu if by_id[cid]["family"] in fams]
        for cid in ids:
            _ready(libs, futs, cid, deadline)
        drv.lib_file.write_text(json.dumps({str(k): v for k, v in libs.items()}))
        built = sum(bool(libs[cid]["lib"]) for cid in ids)
        print(f"[{time.time() - t0:5.0f}s] {label}: {built}/{len(ids)} libraries built", flush=True)
        _phase(
            drv, args.workers, [cid for cid in ids if libs[cid]["lib"]], 25.0, f"{label} CUDA cases"
        )
    print(f"[{time.time() - t0:5.0f}s] correctness done", flush=True)
    _time_correct(args, cases, drv, out)
    pool.shutdown(wait=False, cancel_futures=True)
    _record_compile_failures(cases, libs, drv.results)
    summary(cases, out, time.time() - t0)
    for log in sorted(work.glob("worker*.log")):  # the first lines tell a broken harness
        print(f"--- {log.name} (tail)")
        print("\n".join(log.read_text().splitlines()[-4:]))
    sys.stdout.flush()
    os._exit(0)


def _run_env(t0: float) -> dict[str, str]:
    """The nvcc and GPU a run used, and when it started (``env.json``)."""
    return {
        "nvcc": subprocess.run([_nvcc(), "--version"], capture_output=True, text=True)
        .stdout.strip()
        .splitlines()[-1],
        "gpu": _smi(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
    }


class _Drivers(NamedTuple):
    """What the worker drivers of ``run`` share: the sources, the built libraries' list, the
    results file, the work folder, the deadline and the run's start."""

    src: Path
    lib_file: Path
    results: Path
    work: Path
    deadline: float
    t0: float


def _ready(
    libs: dict[int, dict[str, Any]],
    futs: dict[int, Future[dict[str, Any]]],
    cid: int,
    deadline: float,
) -> dict[str, Any]:
    """A CUDA case's library, waiting for its compile until the deadline at most."""
    if cid not in libs:
        try:
            libs[cid] = futs[cid].result(timeout=max(1.0, deadline - time.time()))
        except Exception:  # noqa: BLE001 - not built before the deadline: not run
            libs[cid] = {"lib": "", "compile_error": "", "skipped": True}
    return libs[cid]


def _worker_cmd(
    src: Path, lib_file: Path, ids: list[int], results: Path, progress: Path, deadline: float
) -> list[str]:
    """The command line of a ``worker`` process over ``ids``."""
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "worker",
        "--src",
        str(src),
        "--libs",
        str(lib_file),
        "--ids",
        ",".join(map(str, ids)),
        "--results",
        str(results),
        "--progress",
        str(progress),
        "--deadline",
        str(deadline),
    ]


def _drive(drv: _Drivers, q: list[int], wid: int, case_timeout: float) -> None:
    """Run the cases of one queue in worker processes, a fresh one after each fault or hang
    (the case it was on is recorded as such), until all are recorded or the deadline."""
    pending = list(q)
    while pending and time.time() < drv.deadline:
        prog = drv.work / f"progress{wid}.log"
        prog.write_text("")
        cmd = _worker_cmd(drv.src, drv.lib_file, pending, drv.results, prog, drv.deadline)
        with (drv.work / f"worker{wid}.log").open("a") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            cur = _watch(proc, prog, case_timeout, drv.deadline)
        if not _blame(drv.results, proc, cur, wid):
            return  # the harness itself is broken: blame no kernel
        recorded = _recorded(drv.results)
        pending = [i for i in pending if i not in recorded]
        if proc.returncode == 0:
            break


def _watch(proc: Any, prog: Path, case_timeout: float, deadline: float) -> int | None:
    """Follow a worker's progress file until it exits; kill it when one case runs past
    ``case_timeout`` or the run past its deadline. The case it was on last."""
    cur, started = None, time.time()
    while proc.poll() is None:
        time.sleep(0.2)
        lines = prog.read_text().split()
        c2 = int(lines[-1]) if lines else None
        if c2 != cur:
            cur, started = c2, time.time()
        if time.time() - started > case_timeout or time.time() > deadline + 5:
            proc.kill()
            proc.wait()
            break
    return cur


def _blame(results: Path, proc: Any, cur: int | None, wid: int) -> bool:
    """Record the case a worker hung or faulted on; False when it died before its first."""
    recorded = _recorded(results)
    if cur is not None and cur not in recorded:
        why = "timeout" if proc.returncode in (-9, None) else f"fault (exit {proc.returncode})"
        status = "fault" if "fault" in why else "timeout"
        _append(results, {"id": cur, "status": status, "error": why})
    elif cur is None and proc.returncode not in (0, None):
        print(f"worker {wid} died before its first case; see worker{wid}.log", flush=True)
        return False
    return True


def _phase(drv: _Drivers, workers: int, ids: list[int], timeout: float, label: str) -> None:
    """Spread ``ids`` round-robin over ``workers`` queues and drive them in parallel."""
    qs: list[list[int]] = [[] for _ in range(workers)]
    for i, cid in enumerate(ids):
        qs[i % workers].append(cid)
    with ThreadPoolExecutor(max_workers=workers) as ex:
        list(ex.map(lambda a: _drive(drv, *a), [(q, i, timeout) for i, q in enumerate(qs)]))
    print(f"[{time.time() - drv.t0:5.0f}s] {label} done", flush=True)


def _time_correct(
    args: argparse.Namespace, cases: list[dict[str, Any]], drv: _Drivers, out: Path
) -> None:
    """Serial timing of the sm_90a cases that were correct, in one worker with ``--time``."""
    ok_ids = [
        r["id"]
        for r in _records(drv.results)
        if r.get("status") == "ok"
        and next(c for c in cases if c["id"] == r["id"])["family"] == "sm_90a"
    ]
    tdead = min(time.time() + args.time_budget, drv.t0 + args.budget + args.time_budget)
    if ok_ids:
        subprocess.run(
            [
                *_worker_cmd(
                    drv.src,
                    drv.lib_file,
                    ok_ids,
                    out / "timing.jsonl",
                    drv.work / "progress_t.log",
                    tdead,
                ),
                "--time",
            ],
            timeout=args.time_budget + 30,
            check=False,
        )


def _record_compile_failures(
    cases: list[dict[str, Any]], libs: dict[int, dict[str, Any]], results: Path
) -> None:
    """A CUDA case whose library did not build is a result too (``compile_error``)."""
    for c in cases:
        lib = libs.get(c["id"], {})
        if c["impl"] == "cuda" and lib and not lib["lib"] and not lib.get("skipped"):
            _append(
                results,
                {"id": c["id"], "status": "compile_error", "error": libs[c["id"]]["compile_error"]},
            )


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


def _recorded(path: Path) -> set[int]:
    return {r["id"] for r in _records(path)}


def summary(cases: list[dict[str, Any]], out: Path, secs: float) -> None:
    by_id = {c["id"]: c for c in cases}
    res = {r["id"]: r for r in _records(out / "verify.jsonl")}
    tim = {r["id"]: r for r in _records(out / "timing.jsonl")}
    print(f"\n== rung verification after {secs:.0f} s: {len(res)}/{len(cases)} cases ==")
    table: dict[tuple[str, str, str], dict[str, int]] = {}
    for cid, r in res.items():
        c = by_id[cid]
        k = (c["op"], c["impl"], c["family"])
        table.setdefault(k, {})
        table[k][r.get("status", "?")] = table[k].get(r.get("status", "?"), 0) + 1
    for k in sorted(table):
        print(
            f"{k[0]:22s} {k[1]:6s} {k[2]:6s} "
            + " ".join(f"{s}={n}" for s, n in sorted(table[k].items()))
        )
    bad = [
        (
            by_id[i]["op"],
            by_id[i]["impl"],
            by_id[i]["variant"],
            by_id[i]["family"],
            r.get("status"),
            str(r.get("max_rel_err", r.get("error", "")))[:70],
        )
        for i, r in sorted(res.items())
        if r.get("status") != "ok"
    ]
    print(f"not ok: {len(bad)}")
    for b in bad[:80]:
        print("  ", *b)
    print(f"timed: {sum(1 for r in tim.values() if 'ms' in r)}")


# ======================================================================================
# worker (device)
# ======================================================================================


def worker(args: argparse.Namespace) -> None:
    import ctypes

    import torch
    import triton

    sys.path.insert(0, str(ROOT / "benchmarks" / "device"))
    import gpu_calibrate as gc  # h18's calibration harness: references of 7 ops

    with contextlib.suppress(OSError):
        ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
    src = Path(args.src)
    cases = {c["id"]: c for c in json.loads((src / "manifest.json").read_text())}
    libs = {}
    if Path(args.libs).exists():
        libs = {int(k): v for k, v in json.loads(Path(args.libs).read_text()).items()}
    dev = torch.device("cuda")
    software = (
        f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name(0)}"
    )
    prog = Path(args.progress).open("a")  # noqa: SIM115 - held for the whole loop
    for cid in [int(x) for x in args.ids.split(",") if x]:
        if time.time() > float(args.deadline):
            break
        prog.write(f"{cid}\n")
        prog.flush()
        c = cases[cid]
        torch.manual_seed(cid)
        rec: dict[str, Any] = {"id": cid, "software": software}
        t0 = time.perf_counter()
        fatal = _verify_case(c, rec, libs, torch, dev, gc, src, args.time)
        rec["seconds"] = round(time.perf_counter() - t0, 2)
        _append(Path(args.results), rec)
        if fatal:
            sys.exit(3)
        torch.cuda.empty_cache()
    sys.exit(0)


def _load_candidate(c: dict[str, Any], src: Path, libs: dict[int, Any]) -> Any:
    """The case's entry point: the Triton module's function, or the CUDA library's
    ``launch_<op>``."""
    import ctypes
    import importlib.util

    cid = c["id"]
    if c["impl"] == "triton":
        spec = importlib.util.spec_from_file_location(f"cand{cid}", src / c["file"])
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return getattr(mod, c["op"])
    lib = libs.get(cid, {}).get("lib")
    if not lib:
        raise RuntimeError("library did not build: " + libs.get(cid, {}).get("compile_error", ""))
    fn = getattr(ctypes.CDLL(lib), f"launch_{c['op']}")
    fn.restype = ctypes.c_int
    return fn


def _verify_case(
    c: dict[str, Any],
    rec: dict[str, Any],
    libs: dict[int, Any],
    torch: Any,
    dev: Any,
    gc: Any,
    src: Path,
    timed: bool,
) -> bool:
    """Load, run once, check (and with ``timed`` time) one case into ``rec``; True when a
    CUDA fault poisoned the context (the worker must exit)."""
    stage = "load"
    try:
        fn = _load_candidate(c, src, libs)
        if c["harness"] in CALIB_OPS:
            hc = {**c, "op": c["harness"]}
            make, call, check = gc._op_harness(hc, torch, dev)
            d, _ = make()
            stage = "first call"

            run_once = functools.partial(call, c["impl"], fn, d)

            check_fn = check
        else:
            d, run_once, check_fn = _own_harness(c, fn, torch, dev, src)
        out = run_once()
        torch.cuda.synchronize()
        stage = "check"
        rel, ok, note = check_fn(d, out)
        rec.update(max_rel_err=float(rel), check=note, status="ok" if ok else "wrong_result")
        if ok and timed:
            stage = "timing"
            rec.update(
                ms=_event_median(run_once, torch),
                timing="events, 15 eager calls after 3 warm-ups, median",
            )
    except Exception as ex:  # noqa: BLE001 - one case must not lose the rest
        rec.update(status="error", stage=stage, error=f"{type(ex).__name__}: {ex}"[:400])
        if stage == "load" and c["impl"] == "triton":
            rec["status"] = "compile_error"
        try:
            torch.cuda.synchronize()
            torch.zeros(1, device=dev).add_(1).item()
        except Exception:  # noqa: BLE001 - a poisoned context
            rec["status"] = "fault"
            return True
    return False


def _event_median(run_once: Callable[[], Any], torch: Any) -> float:
    """Median ms of 15 eager calls timed with CUDA events, after 3 warm-up calls."""
    for _ in range(3):
        run_once()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(15):
        s.record()
        run_once()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


def _cuda_params(code: str, op: str) -> list[tuple[str, str]]:
    """(type, name) of the launch wrapper's parameters, stream excluded."""
    m = re.search(rf'extern "C" cudaError_t launch_{op}\((.*?)\)\s*\{{', code, re.S)
    assert m, "no launch wrapper"
    out = []
    for part in m.group(1).split(","):
        toks = part.replace("*", " * ").split()
        if not toks or toks[-1] == "stream":
            continue
        out.append(("ptr" if "*" in toks else toks[-2], toks[-1]))
    return out


def _triton_params(code: str, op: str) -> list[str]:
    m = re.search(rf"^def {op}\((.*?)\):", code, re.S | re.M)
    assert m, "no entry point"
    return [a.split("=")[0].strip() for a in m.group(1).split(",") if a.strip() and "=" not in a]


def _rel(out: Any, ref: Any) -> float:
    num = (out.float() - ref.float()).norm().item()
    return num / max(ref.float().norm().item(), 1e-30)


class _OwnCase:
    """An own-op case being set up: its tensors (``d``, by the names the CUDA wrapper and
    the Triton entry point use), which of them are outputs (in the Triton return order) or
    updated in place, name aliases, and the tolerance of the check."""

    def __init__(self, torch: Any, dev: Any, act: Any) -> None:
        self.torch, self.dev, self.act = torch, dev, act
        self.f8 = torch.float8_e4m3fn
        self.F = torch.nn.functional
        self.d: dict[str, Any] = {}
        self.outs: list[str] = []  # output names in the Triton return order
        self.inplace: list[str] = []  # tensors the kernel updates in place
        self.tol = 2e-2
        self.aliases: dict[str, str] = {}

    def rn(self, *shape: int, dtype: Any = None, scale: float = 1.0) -> Any:
        dtype = self.act if dtype is None else dtype
        return (scale * self.torch.randn(*shape, device=self.dev)).to(dtype)


def _own_harness(
    c: dict[str, Any], fn: Any, torch: Any, dev: Any, src: Path
) -> tuple[Any, Any, Any]:
    """(data, run_once, check) for the ops referenced here.

    ``data`` holds every tensor by the names the CUDA wrapper and the Triton entry point
    use; ``run_once`` calls the candidate and returns {output name: tensor}; ``check``
    compares with an fp32 reference computed from pristine copies of the inputs.
    """
    op = c["op"]
    act = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(c["dtype"], torch.float16)
    e = _OwnCase(torch, dev, act)
    setup = _OWN_SETUPS.get(op)
    if setup is None:
        raise ValueError(f"no reference for {op}")
    ref = setup(c, e)
    d = e.d
    pristine = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in d.items()}
    code = (src / c["file"]).read_text()
    if c["impl"] == "cuda":
        run_once = _cuda_runner(e, fn, _cuda_params(code, op), pristine)
    else:
        run_once = _triton_runner(e, fn, _triton_params(code, op), pristine)

    def check(_d: Any, got: dict[str, Any]) -> tuple[float, bool, str]:
        if op in ("nucleus_sample", "minp_sample"):
            return _sampling_check(op, pristine, got)
        return _reference_check(e, ref(pristine), got)

    return d, run_once, check


def _lookup(e: _OwnCase, name: str) -> Any:
    """A kernel parameter's tensor (or scalar) by its name or its alias."""
    d, aliases = e.d, e.aliases
    return d[aliases.get(name, name)] if aliases.get(name, name) in d else d[name]


#: ctypes of the integer scalars a launch wrapper may take (any other scalar is a float).
_INT_TYPES: dict[str, Any] = {
    "int": ctypes.c_int,
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "long": ctypes.c_long,
}


def _cuda_runner(
    e: _OwnCase, fn: Any, params: list[tuple[str, str]], pristine: dict[str, Any]
) -> Callable[[], Any]:
    """Launch the CUDA wrapper (pointers, integer and float scalars in its order, on the
    current stream) after restoring the in-place tensors."""
    torch, d = e.torch, e.d
    stream = lambda: ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)  # noqa: E731

    def run_once() -> Any:
        for name in e.inplace:
            d[name].copy_(pristine[name])
        args = []
        for ty, name in params:
            if ty == "ptr":
                args.append(ctypes.c_void_p(_lookup(e, name).data_ptr()))
            elif ty in _INT_TYPES:
                args.append(_INT_TYPES[ty](int(_lookup(e, name))))
            else:
                args.append(ctypes.c_float(float(_lookup(e, name))))
        rc = fn(*args, stream())
        if rc != 0:
            raise RuntimeError(f"launch returned cudaError {rc}")
        return {n: d[n] for n in e.outs}

    return run_once


def _triton_runner(
    e: _OwnCase, fn: Any, names: list[str], pristine: dict[str, Any]
) -> Callable[[], Any]:
    """Call the Triton entry point after restoring the in-place tensors; its outputs are
    what it returns, or the in-place tensors when it returns nothing of its own."""
    d, outs, inplace = e.d, e.outs, e.inplace

    def run_once() -> Any:
        for name in inplace:
            d[name].copy_(pristine[name])
        r = fn(*[_lookup(e, n) for n in names])
        if r is None or inplace and all(n in inplace for n in outs):
            return {n: d[n] for n in outs}
        if not isinstance(r, (tuple, list)):
            r = (r,)
        return dict(zip(outs, r, strict=False))

    return run_once


def _sampling_check(
    op: str, pristine: dict[str, Any], got: dict[str, Any]
) -> tuple[float, bool, str]:
    """A sampled token is right when it lies in the allowed set (min-p or top-p)."""
    p = pristine["logits"].float().softmax(-1)
    tok = got["token"].long()
    valid = (tok >= 0) & (tok < p.shape[1])
    pt = p.gather(-1, tok.clamp(0, p.shape[1] - 1)[:, None]).squeeze(-1)
    if op == "minp_sample":
        thr = pristine["min_p"] * p.amax(-1)
        good = valid & (pt >= thr * (1 - 1e-3))
    else:
        sp = p.sort(-1, descending=True).values
        cum = sp.cumsum(-1)
        cut = (cum < pristine["top_p"][:, None]).sum(-1).clamp(max=p.shape[1] - 1)
        thr = sp.gather(-1, cut[:, None]).squeeze(-1)
        good = valid & (pt >= thr * (1 - 1e-3))
    bad = int((~good).sum().item())
    return bad / len(tok), bad == 0, "token inside the allowed set"


def _reference_check(
    e: _OwnCase, want: dict[str, Any], got: dict[str, Any]
) -> tuple[float, bool, str]:
    """Every output finite and within the case's tolerance (rel L2) of the fp32 reference."""
    torch, d = e.torch, e.d
    worst = 0.0
    finite = True
    for name, r in want.items():
        g = got.get(name, d[name])
        finite = finite and bool(torch.isfinite(g.float()).all())
        worst = max(worst, _rel(g, r))
    return worst, finite and worst < e.tol, "rel L2 vs fp32"


def _embedding_gather_setup(
    c: dict[str, Any], e: _OwnCase
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Rows of an embedding table gathered by token id."""
    s = c["shape"]
    torch, dev, act, d, rn = e.torch, e.dev, e.act, e.d, e.rn
    T, V, H = s["T"], s["V"], s["H"]
    d["ids"] = torch.randint(0, V, (T,), device=dev, dtype=torch.int64)
    d["table"] = rn(V, H)
    d["out"] = torch.empty(T, H, device=dev, dtype=act)
    e.outs = ["out"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        return {"out": x["table"][x["ids"]].float()}

    return ref


def _moe_scatter_setup(
    c: dict[str, Any], e: _OwnCase
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Tokens copied to their experts' slots (each token to its k slots)."""
    s = c["shape"]
    torch, dev, act, d, rn = e.torch, e.dev, e.act, e.d, e.rn
    T, H, E, k = s["T"], s["H"], s["E"], s["k"]
    d["x"] = rn(T, H)
    d["topk_ids"] = torch.randint(0, E, (T, k), device=dev, dtype=torch.int32)
    d["sorted_slot"] = torch.randperm(T * k, device=dev).to(torch.int32)
    d["x_perm"] = torch.empty(T * k, H, device=dev, dtype=act)
    e.outs = ["x_perm"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        o = torch.empty(T * k, H, device=dev)
        o[x["sorted_slot"].long()] = x["x"].float().repeat_interleave(k, 0)
        return {"x_perm": o}

    return ref


def _moe_combine_setup(
    c: dict[str, Any], e: _OwnCase
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Expert outputs gathered back per token and summed with the top-k weights."""
    s = c["shape"]
    torch, dev, act, d, rn = e.torch, e.dev, e.act, e.d, e.rn
    T, H, k = s["T"], s["H"], s["k"]
    d["y_perm"] = rn(T * k, H)
    d["topk_weights"] = torch.rand(T, k, device=dev).softmax(-1)
    d["sorted_slot"] = torch.randperm(T * k, device=dev).to(torch.int32)
    d["y"] = torch.empty(T, H, device=dev, dtype=act)
    e.outs = ["y"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        g = x["y_perm"].float()[x["sorted_slot"].long()].view(T, k, H)
        return {"y": (g * x["topk_weights"][..., None]).sum(1)}

    return ref


def _kv_append_setup(c: dict[str, Any], e: _OwnCase) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """New keys/values written into a paged cache at their slots (in place)."""
    s = c["shape"]
    torch, dev, d, rn = e.torch, e.dev, e.d, e.rn
    T, Hkv, D, page = s["T"], s["Hkv"], s["D"], s["page"]
    nb = -(-2 * T // page) + 1
    d["k"], d["v"] = rn(T, Hkv, D), rn(T, Hkv, D)
    d["slot_mapping"] = torch.randperm(nb * page, device=dev)[:T].to(torch.int64)
    d["k_cache"] = rn(nb, page, Hkv, D)
    d["v_cache"] = rn(nb, page, Hkv, D)
    e.outs, e.inplace = ["k_cache", "v_cache"], ["k_cache", "v_cache"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        kc = x["k_cache"].float().view(-1, Hkv, D).clone()
        vc = x["v_cache"].float().view(-1, Hkv, D).clone()
        kc[x["slot_mapping"]] = x["k"].float()
        vc[x["slot_mapping"]] = x["v"].float()
        return {"k_cache": kc.view(nb, page, Hkv, D), "v_cache": vc.view(nb, page, Hkv, D)}

    return ref


def _paged_kv_copy_setup(
    c: dict[str, Any], e: _OwnCase
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Cache blocks copied per layer by a (source, destination) mapping (in place)."""
    s = c["shape"]
    torch, dev, d, rn = e.torch, e.dev, e.d, e.rn
    nb, page, Hkv, D, L = s["n_blocks"], s["page"], s["Hkv"], s["D"], s["L"]
    half = nb // 2
    src_b = torch.randperm(half, device=dev)
    dst_b = half + torch.randperm(nb - half, device=dev)[:half]
    pairs = torch.stack([src_b, dst_b], 1)
    ident = torch.arange(nb - half, device=dev) % max(half, 1)
    pairs = torch.cat([pairs, torch.stack([ident, ident], 1)], 0)[:nb]
    d["block_mapping"] = pairs.to(torch.int64).contiguous()
    d["k_cache"] = rn(L, nb, page, Hkv, D)
    d["v_cache"] = rn(L, nb, page, Hkv, D)
    e.outs, e.inplace = ["k_cache", "v_cache"], ["k_cache", "v_cache"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        r = {}
        m = x["block_mapping"]
        for name in ("k_cache", "v_cache"):
            t = x[name].float().clone()
            t[:, m[:, 1]] = x[name].float()[:, m[:, 0]]
            r[name] = t
        return r

    return ref


def _conv1d_causal_setup(
    c: dict[str, Any], e: _OwnCase
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Depthwise causal 1-D convolution plus bias, then SiLU."""
    s = c["shape"]
    torch, dev, act, F, d, rn = e.torch, e.dev, e.act, e.F, e.d, e.rn
    B, L, C, W = s["B"], s["L"], s["C"], s["W"]
    d["x"], d["weight"], d["bias"] = rn(B, L, C), rn(C, W, scale=0.5), rn(C, scale=0.1)
    d["out"] = torch.empty(B, L, C, device=dev, dtype=act)
    e.outs = ["out"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        xt = x["x"].float().transpose(1, 2)  # B, C, L
        y = F.conv1d(
            F.pad(xt, (W - 1, 0)), x["weight"].float()[:, None, :], x["bias"].float(), groups=C
        )
        return {"out": F.silu(y).transpose(1, 2)}

    return ref


def _rope_setup(c: dict[str, Any], e: _OwnCase) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Rotary embedding of q and k from a cos/sin cache by position (in place)."""
    s = c["shape"]
    torch, dev, act, d, rn, aliases = e.torch, e.dev, e.act, e.d, e.rn, e.aliases
    T, Hq, Hkv, D = s["T"], s["Hq"], s["Hkv"], s["D"]
    maxpos = 4096
    d["q"], d["k"] = rn(T, Hq, D), rn(T, Hkv, D)
    ang = torch.rand(maxpos, D // 2, device=dev) * 6.28
    d["cos_sin_cache"] = torch.cat([ang.cos(), ang.sin()], -1).to(act)
    aliases["cos_sin"] = "cos_sin_cache"
    d["positions"] = torch.randint(0, maxpos, (T,), device=dev, dtype=torch.int64)
    e.outs, e.inplace = ["q", "k"], ["q", "k"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        cs = x["cos_sin_cache"].float()[x["positions"]]
        cos, sin = cs[:, None, : D // 2], cs[:, None, D // 2 :]
        r = {}
        for name in ("q", "k"):
            t = x[name].float()
            a, b = t[..., : D // 2], t[..., D // 2 :]
            r[name] = torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
        return r

    return ref


def _kv_int8_quant_setup(
    c: dict[str, Any], e: _OwnCase
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Keys/values quantised to int8 with one scale per (token, head)."""
    s = c["shape"]
    torch, dev, d, rn = e.torch, e.dev, e.d, e.rn
    T, Hkv, D = s["T"], s["Hkv"], s["D"]
    d["k"], d["v"] = rn(T, Hkv, D), rn(T, Hkv, D)
    d["k_q"] = torch.empty(T, Hkv, D, device=dev, dtype=torch.int8)
    d["v_q"] = torch.empty(T, Hkv, D, device=dev, dtype=torch.int8)
    d["scales"] = torch.empty(T, 2, Hkv, device=dev, dtype=torch.float32)
    e.outs = ["k_q", "v_q", "scales"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        r = {}
        sc = []
        for name in ("k", "v"):
            t = x[name].float()
            scale = t.abs().amax(-1).clamp_min(1e-8) / 127.0
            sc.append(scale)
            r[name + "_q"] = (t / scale[..., None]).round().clamp(-127, 127)
        r["scales"] = torch.stack(sc, 1)
        return r

    e.tol = 1.5e-2  # rel L2 admits a rounding tie now and then, not a wrong scale

    return ref


def _gemv_setup(c: dict[str, Any], e: _OwnCase) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``int8_gemv`` / ``fp8_gemv``: a quantised weight with per-row scales."""
    op = c["op"]
    s = c["shape"]
    torch, dev, f8, d, rn = e.torch, e.dev, e.f8, e.d, e.rn
    B, N, K = s["B"], s["N"], s["K"]
    d["x"] = rn(B, K, dtype=torch.float16)
    if op == "int8_gemv":
        d["w"] = torch.randint(-127, 128, (N, K), device=dev, dtype=torch.int8)
    else:
        d["w"] = rn(N, K, dtype=f8)
    d["w_scale"] = torch.rand(N, device=dev) / K**0.5 / 20 + 1e-4
    d["y"] = torch.empty(B, N, device=dev, dtype=torch.float16)
    e.outs = ["y"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        return {"y": (x["x"].float() @ x["w"].float().T) * x["w_scale"]}

    return ref


def _gemm_setup(c: dict[str, Any], e: _OwnCase) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``int8_gemm`` (per-row/column scales) and ``fp8_gemm[_persistent]`` (per-tensor)."""
    op = c["op"]
    s = c["shape"]
    torch, dev, f8, d, rn = e.torch, e.dev, e.f8, e.d, e.rn
    M, N, K = s["M"], s["N"], s["K"]
    od = torch.bfloat16 if op == "fp8_gemm_persistent" else torch.float16
    if op == "int8_gemm":
        d["a"] = torch.randint(-127, 128, (M, K), device=dev, dtype=torch.int8)
        d["w"] = torch.randint(-127, 128, (N, K), device=dev, dtype=torch.int8)
        d["a_scale"] = torch.rand(M, device=dev) / 127 + 1e-4
        d["w_scale"] = torch.rand(N, device=dev) / 127 / K**0.5 + 1e-5
    else:
        d["a"], d["w"] = rn(M, K, dtype=f8), rn(N, K, dtype=f8)
        d["a_scale"] = torch.tensor([0.5], device=dev)
        d["w_scale"] = torch.tensor([1.0 / K**0.5], device=dev)
    d["c"] = torch.empty(M, N, device=dev, dtype=od)
    e.outs = ["c"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        acc = x["a"].double() @ x["w"].double().T
        if op == "int8_gemm":
            return {
                "c": (acc * x["a_scale"].double()[:, None] * x["w_scale"].double()[None, :]).float()
            }
        return {"c": (acc * float(x["a_scale"]) * float(x["w_scale"])).float()}

    return ref


def _attention_setup(c: dict[str, Any], e: _OwnCase) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``flash_prefill`` / ``chunked_prefill`` (causal) and ``cross_attn`` (no mask)."""
    op = c["op"]
    s = c["shape"]
    torch, dev, act, F, d, rn, aliases = e.torch, e.dev, e.act, e.F, e.d, e.rn, e.aliases
    B, Hq, Hkv, D = s["B"], s["Hq"], s["Hkv"], s["D"]
    Sq = {
        "flash_prefill": s.get("S"),
        "cross_attn": s.get("Sq"),
        "chunked_prefill": s.get("C"),
    }[op]
    Skv = {
        "flash_prefill": s.get("S"),
        "cross_attn": s.get("Senc"),
        "chunked_prefill": (s.get("P") or 0) + (s.get("C") or 0),
    }[op]
    d["q"], d["k"], d["v"] = rn(B, Sq, Hq, D), rn(B, Skv, Hkv, D), rn(B, Skv, Hkv, D)
    aliases.update(k_enc="k", v_enc="v")
    d["out"] = torch.empty(B, Sq, Hq, D, device=dev, dtype=act)
    e.outs = ["out"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        q, k, v = heads_first_gqa(x, Hq, Hkv)  # B,Hq,Sq|Skv,D
        mask = None
        if op != "cross_attn":
            i = torch.arange(Sq, device=dev)[:, None]
            j = torch.arange(Skv, device=dev)[None, :]
            mask = j <= i + (Skv - Sq)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return {"out": o.transpose(1, 2)}

    return ref


def _swa_decode_setup(c: dict[str, Any], e: _OwnCase) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Paged decode attention over the last W positions (sliding window)."""
    s = c["shape"]
    torch, dev, act, d, rn = e.torch, e.dev, e.act, e.d, e.rn
    B, Hq, Hkv, D, Skv, W, page = (s[x] for x in ("B", "Hq", "Hkv", "D", "Skv", "W", "page"))
    nb = -(-Skv // page)
    d["q"] = rn(B, Hq, D)
    d["k_cache"], d["v_cache"] = rn(B * nb, page, Hkv, D), rn(B * nb, page, Hkv, D)
    d["block_table"] = (
        torch.randperm(B * nb, device=dev, dtype=torch.int32).view(B, nb).contiguous()
    )
    d["seq_lens"] = torch.full((B,), Skv, device=dev, dtype=torch.int32)
    d["out"] = torch.empty(B, Hq, D, device=dev, dtype=act)
    e.outs = ["out"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        bt = x["block_table"].long()
        k = x["k_cache"][bt].reshape(B, nb * page, Hkv, D)[:, max(0, Skv - W) : Skv].float()
        v = x["v_cache"][bt].reshape(B, nb * page, Hkv, D)[:, max(0, Skv - W) : Skv].float()
        q = x["q"].float().view(B, Hkv, Hq // Hkv, D)
        sc = torch.einsum("bhgd,bshd->bhgs", q, k) / D**0.5
        return {"out": torch.einsum("bhgs,bshd->bhgd", sc.softmax(-1), v).reshape(B, Hq, D)}

    return ref


def _sampling_setup(c: dict[str, Any], e: _OwnCase) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``nucleus_sample`` / ``minp_sample``: checked by the allowed token set, no ref."""
    op = c["op"]
    s = c["shape"]
    torch, dev, d, rn = e.torch, e.dev, e.d, e.rn
    Bt, V = s["B"], s["V"]
    d["logits"] = rn(Bt, V, scale=3.0)
    pname = "top_p" if op == "nucleus_sample" else "min_p"
    d[pname] = (
        (0.5 + 0.4 * torch.rand(Bt, device=dev))
        if op == "nucleus_sample"
        else (0.02 + 0.1 * torch.rand(Bt, device=dev))
    )
    d["uniform"] = torch.rand(Bt, device=dev).clamp(1e-4, 1 - 1e-4)
    d["token"] = torch.full((Bt,), -1, device=dev, dtype=torch.int32)
    e.outs = ["token"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        return {}

    return ref


def _mamba_step_setup(c: dict[str, Any], e: _OwnCase) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """One Mamba selective-scan step: state update (in place) and gated output."""
    s = c["shape"]
    torch, dev, act, F, d, rn = e.torch, e.dev, e.act, e.F, e.d, e.rn
    B, Din, N = s["B"], s["Din"], s["N"]
    d["state"] = torch.randn(B, Din, N, device=dev)
    d["u"], d["delta"] = rn(B, Din), (0.05 + 0.1 * torch.rand(B, Din, device=dev)).to(act)
    d["A"] = -torch.rand(Din, N, device=dev) - 0.1
    d["Bm"], d["Cm"] = rn(B, N), rn(B, N)
    d["D"] = torch.randn(Din, device=dev)
    d["z"] = rn(B, Din)
    d["y"] = torch.empty(B, Din, device=dev, dtype=act)
    e.outs, e.inplace = ["y", "state"], ["state"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        dl = x["delta"].float()[..., None]
        st = (
            torch.exp(dl * x["A"]) * x["state"]
            + dl * x["Bm"].float()[:, None, :] * x["u"].float()[..., None]
        )
        y = (st * x["Cm"].float()[:, None, :]).sum(-1) + x["D"] * x["u"].float()
        return {"y": y * F.silu(x["z"].float()), "state": st}

    return ref


#: The setup of each op referenced here.
_OWN_SETUPS: dict[str, Callable[[dict[str, Any], _OwnCase], Any]] = {
    "embedding_gather": _embedding_gather_setup,
    "moe_scatter": _moe_scatter_setup,
    "moe_combine": _moe_combine_setup,
    "kv_append": _kv_append_setup,
    "paged_kv_copy": _paged_kv_copy_setup,
    "conv1d_causal": _conv1d_causal_setup,
    "rope": _rope_setup,
    "kv_int8_quant": _kv_int8_quant_setup,
    "int8_gemv": _gemv_setup,
    "fp8_gemv": _gemv_setup,
    "int8_gemm": _gemm_setup,
    "fp8_gemm": _gemm_setup,
    "fp8_gemm_persistent": _gemm_setup,
    "flash_prefill": _attention_setup,
    "cross_attn": _attention_setup,
    "chunked_prefill": _attention_setup,
    "swa_decode": _swa_decode_setup,
    "nucleus_sample": _sampling_setup,
    "minp_sample": _sampling_setup,
    "mamba_step": _mamba_step_setup,
    **MORE_SETUPS,
}


# ======================================================================================
# collect (here)
# ======================================================================================

FIELDS = (
    "op",
    "impl",
    "variant",
    "family",
    "structure",
    "gpu_rendered",
    "built_for",
    "dtype",
    "shape",
    "params",
    "status",
    "max_rel_err",
    "check",
    "error",
    "ms",
    "timing",
    "software",
    "device",
    "nvcc",
    "measured_at",
    "generator_version",
    "command",
)


def collect(run_dir: Path, manifest: Path, append: bool = False) -> None:
    """Write the CSV from a run; ``append`` keeps the rows already there whose structure
    (op, impl, rung, family, structure, shape) this manifest did not measure: a
    ``--styles`` run adds its rows to the 1.6.0 ones, a re-run of some cases replaces
    theirs."""
    cases = {c["id"]: c for c in json.loads(manifest.read_text())}
    env = json.loads((run_dir / "env.json").read_text())
    res = {r["id"]: r for r in _records(run_dir / "verify.jsonl")}
    tim = {r["id"]: r for r in _records(run_dir / "timing.jsonl")}
    rows = []
    for cid, c in sorted(cases.items()):
        r = res.get(cid, {"status": "not_run"})
        t = tim.get(cid, {})
        rows.append(
            {
                "op": c["op"],
                "impl": c["impl"],
                "variant": c["variant"],
                "family": c["family"],
                "structure": c.get("structure", ""),
                "gpu_rendered": c["gpu"],
                "built_for": c["gencode"] if c["impl"] == "cuda" else "triton JIT (sm_90a)",
                "dtype": c["dtype"],
                "shape": ",".join(f"{k}={v}" for k, v in c["shape"].items()),
                "params": json.dumps(c["params"], sort_keys=True),
                "status": r.get("status", ""),
                "max_rel_err": f"{r['max_rel_err']:.3g}" if "max_rel_err" in r else "",
                "check": r.get("check", ""),
                "error": (r.get("error") or "").replace("\n", " ")[:240],
                "ms": f"{t['ms']:.5g}" if "ms" in t else "",
                "timing": t.get("timing", ""),
                "software": r.get("software", ""),
                "device": env.get("gpu", ""),
                "nvcc": env.get("nvcc", ""),
                "measured_at": env.get("started", ""),
                "generator_version": c["generator_version"],
                "command": COMMAND,
            }
        )
    if append and OUT_CSV.exists():

        def key(r: dict[str, Any]) -> tuple[str, ...]:
            return tuple(
                r.get(k, "") for k in ("op", "impl", "variant", "family", "structure", "shape")
            )

        measured = {key(r) for r in rows}
        with OUT_CSV.open(newline="") as fh:
            keep = [
                {k: r.get(k, "") for k in FIELDS}
                for r in csv.DictReader(fh)
                if key(r) not in measured
            ]
        rows = keep + rows
    OUT_CSV.parent.mkdir(parents=True, exist_ok=True)
    with OUT_CSV.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(FIELDS))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {len(rows)} rows to {OUT_CSV.relative_to(ROOT)}")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--out", type=Path, default=SRC_DIR)
    p.add_argument("--styles", action="store_true", help="the non-1.6.0 structures")
    p.add_argument("--ops", help="comma-separated op names (default: every referenced op)")
    r = sub.add_parser("run")
    r.add_argument("--out", default=os.environ.get("OUT", "verify_out"))
    r.add_argument("--src", default=str(SRC_DIR))
    r.add_argument("--budget", type=float, default=250.0)
    r.add_argument("--time-budget", type=float, default=30.0)
    r.add_argument("--workers", type=int, default=6)
    r.add_argument("--compile-jobs", type=int, default=10)
    w = sub.add_parser("worker")
    for a in ("--src", "--libs", "--ids", "--results", "--progress", "--deadline"):
        w.add_argument(a, required=True)
    w.add_argument("--time", action="store_true")
    c = sub.add_parser("collect")
    c.add_argument("--run", type=Path, required=True)
    c.add_argument("--manifest", type=Path, default=SRC_DIR / "manifest.json")
    c.add_argument("--append", action="store_true")
    a = ap.parse_args()
    if a.cmd == "prepare":
        prepare(a.out, a.styles, set(a.ops.split(",")) if a.ops else None)
    elif a.cmd == "run":
        run(a)
    elif a.cmd == "worker":
        worker(a)
    else:
        collect(a.run, a.manifest, a.append)


if __name__ == "__main__":
    main()
