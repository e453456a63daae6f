"""Run materialised kernel_commits rows through their harness specs, on one GPU.

``python -m dagster_project.commit_exec.device.runner WORK OUT.jsonl`` reads
``WORK/manifest.json`` (rows: id, repo, sha, path, ``before``/``after`` file names, written
by ``commit_exec.materialise``) and appends one JSON line per row. Per row, in this one
process: import both sides (``loader``), check every shape (the spec's named shapes, its
control and one random shape drawn now from ``os.urandom``) against the oracle (the
``before`` side; the spec's torch reference is reported beside it), then time before and
after interleaved A/B/A/B in two scopes:

* ``graph``: one CUDA graph per side that calls the launcher once on each of a rotation of
  fresh input sets whose bytes exceed 3x the L2 cache, replayed; per call = replay / sets;
* ``host``: the same rotation called eagerly (launch overhead and host work included),
  synchronised once at the end; per call = wall time / sets.

Every side is compiled (called on every set) before any timing. Without CUDA (CPU debug
with ``TRITON_INTERPRET=1``) shapes are checked and nothing is timed. Imports only the
standard library, torch, triton and this package's device-side modules.

Warm-up shards (``COMMIT_EXEC_WARM=1``, ``COMMIT_EXEC_SHARD=i/n``, n > 1) share one card:
each caps its CUDA allocator at ``WARM_CARD_SHARE / n`` of the card, so one row that asks
for more fails alone with an out-of-memory error instead of starving the other shards'
rows (stop 35: one reference took 69 GB and 56 rows of the other seven shards failed); the
single timing process that follows has the whole card and gives that row its verdict.

CPU check (``COMMIT_EXEC_CPU_PATCH=1``, only with ``TRITON_INTERPRET=1`` and no CUDA)::

    TRITON_INTERPRET=1 COMMIT_EXEC_CPU_PATCH=1 COMMIT_EXEC_SMOKE=1 \
        /tmp/venv-exec/bin/python -m dagster_project.commit_exec.device.runner WORK OUT.jsonl ID

cuts every ``triton.autotune`` to its first config (the interpreter would run each config
of the sweep, minutes per call), makes ``torch.cuda.device(...)`` a no-op context (it
raises without CUDA) and answers the device queries files make at import time as the H100
(``CPU_STAND_IN_DEVICE``), so rows whose files use any of these can be checked here. It changes what
runs, never what is compared; it refuses to start on a CUDA machine or without the
interpreter, so a device run can never be patched by a stray variable.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..specs import Spec, shape_label, spec_for
from ..specs.base import Inputs, Outputs, Shape
from . import stats
from .compare import compare
from .judge import JUDGE_VERSION, judge
from .loader import load_file, package_of

#: Version of the harness (runner, loader, comparison, statistics). Bump it when a change
#: could change a result; it is stored with every result.
HARNESS_VERSION = "6"  # 6: timing in blocks (fresh inputs and captures per block), a t
#   interval over blocks (``stats.block_interval``); 5: sibling modules at each side's
#   commit (loader, materialise);
#   4: type-level stubs, specs' not_runnable rows, Triton fallback of
#   compiled-op quant launchers, KDA-gate tolerance of chunk_delta_h; 3: per-shape
#   tolerance, capped warm-up shards

#: L2 multiple the timing rotation must exceed, and caps on sets and their bytes.
L2_MULTIPLE = 3
MAX_SETS = 64
MAX_ROTATION_BYTES = 6 * 2**30
#: Timed samples per side, scope and block (interleaved); ``stats.BLOCKS`` blocks per shape,
#: so 24 samples per side and scope (harness <= 5 took 21 from a single capture).
REPEATS = 4

#: Share of the card the warm-up shards may hold together (the rest: CUDA context, cache).
WARM_CARD_SHARE = 0.9


def warm_memory_fraction(warm: bool, shards: int) -> float | None:
    """Each warm-up shard's cap on its share of the card, or None (no cap): only sharing
    warm-up processes are capped; a lone process (the timing run) gets the whole card."""
    if not warm or shards <= 1:
        return None
    return WARM_CARD_SHARE / shards


class CpuPatchRefused(RuntimeError):
    """``COMMIT_EXEC_CPU_PATCH`` was asked for where it must not run."""


def cpu_patch_wanted(env: Mapping[str, str], cuda_available: bool) -> bool:
    """Whether the CPU-check patches apply. Raises ``CpuPatchRefused`` when asked for on a
    machine with CUDA or without ``TRITON_INTERPRET=1``: the patches change which configs
    run, which is fine for a correctness check on the CPU and never for a device run."""
    if env.get("COMMIT_EXEC_CPU_PATCH", "") in ("", "0"):
        return False
    if cuda_available:
        raise CpuPatchRefused("COMMIT_EXEC_CPU_PATCH=1 refused: CUDA is present (CPU only)")
    if env.get("TRITON_INTERPRET") != "1":
        raise CpuPatchRefused("COMMIT_EXEC_CPU_PATCH=1 needs TRITON_INTERPRET=1")
    return True


class _NoDevice:
    """Stands in for ``torch.cuda.device(...)`` on the CPU: enters and leaves nothing."""

    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: Any) -> None:
        return None


#: The H100 the device rows run on, as ``torch.cuda.get_device_properties`` reports it,
#: for files that read the device at import time (``CUDA_CAPABILITY``, SM counts, warp
#: size) when checked on the CPU.
CPU_STAND_IN_DEVICE: dict[str, Any] = {
    "name": "NVIDIA H100 80GB HBM3 (CPU check stand-in)",
    "major": 9,
    "minor": 0,
    "multi_processor_count": 132,
    "warp_size": 32,
    "L2_cache_size": 50 * 2**20,
    "total_memory": 80 * 2**30,
    "max_shared_memory_per_block_optin": 227 * 2**10,
    "shared_memory_per_block_optin": 227 * 2**10,
    "regs_per_multiprocessor": 65536,
}


def apply_cpu_patch() -> None:
    """``triton.autotune`` keeps its first config; ``torch.cuda.device`` becomes a no-op;
    the device queries files make at import (capability, properties, current device)
    answer as the H100 does (``CPU_STAND_IN_DEVICE``). Call before any upstream file is
    loaded (their decorators and module-level queries run at import)."""
    import types

    import torch
    import triton

    original = triton.autotune
    if getattr(original, "_ce_first_config", False):
        return

    def first_config(configs: list[Any], *args: Any, **kwargs: Any) -> Any:
        return original(list(configs)[:1], *args, **kwargs)

    first_config._ce_first_config = True  # type: ignore[attr-defined]
    triton.autotune = first_config
    torch.cuda.device = _NoDevice
    props = types.SimpleNamespace(**CPU_STAND_IN_DEVICE)
    cap = (props.major, props.minor)
    torch.cuda.get_device_capability = lambda *_a, **_k: cap
    torch.cuda.get_device_properties = lambda *_a, **_k: props
    torch.cuda.get_device_name = lambda *_a, **_k: props.name
    torch.cuda.current_device = lambda: 0
    # launchers that ``assert x.is_cuda`` (SGLang's) accept the CPU tensors of the check
    torch.Tensor.is_cuda = property(lambda self: True)
    _interpreter_bf16_dot()
    _interpreter_float_casts()


def _interpreter_float_casts() -> None:
    """Float conversions of Triton 3.6's interpreter, done by torch instead: its own
    (``_convert_float``) loses the carry when rounding up crosses a power of two (fp32
    1.992 -> fp8 1.0, 3,838 of 172,800 elements of one SGLang gather row), rounds ties
    away from zero, and truncates fp32 -> bf16; the GPU rounds to nearest even and
    saturates fp8 to its largest finite value (``cvt.rn.satfinite``), as done here. An
    explicit round-toward-zero and the AMD fp8 formats keep the interpreter's code."""
    import numpy as np
    import torch
    import triton.language as tl
    from triton._C.libtriton import ir
    from triton.runtime import interpreter

    original = interpreter._convert_float
    if getattr(original, "_ce_torch", False):
        return
    kinds = {
        tl.float64: (torch.float64, np.int64),
        tl.float32: (torch.float32, np.int32),
        tl.float16: (torch.float16, np.int16),
        tl.bfloat16: (torch.bfloat16, np.int16),
        tl.float8e4nv: (torch.float8_e4m3fn, np.int8),
        tl.float8e5: (torch.float8_e5m2, np.int8),
    }

    def convert(data: Any, src: Any, dst: Any, rounding: Any) -> Any:
        if src not in kinds or dst not in kinds or rounding == ir.ROUNDING_MODE.RTZ:
            return original(data, src, dst, rounding)
        (src_t, src_np), (dst_t, _) = kinds[src], kinds[dst]
        bits = np.ascontiguousarray(data).view(src_np)
        value = torch.from_numpy(bits.copy()).view(src_t)
        value = value.double() if src_t == torch.float64 else value.float()  # exact
        if dst_t.itemsize == 1:
            top = torch.finfo(dst_t).max
            value = torch.where(value.isnan(), value, value.clamp(-top, top))
        out = value.to(dst_t).view(getattr(torch, f"uint{8 * dst_t.itemsize}"))
        return out.numpy().reshape(np.shape(data))

    convert._ce_torch = True  # type: ignore[attr-defined]
    interpreter._convert_float = convert


