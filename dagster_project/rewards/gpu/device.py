"""The part of the harness that runs on the GPU: inputs, reference, check, timing.

Imports torch and triton inside functions only, so the package imports on a CPU.

Per row: the kernel is loaded from the row's source; the inputs are built once (random
activations and weights, quantised the row's way, ``quant``), in several *sets* so the
data touched while timing is at least ``rotate_factor`` times the L2 cache (otherwise
repeated launches would time the cache, not HBM); the reference is computed once, in
fp32 from the dequantised inputs with TF32 off. Per candidate config: the launches are
planned (``plan``), the output is poisoned with NaN, the kernel runs once on set 0 and
is compared with the reference (relative Frobenius error under ``TOLERANCE``, every
element written), then timed: a CUDA graph holding ``L`` launches that cycle through the
input sets is replayed ``R`` times between CUDA events and the median replay divided by
``L`` is the time per call (graphs remove Python launch overhead, which would otherwise
dominate the small-M rows). If graph capture fails the same loop runs without a graph.

A row whose config governs both MoE GEMMs (``moe_gemms="both"``) is timed as the up and
the down launch back to back, and each output is checked against its own reference.
With ``TRITON_INTERPRET=1`` everything runs on the CPU instead (``interpreting``).

A launch that leaves the CUDA context broken (illegal address) is sticky for the whole
process: ``CudaContextLost`` is raised after its result is reported, and the batch
runner exits with ``EXIT_CONTEXT_LOST`` so a wrapper restarts it (it resumes).
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .neighbours import Candidate
from .plan import (
    BindError,
    DTypeRef,
    GemmProblem,
    Launch,
    TensorRef,
    plan_launches,
    problems_for,
)
from .quant import (
    dequantise,
    expand_blocks,
    expand_groups,
    quantise,
    scale_blocks,
    scale_groups,
    scale_per_row,
    scale_per_tensor,
)
from .routing import Routing, row_routing
from .source import KernelSourceError, LoadedKernel, load_kernel
from .spec import (
    COMPILE_FAILED,
    HARNESS_ERROR,
    INVALID_CONFIG,
    LAUNCH_FAILED,
    OK,
    OUT_OF_RESOURCES,
    WRONG_RESULT,
    ConfigError,
    Measurement,
    MeasureRow,
    failed,
    normalise_config,
)

#: Relative Frobenius error allowed against the fp32 reference. The kernels accumulate
#: in fp32 and round the output to bf16 (~2e-3 of relative error on random data), and
#: fp8 dots on Hopper accumulate with fewer bits; a real indexing or scaling bug is
#: orders of magnitude above these.
TOLERANCE = {"bf16": 1e-2, "fp8_tensor": 2e-2, "fp8_channel": 2e-2, "fp8_block": 2e-2}


class CudaContextLost(RuntimeError):
    """The CUDA context is unusable after a failed launch; restart the process."""


def interpreting() -> bool:
    """``TRITON_INTERPRET=1``: Triton runs kernels on the CPU with numpy. The harness then
    keeps tensors on the CPU and times with a wall clock, which checks every step of a
    row (loading, binding, launching, the comparison with the reference) on a machine
    without a GPU; the times mean nothing."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def _device() -> str:
    return "cpu" if interpreting() else "cuda"


def _sync() -> None:
    if not interpreting():
        import torch

        torch.cuda.synchronize()


@dataclass(frozen=True)
class TimingSettings:
    l2_bytes: int | None = None  # None: read from the device (60 MB on an H200)
    rotate_factor: float = 2.0  # data touched per timing pass >= this x L2
    min_sets: int = 2
    max_sets: int = 64
    memory_fraction: float = 0.5  # of free GPU memory the input sets may take
    graph_ms: float = 2.0  # launches per replay: enough for ~this many ms
    max_graph_launches: int = 256
    target_ms: float = 120.0  # timed replays per config: about this much GPU time
    min_reps: int = 5
    max_reps: int = 60


#: ``full`` is harness 1.0.0's timing (about 120 ms of replays per config); ``fast``
#: (1.1.0's default) replays ~1 ms graphs for ~30 ms, at least 10 times. The replays'
#: p10-p90 spread stays the stored noise figure of each result either way; the 1.1.0
#: batch re-timed rows of a 1.0.0 batch to show the two agree within it (RESULTS.md).
TIMING_PRESETS: dict[str, TimingSettings] = {
    "full": TimingSettings(),
    "fast": TimingSettings(graph_ms=1.0, target_ms=30.0, min_reps=10, max_reps=40),
}


