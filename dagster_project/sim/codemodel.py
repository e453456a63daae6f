"""A timing correction that reads the kernel's code and launch (issue 36, item 3).

The roofline model (``timing.predict``) misses by more than 2x on about half the session
kernels measured on the H100, and a per-(impl, rung level) refit did not move the held-out
figures: the misses are not a property of the rung's name. They follow what the code does
(a naive CUDA GEMM whose threads stride through K apart from one another, a scan that
issues ``__expf`` per state per step, one thread issuing small bulk copies) and how it is
launched (a grid of a few CTAs, a tail wave, an allocation near the card's memory). So
each measured kernel is described by features read from its own rendered source and
from the model's breakdown of its prediction, and a ridge regression learns
log(measured / modelled) from them.

* ``code_facts`` reads the source text (comments stripped): tensor-core instructions,
  barriers, special-function calls (and those inside loops), vector width of loads,
  loads whose fast index is a loop counter (consecutive threads then read addresses a
  row apart: uncoalesced), atomics, bulk copies issued by one thread.
* ``launch_facts`` reads the prediction: the shares of compute, memory, serial and
  launch time, waves and the tail wave, grid versus SMs, threads and CTAs per SM, shared
  memory, the code's own SFU floor against the modelled time, footprint against memory.
* ``fit`` / ``predict_log`` are ridge regression (features standardised on the training
  rows; intercept unpenalised); the penalty is picked by an inner cross-validation on the
  training rows only (``choose_penalty``), never on the held-out fold.

The op's name is deliberately not a feature: leaving a whole op out must test whether the
code's features carry over to an op the fit never saw.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .hardware import GPU
from .timing import SFU_PER_CLK, Prediction

#: Version of the feature set and learner; a change that moves any corrected time bumps it.
#: 1.1.0: the model's own distance from the physical floor, its efficiencies, compute path,
#: ALU share and dependent-trip chain as features; the GPU's bandwidth as a feature (a
#: second measuring GPU); shrunk per-(op, impl) and per-(op, impl, rung) offsets of the
#: measured kernels' residuals (``Offsets``) on top of the learner.
#: 1.2.0 (issue 36 item 3, round 3): features of serial per-thread loops (``serial_trip``:
#: a naive GEMM's K loop, a one-thread-per-row scan) and of sorts/scans (``sort_scan``);
#: deeper boosted trees (depth 5, 150 rounds at rate 0.05) fitted always (the nested
#: ridge-or-trees pick chose trees on these answers and cost five extra fits); offsets with
#: a prior of one kernel (K 2 -> 1), the rung's offset weighted by the measured kernels'
#: launch likeness (``LOCAL_FEATURES``, ``LOCAL_WIDTH``). Chosen on 10 group folds of the
#: evidence answers (benchmarks/codemodel_dev_cv.py), by session and by op.
#: 1.3.0 (issue 36, 36q): fitted on the online tier's answers too (``measured.all_points``:
#: 1.2.0's blind set, now development data), each online session's baseline and best marked;
#: features of every serial pass (``serial_total``: a sampler's one-thread walk per pass) and
#: of the work one program carries against one SM's share of the bandwidth
#: (``_program_facts``); the boosted trees' loss counts each (baseline, best) pair's
#: difference too (``PAIR_WEIGHT``). Chosen on 10 group folds of both answer files
#: (benchmarks/codemodel_dev_cv.py), by session and by op.
CODEMODEL_VERSION = "1.3.0"

#: Time of one step of a loop one thread walks alone (ms): a dependent load through L2
#: and a few instructions, ~5 ns (fixed a priori, not tuned): scales ``serial_trip``.
SERIAL_STEP_MS = 5e-6

#: Ridge penalties the inner cross-validation chooses from (fixed in advance).
PENALTIES = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
#: Inner folds of ``choose_penalty``.
INNER_FOLDS = 5

_CUDA_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_PY_COMMENT = re.compile(r"#[^\n]*")
_TENSOR = re.compile(r"\b(?:mma\.sync|wgmma|wmma::|mma_sync|tl\.dot|tcgen05)")
_WGMMA = re.compile(r"\bwgmma\b|cp\.async\.bulk\.tensor|tma_load|TensorDescriptor|make_tensor_desc")
_BARRIER = re.compile(
    r"__syncthreads\s*\(|bar\.sync|mbar_wait\s*\(|mbarrier\.try_wait|"
    r"cp\.async\.wait|tl\.debug_barrier|__syncwarp\s*\("
)
_SFU = re.compile(
    r"\b(?:__expf|expf|exp|exp2|exp2f|__exp2f|__logf|logf|log|log2|tanhf|tanh|rsqrtf|rsqrt|"
    r"__frsqrt_rn|sqrtf|sqrt|__sinf|__cosf|sinf|cosf|sin|cos|erff|erf|__powf|powf|sigmoid|"
    r"__fdividef)\s*\("
)
_VEC16 = re.compile(r"\b(?:float4|int4|uint4|longlong2|double2)\b|ld\.global\.v4|cp\.async\.cg")
_VEC8 = re.compile(r"\b(?:float2|int2|uint2)\b|ld\.global\.v2")
_VEC4 = re.compile(r"\b(?:__half2|__nv_bfloat162|half2)\b")
_ATOMIC = re.compile(r"\batomic\w*\s*\(|tl\.atomic_\w+\s*\(")
_SHARED = re.compile(r"__shared__")
_CUDA_FOR = re.compile(r"\bfor\s*\(\s*(?:int|int64_t|uint32_t|unsigned)\s+(\w+)")
_PY_FOR = re.compile(r"^\s*for\s+(\w+)\s+in\b")
#: ``[row * kStride + j]`` / ``[int64_t(row) * kStride + j]``: an index whose fast part is
#: ``j``; with ``j`` a loop counter, each thread walks its own row (threads a row apart).
_STRIDED = re.compile(r"\[\s*(?:int64_t\()?\s*(\w+)\s*\)?\s*\*\s*(\w+)\s*\+\s*(\w+)\s*\]")
_THREAD0 = re.compile(r"if\s*\(\s*threadIdx\.x\s*==\s*0\s*\)\s*\{")
#: ``constexpr int kV = 50257;``: the compile-time sizes a rendered CUDA source names.
_CONSTEXPR = re.compile(r"constexpr\s+(?:int|int64_t|uint32_t|unsigned)\s+(\w+)\s*=\s*(\d+)\s*;")
#: ``for (int i = 0; i < kV; ++i)``: a loop one thread walks alone, step by step (its start
#: is a constant, not the thread's index; its step is one), so its trip count is serial
#: work per thread: a naive GEMM's K loop, a one-thread-per-row scan over the vocabulary.
_SERIAL_FOR = re.compile(
    r"\bfor\s*\(\s*(?:int|int64_t|uint32_t|unsigned)\s+(\w+)\s*=\s*\d+\s*;\s*\1\s*<=?\s*"
    r"(\w+)\s*;\s*(?:\+\+\1|\1\+\+|\1\s*\+=\s*1\b)"
)
#: Sorts and scans: library radix sorts (CUB), Triton's sort and scan primitives; each is
#: several passes over its input that the roofline's single pass does not count.
_SORT_SCAN = re.compile(r"\bcub::|\btl\.sort\s*\(|\btl\.cumsum\s*\(|\btl\.associative_scan\s*\(")


def strip_comments(code: str, impl: str) -> str:
    """The source without comments (the author's notes must not count as code)."""
    return _CUDA_COMMENT.sub("", code) if impl == "cuda" else _PY_COMMENT.sub("", code)


def _block_after(text: str, start: int) -> str:
    """The brace-delimited block opening at or after ``start`` (to its matching brace)."""
    i = text.find("{", start)
    if i < 0:
        return ""
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i : j + 1]
    return text[i:]