def _interpreter_bf16_dot() -> None:
    """Triton 3.6's interpreter keeps bf16 as its uint16 bits and ``tl.dot`` multiplies
    those integers (a bf16 GEMM gave 1e12 on the CPU: every fused-MoE row, before and
    after alike); here bf16 operands are widened to fp32 first (exact, as tensor cores
    multiply them) and the dot is otherwise the interpreter's own."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original = builder.create_dot
    if getattr(original, "_ce_bf16", False):
        return

    def widen(h: Any) -> Any:
        if h.dtype.scalar != tl.bfloat16:
            return h
        data = interpreter._convert_float(h.data, tl.bfloat16, tl.float32, None)
        return interpreter.TensorHandle(data.view(np.float32), tl.float32)

    def create_dot(self: Any, a: Any, b: Any, d: Any, *rest: Any) -> Any:
        return original(self, widen(a), widen(b), d, *rest)

    create_dot._ce_bf16 = True  # type: ignore[attr-defined]
    builder.create_dot = create_dot


def toolchain() -> dict[str, str]:
    """GPU, driver, CUDA, torch and Triton versions this process runs with."""
    import torch
    import triton

    out = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": str(torch.version.cuda),
        "python": platform.python_version(),
    }
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
        cap = torch.cuda.get_device_capability(0)
        out["capability"] = f"sm_{cap[0]}{cap[1]}"
        try:
            import subprocess

            out["driver"] = (
                subprocess.run(
                    ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                    capture_output=True,
                    text=True,
                    timeout=20,
                    check=False,
                )
                .stdout.strip()
                .splitlines()[0]
            )
        except Exception:  # noqa: BLE001 - a missing nvidia-smi leaves the driver unknown
            out["driver"] = "unknown"
    else:
        out["gpu"] = "cpu (TRITON_INTERPRET)"
    return out


def _bytes(inputs: Inputs) -> int:
    return sum(v.numel() * v.element_size() for v in inputs.values() if hasattr(v, "numel"))


def _clone_mutated(spec: Spec, inputs: Inputs) -> Inputs:
    return {k: (v.clone() if k in spec.mutated else v) for k, v in inputs.items()}


def _runner(spec: Spec, module: Any, sha: str) -> Callable[[Inputs], Outputs]:
    return lambda inputs: spec.call(module, inputs, sha)


def _rotation(spec: Spec, shape: Shape, device: Any, seed: int) -> list[Inputs]:
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    first = spec.make_inputs(shape, gen, device)
    size = max(1, _bytes(first))
    l2 = 50 * 2**20
    if device.type == "cuda":
        l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", l2))
    n = min(MAX_SETS, max(2, -(-L2_MULTIPLE * l2 // size)), max(2, MAX_ROTATION_BYTES // size))
    return [first] + [spec.make_inputs(shape, gen, device) for _ in range(n - 1)]


def _graph_samples(
    fa: Callable, fb: Callable, sets_a: list, sets_b: list, flip: bool = False
) -> dict[str, Any]:
    import torch

    graphs: list[Any] = [None, None]
    outputs: list[Any] = [None, None]
    sides = ((1, fb, sets_b), (0, fa, sets_a)) if flip else ((0, fa, sets_a), (1, fb, sets_b))
    for index, fn, sets in sides:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for s in sets:
                fn(s)
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            outputs[index] = [fn(s) for s in sets]  # static tensors: hold the last replay's
        graphs[index] = g
    samples: list[list[float]] = [[], []]
    for rep in range(REPEATS):
        order = (0, 1) if (rep % 2 == 0) != flip else (1, 0)
        for side in order:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            graphs[side].replay()
            end.record()
            end.synchronize()
            samples[side].append(start.elapsed_time(end) * 1000 / len(sets_a))
    return {"before": samples[0], "after": samples[1], "outputs": outputs}


def _host_samples(
    fa: Callable, fb: Callable, sets_a: list, sets_b: list, flip: bool = False
) -> dict[str, Any]:
    import torch

    samples: list[list[float]] = [[], []]
    outputs: list[Any] = [None, None]
    fns = ((fa, sets_a), (fb, sets_b))
    for rep in range(REPEATS):
        order = (0, 1) if (rep % 2 == 0) != flip else (1, 0)
        for side in order:
            fn, sets = fns[side]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            outputs[side] = [fn(s) for s in sets]  # the last repetition's are compared
            torch.cuda.synchronize()
            samples[side].append((time.perf_counter() - t0) * 1e6 / len(sets))
    return {"before": samples[0], "after": samples[1], "outputs": outputs}


def _timed_outputs(spec: Spec, shape: Shape, outputs: list[Any]) -> dict[str, Any]:
    """Compare what the timed calls returned (after against before, set by set), so code that
    computes right when checked and wrong when timed loses. Returned tensors only: inputs the
    spec mutates in place have been updated once per timed call on each side, and a drift
    there after many calls is not a verdict (their single-call values are checked)."""
    tol = spec.tolerance_for(shape)
    for before, after in zip(outputs[0], outputs[1], strict=True):
        keep = [k for k in before if k not in spec.mutated]
        res = compare({k: after[k] for k in keep}, {k: before[k] for k in keep}, tol)
        if not res["ok"]:
            return {"ok": False, "why": res.get("why")}
    return {"ok": True}


def _summary(samples: dict[str, list[float]]) -> dict[str, Any]:
    """One scope of one shape: ``samples`` hold the blocks' samples in block order."""
    b, a = samples["before"], samples["after"]
    speedup, lo, hi = stats.block_interval([(b, a, REPEATS)])
    return {
        "before_us": statistics.median(b),
        "after_us": statistics.median(a),
        "speedup": speedup,
        "ci_lo": lo,
        "ci_hi": hi,
        "p": stats.mann_whitney_p(b, a),
        "block_size": REPEATS,
        "samples_before": [round(x, 4) for x in b],
        "samples_after": [round(x, 4) for x in a],
    }