def _driver_version() -> str | None:
    """The NVIDIA driver's version (torch does not expose it): NVML, else nvidia-smi."""
    with contextlib.suppress(Exception):
        import pynvml  # nvidia-ml-py, present on the GPU image

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    with contextlib.suppress(Exception):
        import subprocess

        res = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        if res.returncode == 0 and res.stdout.strip():
            return res.stdout.strip().splitlines()[0]
    return None


def environment() -> dict[str, Any]:
    """Device, driver and library versions stored with every result."""
    import torch
    import triton

    if interpreting():
        return {
            "device": "cpu (TRITON_INTERPRET=1)",
            "torch": torch.__version__,
            "triton": triton.__version__,
        }
    props = torch.cuda.get_device_properties(0)
    return {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "driver": _driver_version(),
        "sm": f"{props.major}.{props.minor}",
        "l2_bytes": int(getattr(props, "L2_cache_size", 0) or 0),
    }


# -- inputs -------------------------------------------------------------------------


def _torch_dtype(name: str) -> Any:
    """The torch dtype of a ``TensorSpec`` dtype. Under the CPU interpreter bf16 *inputs*
    are fp16 instead: Triton's interpreter (3.6) misreads bf16 loads, and the point of
    that mode is to check the plumbing, not the numerics."""
    import torch

    return {
        "bf16": torch.float16 if interpreting() else torch.bfloat16,
        "fp8": torch.float8_e4m3fn,
        "f32": torch.float32,
        "i32": torch.int32,
    }[name]


def _quantise_rows(x: Any, quant: str, block: tuple[int, int] | None) -> tuple[Any, Any]:
    """Activations ``[rows, k]`` fp32 -> (fp8, scale) the way the runtimes quantise
    them: per tensor, per token (channel mode) or per token and ``block_k`` group."""
    import torch

    if quant == "fp8_tensor":
        s = scale_per_tensor(x)
        full = s
    elif quant == "fp8_channel":
        s = scale_per_row(x)
        full = s
    else:
        assert block is not None
        s = scale_groups(x, block[1])
        full = expand_groups(s, block[1], x.shape[-1])
    return quantise(x, full).to(torch.float8_e4m3fn), s.float().contiguous()


def _quantise_weight(w: Any, quant: str, block: tuple[int, int] | None) -> tuple[Any, Any]:
    """Weights ``[..., n, k]`` fp32 -> (fp8, scale): per expert (tensor mode), per output
    channel ``[..., n, 1]`` or per ``block_n x block_k`` tile ``[..., nb, kb]``."""
    import torch

    if quant == "fp8_tensor":
        amax = abs(w).amax(dim=(-2, -1))
        s = (amax / 448.0).clip(min=1e-12)
        full = s[..., None, None]
    elif quant == "fp8_channel":
        s = scale_per_row(w)
        full = s
    else:
        assert block is not None
        s = scale_blocks(w, block)
        full = expand_blocks(s, block, w.shape[-2], w.shape[-1])
    return quantise(w, full).to(torch.float8_e4m3fn), s.float().contiguous()


def _dequant_a(p: GemmProblem, t: dict[str, Any]) -> Any:
    a = t["A"].float()
    if not p.fp8:
        return a
    s = t["A_scale"]
    if p.quant == "fp8_block":
        assert p.block_shape is not None
        s = expand_groups(s, p.block_shape[1], p.k)
    return dequantise(a, s)


def _dequant_b(p: GemmProblem, t: dict[str, Any], expert: int | None) -> Any:
    b = t["B"] if expert is None else t["B"][expert]
    b = b.float()
    if not p.fp8:
        return b
    s = t["B_scale"] if expert is None else t["B_scale"][expert]
    if p.quant == "fp8_tensor":
        return b * s
    if p.quant == "fp8_channel":
        return b * s
    assert p.block_shape is not None
    return b * expand_blocks(s, p.block_shape, p.n, p.k)


