"""Output checks the parent applies to what a candidate returned (numpy, no torch).

Three questions, in this order, each failure a named defence:

1. ``exact_type``: is the output exactly the array type the task returns (``type(x) is``,
   not ``isinstance``), with the task's dtype, shape and strides? A Tensor subclass or a
   lazy object is refused before anything reads it, and an output of the wrong shape or
   strides that would broadcast in a comparison is refused instead of compared.
2. ``finite``: every element finite? NaN compares false with everything, so a check
   written as ``not (err > tol)`` would pass an all-NaN output.
3. ``tolerance``: magnitude-aware, per dtype: elementwise
   ``|out - ref| <= atol_scale * max|ref| + rtol * |ref|`` *and* the relative Frobenius
   error ``||out - ref|| / ||ref|| <= rel``. The absolute part scales with the reference,
   so a zero or constant output never passes on small outputs (with a fixed ``atol=1e-2``
   returning zeros passes 4 of 60 KernelBench level-1 problems).

The per-dtype numbers come from two correct implementations of each task (the before and
after code of the suite): their disagreement is far below these, while one precision step
down (fp16 or TF32 accumulation for an fp32 task) is far above.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: (rtol, atol as a share of max|ref|, relative Frobenius error) per output dtype.
TOLERANCES: dict[str, tuple[float, float, float]] = {
    "float64": (1e-9, 1e-12, 1e-10),
    "float32": (2e-4, 2e-5, 5e-5),
    "float16": (1e-2, 1e-3, 5e-3),
    "bfloat16": (2e-2, 4e-3, 1e-2),
}


@dataclass(frozen=True)
class Expected:
    """What the output must be: its array type's full name, dtype, shape and strides in
    elements (``None``: any strides)."""

    type_name: str
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Verdict:
    """``ok`` or the defence that failed (``exact_type``, ``finite``, ``tolerance``) and
    why, with the relative error where one was computed."""

    ok: bool
    defence: str = ""
    reason: str = ""
    rel_err: float | None = None


PASS = Verdict(True)


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides in elements."""
    out: list[int] = []
    step = 1
    for dim in reversed(shape):
        out.append(step)
        step *= max(1, int(dim))
    return tuple(reversed(out))


def check_meta(meta: Mapping[str, Any], expected: Expected) -> Verdict:
    """The output's recorded type, dtype, shape and strides against ``expected``."""
    got_type = str(meta.get("type"))
    if got_type != expected.type_name or not meta.get("exact_type", False):
        return Verdict(False, "exact_type", f"output is {got_type}, not {expected.type_name}")
    if str(meta.get("dtype")) != expected.dtype:
        return Verdict(False, "exact_type", f"dtype {meta.get('dtype')} != {expected.dtype}")
    shape = tuple(int(d) for d in meta.get("shape") or ())
    if shape != tuple(expected.shape):
        return Verdict(False, "exact_type", f"shape {shape} != {tuple(expected.shape)}")
    if expected.strides is not None:
        strides = tuple(int(s) for s in meta.get("strides") or ())
        if strides != tuple(expected.strides):
            return Verdict(False, "exact_type", f"strides {strides} != {expected.strides}")
    if meta.get("aliases_input"):
        return Verdict(False, "exact_type", "output shares memory with an input")
    return PASS


def compare(out: Any, ref: Any, dtype: str) -> Verdict:
    """``out`` (numpy, any float dtype) against the float64 ``ref``, by ``dtype``'s
    tolerances (see the module docstring)."""
    import numpy as np

    rtol, atol_share, rel = TOLERANCES[dtype]
    with np.errstate(all="ignore"):
        o = np.asarray(out, dtype=np.float64)
        r = np.asarray(ref, dtype=np.float64)
    if o.shape != r.shape:
        return Verdict(False, "exact_type", f"shape {o.shape} != reference {r.shape}")
    if not bool(np.isfinite(o).all()):
        return Verdict(False, "finite", "output has non-finite elements (NaN never compares)")
    scale = float(np.abs(r).max()) if r.size else 0.0
    diff = np.abs(o - r)
    # Frobenius norms as plain reductions, not BLAS: guard 1.6.0 checks every timed call,
    # and a multithreaded ``ddot`` per call cost the parent ~10 ms each on a busy machine
    den = float(np.sqrt(np.square(r).sum()))
    err = float(np.sqrt(np.square(diff).sum())) / max(den, 1e-300)
    if not bool((diff <= atol_share * scale + rtol * np.abs(r)).all()):
        worst = int(np.argmax(diff - rtol * np.abs(r)))
        return Verdict(
            False,
            "tolerance",
            f"element {worst}: |diff| {float(diff.flat[worst]):.3g} beyond rtol {rtol:g} and "
            f"atol {atol_share:g} x max|ref| ({scale:.3g})",
            err,
        )
    if not err <= rel:
        return Verdict(False, "tolerance", f"relative error {err:.3g} > {rel:g}", err)
    return Verdict(True, rel_err=err)


def timing_consistent(
    timed_s: float, untimed_s: float, wall_s: float, share: float = 0.75, slack_s: float = 0.005
) -> str | None:
    """Why the child's own clock under-reports the parent's wall time of a phase (``None``
    if it does not): the child's timed plus untimed seconds must cover at least ``share``
    of the parent's wall time, less ``slack_s``. One-sided: a late read of a message by a
    busy parent only lengthens the parent's figure. A clock the candidate slowed or
    stopped breaks this even when every identity survived, as long as the timed work is
    more than about a quarter of the phase and ``slack_s``: a swapped clock on kernels far
    faster than that stays below what this check can see (the card says so)."""
    if not (math.isfinite(timed_s) and math.isfinite(untimed_s)) or timed_s < 0:
        return f"child clock reported {timed_s!r} s timed, {untimed_s!r} s untimed"
    total = timed_s + untimed_s
    if total < share * wall_s - slack_s:
        return f"child clock {total:.4f} s under the parent's wall clock {wall_s:.4f} s"
    return None