def _time_block(
    spec: Spec, fa: Callable, fb: Callable, shape: Shape, device: Any, seed: int, flip: bool
) -> dict[str, Any]:
    """One block: fresh input sets (new allocations), both sides run on every set, then each
    scope's interleaved samples (graphs captured anew). A scope that fails records its error."""
    sets_a = _rotation(spec, shape, device, seed)
    sets_b = [_clone_mutated(spec, s) for s in sets_a]
    for s in sets_a:  # compile + autotune before anything is timed (cached after block 0)
        fa(s)
    for s in sets_b:
        fb(s)
    out: dict[str, Any] = {"sets": len(sets_a), "set_bytes": _bytes(sets_a[0])}
    for scope, fn in (("graph", _graph_samples), ("host", _host_samples)):
        try:
            res = fn(fa, fb, sets_a, sets_b, flip)
            res["timed_outputs"] = _timed_outputs(spec, shape, res.pop("outputs"))
            out[scope] = res
        except Exception as exc:  # noqa: BLE001 - e.g. a launcher that syncs cannot be captured
            out[scope] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return out


def time_shape(spec: Spec, fa: Callable, fb: Callable, shape: Shape, device: Any) -> dict:
    """Both scopes for one shape, in ``stats.BLOCKS`` blocks (harness 6): each block allocates
    its own inputs and captures its own graphs, and which side goes first alternates, so the
    interval covers what differs between captures and allocations (see ``stats``)."""
    seed = random.randrange(2**31)
    blocks = [
        _time_block(spec, fa, fb, shape, device, seed + k, flip=k % 2 == 1)
        for k in range(stats.BLOCKS)
    ]
    out: dict[str, Any] = {
        "sets": blocks[0]["sets"],
        "set_bytes": blocks[0]["set_bytes"],
        "blocks": len(blocks),
    }
    for scope in ("graph", "host"):
        errors = [b[scope]["error"] for b in blocks if "error" in b[scope]]
        if errors:
            out[scope] = {"error": errors[0]}
            continue
        pooled = {side: [x for b in blocks for x in b[scope][side]] for side in ("before", "after")}
        out[scope] = _summary(pooled)
        wrong = [b[scope]["timed_outputs"] for b in blocks if not b[scope]["timed_outputs"]["ok"]]
        out[scope]["timed_outputs_ok"] = not wrong
        if wrong:
            out[scope]["timed_outputs_why"] = wrong[0].get("why")
    return out