def _loop_depths_cuda(text: str) -> list[int]:
    """Per line, how many ``for`` loops enclose it (braced or single-statement)."""
    depths: list[int] = []
    stack: list[int] = []
    pending = 0
    for line in text.splitlines():
        opens_for = bool(_CUDA_FOR.search(line)) or line.lstrip().startswith("for (")
        depths.append(sum(stack) + (1 if opens_for else 0) + pending)
        pending = 0
        for ch in line:
            if ch == "{":
                stack.append(1 if opens_for else 0)
                opens_for = False
            elif ch == "}" and stack:
                stack.pop()
        if opens_for:  # a loop without braces covers the next statement only
            pending = 1
    return depths


def _loop_depths_py(text: str) -> list[int]:
    """Per line, how many ``for``/``while`` loops enclose it (by indentation)."""
    depths: list[int] = []
    loops: list[int] = []
    for line in text.splitlines():
        if not line.strip():
            depths.append(len(loops))
            continue
        ind = len(line) - len(line.lstrip())
        while loops and ind <= loops[-1]:
            loops.pop()
        depths.append(len(loops))
        if _PY_FOR.match(line) or line.lstrip().startswith("while "):
            loops.append(ind)
    return depths


def _loop_vars(text: str, impl: str) -> set[str]:
    if impl == "cuda":
        return set(_CUDA_FOR.findall(text))
    return {m.group(1) for line in text.splitlines() if (m := _PY_FOR.match(line))}


def _vector_bytes(text: str, impl: str) -> int:
    """Widest load/store vector the source names (Triton: the compiler vectorises, 16)."""
    if impl != "cuda":
        return 16
    for pat, width in ((_VEC16, 16), (_VEC8, 8), (_VEC4, 4)):
        if pat.search(text):
            return width
    return 2


def _one_thread_bulk(text: str) -> int:
    """Bulk copies issued from a loop inside an ``if (threadIdx.x == 0)`` block: one
    thread serialising many small TMA/bulk issues."""
    n = 0
    for m in _THREAD0.finditer(text):
        block = _block_after(text, m.start())
        if "for (" in block and re.search(r"bulk|cp\.async", block):
            n += len(re.findall(r"\bbulk\w*\s*\(|cp\.async\.bulk", block))
    return n


def serial_trip(text: str) -> float:
    """The longest loop one thread walks alone (``_SERIAL_FOR``), its bound read from the
    source's ``constexpr`` sizes or a literal (an unresolved bound counts nothing)."""
    sizes = {name: int(v) for name, v in _CONSTEXPR.findall(text)}
    trips = [0]
    for _var, bound in _SERIAL_FOR.findall(text):
        trips.append(int(bound) if bound.isdigit() else sizes.get(bound, 0))
    return float(max(trips))


