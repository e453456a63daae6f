"""Output comparison against the oracle, per output with its tolerance.

An output passes when every element satisfies |x - o| <= atol + rtol * |o| (NaN where the
oracle is NaN, equal infinities), compared in float64 after upcasting both sides, so an
fp8/bf16 output is compared at its own precision's tolerance and never at float32's."""

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
    import torch

    worst, worst_name, why = 0.0, "", ""
    ok = True
    for name, ref in oracle.items():
        got = out.get(name)
        if got is None or tuple(got.shape) != tuple(ref.shape):
            return {"ok": False, "max_abs_err": None, "worst": name, "why": f"{name}: shape"}
        atol, rtol = tolerance_for(name, ref, overrides)
        a, b = got.detach().double(), ref.detach().double()
        both_nan = torch.isnan(a) & torch.isnan(b)
        same = (a == b) | both_nan
        err = torch.where(same, torch.zeros_like(a), (a - b).abs())
        err = torch.nan_to_num(err, nan=float("inf"))
        bad = err > atol + rtol * b.abs().nan_to_num(0.0)
        m = float(err.max()) if err.numel() else 0.0
        if m > worst or not worst_name:
            worst, worst_name = m, name
        if bool(bad.any()):
            ok = False
            why = why or f"{name}: {int(bad.sum())}/{bad.numel()} beyond atol={atol} rtol={rtol}"
    return {"ok": ok, "max_abs_err": worst, "worst": worst_name, "why": why}