def check_shape(spec: Spec, sides: dict[str, Callable], shape: Shape, device: Any) -> dict:
    """Run every side on the same fresh inputs; compare after (and before) with the oracle."""
    import torch

    seed = random.randrange(2**31)
    gen = torch.Generator(device=device).manual_seed(seed)
    base = spec.make_inputs(shape, gen, device)
    outs = {}
    for side, fn in sides.items():
        outs[side] = {k: v.clone() for k, v in fn(_clone_mutated(spec, base)).items()}
    oracle = outs["before"]
    tol = spec.tolerance_for(shape)
    res: dict[str, Any] = {
        "seed": seed,
        "after_vs_before": compare(outs["after"], oracle, tol),
    }
    if spec.reference is not None:
        ref = spec.reference(_clone_mutated(spec, base))
        res["before_vs_reference"] = compare(outs["before"], ref, tol)
        res["after_vs_reference"] = compare(outs["after"], ref, tol)
    res["equivalent"] = bool(res["after_vs_before"]["ok"])
    return res


def _shapes(spec: Spec, rng: random.Random) -> list[tuple[str, Shape]]:
    if os.environ.get("COMMIT_EXEC_SMOKE"):  # CPU interpreter: the random shape only
        return [("random", spec.random_shape(rng))]
    shapes = [("named", s) for s in spec.shapes]
    if spec.control is not None:
        shapes.append(("control", spec.control))
    shapes.append(("random", spec.random_shape(rng)))
    return shapes


