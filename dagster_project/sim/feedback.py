"""Environment feedback text: the ``RESULT`` turns an agent reads after each candidate.

Compile errors quote the emitted source (nvcc prints the offending line and a caret;
ptxas names the PTX instruction and the target; Triton raises ``CompilationError`` with a
relative line:col), wrong results quote max abs / rel error against the fp32 reference,
and successes report latency, speedup vs baseline and vs best, and the resource usage
the harness reads from ptxas / the Triton compiler.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable

from .hardware import GPU, min_arch_for
from .kernels import KernelPlan
from .timing import Prediction

ATOL = 1e-2
RTOL = 1e-2

#: How every CUDA template's shared-memory guard begins (``templates/cuda/_common.cuh.j2``
#: ``smem_guard``): one assertion per architecture class, its limit in KiB times 1024, so the
#: source carries the number an engineer would write rather than a project macro.
SMEM_GUARD = "static_assert(kSmemBytes <="


def hms(seconds: float) -> str:
    """``H:MM:SS`` as in the card's ``elapsed_hms``."""
    s = int(round(seconds))
    return f"{s // 3600}:{(s % 3600) // 60:02d}:{s % 60:02d}"


def stamp(seconds: float) -> str:
    return f"[t+{hms(seconds)}]"


def fmt_ms(ms: float) -> str:
    """Four significant digits, as the harness prints latencies."""
    return f"{ms:.4g}"


# --------------------------------------------------------------------------------------
# Gated features: what ptxas / Triton print when a feature is missing
# --------------------------------------------------------------------------------------


def _ptx_name(rng: random.Random) -> str:
    return f"/tmp/tmpxft_{rng.randrange(0x1000, 0xFFFF):08x}_00000000-6_candidate.ptx"


def ptxas_target(flag: str) -> str:
    """The target name ptxas prints: arch-specific 'a' targets are reported without the 'a'."""
    return flag[:-1] if flag.endswith("a") else flag


def _wgmma_errors(err: Callable[[str], None], t: str, target: str, int_mma: bool) -> None:
    """The wgmma instructions ptxas rejects on a non-Hopper target, in the order it meets them
    (sm_120 also refuses the fence for its architecture)."""
    err(f"Instruction 'wgmma.fence' not supported on {t}")
    if target == "sm_120":
        err("Instruction 'wgmma.fence' cannot be compiled for architecture 'sm_120'")
    kind = "integer types" if int_mma else "floating point types"
    err(f"Instruction 'wgmma.mma_async with {kind}' not supported on {t}")
    err(f"Instruction 'wgmma.commit_group' not supported on {t}")
    err(f"Instruction 'wgmma.wait_group' not supported on {t}")


def ptxas_feature_lines(
    features: list[str],
    flag: str,
    rng: random.Random,
    int_mma: bool = False,
    tensor_maps: bool = True,
) -> list[str]:
    """ptxas error lines for PTX features the target lacks (wording as ptxas 13 prints it)."""
    ptx = _ptx_name(rng)
    line = rng.randrange(180, 420)
    target = ptxas_target(flag)
    out: list[str] = []

    def err(msg: str) -> None:
        nonlocal line
        out.append(f"ptxas {ptx}, line {line}; error   : {msg}")
        line += rng.randrange(3, 40)

    t = f".target '{target}'"
    for f in features:
        if f == "tma":
            err(
                f"Feature '{'cp.async.bulk.tensor' if tensor_maps else 'cp.async.bulk'}' requires "
                f".target sm_90 or higher"
            )
            err("Feature '.mbarrier::complete_tx::bytes' requires .target sm_90 or higher")
            err("Feature 'mbarrier.arrive.expect_tx' requires .target sm_90 or higher")
            err("Feature 'mbarrier.try_wait.parity' requires .target sm_90 or higher")
        elif f == "wgmma":
            _wgmma_errors(err, t, target, int_mma)
        elif f == "setmaxnreg":
            err(f"Instruction 'setmaxnreg.dec' not supported on {t}")
            err(f"Instruction 'setmaxnreg.inc' not supported on {t}")
        elif f == "tma_multicast":
            err("Modifier '.multicast::cluster' requires .target sm_90 or higher")
        elif f == "fp8_mma":
            err("Feature 'mma with FP8 floating point type' requires .target sm_89 or higher")
        elif f == "fp4_mma":
            err(f"Instruction 'mma with block scale' not supported on {t}")
            err(f"Feature '.kind::mxf4nvf4' not supported on {t}")
            err(f"Feature '.block_scale' not supported on {t}")
        elif f in ("cp_async", "mma_sync"):
            err(
                f"Feature '{'cp.async' if f == 'cp_async' else 'mma'}' requires .target "
                f"{min_arch_for(f)} or higher"
            )
    out.append("ptxas fatal   : Ptx assembly aborted due to errors")
    return out


