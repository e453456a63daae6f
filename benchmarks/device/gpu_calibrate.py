"""Measure the simulator's kernels on a real H200 and check its Hopper templates there.

Three steps, two machines:

``prepare`` (here, with the project installed) renders every calibration point of
``dagster_project.sim.calibration`` with the simulator's own codegen — CUDA templates for
sm_90a and Triton templates for the H200 — plus one instance of every op's Hopper CUDA
rung (compile check only), and writes them with a manifest into ``.calib/`` (ignored by
git, carried to the device)::

    .venv/bin/python benchmarks/device/gpu_calibrate.py prepare

``run`` (on the device: python3 with torch, triton and numpy; nothing of this project is
imported) compiles every CUDA source with ``nvcc -gencode=arch=compute_90a,code=sm_90a``
in a thread pool while the GPU measures the Triton and torch points, then measures the
CUDA points whose library built. Each point is checked against a float32 reference
before it is timed; timing replays a CUDA graph of calls that cycle through enough input
sets to exceed the 60 MB L2, and takes the median of the replays. Points run in a worker
process watched by a per-point timeout, so a hung or faulting kernel (a CUDA error
poisons its context) costs one point, not the run::

    PYTHONUNBUFFERED=1 python3 benchmarks/device/gpu_calibrate.py run --out $OUT

``collect`` (here) turns the returned ``results.jsonl`` and ``compile.jsonl`` into the
committed ``dagster_project/sim/data/calibration/h200_measured.csv`` and
``h200_compile_check.csv``::

    .venv/bin/python benchmarks/device/gpu_calibrate.py collect --run <run 1 dir> --run <run 2 dir>

(each run directory: the files the device returned plus the manifest.json it ran with).

``fit`` (here) prints the error metrics before/after and the proposed efficiencies, and with
``--apply`` writes the H200 table and the H100 table scaled by the same factors::

    .venv/bin/python benchmarks/device/gpu_calibrate.py fit [--apply] [--full]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CALIB_DIR = ROOT / ".calib"
NVCC_FLAGS = ("-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a")
L2_ROTATE_BYTES = 3 * 60 * 2**20  # input sets cycled per graph: three times the L2
COMMAND = "PYTHONUNBUFFERED=1 python3 benchmarks/device/gpu_calibrate.py run --out $OUT"


# ======================================================================================
# prepare (here)
# ======================================================================================


def prepare(out: Path) -> None:
    """Render calibration points and Hopper compile-check cases into ``out``."""
    sys.path.insert(0, str(ROOT))
    import random

    from dagster_project.sim.calibration import calibration_points, render_point
    from dagster_project.sim.codegen import render_candidate
    from dagster_project.sim.hardware import get_gpu
    from dagster_project.sim.kernels import plan
    from dagster_project.sim.ops import OPS
    from dagster_project.sim.variants import default_params, features_used, hw_choice, ladder

    if out.exists():
        shutil.rmtree(out)
    (out / "cuda").mkdir(parents=True)
    (out / "triton").mkdir(parents=True)
    cases: list[dict[str, Any]] = []
    for pt in calibration_points():
        case: dict[str, Any] = {
            "id": len(cases),
            "kind": "calib",
            "op": pt.op,
            "dtype": pt.dtype,
            "shape": pt.shape,
            "impl": "torch" if pt.source == "torch" else pt.impl,
            "variant": pt.variant,
            "sim_impl": pt.impl,
            "source": pt.source,
            "label": pt.label,
            "params": pt.params,
            "expect_compile": True,
        }
        if pt.source != "torch":
            ext = "cu" if pt.impl == "cuda" else "py"
            rel = f"{pt.impl}/{case['id']:04d}_{pt.op}_{pt.variant}.{ext}"
            (out / rel).write_text(render_point(pt))
            case["file"] = rel
        cases.append(case)
    # Compile check: every op's Hopper rung(s) at a shape its own sampler draws, and every
    # other CUDA rung of the ops not already covered by calibration points.
    gpu = get_gpu("h200")
    covered = {c["op"] for c in cases}
    for name, spec in OPS.items():
        rng = random.Random(f"hopper-compile-{name}")
        shape = spec.sample(rng)
        dtype = spec.dtypes[0] if spec.dtypes[0] != "fp32" else spec.dtypes[-1]
        rungs = [] if name in covered else ladder(spec.family, "cuda")
        hopper = [v for v in ladder(spec.family, "cuda") if v.level == 4]
        chosen = {v.tag: v for v in rungs}
        for v in hopper:
            chosen.setdefault(v.tag, v)
        hw = hw_choice(spec.family, "cuda", gpu)
        if hw is not None:
            chosen.setdefault(hw.tag, hw)
        for v in chosen.values():
            params = default_params(v, spec, dtype, shape, gpu)
            feats = features_used(v, spec, dtype, params)
            over = plan(spec, shape, dtype, gpu, v, params).smem > gpu.smem_per_block_optin
            expect = not over and all(f in gpu.features for f in feats)
            rel = f"cuda/{len(cases):04d}_{name}_{v.tag}.cu"
            (out / rel).write_text(render_candidate(spec, gpu, dtype, shape, v, params))
            cases.append(
                {
                    "id": len(cases),
                    "kind": "compile",
                    "op": name,
                    "dtype": dtype,
                    "shape": shape,
                    "impl": "cuda",
                    "variant": v.tag,
                    "sim_impl": "cuda",
                    "source": "cuda_template",
                    "label": v.title,
                    "params": params,
                    "features": sorted(feats),
                    "expect_compile": expect,
                    "file": rel,
                }
            )
    (out / "manifest.json").write_text(json.dumps(cases, indent=1))
    kinds: dict[str, int] = {}
    for c in cases:
        k = f"{c['kind']}/{c['impl']}"
        kinds[k] = kinds.get(k, 0) + 1
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"wrote {len(cases)} cases to {out} ({size / 2**20:.1f} MiB): {kinds}")


# ======================================================================================
# run (device): compile pool + watched worker processes
# ======================================================================================


def _nvcc() -> str:
    for cand in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and Path(cand).exists():
            return cand
    raise RuntimeError("nvcc not found")


def _libcuda_dir() -> str | None:
    """A directory holding libcuda.so (driver or toolkit stub) for ``-lcuda``, if any."""
    nvcc = Path(_nvcc()).resolve()
    for d in (
        nvcc.parent.parent / "lib64" / "stubs",
        nvcc.parent.parent / "targets" / "x86_64-linux" / "lib" / "stubs",
        Path("/usr/local/cuda/lib64/stubs"),
        Path("/usr/local/nvidia/lib64"),
        Path("/usr/lib/x86_64-linux-gnu"),
    ):
        if (d / "libcuda.so").exists():
            return str(d)
    return None


def compile_case(case: dict[str, Any], src_dir: Path, build: Path) -> dict[str, Any]:
    """nvcc one CUDA source: a shared library for measured points, an object otherwise."""
    src = src_dir / case["file"]
    stem = Path(case["file"]).stem
    shared = case["kind"] == "calib"
    target = build / (f"lib{stem}.so" if shared else f"{stem}.o")
    cmd = [_nvcc(), *NVCC_FLAGS, "-Xptxas", "-v"]
    if shared:
        cmd += ["-shared", "-Xcompiler", "-fPIC", str(src), "-o", str(target)]
        libdir = _libcuda_dir()
        if libdir:
            cmd += [f"-L{libdir}", "-lcuda"]
    else:
        cmd += ["-c", str(src), "-o", str(target)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        ok, err = proc.returncode == 0, proc.stderr
    except subprocess.TimeoutExpired:
        ok, err = False, "nvcc timeout (240 s)"
    lines = err.splitlines()
    errors = [ln for ln in lines if "error" in ln.lower()][:4]
    regs = [ln.split("ptxas info    : ")[-1] for ln in lines if "Used " in ln][:4]
    return {
        "id": case["id"],
        "kind": case["kind"],
        "op": case["op"],
        "variant": case["variant"],
        "features": case.get("features", []),
        "expect_compile": case["expect_compile"],
        "compiled": ok,
        "seconds": round(time.perf_counter() - t0, 2),
        "lib": str(target) if ok else "",
        "errors": errors,
        "resources": regs,
        "cmd": " ".join(["nvcc", *cmd[1:]]).replace(str(src_dir) + "/", ""),
    }


class Watched:
    """Runs cases in a worker process; a case past its timeout or a dead worker is
    recorded and the rest continue in a fresh worker."""

    def __init__(
        self,
        manifest: Path,
        out: Path,
        libs: dict[int, str],
        deadline: float,
        case_timeout: float = 25.0,
    ) -> None:
        self.manifest, self.out, self.libs, self.deadline = manifest, out, libs, deadline
        self.case_timeout = case_timeout
        self.results = out / "results.jsonl"
        self.progress = out / "progress.log"
        self._mark = 0

    def _done_ids(self) -> set[int]:
        if not self.results.exists():
            return set()
        return {json.loads(ln)["id"] for ln in self.results.read_text().splitlines() if ln.strip()}

    def _record(self, rec: dict[str, Any]) -> None:
        with self.results.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")

    def run(self, ids: list[int], first_timeout: float = 60.0) -> None:
        pending = list(ids)
        case_timeout = self.case_timeout
        first_timeout = max(first_timeout, case_timeout)  # a fresh worker's first case too
        libs_file = self.out / "libs.json"
        libs_file.write_text(json.dumps({str(k): v for k, v in self.libs.items()}))
        while pending and time.time() < self.deadline:
            self._mark = self._lines()
            cmd = [
                sys.executable,
                str(Path(__file__).resolve()),
                "worker",
                "--manifest",
                str(self.manifest),
                "--out",
                str(self.out),
                "--libs",
                str(libs_file),
                "--ids",
                ",".join(map(str, pending)),
                "--deadline",
                str(self.deadline),
            ]
            with (self.out / "worker.log").open("a") as log:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
                current, started, first = None, time.time(), True
                while proc.poll() is None:
                    time.sleep(0.2)
                    cur = self._current()
                    if cur != current:
                        if current is not None:
                            first = False
                        current, started = cur, time.time()
                    limit = first_timeout if first else case_timeout
                    if time.time() - started > limit or time.time() > self.deadline + 5:
                        proc.kill()
                        proc.wait()
                        break
            done = self._done_ids()
            cur = self._current()
            if cur is None and proc.returncode != 0:
                cur = pending[0]  # died before its first case: blame that case, move on
            if cur is not None and cur not in done and cur in pending:
                why = (
                    "timeout" if proc.returncode in (-9, None) else f"worker exit {proc.returncode}"
                )
                self._record({"id": cur, "status": "crash", "error": why})
                done.add(cur)
            pending = [i for i in pending if i not in done]
            if proc.returncode == 0:
                break
        for i in pending:
            self._record({"id": i, "status": "skipped", "error": "deadline"})

    def _lines(self) -> int:
        return len(self.progress.read_text().splitlines()) if self.progress.exists() else 0

    def _current(self) -> int | None:
        """The case the current worker started last (None before its first)."""
        if not self.progress.exists():
            return None
        lines = self.progress.read_text().splitlines()[self._mark :]
        return int(lines[-1]) if lines else None


def parse_ids(spec: str) -> set[int]:
    """``"183-210,216,222"`` → the manifest ids it names (ranges inclusive): a re-run of
    the points an earlier run's deadline cut off, or a repeat of contested ones."""
    ids: set[int] = set()
    for part in filter(None, (p.strip() for p in spec.split(","))):
        lo, _, hi = part.partition("-")
        try:
            ids.update(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise SystemExit(f"--ids: {part!r} is not an id or a range like 183-210") from None
    return ids


def _cmd_out(cmd: list[str]) -> str:
    """A tool's stdout, or the reason it could not run (the table must still print)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"unavailable: {e}"


def run(args: argparse.Namespace) -> None:
    """Device entry point: compile, measure, print the table."""
    t_start = time.time()
    deadline = t_start + args.budget
    src_dir = Path(args.src)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    build = Path(args.build)
    build.mkdir(parents=True, exist_ok=True)
    manifest = src_dir / "manifest.json"
    cases: list[dict[str, Any]] = json.loads(manifest.read_text())
    env = {
        "nvcc": _cmd_out([_nvcc(), "--version"]).splitlines()[-1:],
        "nvidia_smi": _cmd_out(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit",
                "--format=csv,noheader",
            ]
        ),
        "libcuda_dir": _libcuda_dir(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)),
    }
    print("env:", json.dumps(env))
    if args.skip_compile_check:
        cases = [c for c in cases if c["kind"] == "calib"]
    if args.ids:
        wanted = parse_ids(args.ids)
        cases = [c for c in cases if c["id"] in wanted]
    cuda_cases = [c for c in cases if c["impl"] == "cuda"]
    # measured points' libraries first: the GPU waits for those
    cuda_cases.sort(key=lambda c: (c["kind"] != "calib", c["id"]))
    # leave cores for Triton's JIT in the worker
    pool = ThreadPoolExecutor(max_workers=max(2, (os.cpu_count() or 4) // 2))
    futs: dict[int, Future[dict[str, Any]]] = {
        c["id"]: pool.submit(compile_case, c, src_dir, build) for c in cuda_cases
    }
    watched = Watched(manifest, out, {}, deadline, case_timeout=args.case_timeout)
    first = [c["id"] for c in _by_shape(cases) if c["impl"] in ("triton", "torch")]
    watched.run(first)
    libs: dict[int, str] = {}
    with (out / "compile.jsonl").open("w") as fh:
        for c in cuda_cases:
            if c["kind"] != "calib":
                continue
            rec = futs[c["id"]].result()
            fh.write(json.dumps(rec) + "\n")
            if rec["compiled"]:
                libs[c["id"]] = rec["lib"]
        print(f"[{time.time() - t_start:5.0f}s] calibration libraries: {len(libs)} built")
        watched.libs = libs
        second = [c["id"] for c in _by_shape(cases) if c["impl"] == "cuda"]
        watched.run(second)
        for c in cuda_cases:
            if c["kind"] == "calib":
                continue
            remaining = deadline + 20 - time.time()
            try:
                rec = futs[c["id"]].result(timeout=max(1.0, remaining))
            except Exception as e:  # noqa: BLE001 - a compile we could not wait for
                rec = {
                    "id": c["id"],
                    "kind": "compile",
                    "op": c["op"],
                    "variant": c["variant"],
                    "compiled": None,
                    "errors": [repr(e)],
                }
            fh.write(json.dumps(rec) + "\n")
    pool.shutdown(wait=False, cancel_futures=True)
    (out / "env.json").write_text(json.dumps(env, indent=1))
    summary(cases, out, time.time() - t_start)
    sys.stdout.flush()
    os._exit(0)  # do not wait for nvcc still running past the deadline


#: One-letter tags of the printed table: c = CUDA template, t = Triton template, p = PyTorch.
_IMPL_TAG = {"cuda": "c", "triton": "t", "torch": "p"}


def _by_shape(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Calibration cases ordered first shape of every op, then second...: if the deadline
    cuts a phase short, every op keeps points."""
    rank: dict[tuple[str, str], int] = {}
    for c in cases:
        if c["kind"] == "calib":
            key = (c["op"], json.dumps(c["shape"], sort_keys=True))
            rank.setdefault(key, sum(1 for k in rank if k[0] == c["op"]))
    calib = [c for c in cases if c["kind"] == "calib"]
    return sorted(
        calib, key=lambda c: (rank[(c["op"], json.dumps(c["shape"], sort_keys=True))], c["id"])
    )


def summary(cases: list[dict[str, Any]], out: Path, secs: float) -> None:
    """Print the short tables the reply carries."""
    by_id = {c["id"]: c for c in cases}
    res: dict[int, dict[str, Any]] = {}
    if (out / "results.jsonl").exists():
        for ln in (out / "results.jsonl").read_text().splitlines():
            r = json.loads(ln)
            res[r["id"]] = r
    comp: dict[int, dict[str, Any]] = {}
    if (out / "compile.jsonl").exists():
        for ln in (out / "compile.jsonl").read_text().splitlines():
            r = json.loads(ln)
            comp[r["id"]] = r
    print(f"\n== measured points (ms; status) after {secs:.0f} s ==")
    groups: dict[str, list[str]] = {}
    for i, r in sorted(res.items()):
        c = by_id[i]
        key = f"{c['op']} {','.join(f'{k}={v}' for k, v in c['shape'].items())}"
        cell = f"{_IMPL_TAG[c['impl']]}:{c['variant']}=" + (
            f"{r['ms']:.4g}" if r.get("status") == "ok" else r.get("status", "?")
        )
        groups.setdefault(key, []).append(cell)
    for k, cells in groups.items():
        print(k)
        print("   " + "  ".join(cells))
    stat: dict[str, int] = {}
    for r in res.values():
        stat[r.get("status", "?")] = stat.get(r.get("status", "?"), 0) + 1
    print("point status:", stat)
    tri = [r for i, r in res.items() if by_id[i]["impl"] == "triton"]
    cu = [r for i, r in res.items() if by_id[i]["impl"] == "cuda"]
    print(
        f"Triton templates: {sum(r.get('compiled', False) for r in tri)}/{len(tri)} compiled, "
        f"{sum(r.get('status') == 'ok' for r in tri)} ran correct"
    )
    built = [r for r in comp.values() if r.get("kind") == "calib"]
    print(
        f"CUDA calib libs (sm_90a): "
        f"{sum(bool(r.get('compiled')) for r in built)}/{len(built)} built, "
        f"{sum(r.get('status') == 'ok' for r in cu)} ran correct"
    )
    cc = [r for r in comp.values() if r.get("kind") == "compile"]
    agree = sum(1 for r in cc if r.get("compiled") == by_id[r["id"]]["expect_compile"])
    print(
        f"CUDA compile-check (sm_90a): "
        f"{sum(bool(r.get('compiled')) for r in cc)}/{len(cc)} compiled; "
        f"agree with simulator {agree}/{len(cc)}"
    )
    for r in cc:
        if r.get("compiled") != by_id[r["id"]]["expect_compile"]:
            print(
                f"  DISAGREE {r['op']}/{r['variant']}: compiled={r.get('compiled')} "
                f"{r.get('errors', [])[:1]}"
            )


# ======================================================================================
# worker (device): inputs, references, checks, timing
# ======================================================================================


def worker(args: argparse.Namespace) -> None:
    """Measure the given cases in order; exit non-zero after a CUDA fault."""
    import ctypes
    import importlib.util

    import torch
    import triton

    out = Path(args.out)
    cases = {c["id"]: c for c in json.loads(Path(args.manifest).read_text())}
    src_dir = Path(args.manifest).parent
    libs = {int(k): v for k, v in json.loads(Path(args.libs).read_text()).items()}
    with contextlib.suppress(OSError):  # cuTensorMapEncodeTiled for the TMA rungs
        ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    software = f"torch {torch.__version__}, triton {triton.__version__}, {props.name}"
    progress = (out / "progress.log").open("a")
    results = (out / "results.jsonl").open("a")

    for cid in [int(x) for x in args.ids.split(",") if x]:
        if time.time() > float(args.deadline):
            break
        progress.write(f"{cid}\n")
        progress.flush()
        c = cases[cid]
        rec: dict[str, Any] = {"id": cid, "software": software}
        t0 = time.perf_counter()
        fatal = False
        stage = "load"
        try:
            make, call_for, check = _op_harness(c, torch, dev)
            if c["impl"] == "triton":
                spec = importlib.util.spec_from_file_location(f"cand{cid}", src_dir / c["file"])
                assert spec is not None and spec.loader is not None
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                run_one = functools.partial(call_for, "triton", getattr(mod, c["op"]))
            elif c["impl"] == "cuda":
                if cid not in libs:
                    raise RuntimeError("library did not build")
                launch = getattr(ctypes.CDLL(libs[cid]), f"launch_{c['op']}")
                launch.restype = ctypes.c_int
                run_one = functools.partial(call_for, "cuda", launch)
            else:
                run_one = functools.partial(call_for, "torch:" + c["variant"], None)
            sets, set_bytes = _input_sets(make, torch)
            stage = "first call"
            first = run_one(sets[0])
            torch.cuda.synchronize()
            rec["compiled"] = True
            stage = "check"
            rel, ok, note = check(sets[0], first)
            rec.update(max_rel_err=rel, check=note)
            if not ok:
                rec["status"] = "wrong_result"
            else:
                stage = "timing"
                ms, spread, reps, how = _time(run_one, sets, torch)
                rec.update(status="ok", ms=ms, spread_pct=spread, reps=reps, timing=how)
            rec["sets"] = len(sets)
            rec["set_mb"] = round(set_bytes / 2**20, 2)
        except Exception as e:  # noqa: BLE001 - one failing point must not lose the rest
            msg = f"{type(e).__name__}: {e}"
            compile_error = type(e).__name__ in _COMPILE_ERRORS or stage == "load"
            rec.setdefault("compiled", not compile_error)
            rec.update(status="error", stage=stage, error=msg[:600])
            try:
                torch.cuda.synchronize()
                torch.zeros(1, device=dev).add_(1).item()
            except Exception:  # noqa: BLE001 - the context is poisoned
                fatal = True
        rec["seconds"] = round(time.perf_counter() - t0, 2)
        results.write(json.dumps(rec) + "\n")
        results.flush()
        print(
            f"{cid} {c['op']} {c['impl']}:{c['variant']} -> {rec.get('status')} "
            f"{rec.get('ms', '')} {rec.get('error', '')[:200]}",
            flush=True,
        )
        if fatal:
            sys.exit(3)
        torch.cuda.empty_cache()
    sys.exit(0)


#: Exceptions that mean the source did not compile (Triton JIT) or did not import.
_COMPILE_ERRORS = frozenset(
    {
        "CompilationError",
        "CompileTimeAssertionFailure",
        "SyntaxError",
        "NameError",
        "UnsupportedLanguageConstruct",
    }
)


def _input_sets(
    make: Callable[[], tuple[dict[str, Any], int]], torch: Any
) -> tuple[list[dict[str, Any]], int]:
    """Enough independent input sets that cycling through them streams from DRAM."""
    first, nbytes = make()
    n = max(1, min(256, -(-L2_ROTATE_BYTES // max(nbytes, 1))))
    free, _total = torch.cuda.mem_get_info()
    n = max(1, min(n, int(free * 0.5 // max(nbytes, 1))))
    return [first] + [make()[0] for _ in range(n - 1)], nbytes


def _time(
    run_one: Callable[[dict[str, Any]], Any], sets: list[dict[str, Any]], torch: Any
) -> tuple[float, float, int, str]:
    """Median per-call ms over graph replays (eager loop if capture fails), spread in %."""
    import statistics

    for d in sets:
        run_one(d)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for d in sets:
        run_one(d)
    e.record()
    torch.cuda.synchronize()
    est = max(s.elapsed_time(e) / len(sets), 1e-4)
    # whole cycles through the input sets, about 2 ms of work per replay, at most 2000 calls
    per_replay = len(sets) * max(1, min(2000 // len(sets), round(2.0 / (est * len(sets)))))
    reps = int(max(5, min(30, 0.25 / max(est * per_replay / 1e3, 1e-6))))
    how = "graph"
    try:
        g = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for d in sets[:2]:
                run_one(d)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        with torch.cuda.graph(g, capture_error_mode="relaxed"):
            for i in range(per_replay):
                run_one(sets[i % len(sets)])
        g.replay()
        torch.cuda.synchronize()

        def once() -> None:
            g.replay()

    except Exception:  # noqa: BLE001 - some launchers cannot be captured
        how = "eager"
        torch.cuda.synchronize()

        def once() -> None:
            for i in range(per_replay):
                run_one(sets[i % len(sets)])

    times = []
    for _ in range(reps):
        s.record()
        once()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / per_replay)
    times.sort()
    med = statistics.median(times)
    q1, q3 = times[len(times) // 4], times[(3 * len(times)) // 4]
    return med, round(100 * (q3 - q1) / med, 2), reps * per_replay, how


def _rel(out: Any, ref: Any) -> float:
    num = (out.float() - ref.float()).norm().item()
    den = max(ref.float().norm().item(), 1e-30)
    return num / den


_Harness = tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]


class _HarnessEnv:
    """What every op's harness shares: torch, the device, the case's dtype, the tolerance,
    and the ctypes glue that launches a CUDA library's ``launch_<op>`` on the current
    stream."""

    def __init__(self, torch: Any, dev: Any, dt: Any) -> None:
        self.torch, self.dev, self.dt = torch, dev, dt
        self.F = torch.nn.functional
        self.tol = 2e-2

    @staticmethod
    def ptr(t: Any) -> Any:
        import ctypes

        return ctypes.c_void_p(t.data_ptr())

    def cuda_call(self, launch: Any, *args: Any) -> None:
        import ctypes

        rc = launch(*args, ctypes.c_void_p(self.torch.cuda.current_stream().cuda_stream))
        if rc != 0:
            raise RuntimeError(f"launch returned cudaError {rc}")


def _op_harness(c: dict[str, Any], torch: Any, dev: Any) -> _Harness:
    """(make inputs, call an implementation, check its output) for one op."""
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[c["dtype"]]
    build = _HARNESSES.get(c["op"])
    if build is None:
        raise ValueError(f"no harness for {c['op']}")
    return build(c, _HarnessEnv(torch, dev, dt))


def _rmsnorm_harness(c: dict[str, Any], e: _HarnessEnv) -> _Harness:
    """RMSNorm over (T, H) rows, against an fp32 reference."""
    import ctypes

    s = c["shape"]
    torch, dev, dt, F, tol, ptr, cuda_call = e.torch, e.dev, e.dt, e.F, e.tol, e.ptr, e.cuda_call

    T, H = s["T"], s["H"]

    def make() -> tuple[dict[str, Any], int]:
        x = torch.randn(T, H, device=dev, dtype=dt)
        w = (1.0 + 0.1 * torch.randn(H, device=dev)).to(dt)
        return {"x": x, "w": w, "out": torch.empty_like(x)}, 2 * x.numel() * x.element_size()

    def call(kind: str, fn: Any, d: dict[str, Any]) -> Any:
        if kind == "triton":
            return fn(d["x"], d["w"], 1e-6)
        if kind == "cuda":
            cuda_call(fn, ptr(d["x"]), ptr(d["w"]), ctypes.c_float(1e-6), ptr(d["out"]))
            return d["out"]
        return F.rms_norm(d["x"], (H,), d["w"], 1e-6)

    def check(d: dict[str, Any], out: Any) -> tuple[float, bool, str]:
        x = d["x"].float()
        ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * d["w"].float()
        r = _rel(out, ref)
        return r, r < tol and bool(torch.isfinite(out.float()).all()), "rel L2 vs fp32"

    return make, call, check


def _gemm_harness(c: dict[str, Any], e: _HarnessEnv) -> _Harness:
    """``gemm_fp16`` (M x K by N x K) and ``gemv_fp16`` (its M is the batch B)."""
    op = c["op"]
    s = c["shape"]
    torch, dev, dt, F, tol, ptr, cuda_call = e.torch, e.dev, e.dt, e.F, e.tol, e.ptr, e.cuda_call

    if op == "gemm_fp16":
        M, N, K = s["M"], s["N"], s["K"]
    else:
        M, N, K = s["B"], s["N"], s["K"]

    def make() -> tuple[dict[str, Any], int]:
        a = torch.randn(M, K, device=dev, dtype=dt)
        w = (torch.randn(N, K, device=dev) / K**0.5).to(dt)
        o = torch.full((M, N), float("nan"), device=dev, dtype=dt)
        return {"a": a, "w": w, "out": o}, (M * K + N * K + M * N) * a.element_size()

    def call(kind: str, fn: Any, d: dict[str, Any]) -> Any:
        if kind == "triton":
            return fn(d["a"], d["w"])
        if kind == "cuda":
            cuda_call(fn, ptr(d["a"]), ptr(d["w"]), ptr(d["out"]))
            return d["out"]
        return F.linear(d["a"], d["w"])

    def check(d: dict[str, Any], out: Any) -> tuple[float, bool, str]:
        ref = d["a"].float() @ d["w"].float().T
        r = _rel(out, ref)
        return r, r < tol and bool(torch.isfinite(out.float()).all()), "rel L2 vs fp32"

    return make, call, check


def _flash_decode_harness(c: dict[str, Any], e: _HarnessEnv) -> _Harness:
    """Paged decode attention (block table, equal sequence lengths) against fp32 math."""
    s = c["shape"]
    torch, dev, dt, tol, ptr, cuda_call = e.torch, e.dev, e.dt, e.tol, e.ptr, e.cuda_call

    B, Hq, Hkv, D, Skv, page = s["B"], s["Hq"], s["Hkv"], s["D"], s["Skv"], s["page"]
    nb = -(-Skv // page)

    def make() -> tuple[dict[str, Any], int]:
        q = torch.randn(B, Hq, D, device=dev, dtype=dt)
        kc = torch.randn(B * nb, page, Hkv, D, device=dev, dtype=dt)
        vc = torch.randn(B * nb, page, Hkv, D, device=dev, dtype=dt)
        bt = torch.randperm(B * nb, device=dev, dtype=torch.int32).view(B, nb).contiguous()
        sl = torch.full((B,), Skv, device=dev, dtype=torch.int32)
        o = torch.full((B, Hq, D), float("nan"), device=dev, dtype=dt)
        return {
            "q": q,
            "k": kc,
            "v": vc,
            "bt": bt,
            "sl": sl,
            "out": o,
        }, 2 * kc.numel() * kc.element_size()

    def call(kind: str, fn: Any, d: dict[str, Any]) -> Any:
        if kind == "triton":
            return fn(d["q"], d["k"], d["v"], d["bt"], d["sl"])
        cuda_call(
            fn, ptr(d["q"]), ptr(d["k"]), ptr(d["v"]), ptr(d["bt"]), ptr(d["sl"]), ptr(d["out"])
        )
        return d["out"]

    def check(d: dict[str, Any], out: Any) -> tuple[float, bool, str]:
        bt = d["bt"].long()
        k = d["k"][bt].reshape(B, nb * page, Hkv, D)[:, :Skv].float()
        v = d["v"][bt].reshape(B, nb * page, Hkv, D)[:, :Skv].float()
        g = Hq // Hkv
        q = d["q"].float().view(B, Hkv, g, D)
        sc = torch.einsum("bhgd,bshd->bhgs", q, k) / D**0.5
        ref = torch.einsum("bhgs,bshd->bhgd", sc.softmax(-1), v).reshape(B, Hq, D)
        r = _rel(out, ref)
        return r, r < tol and bool(torch.isfinite(out.float()).all()), "rel L2 vs fp32"

    return make, call, check


def _topk_sample_harness(c: dict[str, Any], e: _HarnessEnv) -> _Harness:
    """Top-k sampling: the drawn token must lie in its row's top k (a draw, not a value)."""
    s = c["shape"]
    torch, dev, dt, ptr, cuda_call = e.torch, e.dev, e.dt, e.ptr, e.cuda_call

    Bt, V, k = s["B"], s["V"], s["k"]

    def make() -> tuple[dict[str, Any], int]:
        lg = (3.0 * torch.randn(Bt, V, device=dev)).to(dt)
        tp = 0.7 + 0.6 * torch.rand(Bt, device=dev)
        u = torch.rand(Bt, device=dev).clamp_(1e-4, 1 - 1e-4)
        tok = torch.full((Bt,), -1, device=dev, dtype=torch.int32)
        return {"lg": lg, "t": tp, "u": u, "tok": tok}, lg.numel() * lg.element_size()

    def draw(p: Any, ids: Any, u: Any) -> Any:
        cdf = p.cumsum(-1)
        idx = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None]).clamp_(max=p.shape[-1] - 1)
        return ids.gather(-1, idx).squeeze(-1).to(torch.int32)

    def call(kind: str, fn: Any, d: dict[str, Any]) -> Any:
        if kind == "triton":
            return fn(d["lg"], d["t"], d["u"])
        if kind == "cuda":
            cuda_call(fn, ptr(d["lg"]), ptr(d["t"]), ptr(d["u"]), ptr(d["tok"]))
            return d["tok"]
        scaled = d["lg"].float() / d["t"][:, None]
        if kind == "torch:v0_sort":
            sp, si = torch.sort(scaled.softmax(-1), dim=-1, descending=True)
            p = sp[:, :k] / sp[:, :k].sum(-1, keepdim=True)
            return draw(p, si[:, :k], d["u"])
        tv, ti = torch.topk(scaled, k, dim=-1)
        return draw(tv.softmax(-1), ti, d["u"])

    def check(d: dict[str, Any], out: Any) -> tuple[float, bool, str]:
        scaled = d["lg"].float() / d["t"][:, None]
        kth = torch.topk(scaled, k, dim=-1).values[:, -1]
        tok = out.long()
        valid = (tok >= 0) & (tok < V)
        got = scaled.gather(-1, tok.clamp(0, V - 1)[:, None]).squeeze(-1)
        # 5e-3 (in logit/T units) admits a bisected threshold's resolution, not a wrong set
        good = valid & (got >= kth - 5e-3)
        bad = int((~good).sum().item())
        return float(bad) / Bt, bad == 0, "token within the row's top-k"

    return make, call, check


def _swiglu_act_harness(c: dict[str, Any], e: _HarnessEnv) -> _Harness:
    """SiLU(gate) * up over a (M, 2N) gate/up tensor."""
    s = c["shape"]
    torch, dev, dt, tol, ptr, cuda_call = e.torch, e.dev, e.dt, e.tol, e.ptr, e.cuda_call

    M, N = s["M"], s["N"]

    def make() -> tuple[dict[str, Any], int]:
        gu = torch.randn(M, 2 * N, device=dev, dtype=dt)
        o = torch.full((M, N), float("nan"), device=dev, dtype=dt)
        return {"gu": gu, "out": o}, 3 * M * N * gu.element_size()

    def call(kind: str, fn: Any, d: dict[str, Any]) -> Any:
        if kind == "triton":
            return fn(d["gu"])
        cuda_call(fn, ptr(d["gu"]), ptr(d["out"]))
        return d["out"]

    def check(d: dict[str, Any], out: Any) -> tuple[float, bool, str]:
        g, u = d["gu"][:, :N].float(), d["gu"][:, N:].float()
        r = _rel(out, g * torch.sigmoid(g) * u)
        return r, r < tol and bool(torch.isfinite(out.float()).all()), "rel L2 vs fp32"

    return make, call, check


def _logits_softmax_harness(c: dict[str, Any], e: _HarnessEnv) -> _Harness:
    """Temperature-scaled softmax of the logits, into fp32."""
    s = c["shape"]
    torch, dev, dt, ptr, cuda_call = e.torch, e.dev, e.dt, e.ptr, e.cuda_call

    Bs, V = s["B"], s["V"]

    def make() -> tuple[dict[str, Any], int]:
        lg = (3.0 * torch.randn(Bs, V, device=dev)).to(dt)
        tp = 0.7 + 0.6 * torch.rand(Bs, device=dev)
        o = torch.full((Bs, V), float("nan"), device=dev, dtype=torch.float32)
        return {"lg": lg, "t": tp, "out": o}, Bs * V * (lg.element_size() + 4)

    def call(kind: str, fn: Any, d: dict[str, Any]) -> Any:
        if kind == "triton":
            return fn(d["lg"], d["t"])
        cuda_call(fn, ptr(d["lg"]), ptr(d["t"]), ptr(d["out"]))
        return d["out"]

    def check(d: dict[str, Any], out: Any) -> tuple[float, bool, str]:
        r = _rel(out, (d["lg"].float() / d["t"][:, None]).softmax(-1))
        return r, r < 1e-3 and bool(torch.isfinite(out).all()), "rel L2 vs fp32"

    return make, call, check


#: The harness of each calibration op.
_HARNESSES: dict[str, Callable[[dict[str, Any], _HarnessEnv], _Harness]] = {
    "rmsnorm": _rmsnorm_harness,
    "gemm_fp16": _gemm_harness,
    "gemv_fp16": _gemm_harness,
    "flash_decode": _flash_decode_harness,
    "topk_sample": _topk_sample_harness,
    "swiglu_act": _swiglu_act_harness,
    "logits_softmax": _logits_softmax_harness,
}


# ======================================================================================
# collect (here)
# ======================================================================================


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def collect(run_dirs: list[Path]) -> None:
    """Device runs → the committed measured and compile-check CSVs.

    Each run directory holds the returned files plus the ``manifest.json`` it ran with.
    Points are matched across runs by (op, shape, source, variant); a point measured ok in
    several runs gets the geometric mean, and the runs' max/min ratio is kept in ``timing``
    (the run-to-run spread); a later run's record replaces an earlier failure (a template
    fixed in between), except a wrong result next to a right one, which marks the point
    ``flaky`` (a race: its time is kept but it calibrates nothing).
    """
    sys.path.insert(0, str(ROOT))
    import csv

    from dagster_project.sim.calibration import measured_path, write_measured

    points: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    compiles: dict[tuple[str, ...], dict[str, Any]] = {}
    for run_dir in run_dirs:
        _collect_run(run_dir, points, compiles)
    rows = [_measured_row(slot) for slot in sorted(points.values(), key=lambda s: s["case"]["id"])]
    n = write_measured(measured_path(), rows)
    comp_rows = [
        _compile_row(item)
        for item in sorted(compiles.values(), key=lambda x: (x["case"]["kind"], x["case"]["id"]))
    ]
    path = measured_path().parent / "h200_compile_check.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(comp_rows[0]))
        w.writeheader()
        w.writerows(comp_rows)
    print(f"wrote {n} measured rows to {measured_path()} and {len(comp_rows)} rows to {path}")


def _point_key(c: dict[str, Any]) -> tuple[str, str, str, str]:
    """A calibration point across runs: (op, shape, source, variant)."""
    from dagster_project.sim.ops import shape_str

    return (c["op"], shape_str(c["shape"]), c["source"], c["variant"])


def _collect_run(
    run_dir: Path,
    points: dict[tuple[str, str, str, str], dict[str, Any]],
    compiles: dict[tuple[str, ...], dict[str, Any]],
) -> None:
    """Fold one run's results and compile records into ``points`` and ``compiles`` (a later
    run's record replaces an earlier one, unless the later run skipped the point)."""
    cases = {c["id"]: c for c in json.loads((run_dir / "manifest.json").read_text())}
    env = json.loads((run_dir / "env.json").read_text())
    res = _jsonl(run_dir / "results.jsonl")
    for r in res:
        c = cases[r["id"]]
        slot = points.setdefault(
            _point_key(c), {"case": c, "ok": [], "wrong": 0, "last": None, "env": env}
        )
        if r.get("status") == "skipped" and slot["last"] is not None:
            continue  # a later run that never reached the point says nothing new
        slot["case"], slot["env"], slot["last"] = c, env, r
        if r.get("status") == "ok":
            slot["ok"].append(r)
        elif r.get("status") == "wrong_result":
            slot["wrong"] += 1
    by_res = {r["id"]: r for r in res}
    for r in _jsonl(run_dir / "compile.jsonl"):
        c = cases[r["id"]]
        ran = by_res.get(r["id"], {})
        k = _point_key(c) + (c["kind"],)
        if ran.get("status") == "skipped" and k in compiles:
            continue  # keep what an earlier run saw the library do
        compiles[k] = {"case": c, "rec": r, "ran": ran}
    for r in res:
        c = cases[r["id"]]
        if c["impl"] == "triton":
            compiles[_point_key(c) + ("triton",)] = {"case": c, "rec": r, "ran": r}


def _measured_row(slot: dict[str, Any]) -> dict[str, Any]:
    """One point's row of the measured CSV: the geometric mean of its ok runs, their spread."""
    import math

    from dagster_project.sim.ops import shape_str

    c, oks, last, env = slot["case"], slot["ok"], slot["last"], slot["env"]
    best = oks[-1] if oks else last
    ms = math.exp(sum(math.log(r["ms"]) for r in oks) / len(oks)) if oks else None
    timing = best.get("timing", "") + (f", {best['sets']} input sets" if "sets" in best else "")
    if len(oks) > 1:
        lo, hi = min(r["ms"] for r in oks), max(r["ms"] for r in oks)
        timing += f"; {len(oks)} runs, max/min {hi / lo:.3f}"
    return {
        "op": c["op"],
        "dtype": c["dtype"],
        "shape": shape_str(c["shape"]),
        "impl": c["sim_impl"],
        "variant": c["variant"],
        "source": c["source"],
        "label": c["label"],
        "params": json.dumps(c["params"], sort_keys=True),
        "measured_ms": f"{ms:.6g}" if ms is not None else "",
        "spread_pct": best.get("spread_pct", ""),
        "reps": best.get("reps", ""),
        "max_rel_err": f"{best['max_rel_err']:.3g}" if "max_rel_err" in best else "",
        # right in one run and wrong in another: a race, not a calibration point
        "status": ("flaky" if slot["wrong"] else "ok") if oks else best.get("status", ""),
        "timing": timing,
        "device": env.get("nvidia_smi", ""),
        "software": best.get("software", ""),
        "measured_at": env.get("started", ""),
        "command": COMMAND,
    }


def _compile_row(item: dict[str, Any]) -> dict[str, Any]:
    """One source's row of the compile-check CSV (a Triton point's compile is its run)."""
    from dagster_project.sim.ops import shape_str

    c, r, ran = item["case"], item["rec"], item["ran"]
    triton = c["impl"] == "triton"
    return {
        "op": c["op"],
        "impl": c["impl"],
        "variant": c["variant"],
        "dtype": c["dtype"],
        "shape": shape_str(c["shape"]),
        "kind": c["kind"],
        "features": " ".join(c.get("features", [])),
        "expect_compile": c["expect_compile"],
        "compiled": r.get("compiled"),
        "ran": ran.get("status", "") if c["kind"] == "calib" else "not run",
        "max_rel_err": ran.get("max_rel_err", ""),
        "nvcc_seconds": "" if triton else r.get("seconds", ""),
        "resources": "" if triton else " | ".join(r.get("resources", [])),
        "errors": (r.get("error", "") if triton else " | ".join(r.get("errors", []))).replace(
            str(CALIB_DIR) + "/", ""
        )[:400]
        or ran.get("error", "")[:400],
    }


def fit(apply: bool, full: bool) -> None:
    """Print the error metrics of the committed measurements before calibration, with the
    packaged tables, and with a fresh fit; ``apply`` writes the fit to the H200/H100 tables."""
    sys.path.insert(0, str(ROOT))
    from dagster_project.sim.calibration import (
        apply_fit,
        baseline_table_path,
        card_safe_fit,
        error_metrics,
        fit_efficiency,
        load_table,
        metrics_markdown,
        pairs_for,
        read_measured,
    )

    measured = read_measured()
    base = load_table(baseline_table_path())
    result = fit_efficiency(measured, base=base) if full else card_safe_fit(measured, base=base)
    before = error_metrics(pairs_for(measured, base))
    print("packaged tables vs the pre-calibration baseline:")
    print(metrics_markdown(before, error_metrics(pairs_for(measured))))
    print(f"\n{'full' if full else 'card-safe'} fit vs the baseline:")
    print(metrics_markdown(before, error_metrics(pairs_for(measured, result.table))))
    for src in ("cuda_template", "triton_template", "torch"):
        b = error_metrics(pairs_for(measured, base, sources=(src,)))
        a = error_metrics(pairs_for(measured, result.table, sources=(src,)))
        print(
            f"  {src:16s} n={a.n:3d}  median|log| {b.median_abs_log_err:.3f} -> "
            f"{a.median_abs_log_err:.3f}  within 1.5x {b.share_within:.0%} -> {a.share_within:.0%}"
        )
    print("\nrung                                      n   mem_eff        compute_eff    mse")
    for r in result.rungs:
        print(
            f"{'/'.join(r.key):40s} {r.n_points:2d}  {r.mem_before:.3f}->{r.mem_after:.3f}  "
            f"{r.comp_before:.3f}->{r.comp_after:.3f}  {r.err_before:.3f}->{r.err_after:.3f}"
        )
    if apply:
        for path in apply_fit(result):
            print("wrote", path)


def holdout(ties: list[str]) -> None:
    """Leave-one-(op, shape)-out error of each way of tying the fit, in-sample beside it
    (the headline of ``sim_calibration``; RESULTS.md's calibration table)."""
    sys.path.insert(0, str(ROOT))
    from dagster_project.sim.calibration import leave_one_group_out, read_measured

    measured = read_measured()
    print(
        "| tie | free parameters | held-out median abs log error | held-out within 1.5x | "
        "held-out rho per op | in-sample median | in-sample within 1.5x |"
    )
    print("|---|---:|---:|---:|---|---:|---:|")
    for tie in ties:
        r = leave_one_group_out(measured, tie=tie)
        h, i = r.held_out, r.in_sample
        rho = ", ".join(f"{k} {v:.2f}" for k, v in h.spearman_by_op.items())
        print(
            f"| {tie} | {r.free_parameters} | {h.median_abs_log_err:.3f} | "
            f"{h.share_within:.0%} | {rho} | {i.median_abs_log_err:.3f} | "
            f"{i.share_within:.0%} |",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--out", default=str(CALIB_DIR))
    r = sub.add_parser("run")
    r.add_argument("--out", default=os.environ.get("OUT", "calib_out"))
    r.add_argument("--src", default=str(CALIB_DIR))
    r.add_argument("--build", default="/tmp/calib_build")
    r.add_argument(
        "--skip-compile-check", action="store_true", help="measure only (no compile-only cases)"
    )
    r.add_argument(
        "--budget", type=float, default=255.0, help="seconds before remaining points are skipped"
    )
    r.add_argument("--ids", default="", help="only these manifest ids, e.g. 183-210,216")
    r.add_argument(
        "--case-timeout",
        type=float,
        default=25.0,
        help="seconds one point may take (Triton's JIT of whole-row tiles can take minutes)",
    )
    w = sub.add_parser("worker")
    w.add_argument("--manifest", required=True)
    w.add_argument("--out", required=True)
    w.add_argument("--libs", required=True)
    w.add_argument("--ids", required=True)
    w.add_argument("--deadline", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--run", action="append", required=True, help="a run directory (repeat)")
    f = sub.add_parser("fit")
    f.add_argument("--apply", action="store_true", help="write the H200 and H100 tables")
    f.add_argument("--full", action="store_true", help="no baseline shrink (breaks the card)")
    h = sub.add_parser("holdout")
    h.add_argument(
        "--tie",
        action="append",
        choices=("rung", "family", "hybrid"),
        help="fit tying modes to score (repeat; default all)",
    )
    args = ap.parse_args()
    if args.cmd == "holdout":
        holdout(args.tie or ["rung", "family", "hybrid"])
    elif args.cmd == "prepare":
        prepare(Path(args.out))
    elif args.cmd == "run":
        run(args)
    elif args.cmd == "worker":
        worker(args)
    elif args.cmd == "fit":
        fit(args.apply, args.full)
    else:
        collect([Path(d) for d in args.run])


if __name__ == "__main__":
    main()