#: Shape roles the timing process times; ``COMMIT_EXEC_TIME_ROLES`` (comma-separated) narrows
#: it, e.g. to ``control,control_aa`` for a session that re-measures the controls only (every
#: shape is still checked).
ROLES = ("named", "control", "random", "control_aa")


def timed_roles(env: Mapping[str, str]) -> tuple[str, ...]:
    """The roles to time; an unknown name is an error, not a silently empty run."""
    raw = env.get("COMMIT_EXEC_TIME_ROLES", "").strip()
    if not raw:
        return ROLES
    wanted = tuple(r.strip() for r in raw.split(",") if r.strip())
    unknown = sorted(set(wanted) - set(ROLES))
    if unknown:
        raise ValueError(f"COMMIT_EXEC_TIME_ROLES names unknown roles {unknown}; known: {ROLES}")
    return wanted


def run_row(row: dict[str, Any], work: Path, device: Any, timing: bool) -> dict[str, Any]:
    """One row: load, check, time. Never raises: errors become the row's status."""
    result: dict[str, Any] = {k: row[k] for k in ("id", "repo", "sha", "path")}
    spec = spec_for(row["repo"], row["sha"], row["path"])
    if spec is None:
        return {**result, "status": "no_harness_spec"}
    result["spec"] = spec.name
    cannot = spec.not_runnable_for(row["sha"])
    if cannot is not None:
        return {**result, "status": cannot[0], "error": cannot[1]}
    package = package_of(row["path"])
    try:
        mods = {
            side: load_file(work / row[side], f"_ce_{side}_{row['id']}", package)
            for side in ("before", "after")
        }
        mods["before_copy"] = load_file(work / row["before"], f"_ce_bc_{row['id']}", package)
    except Exception as exc:  # noqa: BLE001
        return {**result, "status": "load_error", "error": f"{type(exc).__name__}: {exc}"[:500]}
    sides = {s: _runner(spec, m, row["sha"]) for s, m in mods.items() if s != "before_copy"}
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    roles = timed_roles(os.environ)
    result["shapes"] = []
    try:
        for role, shape in _shapes(spec, rng):
            entry = {
                "role": role,
                "shape": shape_label(shape),
                **check_shape(spec, sides, shape, device),
            }
            if timing and role in roles:
                entry["timing"] = time_shape(spec, sides["before"], sides["after"], shape, device)
            result["shapes"].append(entry)
        if timing and spec.control is None and "control_aa" in roles:
            shape = spec.shapes[0]
            aa = time_shape(
                spec, sides["before"], _runner(spec, mods["before_copy"], row["sha"]), shape, device
            )
            result["shapes"].append(
                {
                    "role": "control_aa",
                    "shape": shape_label(shape),
                    "equivalent": True,
                    "timing": aa,
                }
            )
    except Exception as exc:  # noqa: BLE001 - a kernel that faults is a result, not a crash
        result["status"] = "run_error"
        result["error"] = f"{type(exc).__name__}: {exc}"[:500]
        result["traceback"] = traceback.format_exc()[-1500:]
        return result
    result["status"], result["equivalent"] = judge(result["shapes"])
    result["judge_version"] = JUDGE_VERSION
    return result