def problem_tensors(p: GemmProblem, routing: Routing | None, seed: int) -> dict[str, Any]:
    """One input set of a problem on the GPU (plus the empty output ``C``)."""
    import torch

    dev = torch.device(_device())
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)
    specs = {s.role: s for s in p.tensors()}
    out: dict[str, Any] = {}
    a = torch.randn(specs["A"].shape, generator=gen, device=dev, dtype=torch.float32)
    if p.fp8:
        out["A"], out["A_scale"] = _quantise_rows(a, p.quant, p.block_shape)
    else:
        out["A"] = a.to(_torch_dtype("bf16"))
    del a
    b_shape = specs["B"].shape
    std = p.k**-0.5  # keeps outputs O(1) whatever K is
    if p.kind == "block_mm":
        w = torch.randn(b_shape, generator=gen, device=dev, dtype=torch.float32) * std
        out["B"], out["B_scale"] = _quantise_weight(w, p.quant, p.block_shape)
    else:
        b = torch.empty(b_shape, device=dev, dtype=_torch_dtype(specs["B"].dtype))
        scales = (
            torch.empty(specs["B_scale"].shape, device=dev, dtype=torch.float32) if p.fp8 else None
        )
        per_expert = max(1, p.n * p.k * 4)
        chunk = max(1, min(p.experts, (512 << 20) // per_expert))  # <= 512 MB of fp32
        for e0 in range(0, p.experts, chunk):
            e1 = min(p.experts, e0 + chunk)
            w = (
                torch.randn((e1 - e0, p.n, p.k), generator=gen, device=dev, dtype=torch.float32)
                * std
            )
            if p.fp8:
                assert scales is not None
                b[e0:e1], s = _quantise_weight(w, p.quant, p.block_shape)
                scales[e0:e1] = s
            else:
                b[e0:e1] = w.to(_torch_dtype("bf16"))
            del w
        out["B"] = b
        if scales is not None:
            out["B_scale"] = scales
        assert routing is not None
        out["topk_weights"] = torch.from_numpy(routing.topk_weights).to(dev).contiguous()
    out["C"] = torch.empty(specs["C"].shape, device=dev, dtype=torch.bfloat16)
    return out


def reference(p: GemmProblem, t: dict[str, Any], routing: Routing | None) -> Any:
    """The problem's output in fp32 (TF32 off) from the dequantised inputs."""
    import torch

    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        a = _dequant_a(p, t)
        if p.kind == "block_mm":
            return a @ _dequant_b(p, t, None).T
        assert routing is not None
        flat = torch.from_numpy(routing.topk_ids.reshape(-1).astype("int64")).to(a.device)
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=p.experts).tolist()
        out = torch.zeros((p.num_pairs, p.n), device=a.device, dtype=torch.float32)
        start = 0
        for e, c in enumerate(counts):
            if not c:
                continue
            pairs = order[start : start + c]
            start += c
            out[pairs] = a[pairs // p.top_k] @ _dequant_b(p, t, e).T
        if p.mul_routed_weight:
            out *= t["topk_weights"].reshape(-1, 1)
        return out
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def rel_error(out: Any, ref: Any) -> float:
    """||out - ref|| / ||ref|| in fp32; NaN if any output element is not finite."""
    import torch

    o = out.float()
    if not bool(torch.isfinite(o).all()):
        return math.nan
    den = float(torch.linalg.vector_norm(ref))
    num = float(torch.linalg.vector_norm(o - ref))
    return num / max(den, 1e-30)


# -- one row ------------------------------------------------------------------------


def _n_sets(bytes_per_set: int, settings: TimingSettings) -> int:
    import torch

    if interpreting():
        return settings.min_sets
    l2 = settings.l2_bytes
    if l2 is None:
        l2 = (
            int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 0) or 60 * 2**20
        )
    want = math.ceil(settings.rotate_factor * l2 / max(1, bytes_per_set))
    free, _ = torch.cuda.mem_get_info()
    fit = int(settings.memory_fraction * free // max(1, bytes_per_set))
    return max(1, min(max(settings.min_sets, want), settings.max_sets, fit))


def _classify(exc: BaseException) -> str:
    """Which failure an exception from compiling or launching means."""
    name = type(exc).__name__
    text = str(exc).lower()
    if "OutOfResources" in name or "out of resource" in text:
        return OUT_OF_RESOURCES
    module = type(exc).__module__ or ""
    if module.startswith("triton") or "compil" in text or "ptxas" in text:
        return COMPILE_FAILED
    return LAUNCH_FAILED


def _context_alive() -> bool:
    import torch

    if interpreting():
        return True
    try:
        torch.cuda.synchronize()
        return float(torch.ones(1, device="cuda").add_(1).item()) == 2.0
    except Exception:  # noqa: BLE001 - any failure here means the context is gone
        return False


class _RowRunner:
    """Inputs and reference of one row, reused by all its candidates."""

    def __init__(self, row: MeasureRow, kernel: LoadedKernel, settings: TimingSettings) -> None:
        self.row = row
        self.kernel = kernel
        self.settings = settings
        self.problems = problems_for(row)
        self.routing = row_routing(row)
        first = [
            problem_tensors(p, self.routing, row.seed + 7919 * i)
            for i, p in enumerate(self.problems)
        ]
        bytes_per_set = sum(t.numel() * t.element_size() for d in first for t in d.values())
        self.n_sets = _n_sets(bytes_per_set, settings)
        self.sets = [first] + [
            [
                problem_tensors(p, self.routing, row.seed + 7919 * i + 104729 * s)
                for i, p in enumerate(self.problems)
            ]
            for s in range(1, self.n_sets)
        ]
        self.bytes_per_set = bytes_per_set
        self.refs = [reference(p, first[i], self.routing) for i, p in enumerate(self.problems)]
        self._int_cache: dict[tuple, Any] = {}
        _sync()

    def _args(self, launch: Launch, tensors: dict[str, Any]) -> dict[str, Any]:
        import torch
        import triton.language as tl

        out: dict[str, Any] = {}
        for name, value in launch.args.items():
            if isinstance(value, TensorRef):
                if value.role in launch.int_data:
                    data = launch.int_data[value.role]
                    key = (value.role, data.shape, data.tobytes())
                    cached = self._int_cache.get(key)
                    if cached is None:
                        cached = torch.from_numpy(data).to(_device())
                        self._int_cache[key] = cached
                    out[name] = cached
                else:
                    out[name] = tensors[value.role]
            elif isinstance(value, DTypeRef):
                out[name] = getattr(tl, value.name)
            else:
                out[name] = value
        return out

    def measure(self, cand: Candidate, index: int) -> Measurement:
        """Check and time one candidate; every failure comes back as a status."""
        planned = self._plan(cand, index)
        if isinstance(planned, Measurement):
            return planned
        launches, notes = planned
        per_set = [
            [self._args(lch, self.sets[s][i]) for i, lch in enumerate(launches)]
            for s in range(self.n_sets)
        ]
        compile_failure = self._compile(cand, index, launches, per_set[0], notes)
        if compile_failure is not None:
            return compile_failure
        checked = self._check(cand, index, launches, per_set[0], notes)
        if isinstance(checked, Measurement):
            return checked
        return self._time(cand, index, launches, per_set, notes, checked)

    def _plan(
        self, cand: Candidate, index: int
    ) -> tuple[list[Launch], tuple[str, ...]] | Measurement:
        """The candidate's launches and notes, or the failure of a config the harness
        refuses or cannot bind to the kernel's signature."""
        row, label = self.row, cand.label
        try:
            cfg, notes = normalise_config(cand.config)
        except ConfigError as exc:
            return failed(row.id, label, cand.config, INVALID_CONFIG, exc.reason, index)
        try:
            launches = plan_launches(row, cfg, self.kernel.signature, self.routing)
        except BindError as exc:
            return failed(row.id, label, cand.config, HARNESS_ERROR, exc.reason, index)
        notes = tuple(dict.fromkeys((*notes, *(n for lch in launches for n in lch.notes))))
        return launches, notes

    def _compile(
        self,
        cand: Candidate,
        index: int,
        launches: list[Launch],
        args0: list[dict[str, Any]],
        notes: tuple[str, ...],
    ) -> Measurement | None:
        """1. compile (warm-up compiles without launching); a failure is classified."""
        fn = self.kernel.fn
        for lch, args in zip(launches, args0, strict=True):
            if interpreting():
                break
            try:
                fn.warmup(grid=lch.grid, **args, **lch.options)
            except Exception as exc:  # noqa: BLE001 - classified, never raised
                return failed(
                    self.row.id,
                    cand.label,
                    cand.config,
                    _classify(exc),
                    f"{type(exc).__name__}: {exc}",
                    index,
                    notes=list(notes),
                )
        return None

    def _check(
        self,
        cand: Candidate,
        index: int,
        launches: list[Launch],
        args0: list[dict[str, Any]],
        notes: tuple[str, ...],
    ) -> list[float] | Measurement:
        """2. one checked launch per GEMM on set 0, output poisoned first: the relative
        error of each GEMM, or the failure of a launch or of a wrong result."""
        row, label = self.row, cand.label
        fn = self.kernel.fn
        errors: list[float] = []
        for i, (lch, args) in enumerate(zip(launches, args0, strict=True)):
            args["c_ptr" if "c_ptr" in args else "C"].fill_(float("nan"))
            try:
                fn[lch.grid](**args, **lch.options)
                _sync()
            except Exception as exc:  # noqa: BLE001
                status = _classify(exc)
                return failed(
                    row.id,
                    label,
                    cand.config,
                    status,
                    f"{type(exc).__name__}: {exc}",
                    index,
                    notes=list(notes),
                    context_lost=not _context_alive(),
                )
            err = rel_error(args["c_ptr" if "c_ptr" in args else "C"], self.refs[i])
            errors.append(err)
            tol = TOLERANCE[self.problems[i].quant]
            if not err <= tol:  # NaN fails too
                why = (
                    "output has non-finite or unwritten elements"
                    if math.isnan(err)
                    else f"relative error {err:.3g} > {tol:g}"
                )
                m = failed(
                    row.id,
                    label,
                    cand.config,
                    WRONG_RESULT,
                    f"{lch.problem} GEMM: {why}",
                    index,
                    notes=list(notes),
                )
                return replace(m, rel_err=None if math.isnan(err) else err)
        return errors

    def _time(
        self,
        cand: Candidate,
        index: int,
        launches: list[Launch],
        per_set: list[list[dict[str, Any]]],
        notes: tuple[str, ...],
        errors: list[float],
    ) -> Measurement:
        """3. time: every input set's launches in turn (``time_calls``), as a result."""
        row, label = self.row, cand.label
        fn = self.kernel.fn

        def call(s: int) -> Callable[[], None]:
            def run() -> None:
                for lch, args in zip(launches, per_set[s], strict=True):
                    fn[lch.grid](**args, **lch.options)

            return run

        try:
            t_us, timing = time_calls([call(s) for s in range(self.n_sets)], self.settings)
        except Exception as exc:  # noqa: BLE001
            return failed(
                row.id,
                label,
                cand.config,
                LAUNCH_FAILED,
                f"timing failed: {type(exc).__name__}: {exc}",
                index,
                context_lost=not _context_alive(),
            )
        flops = sum(p.flops() for p in self.problems)
        return Measurement(
            row_id=row.id,
            label=label,
            config=dict(cand.config),
            status=OK,
            t_us=t_us,
            rel_err=max(errors) if errors else None,
            index=index,
            details={
                **timing,
                "n_sets": self.n_sets,
                "bytes_per_set": self.bytes_per_set,
                "tflops": round(flops / (t_us * 1e-6) / 1e12, 2),
                "grid": [list(lch.grid) for lch in launches],
                "notes": list(notes),
            },
        )


def time_calls(
    calls: Sequence[Callable[[], None]], settings: TimingSettings
) -> tuple[float, dict[str, Any]]:
    """Median time of one call in microseconds, cycling through ``calls`` (one per input
    set) inside a CUDA graph; falls back to plain stream launches if capture fails."""
    import torch

    n = len(calls)
    if interpreting():
        started = time.perf_counter()
        for c in calls:
            c()
        per = (time.perf_counter() - started) / n * 1e6
        return per, {"mode": "interpreter", "launches": n, "reps": 1, "spread": None}
    for c in calls:  # warm-up outside any capture
        c()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for c in calls:
        c()
    end.record()
    torch.cuda.synchronize()
    est_ms = max(start.elapsed_time(end) / n, 1e-4)
    launches = int(min(settings.max_graph_launches, max(n, math.ceil(settings.graph_ms / est_ms))))
    reps = int(
        min(
            settings.max_reps,
            max(settings.min_reps, math.ceil(settings.target_ms / (launches * est_ms))),
        )
    )

    def body() -> None:
        for j in range(launches):
            calls[j % n]()

    mode = "cuda_graph"
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            body()
        graph.replay()
        torch.cuda.synchronize()
        run: Callable[[], None] = graph.replay
    except Exception:  # noqa: BLE001 - fall back to stream launches
        torch.cuda.synchronize()
        mode, run = "stream", body
        run()
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(reps)
    ]
    for s, e in events:
        s.record()
        run()
        e.record()
    torch.cuda.synchronize()
    per_call = sorted(s.elapsed_time(e) / launches * 1000.0 for s, e in events)
    med = statistics.median(per_call)
    lo = per_call[max(0, int(0.1 * (reps - 1)))]
    hi = per_call[min(reps - 1, math.ceil(0.9 * (reps - 1)))]
    return med, {
        "mode": mode,
        "launches": launches,
        "reps": reps,
        "spread": round((hi - lo) / med, 4) if med else None,
    }


def measure_candidates(
    row: MeasureRow,
    cands: Sequence[Candidate],
    *,
    settings: TimingSettings | None = None,
    on_result: Callable[[Measurement], None] | None = None,
    on_attempt: Callable[[Candidate], None] | None = None,
    deadline: float | None = None,
    indices: Sequence[int] | None = None,
) -> list[Measurement]:
    """Measure every candidate of a row (in order). Never raises for a bad config or a
    bad row; raises ``CudaContextLost`` only when the process must restart.

    ``on_attempt`` is called before a candidate runs and ``on_result`` after, so a
    caller can record which config was running if the process dies; candidates not
    started by ``deadline`` (``time.monotonic()``) are left out of the result.
    """
    settings = settings or TimingSettings()
    idx = list(indices) if indices is not None else list(range(len(cands)))
    results: list[Measurement] = []

    def emit(m: Measurement) -> None:
        results.append(m)
        if on_result is not None:
            on_result(m)

    runner = _row_runner(row, settings)
    if isinstance(runner, str):  # the row cannot be measured: every candidate fails
        for i, c in zip(idx, cands, strict=True):
            emit(failed(row.id, c.label, c.config, HARNESS_ERROR, runner, i))
        return results
    import torch

    try:
        for i, cand in zip(idx, cands, strict=True):
            if deadline is not None and time.monotonic() > deadline:
                break
            if on_attempt is not None:
                on_attempt(cand)
            started = time.monotonic()
            m = runner.measure(cand, i)
            m.details["elapsed_s"] = round(time.monotonic() - started, 3)
            emit(m)
            if m.details.get("context_lost"):
                raise CudaContextLost(f"{cand.label}: {m.reason}")
    finally:
        del runner
        with contextlib.suppress(Exception):
            torch.cuda.empty_cache()
    return results


def _row_runner(row: MeasureRow, settings: TimingSettings) -> _RowRunner | str:
    """The row's runner (its kernel loaded, inputs and reference built), or why the row
    cannot be measured at all; raises ``CudaContextLost`` when building the inputs
    failed because the CUDA context is gone."""
    problem = row.problem_error()
    if problem:
        return problem
    try:
        import torch

        if not interpreting() and not torch.cuda.is_available():
            return "no CUDA GPU"
    except ImportError:
        return "torch is not installed"
    try:
        kernel = load_kernel(row.kernel_source, row.kernel)
    except KernelSourceError as exc:
        return exc.reason
    try:
        return _RowRunner(row, kernel, settings)
    except Exception as exc:  # noqa: BLE001 - inputs/reference failed: the row's problem
        if not _context_alive():
            raise CudaContextLost(str(exc)) from exc
        return f"building inputs failed: {type(exc).__name__}: {exc}"


def precompile(items: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> list[str]:
    """Compile (row, config) pairs into Triton's on-disk cache without launching, so the
    timing process later loads them instead of compiling one by one. Runs in worker
    processes of the batch runner; any failure is returned as text, never raised (the
    timing pass meets the same failure and classifies it)."""
    import torch
    import triton.language as tl

    out: list[str] = []
    tiny: dict[str, Any] = {}
    for row_json, config in items:
        try:
            row = MeasureRow.from_json(row_json)
            kernel = load_kernel(row.kernel_source, row.kernel)
            cfg, _ = normalise_config(config)
            routing = row_routing(row)
            for lch, p in zip(
                plan_launches(row, cfg, kernel.signature, routing), problems_for(row), strict=True
            ):
                dtypes = {s.role: s.dtype for s in p.tensors()}
                dtypes.update(
                    {
                        "sorted_token_ids": "i32",
                        "expert_ids": "i32",
                        "num_tokens_post_padded": "i32",
                    }
                )
                args: dict[str, Any] = {}
                for name, value in lch.args.items():
                    if isinstance(value, TensorRef):
                        dt = dtypes[value.role]
                        if dt not in tiny:
                            tiny[dt] = torch.zeros(16, device=_device(), dtype=_torch_dtype(dt))
                        args[name] = tiny[dt]
                    elif isinstance(value, DTypeRef):
                        args[name] = getattr(tl, value.name)
                    else:
                        args[name] = value
                kernel.fn.warmup(grid=lch.grid, **args, **lch.options)
            out.append("ok")
        except Exception as exc:  # noqa: BLE001 - reported, the timing pass re-classifies
            out.append(f"{type(exc).__name__}: {str(exc)[:200]}")
    return out