def cluster_error(code: str, flag: str) -> tuple[str, str]:
    """nvcc front end on a ``__cluster_dims__`` kernel for a target without clusters (sm_8x)."""
    lines = code.split("\n")
    idx = next(i for i, ln in enumerate(lines) if "__cluster_dims__(" in ln)
    src = lines[idx]
    col = src.index("__cluster_dims__(")
    diag = (
        f"nvcc -O3 -std=c++17 -arch={flag} -c candidate.cu\n"
        f"candidate.cu({idx + 1}): error: __cluster_dims__ is not supported for this GPU "
        f"architecture\n"
        f"  {src.rstrip()}\n  {' ' * col}^\n\n"
        f'1 error detected in the compilation of "candidate.cu".\n'
    )
    return diag, "__cluster_dims__ is not supported"


def feature_key(features: list[str], tensor_maps: bool = True) -> str:
    """Phrase a real ptxas log must contain for the first missing feature (validation)."""
    f = features[0]
    return {
        "tma": "cp.async.bulk.tensor" if tensor_maps else "cp.async.bulk",
        "wgmma": "wgmma.fence",
        "setmaxnreg": "setmaxnreg",
        "tma_multicast": ".multicast::cluster",
        "fp8_mma": "mma with FP8 floating point type",
        "fp4_mma": "mma with block scale",
        "cp_async": "cp.async",
        "mma_sync": "mma",
    }[f]


def triton_feature_error(features: list[str], gpu: GPU) -> str:
    cc = {"sm_80": "80", "sm_86": "86", "sm_90a": "90", "sm_120": "120"}[gpu.arch]
    f = features[0]
    if f == "fp8_mma":
        return (
            "triton.compiler.errors.CompilationError: at 1:0:\n"
            'ValueError("type fp8e4nv not supported in this architecture. '
            "The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')\")"
        )
    if f == "fp4_mma":
        return (
            "triton.compiler.errors.CompilationError: at 1:0:\n"
            f"NotImplementedError('dot_scaled with e2m1 operands requires block-scaled MMA "
            f"(compute capability 12.0+), got {cc}')"
        )
    if f == "wgmma":
        return (
            "triton.compiler.errors.CompilationError: at 1:0:\n"
            f"NotImplementedError('warp specialization requires wgmma "
            f"(compute capability 9.0a), got {cc}')"
        )
    return (
        "triton.compiler.errors.CompilationError: at 1:0:\n"
        f"RuntimeError('tensor descriptors lower to TMA (cp.async.bulk.tensor), "
        f"which needs compute capability >= 9.0, got {cc}')"
    )


def feature_error(
    features: list[str],
    gpu: GPU,
    impl: str,
    flag: str,
    rng: random.Random,
    int_mma: bool = False,
    tensor_maps: bool = True,
) -> str:
    if impl == "triton":
        return triton_feature_error(features, gpu)
    head = f"nvcc -O3 -std=c++17 -arch={flag} -c candidate.cu"
    return (
        head
        + "\n"
        + "\n".join(ptxas_feature_lines(features, flag, rng, int_mma, tensor_maps))
        + "\n"
    )


def smem_error(impl: str, smem: int, gpu: GPU, flag: str, code: str) -> tuple[str, str]:
    """Over-cap shared memory: nvcc static_assert (CUDA) or Triton OutOfResources.

    Returns (diagnostic, key phrase).
    """
    if impl == "triton":
        return (
            f"triton.runtime.errors.OutOfResources: out of resource: shared memory, "
            f"Required: {smem}, "
            f"Hardware limit: {gpu.smem_per_block_optin}. Reducing block sizes or "
            f"`num_stages` may help.",
            "out of resource: shared memory",
        )
    lines = code.split("\n")
    # the guard has one assertion per architecture class; nvcc reports the one whose
    # preprocessor branch the target takes, i.e. the one naming this GPU's opt-in limit
    limit = f"{SMEM_GUARD} {gpu.smem_per_block_optin // 1024} * 1024,"
    idx = next((i for i, ln in enumerate(lines) if limit in ln), None)
    if idx is None:
        raise ValueError("CUDA candidate has no shared-memory guard")
    src = lines[idx]
    message = src[src.index('"') + 1 : src.rindex('"')]
    diag = (
        f"nvcc -O3 -std=c++17 -arch={flag} -c candidate.cu\n"
        f'candidate.cu({idx + 1}): error: static assertion failed with "{message}"\n'
        f"  {src.strip()}\n  ^\n\n"
        f'1 error detected in the compilation of "candidate.cu".\n'
    )
    return diag, "static assertion failed"