def serial_total(text: str) -> tuple[float, float]:
    """(trips summed over every loop one thread walks alone, how many such loops): a
    one-thread-per-row sampler walks its row once per pass (max, sum, threshold, draw), so
    its serial work is the passes' sum, not the longest one (``serial_trip``)."""
    sizes = {name: int(v) for name, v in _CONSTEXPR.findall(text)}
    trips = [int(b) if b.isdigit() else sizes.get(b, 0) for _v, b in _SERIAL_FOR.findall(text)]
    trips = [t for t in trips if t > 0]
    return float(sum(trips)), float(len(trips))


def code_facts(code: str, impl: str) -> dict[str, float]:
    """Counts read from one rendered source (comments stripped)."""
    text = strip_comments(code, impl)
    lines = text.splitlines()
    depths = _loop_depths_cuda(text) if impl == "cuda" else _loop_depths_py(text)
    loop_vars = _loop_vars(text, impl)
    sfu_loop = sum(len(_SFU.findall(ln)) for ln, d in zip(lines, depths, strict=True) if d >= 1)
    strided = {m.group(0) for m in _STRIDED.finditer(text) if m.group(3) in loop_vars}
    return {
        "tensor_core": float(bool(_TENSOR.search(text))),
        "wgmma_tma": float(bool(_WGMMA.search(text))),
        "barriers": float(len(_BARRIER.findall(text))),
        "sfu_calls": float(len(_SFU.findall(text))),
        "sfu_in_loop": float(sfu_loop),
        "vector_bytes": float(_vector_bytes(text, impl)),
        "strided_loop_loads": float(len(strided)),
        "atomics": float(len(_ATOMIC.findall(text))),
        "shared_decl": float(len(_SHARED.findall(text))),
        "one_thread_bulk": float(_one_thread_bulk(text)),
        "max_loop_depth": float(max(depths, default=0)),
        "serial_trip": serial_trip(text) if impl == "cuda" else 0.0,
        "sort_scan": float(len(_SORT_SCAN.findall(text))),
        **_serial_facts(text, impl),
    }


def _serial_facts(text: str, impl: str) -> dict[str, float]:
    """``serial_total`` of a CUDA source (Triton programs have no per-thread loops)."""
    total, loops = serial_total(text) if impl == "cuda" else (0.0, 0.0)
    return {"serial_total": total, "serial_loops": loops}


def launch_facts(
    pred: Prediction, gpu: GPU, footprint: float, sfu_calls: float
) -> dict[str, float]:
    """The model's own breakdown of its prediction and the launch's shape on ``gpu``."""
    dev = max(pred.device_ms, 1e-6)
    kp = pred.plan
    launch = pred.launch_ms - pred.host_ms
    sfu_rate = SFU_PER_CLK * gpu.sms * gpu.clock_ghz * 1e9
    # the code's own SFU work: the op's least count, times the calls the code makes in loops
    sfu_ms = kp.sfu_ops * max(1.0, sfu_calls) / sfu_rate * 1e3 if kp.sfu_ops else 0.0
    waves = max(pred.waves, 1e-6)
    tail = waves - math.floor(waves) if waves > 1 else 0.0
    return {
        "log_device_ms": math.log(dev),
        "share_compute": min(pred.t_compute_ms / dev, 3.0),
        "share_memory": min(pred.t_memory_ms / dev, 3.0),
        "share_serial": min(pred.t_serial_ms / dev, 3.0),
        "share_launch": min(max(launch, 0.0) / dev, 1.0),
        "log_compute_over_memory": math.log((pred.t_compute_ms + 1e-6) / (pred.t_memory_ms + 1e-6)),
        "log_waves": math.log(waves),
        "tail": tail,
        "log_grid_over_sms": math.log(max(kp.grid, 1) / gpu.sms),
        "log2_threads": math.log2(max(kp.threads, 1)),
        "ctas_per_sm": float(pred.ctas_per_sm),
        "smem_frac": kp.smem / gpu.smem_per_sm,
        "log_sfu_over_model": math.log1p(sfu_ms / dev),
        "footprint_frac": footprint / (gpu.mem_gb * 1e9),
        "launches": float(kp.launches),
        **_roofline_facts(pred, gpu),
        **_program_facts(pred, gpu),
    }


def _program_facts(pred: Prediction, gpu: GPU) -> dict[str, float]:
    """The work one program carries (1.3.0): a grid of fewer programs than SMs streams each
    program's bytes through one SM's share of the memory system, which the roofline's
    whole-card bandwidth does not see (a softmax of 4 rows of 151,936 on 4 CTAs, an
    attention best whose grid is its 32 heads). Bytes and FLOPs per program, and the
    memory time were each program held to one SM's share of the bandwidth, over the
    model's time."""
    kp = pred.plan
    grid = max(kp.grid, 1)
    dev = max(pred.device_ms, 1e-6)
    per_sm_ms = kp.bytes / grid / (gpu.bw_tbs * 1e12 / gpu.sms) * 1e3
    return {
        "log_bytes_per_program": math.log1p(kp.bytes / grid),
        "log_flops_per_program": math.log1p(kp.flops / grid),
        "log_sm_share_over_model": math.log(max(per_sm_ms, 1e-9) / dev),
    }