def rows_in_order(rows: list[dict[str, Any]], wanted: list[str] | None) -> list[dict[str, Any]]:
    """The manifest's rows in the order of ``wanted`` (ids), rows it does not name after
    them in manifest order; no ids: the manifest's order."""
    if not wanted:
        return rows
    rank = {rid: i for i, rid in enumerate(wanted)}
    return sorted(rows, key=lambda r: rank.get(r["id"], len(rank)))


def main(argv: list[str]) -> int:
    import torch

    timed_roles(os.environ)  # a misspelt role fails here, before any row runs
    work, out = Path(argv[0]), Path(argv[1])
    # The ids, when given, also set the order: the timing process takes the rows a
    # session most needs first (never timed, then a few to re-measure), since its time
    # limit usually ends the list.
    wanted = argv[2].split(",") if len(argv) > 2 and argv[2] else None
    only = set(wanted) if wanted else None
    manifest = json.loads((work / "manifest.json").read_text())
    manifest["rows"] = rows_in_order(manifest["rows"], wanted)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    if cpu_patch_wanted(os.environ, cuda):
        apply_cpu_patch()
    chain = toolchain()
    # COMMIT_EXEC_WARM=1: check only (fills Triton's disk cache: run several such shards,
    # "i/n" in COMMIT_EXEC_SHARD, side by side before the one timing process).
    warm = bool(os.environ.get("COMMIT_EXEC_WARM"))
    shard, shards = (int(v) for v in os.environ.get("COMMIT_EXEC_SHARD", "0/1").split("/"))
    share = warm_memory_fraction(warm, shards)
    if cuda and share is not None:
        torch.cuda.set_per_process_memory_fraction(share, 0)
        chain["memory_fraction"] = f"{share:.4f}"
    with out.open("a") as fh:
        for index, row in enumerate(manifest["rows"]):
            if (only and row["id"] not in only) or index % shards != shard:
                continue
            t0 = time.time()
            res = run_row(row, work, device, timing=cuda and not warm)
            res.update(
                toolchain=chain, harness_version=HARNESS_VERSION, seconds=round(time.time() - t0, 2)
            )
            fh.write(json.dumps(res) + "\n")
            fh.flush()
            print(_line(res), flush=True)
    return 0


def _line(res: dict[str, Any]) -> str:
    bits = [res["id"][:8], res.get("spec", "-"), res["status"], f"{res['seconds']}s"]
    for s in res.get("shapes", []):
        t = s.get("timing", {}).get("graph", {})
        h = s.get("timing", {}).get("host", {})
        bits.append(
            f"{s['role'][:4]}:{'ok' if s['equivalent'] else 'X'}"
            + (f" g{t.get('speedup', 0):.2f}" if "speedup" in t else "")
            + (f" h{h.get('speedup', 0):.2f}" if "speedup" in h else "")
        )
    if "error" in res:
        bits.append(res["error"][:200])
    return " | ".join(bits)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