# --------------------------------------------------------------------------------------
# Wrong results
# --------------------------------------------------------------------------------------

_BUG_PROFILE = {
    # (fraction of outputs wrong (lo, hi), relative error magnitude (lo, hi))
    "missing_sync": ((0.001, 0.05), (0.2, 3.0)),
    "no_tail_mask": ((0.002, 0.03), (0.5, 50.0)),
    "splitk_race": ((0.3, 0.95), (0.3, 0.9)),
    "no_rescale": ((0.7, 1.0), (0.1, 0.8)),
    "eps_outside": ((0.02, 0.2), (0.011, 0.06)),
    "wrong_scale": ((0.5, 1.0), (0.3, 8.0)),
    "wrong_index": ((0.2, 0.9), (0.5, 4.0)),
    "stale_max": ((0.05, 0.4), (1.0, 1.0)),
    "state_reset": ((0.5, 1.0), (0.2, 1.5)),
}


def wrong_result(
    bug: str,
    out_name: str,
    dims: tuple[int, ...],
    rng: random.Random,
    tail_index: tuple[int, ...] | None = None,
) -> str:
    total = 1
    for d in dims:
        total *= d
    (flo, fhi), (rlo, rhi) = _BUG_PROFILE[bug]
    if out_name == "token":
        rows = dims[0]
        bad = max(1, int(round(rows * rng.uniform(flo, fhi))))
        r = rng.randrange(rows)
        return (
            f"sampled tokens differ from the reference sampler "
            f"(same uniforms) in {bad} of {rows} rows; "
            f"first at token[{r}]: got {rng.randrange(32000)}, expected {rng.randrange(32000)}\n"
            f"the selected set's probability mass is off by {rng.uniform(0.02, 0.3):.3f} on "
            f"mismatching rows"
        )
    frac = rng.uniform(flo, fhi)
    bad = max(1, min(total, int(round(total * frac))))
    rel = rng.uniform(rlo, rhi)
    expected = rng.uniform(0.05, 3.0) * (1 if rng.random() < 0.5 else -1)
    got = expected * (1 + rel * (1 if rng.random() < 0.6 else -1))
    if bug == "no_tail_mask" and tail_index is not None:
        idx = tail_index
    else:
        idx = tuple(rng.randrange(d) for d in dims)
    abs_err = abs(got - expected)
    idx_s = ", ".join(str(i) for i in idx)
    return (
        f"max_abs_err {abs_err:.2e}, max_rel_err {rel:.2e} vs fp32 reference (atol {ATOL:.0e}, "
        f"rtol {RTOL:.0e})\n"
        f"{bad} of {total} outputs mismatch; first at {out_name}[{idx_s}]: got {got:.4f}, "
        f"expected {expected:.4f}"
    )


#: The phrase every report of a configuration that fails whatever its text (a kernel measured
#: wrong or faulting) carries; bug reports (``wrong_result``) never use it, so the session
#: checker can tell the two apart by the feedback alone.
MISMATCH = "does not match the fp32 reference"

_CUDA_ERROR = re.compile(r"CUDA error: ([^.`]*?)(?:\s+Search for|\.|$)")


def failure_report(out_name: str, dims: tuple[int, ...], rel_err: float | None, error: str) -> str:
    """What the harness prints when this kernel, at this task's shape, fails its check.

    ``rel_err`` is the relative L2 error of a run that finished (None or non-finite when it
    faulted or produced non-finite values); ``error`` the runtime's message, of which only
    the CUDA error itself is quoted (no paths, device names or tool names)."""
    total = 1
    for d in dims:
        total *= d
    head = f"{out_name} [{total} values] {MISMATCH}"
    if rel_err is not None and math.isfinite(rel_err):
        return f"{head}: max_rel_err {rel_err:.3g} (rel L2 vs fp32 reference)"
    m = _CUDA_ERROR.search(error or "")
    if m:
        return f"RuntimeError: CUDA error: {m.group(1).strip()}\n{head}: no output was produced"
    if "timeout" in (error or "").lower():
        return f"{head}: the kernel did not finish within the 30 s limit"
    return f"{head}: the output holds non-finite values"