def _roofline_facts(pred: Prediction, gpu: GPU) -> dict[str, float]:
    """Where the model puts the kernel against its physical floor and why: the model's
    time over the plan's bytes/FLOPs/SFU floor, the rung's memory and compute
    efficiencies, FP32 CUDA-core path vs tensor cores, the share of FP32 ALU work, the
    dependent memory trips on a program's critical path, and the GPU's bandwidth (the
    same code runs on an H100 and an H200 at different peaks)."""
    dev = max(pred.device_ms, 1e-6)
    floor = max(pred.floor_ms - pred.host_ms, 1e-4)
    return {
        "log_over_floor": math.log(dev / floor),
        "log_mem_eff": math.log(max(pred.eff[0], 1e-3)),
        "log_comp_eff": math.log(max(pred.eff[1], 1e-3)),
        "quirk": pred.quirk,
        "path_fp32": float(pred.plan.path == "fp32"),
        "share_alu": min(pred.t_alu_ms / dev, 3.0),
        "log_chain": math.log1p(pred.plan.chain),
        "gpu_bw_tbs": gpu.bw_tbs,
    }


def features(
    code: str, impl: str, level: int, pred: Prediction, gpu: GPU, footprint: float
) -> dict[str, float]:
    """Every feature of one kernel, with the interactions the residuals show (naive CUDA
    baselines: level 0 CUDA code, scaled by how compute-bound the model thinks it is)."""
    c = code_facts(code, impl)
    f = {**c, **launch_facts(pred, gpu, footprint, c["sfu_in_loop"])}
    cuda = 1.0 if impl == "cuda" else 0.0
    naive = cuda * (1.0 if level == 0 else 0.0)
    f.update(
        {
            "cuda": cuda,
            "level": float(level),
            "naive_cuda": naive,
            "naive_cuda_compute": naive * f["share_compute"],
            "naive_strided": naive * min(c["strided_loop_loads"], 4.0),
            "cuda_no_tc_compute": cuda * (1 - c["tensor_core"]) * f["share_compute"],
            "log1p_barriers": math.log1p(c["barriers"]),
            "log1p_sfu_in_loop": math.log1p(c["sfu_in_loop"]),
            "log1p_serial_trip": math.log1p(c["serial_trip"]),
            "naive_serial_trip": naive * math.log1p(c["serial_trip"]),
            # the serial walk's own time (SERIAL_STEP_MS per trip) against the model's
            "log_serial_over_model": math.log1p(
                c["serial_trip"] * SERIAL_STEP_MS / max(pred.device_ms, 1e-6)
            ),
            "log1p_sort_scan": math.log1p(c["sort_scan"]),
            "log1p_serial_total": math.log1p(c["serial_total"]),
            "serial_loops": c["serial_loops"],
            # every serial pass's walk (SERIAL_STEP_MS per trip) against the model's time
            "log_serial_total_over_model": math.log1p(
                c["serial_total"] * SERIAL_STEP_MS / max(pred.device_ms, 1e-6)
            ),
        }
    )
    for k in ("barriers", "sfu_calls", "sfu_in_loop", "serial_trip", "sort_scan", "serial_total"):
        f.pop(k)
    return f


#: Feature order of the design matrix.
FEATURES: tuple[str, ...] = (
    "tensor_core",
    "wgmma_tma",
    "vector_bytes",
    "strided_loop_loads",
    "atomics",
    "shared_decl",
    "one_thread_bulk",
    "max_loop_depth",
    "log_device_ms",
    "share_compute",
    "share_memory",
    "share_serial",
    "share_launch",
    "log_compute_over_memory",
    "log_waves",
    "tail",
    "log_grid_over_sms",
    "log2_threads",
    "ctas_per_sm",
    "smem_frac",
    "log_sfu_over_model",
    "footprint_frac",
    "launches",
    "cuda",
    "level",
    "naive_cuda",
    "naive_cuda_compute",
    "naive_strided",
    "cuda_no_tc_compute",
    "log1p_barriers",
    "log1p_sfu_in_loop",
    "log_over_floor",
    "log_mem_eff",
    "log_comp_eff",
    "quirk",
    "path_fp32",
    "share_alu",
    "log_chain",
    "gpu_bw_tbs",
    "log1p_serial_trip",
    "naive_serial_trip",
    "log_serial_over_model",
    "log1p_sort_scan",
    "log1p_serial_total",
    "serial_loops",
    "log_serial_total_over_model",
    "log_bytes_per_program",
    "log_flops_per_program",
    "log_sm_share_over_model",
)


def vector(feats: Mapping[str, float]) -> list[float]:
    """One kernel's features in ``FEATURES`` order."""
    return [float(feats[k]) for k in FEATURES]


