"""Output comparison against the oracle, per output with its tolerance.

An output passes when every element satisfies |x - o| <= atol + rtol * |o| (NaN where the
oracle is NaN, equal infinities), compared in float64 after upcasting both sides, so an
fp8/bf16 output is compared at its own precision's tolerance and never at float32's; in
slices of ``CHUNK`` elements, so a large output's float64 copies never outgrow a warm-up
shard's share of the card."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..specs.base import DEFAULT_TOLERANCE


def tolerance_for(name: str, tensor: Any, overrides: Mapping[str, tuple[float, float]]) -> Any:
    if name in overrides:
        return overrides[name]
    return DEFAULT_TOLERANCE.get(str(tensor.dtype), (0.0, 0.0))


def compare(
    out: Mapping[str, Any], oracle: Mapping[str, Any], overrides: Mapping[str, tuple[float, float]]
) -> dict[str, Any]:
    """{"ok", "max_abs_err", "worst", "why"} over every output the oracle has."""
    worst, worst_name, why = 0.0, "", ""
    ok = True
    for name, ref in oracle.items():
        got = out.get(name)
        if got is None or tuple(got.shape) != tuple(ref.shape):
            return {"ok": False, "max_abs_err": None, "worst": name, "why": f"{name}: shape"}
        atol, rtol = tolerance_for(name, ref, overrides)
        m, n_bad = _max_err_and_misses(
            got.detach().reshape(-1), ref.detach().reshape(-1), atol, rtol
        )
        if m > worst or not worst_name:
            worst, worst_name = m, name
        if n_bad:
            ok = False
            why = why or f"{name}: {n_bad}/{ref.numel()} beyond atol={atol} rtol={rtol}"
    return {"ok": ok, "max_abs_err": worst, "worst": worst_name, "why": why}


#: Elements compared at once: float64 copies of a whole 0.5G-element output (DeepSeek-V4's
#: 8k x 128 x 512 attention output) held ~20 GB, more than a warm-up shard's share of the
#: card (s04: its rows ran out of memory there); slices of 2^24 hold ~0.6 GB.
CHUNK = 2**24


def _max_err_and_misses(got: Any, ref: Any, atol: float, rtol: float) -> tuple[float, int]:
    """(max |got - ref|, elements beyond atol + rtol * |ref|) of two flat tensors, slice by
    slice, in float64 (the same element-wise rule as one pass over the whole)."""
    import torch

    worst, misses = 0.0, 0
    for lo in range(0, ref.numel(), CHUNK):
        a, b = got[lo : lo + CHUNK].double(), ref[lo : lo + CHUNK].double()
        same = (a == b) | (torch.isnan(a) & torch.isnan(b))
        err = torch.where(same, torch.zeros_like(a), (a - b).abs())
        err = torch.nan_to_num(err, nan=float("inf"))
        misses += int((err > atol + rtol * b.abs().nan_to_num(0.0)).sum())
        worst = max(worst, float(err.max()))
    return worst, misses