# --------------------------------------------------------------------------------------
# Successes
# --------------------------------------------------------------------------------------


def resource_line(impl: str, pred: Prediction, params: dict, kp: KernelPlan) -> str:
    if impl == "triton":
        nw = params.get("num_warps", kp.threads // 32)
        ns = params.get("num_stages", 1)
        return (
            f"triton: num_warps={nw} num_stages={ns}, {kp.smem} B shared, grid {kp.grid}, "
            f"{pred.ctas_per_sm} programs/SM, {pred.waves:.2f} waves"
        )
    spill = ""
    if kp.regs > 255:
        spill = f", {(kp.regs - 255) * 8} bytes spill stores"
    return (
        f"ptxas: {min(kp.regs, 255)} registers{spill}, {kp.smem} B smem, "
        f"{kp.threads} threads x {kp.grid} CTAs, "
        f"{pred.ctas_per_sm} CTAs/SM, {pred.waves:.2f} waves"
    )


def _runs(runs: int | str) -> str:
    """ "200 runs", or the device's own repeats as given ("30 graph replays")."""
    return f"{runs} runs" if isinstance(runs, int) else runs


def ok_result(
    time_ms: float,
    spread: float,
    runs: int | str,
    baseline_ms: float | None,
    best_ms: float | None,
    best_step: int | None,
    improved: bool,
    err: float,
    resources: str,
    check: str | None = None,
    no_baseline: bool = False,
) -> str:
    """The body of an ok result; ``check`` replaces the "correct" line of a rung that was
    never executed on this arch family (the dataset does not know that it is correct).
    ``no_baseline``: the session's baseline did not run correctly (only a measured one can
    fail), so a later step has no speedup to report, only its place against the best."""
    lines = []
    if no_baseline:
        head = f"latency {fmt_ms(time_ms)} ms (median of {_runs(runs)}, ±{spread:.1f}%)"
        if best_ms:
            tail = (
                " -> new best"
                if improved
                else f" (best stays {fmt_ms(best_ms)} ms from step {best_step})"
            )
            head += f" | {best_ms / time_ms:.2f}x vs best{tail}"
        elif improved:
            head += " -> new best"
        lines.append(head + " | no speedup: the baseline did not run correctly")
    elif baseline_ms is None:
        lines.append(
            f"latency {fmt_ms(time_ms)} ms (median of {_runs(runs)}, ±{spread:.1f}%) | baseline"
        )
    else:
        sp = baseline_ms / time_ms
        vs = best_ms / time_ms if best_ms else 1.0
        tail = (
            " -> new best"
            if improved
            else f" (best stays {fmt_ms(best_ms or 0)} ms from step {best_step})"
        )
        lines.append(
            f"latency {fmt_ms(time_ms)} ms (median of {_runs(runs)}, ±{spread:.1f}%) | "
            f"{sp:.2f}x vs baseline {fmt_ms(baseline_ms)} ms | {vs:.2f}x vs best{tail}"
        )
    if check is None:
        lines.append(f"correct: max_abs_err {err:.1e} (atol {ATOL:.0e}, rtol {RTOL:.0e})")
    else:
        lines.append(check)
    lines.append(resources)
    return "\n".join(lines)


def unverified_line(tag: str, arch: str) -> str:
    """What an unverified ok says instead of "correct" (see ``verification``).

    The harness's own words: the output was not compared, so no error figure is printed.
    Which evidence is missing, and that the time is a model's, are dataset columns (the
    step's ``status`` and the sessions' provenance), never part of the text a model reads.
    ``tag`` and ``arch`` stay in the signature for the callers; neither is printed (an
    arch named here would read as a fact about the run)."""
    del tag, arch
    return "correctness: not checked - no reference comparison was run for this configuration"


def rebench_result(
    time_ms: float,
    spread: float,
    runs: int | str,
    baseline_ms: float,
    best_ms: float,
    best_step: int,
    tag: str,
) -> str:
    return (
        f"re-measured best (step {best_step}, {tag}) over {_runs(runs)}: {fmt_ms(time_ms)} ms "
        f"(±{spread:.1f}%), "
        f"recorded {fmt_ms(best_ms)} ms | {baseline_ms / time_ms:.2f}x vs baseline "
        f"{fmt_ms(baseline_ms)} ms"
    )