@dataclass(frozen=True)
class Ridge:
    """A fitted ridge regression on standardised features."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    penalty: float
    #: The least and greatest target of the training rows: a prediction is held inside
    #: them (a kernel whose features lie far outside the fit's must not extrapolate a
    #: correction no measured kernel ever needed; the first held-out run put one naive
    #: grouped GEMM at 10^4x its measured time).
    lo: float = -math.inf
    hi: float = math.inf

    def predict(self, x: Sequence[Sequence[float]] | Any) -> list[float]:
        """Predicted log(measured / modelled) of each row, within the training range."""
        z = (np.asarray(x, float) - np.asarray(self.mean)) / np.asarray(self.scale)
        raw = z @ np.asarray(self.coef) + self.intercept
        return [float(min(max(v, self.lo), self.hi)) for v in raw]


def fit(x: Sequence[Sequence[float]] | Any, y: Sequence[float] | Any, penalty: float) -> Ridge:
    """Ridge regression of ``y`` on ``x`` (columns standardised on these rows; constant
    columns get zero weight; the intercept is the mean and is not penalised)."""
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    mean = xa.mean(axis=0)
    scale = xa.std(axis=0)
    scale[scale < 1e-12] = 1.0
    z = (xa - mean) / scale
    yc = ya - ya.mean()
    a = z.T @ z + penalty * np.eye(z.shape[1])
    coef = np.linalg.solve(a, z.T @ yc)
    return Ridge(
        tuple(float(v) for v in mean),
        tuple(float(v) for v in scale),
        tuple(float(v) for v in coef),
        float(ya.mean()),
        penalty,
        float(ya.min()),
        float(ya.max()),
    )


def group_folds(groups: Sequence[str], k: int) -> list[list[int]]:
    """Row indices split into ``k`` folds with every group in one fold (round-robin over
    the sorted groups, so the split is deterministic)."""
    names = sorted(set(groups))
    fold_of = {g: i % k for i, g in enumerate(names)}
    out: list[list[int]] = [[] for _ in range(min(k, len(names)))]
    for i, g in enumerate(groups):
        out[fold_of[g]].append(i)
    return out


class Model(Protocol):
    """A fitted correction: log(measured / modelled) of feature rows."""

    def predict(self, x: Sequence[Sequence[float]] | Any) -> list[float]: ...


def _inner_error(
    make: Callable[[Any, Any], Model], xa: Any, ya: Any, folds: list[list[int]]
) -> float:
    """Median absolute error of ``make``'s fits over ``folds`` of these rows."""
    errs: list[float] = []
    for test in folds:
        mask = np.ones(len(ya), bool)
        mask[test] = False
        model = make(xa[mask], ya[mask])
        errs.extend(abs(p - t) for p, t in zip(model.predict(xa[test]), ya[test], strict=True))
    return float(np.median(errs))


def choose_penalty(
    x: Sequence[Sequence[float]] | Any, y: Sequence[float] | Any, groups: Sequence[str]
) -> float:
    """The penalty of ``PENALTIES`` with the least median absolute error over
    ``INNER_FOLDS`` group folds of these (training) rows alone."""
    return _choose_ridge(np.asarray(x, float), np.asarray(y, float), groups)[0]


def _choose_ridge(xa: Any, ya: Any, groups: Sequence[str]) -> tuple[float, float]:
    folds = group_folds(groups, INNER_FOLDS)
    if len(folds) < 2:
        return PENALTIES[len(PENALTIES) // 2], math.inf
    scored = [
        (_inner_error(functools.partial(fit, penalty=lam), xa, ya, folds), lam) for lam in PENALTIES
    ]
    err, lam = min(scored)
    return lam, err


# --------------------------------------------------------------------------------------
# boosted trees: the second learner the inner folds may pick (1.2.0's learner)
# --------------------------------------------------------------------------------------

#: Fixed before any held-out run (not tuned): rounds, shrinkage, least rows per leaf.
#: 1.2.0: depth 5 and 150 rounds at 0.05 (1.1.0: depth 2, 80 at 0.1), chosen on the
#: development folds (depth 2 to 6 tried; 5 best held out by op, 6 no better by session).
BOOST_ROUNDS = 150
BOOST_RATE = 0.05
BOOST_MIN_LEAF = 8
BOOST_DEPTH = 5
#: Weight of a (baseline, best) pair's squared difference error against one kernel's own
#: squared error in the boosted trees' loss (0: 1.2.0's per-kernel loss). Kept at 0 in
#: 1.3.0: on the development folds a weight of 1 or 3 put 5-8 more *modelled* sessions'
#: speedups within 2x (whose best the model picked: its errors lean fast) and 1-7 fewer
#: *online* ones (whose best the device picked: they lean slow), three fold seeds alike; a
#: kernel's correction must not learn which way a session's pick leans, and the blind sets
#: are online tiers.
PAIR_WEIGHT = 0.0

#: One depth-2 tree: (feature, threshold, left subtree, right subtree), leaves are floats.
Tree = tuple[int, float, "Tree | float", "Tree | float"]  # depth BOOST_DEPTH


def _best_split(xa: Any, r: Any, order: Any, min_leaf: int) -> tuple[int, float] | None:
    """(feature, threshold) of the split that most reduces the squared error of ``r`` over
    the rows ``order`` holds (per feature, those rows' indices sorted by that feature)."""
    n = order.shape[0]
    if n < 2 * min_leaf:
        return None
    xs = xa[order, np.arange(xa.shape[1])]
    cs = np.cumsum(r[order], axis=0)
    total = cs[-1]
    k = np.arange(1, n)[:, None]
    gain = cs[:-1] ** 2 / k + (total - cs[:-1]) ** 2 / (n - k) - total**2 / n
    valid = (xs[:-1] < xs[1:]) & (k >= min_leaf) & (n - k >= min_leaf)
    gain = np.where(valid, gain, -np.inf)
    pos, feat = np.unravel_index(int(np.argmax(gain)), gain.shape)
    if not np.isfinite(gain[pos, feat]) or gain[pos, feat] <= 0:
        return None
    return int(feat), float((xs[pos, feat] + xs[pos + 1, feat]) / 2)


def _grow(xa: Any, r: Any, order: Any, depth: int) -> Tree | float:
    """A tree of ``depth`` over the rows ``order`` holds (sorted once per fit, filtered
    for each child, so no node sorts again)."""
    split = _best_split(xa, r, order, BOOST_MIN_LEAF) if depth > 0 else None
    if split is None:
        return float(r[order[:, 0]].mean())
    f, t = split
    go_left = xa[:, f] <= t
    cols = order.T
    keep = go_left[cols]
    left = cols[keep].reshape(cols.shape[0], -1).T
    right = cols[~keep].reshape(cols.shape[0], -1).T
    return (f, t, _grow(xa, r, left, depth - 1), _grow(xa, r, right, depth - 1))


def _tree_values(tree: Tree | float, xa: Any) -> Any:
    """The tree's leaf value for every row of ``xa``: each row walks its own path (a few
    rows, as ``step_times`` asks one kernel at a time) or each node splits the rows it gets
    (many rows); both give the same leaves."""
    if len(xa) <= 8:
        return np.asarray([_leaf(tree, row) for row in xa.tolist()], float)
    if isinstance(tree, float):
        return np.full(len(xa), tree)
    f, t, left, right = tree
    go = xa[:, f] <= t
    out = np.empty(len(xa))
    out[go] = _tree_values(left, xa[go])
    out[~go] = _tree_values(right, xa[~go])
    return out


def _leaf(tree: Tree | float, row: list[float]) -> float:
    """The leaf one row reaches."""
    node = tree
    while not isinstance(node, float):
        f, t, left, right = node
        node = left if row[f] <= t else right
    return node


@dataclass(frozen=True)
class Boosted:
    """Gradient-boosted regression trees (squared loss), clamped like ``Ridge``."""

    base: float
    trees: tuple[Tree, ...]
    lo: float
    hi: float

    def predict(self, x: Sequence[Sequence[float]] | Any) -> list[float]:
        xa = np.asarray(x, float)
        v = np.full(len(xa), self.base)
        for t in self.trees:
            v += BOOST_RATE * _tree_values(t, xa)
        return [float(min(max(e, self.lo), self.hi)) for e in v]


def fit_boosted(
    x: Sequence[Sequence[float]] | Any,
    y: Sequence[float] | Any,
    pairs: Sequence[tuple[int, int]] = (),
    pair_weight: float | None = None,
) -> Boosted:
    """``BOOST_ROUNDS`` trees of depth ``BOOST_DEPTH``, each fitted to the negative gradient
    of the loss at the ones before: squared error per kernel plus, for each (baseline, best)
    row pair of ``pairs``, ``pair_weight`` times the squared error of their difference (a
    session's speedup is the ratio of the two times, so its error is the two kernels'
    errors together; 1.3.0)."""
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    lam = PAIR_WEIGHT if pair_weight is None else pair_weight
    pb = np.asarray([b for b, _t in pairs], int)
    pt = np.asarray([t for _b, t in pairs], int)
    pred = np.full(len(ya), ya.mean())
    order = np.argsort(xa, axis=0, kind="stable")
    trees: list[Tree] = []
    for _ in range(BOOST_ROUNDS):
        grad = ya - pred
        if lam and len(pb):
            d = lam * (grad[pb] - grad[pt])
            grad = grad.copy()
            np.add.at(grad, pb, d)
            np.add.at(grad, pt, -d)
        tree = _grow(xa, grad, order, BOOST_DEPTH)
        if isinstance(tree, float):
            break
        trees.append(tree)
        pred += BOOST_RATE * _tree_values(tree, xa)
    return Boosted(float(ya.mean()), tuple(trees), float(ya.min()), float(ya.max()))


def fit_model(
    x: Sequence[Sequence[float]] | Any, y: Sequence[float] | Any, groups: Sequence[str]
) -> Model:
    """The learner these (training) rows pick for themselves: ridge at its best penalty or
    the boosted trees, whichever has the smaller median absolute error over the same
    ``INNER_FOLDS`` group folds of these rows (nested: no held-out row takes part)."""
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    lam, ridge_err = _choose_ridge(xa, ya, groups)
    folds = group_folds(groups, INNER_FOLDS)
    boost_err = _inner_error(fit_boosted, xa, ya, folds) if len(folds) >= 2 else math.inf
    return fit_boosted(xa, ya) if boost_err < ridge_err else fit(xa, ya, lam)


# --------------------------------------------------------------------------------------
# the measured kernels of the same op and rung as evidence (1.1.0)
# --------------------------------------------------------------------------------------

#: Shrinkage of the offsets: a group of n measured kernels moves its kernels by
#: sum(residual) / (n + K). 1.2.0: a prior of one kernel (1.1.0: two); K 0.5 to 4 tried on
#: the development folds, 1 best by session (no effect by op: an unseen op has no offset).
K_OP = 1.0
K_RUNG = 1.0
#: The rung's offset weighs each measured kernel of the rung by how alike its launch is
#: (Gaussian of the distance over these features, standardised on the training rows, of
#: width ``LOCAL_WIDTH``): a rung's miss moves with size and grid (a GEMV rung runs 3x slow
#: at one shape and 2x fast at another), so the nearest measured shapes say the most.
LOCAL_FEATURES = ("log_device_ms", "log_waves", "log_grid_over_sms", "log_over_floor")
LOCAL_WIDTH = 1.0

#: (op, impl) and (op, impl, rung tag) of a kernel.
KernelKey = tuple[str, str, str]


@dataclass(frozen=True)
class Offsets:
    """What the learner still misses per op and rung, from the measured kernels: the
    shrunk mean residual of the kernels of the same (op, impl), then of the same rung on
    top of it, weighted by launch likeness when the kernel's features are given. The
    learner reads code and launch only, so kernels of one op share misses it cannot see
    (an op whose dequantisation the plan under-counts, say); an op or rung with no
    measured kernel gets no offset, which is what a held-out op sees."""

    op: Mapping[tuple[str, str], float]
    #: Per rung, its measured kernels' ``LOCAL_FEATURES`` (standardised) and residuals
    #: after the op's offset.
    rung_rows: Mapping[KernelKey, tuple[tuple[tuple[float, ...], ...], tuple[float, ...]]]
    #: Mean and scale of ``LOCAL_FEATURES`` over the training rows.
    center: tuple[float, ...] = ()
    scale: tuple[float, ...] = ()

    @property
    def rung(self) -> dict[KernelKey, float]:
        """Per rung, the plain shrunk mean of its residuals (every kernel weighted 1)."""
        return {k: sum(r) / (len(r) + K_RUNG) for k, (_z, r) in self.rung_rows.items()}

    def of(self, key: KernelKey, feats: Sequence[float] | None = None) -> float:
        """The offset of a kernel of ``key`` (``feats``: its ``FEATURES`` row; without it
        every measured kernel of the rung weighs the same)."""
        op, impl, _tag = key
        out = self.op.get((op, impl), 0.0)
        rows = self.rung_rows.get(key)
        if not rows:
            return out
        z, r = np.asarray(rows[0], float), np.asarray(rows[1], float)
        if feats is None or not self.center:
            w = np.ones(len(r))
        else:
            q = (_local(feats) - np.asarray(self.center)) / np.asarray(self.scale)
            w = np.exp(-((z - q) ** 2).sum(axis=1) / (2 * LOCAL_WIDTH**2))
        return out + float((w * r).sum() / (w.sum() + K_RUNG))


def _local(row: Sequence[float]) -> Any:
    """The ``LOCAL_FEATURES`` of one ``FEATURES`` row."""
    return np.asarray([row[FEATURES.index(n)] for n in LOCAL_FEATURES], float)


def fit_offsets(
    keys: Sequence[KernelKey],
    resid: Sequence[float],
    x: Sequence[Sequence[float]] | Any = None,
) -> Offsets:
    """Hierarchical shrunk means of ``resid`` (the learner's residuals on its own training
    rows): per (op, impl) with ``K_OP``, then per rung on what is left with ``K_RUNG``,
    each kernel of the rung kept with its launch (``x``: the rows' ``FEATURES``; without
    them, or with rows of other columns, a rung's kernels weigh the same)."""
    s1: dict[tuple[str, str], float] = {}
    n1: dict[tuple[str, str], int] = {}
    for (op, impl, _tag), r in zip(keys, resid, strict=True):
        s1[(op, impl)] = s1.get((op, impl), 0.0) + r
        n1[(op, impl)] = n1.get((op, impl), 0) + 1
    o1 = {g: s1[g] / (n1[g] + K_OP) for g in s1}
    center: tuple[float, ...] = ()
    scale: tuple[float, ...] = ()
    zs = np.zeros((len(keys), len(LOCAL_FEATURES)))
    if x is not None and len(keys) and len(x[0]) == len(FEATURES):  # else: plain means
        loc = np.asarray([_local(row) for row in x])
        mu, sd = loc.mean(axis=0), loc.std(axis=0)
        sd[sd < 1e-12] = 1.0
        zs = (loc - mu) / sd
        center, scale = tuple(float(v) for v in mu), tuple(float(v) for v in sd)
    z2: dict[KernelKey, list[tuple[float, ...]]] = {}
    r2: dict[KernelKey, list[float]] = {}
    for i, (k, r) in enumerate(zip(keys, resid, strict=True)):
        z2.setdefault(k, []).append(tuple(float(v) for v in zs[i]))
        r2.setdefault(k, []).append(r - o1[(k[0], k[1])])
    rows = {k: (tuple(z2[k]), tuple(r2[k])) for k in r2}
    return Offsets(o1, rows, center, scale)


@dataclass(frozen=True)
class CodeModel:
    """The code model: the learner's correction of a kernel's features plus the offsets of
    its op and rung; ``predict_kernels`` gives log(measured / modelled) per kernel."""

    learner: Model
    offsets: Offsets

    def predict_kernels(
        self, x: Sequence[Sequence[float]] | Any, keys: Sequence[KernelKey]
    ) -> list[float]:
        base = self.learner.predict(x)
        rows = np.asarray(x, float)
        return [
            b + self.offsets.of(k, rows[i]) for i, (b, k) in enumerate(zip(base, keys, strict=True))
        ]


def pair_rows(uses: Sequence[Sequence[tuple[str, int, str]]]) -> list[tuple[int, int]]:
    """(baseline row, best row) of every session both of whose kernels are among the rows
    (``uses``: each row's (session, step, role) uses); a session whose best is its baseline
    makes no pair (its speedup is 1 whatever the model says)."""
    roles: dict[str, dict[str, int]] = {}
    for i, row in enumerate(uses):
        for sid, _step, role in row:
            if role in ("baseline", "best"):
                roles.setdefault(sid, {})[role] = i
    return sorted(
        (r["baseline"], r["best"])
        for r in roles.values()
        if len(r) == 2 and r["baseline"] != r["best"]
    )


def fit_code(
    x: Sequence[Sequence[float]] | Any,
    y: Sequence[float] | Any,
    groups: Sequence[str],
    keys: Sequence[KernelKey],
    pairs: Sequence[tuple[int, int]] = (),
) -> CodeModel:
    """Boosted trees on these rows (since 1.2.0 always; ``groups`` is kept for callers, the
    nested pick of ``fit_model`` chose trees on the evidence answers at five times the
    cost; ``pairs``: (baseline row, best row) of each session both were timed for), then
    the offsets of its residuals on them."""
    del groups
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    learner = fit_boosted(xa, ya, pairs)
    resid = ya - np.asarray(learner.predict(xa))
    return CodeModel(learner, fit_offsets(keys, [float(r) for r in resid], xa))


# --------------------------------------------------------------------------------------
# a fitted model as plain data (``sim.model_cache`` keeps the shipped fit on disk)
# --------------------------------------------------------------------------------------


def _tree_to_data(node: Tree | float) -> Any:
    if isinstance(node, float):
        return float(node)
    f, t, left, right = node
    return [int(f), float(t), _tree_to_data(left), _tree_to_data(right)]


def _tree_from_data(node: Any) -> Tree | float:
    if isinstance(node, list):
        f, t, left, right = node  # a malformed node raises ValueError here
        return (int(f), float(t), _tree_from_data(left), _tree_from_data(right))
    return float(node)


def model_to_data(model: CodeModel) -> dict[str, Any]:
    """``model`` as JSON-ready data (lists, floats, strings): every number as the float it
    is, so ``model_from_data`` gives back an equal model that predicts identically."""
    learner = model.learner
    if isinstance(learner, Boosted):
        ld: dict[str, Any] = {
            "kind": "boosted",
            "base": learner.base,
            "trees": [_tree_to_data(t) for t in learner.trees],
            "lo": learner.lo,
            "hi": learner.hi,
        }
    elif isinstance(learner, Ridge):
        ld = {"kind": "ridge", **dataclasses.asdict(learner)}
    else:  # pragma: no cover - fit_code makes one of the two
        raise TypeError(f"cannot store a {type(learner).__name__} learner")
    off = model.offsets
    return {
        "learner": ld,
        "offsets": {
            "op": [[op, impl, v] for (op, impl), v in off.op.items()],
            "rung_rows": [
                [list(k), [list(z) for z in zs], list(rs)] for k, (zs, rs) in off.rung_rows.items()
            ],
            "center": list(off.center),
            "scale": list(off.scale),
        },
    }


def model_from_data(data: Mapping[str, Any]) -> CodeModel:
    """The model ``model_to_data`` stored; raises ``KeyError``, ``TypeError`` or
    ``ValueError`` on data of any other shape."""
    ld = data["learner"]
    learner: Model
    if ld["kind"] == "boosted":
        trees = tuple(_tree_from_data(t) for t in ld["trees"])
        if any(isinstance(t, float) for t in trees):
            raise ValueError("a stored boosted tree is a bare leaf")
        learner = Boosted(
            float(ld["base"]),
            tuple(t for t in trees if not isinstance(t, float)),
            float(ld["lo"]),
            float(ld["hi"]),
        )
    elif ld["kind"] == "ridge":
        learner = Ridge(
            tuple(float(v) for v in ld["mean"]),
            tuple(float(v) for v in ld["scale"]),
            tuple(float(v) for v in ld["coef"]),
            float(ld["intercept"]),
            float(ld["penalty"]),
            float(ld["lo"]),
            float(ld["hi"]),
        )
    else:
        raise ValueError(f"unknown learner kind {ld['kind']!r}")
    od = data["offsets"]
    op = {(str(o), str(i)): float(v) for o, i, v in od["op"]}
    rows: dict[KernelKey, tuple[tuple[tuple[float, ...], ...], tuple[float, ...]]] = {}
    for key, zs, rs in od["rung_rows"]:
        o, i, tag = key
        rows[(str(o), str(i), str(tag))] = (
            tuple(tuple(float(v) for v in z) for z in zs),
            tuple(float(v) for v in rs),
        )
    center = tuple(float(v) for v in od["center"])
    scale = tuple(float(v) for v in od["scale"])
    return CodeModel(learner, Offsets(op, rows, center, scale))
