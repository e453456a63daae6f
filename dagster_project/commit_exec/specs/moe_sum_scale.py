"""Spec for SGLang 515ef4fa and its re-land 3712abfa (issue 35): the top-k reduction at the
end of the Triton fused MoE with DeepSeek's routed scaling factor folded in
(``fused_moe_triton/fused_moe.py``'s new ``moe_sum_reduce_triton`` and
``moe_sum_reduce_torch_compile``).

Both commits only add the launchers (the census finds none in both versions); what they
replace is, at ``sha^``, ``fused_experts_impl``'s ``torch.sum`` over the top-k axis into the
output and DeepSeek-V2's ``final_hidden_states *= routed_scaling_factor`` after it. The
before side runs that sum and that multiply; the after side calls what the commit's
``fused_experts_impl`` calls for top-k > 2 on CUDA: the ``torch.compile`` version for at
most 32 tokens, the Triton kernel above. The sides write into the same kind of output
buffer, which is compared. Torch reference: the sum in fp32 times the factor, rounded once
(our own writing). No path of the new functions is left unchanged: the runner times an A/A
control.

Shapes: DeepSeek-V3 / R1 (top-8, hidden 7168, factor 2.5) decode and prefill, and
DeepSeek-V2-Lite (top-6, hidden 2048, factor 1.0).
"""

from __future__ import annotations

from typing import Any

from .base import Inputs, Outputs, Shape, Spec

_PATH = "python/sglang/srt/layers/moe/fused_moe_triton/fused_moe.py"


def _torch() -> Any:
    import torch

    return torch


def _sum_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """``intermediate_cache3``: each token's top-k expert outputs, already weighted by
    their routing weights (bf16, ~0.3 each), and the output buffer."""
    torch = _torch()
    t, k, h = shape["tokens"], shape["topk"], shape["hidden"]
    cache = torch.randn(t, k, h, generator=gen, device=device) * 0.3
    return {
        "cache3": cache.to(torch.bfloat16),
        "out": torch.empty(t, h, dtype=torch.bfloat16, device=device),
        "factor": float(shape["factor"]),
    }


def _sum_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    torch = _torch()
    cache, out, factor = x["cache3"], x["out"], x["factor"]
    triton_sum = getattr(mod, "moe_sum_reduce_triton", None)
    if triton_sum is None:  # before: fused_experts_impl's sum, then the model's scaling
        torch.sum(cache.view(*cache.shape), dim=1, out=out)
        out *= factor
    elif cache.shape[0] <= 32:  # after, as fused_experts_impl picks for small batches
        mod.moe_sum_reduce_torch_compile(cache.view(*cache.shape), out, factor)
    else:
        triton_sum(cache.view(*cache.shape), out, factor)
    return {"out": out}


def _sum_reference(x: Inputs) -> Outputs:
    return {"out": (x["cache3"].float().sum(1) * x["factor"]).to(x["out"].dtype)}


def _shape(name: str, tokens: int, why: str, **kw: Any) -> Shape:
    dims = {"topk": 8, "hidden": 7168, "factor": 2.5, **kw}
    return {"name": name, "source": why, "tokens": tokens, **dims}


_V3 = "DeepSeek-V3 (top-8 of 256, hidden 7168, routed_scaling_factor 2.5)"

MOE_SUM_SCALE = Spec(
    name="sglang_moe_sum_reduce_scaled",
    launcher="moe_sum_reduce_triton",
    rows=(("sglang", "515ef4fa", _PATH), ("sglang", "3712abfa", _PATH)),
    shapes=(
        _shape("dsv3-decode-b16", 16, _V3 + ", decode (the torch.compile path)"),
        _shape("dsv3-decode-b128", 128, _V3 + ", decode"),
        _shape("dsv3-prefill-4k", 4096, _V3 + ", a 4k-token prefill chunk"),
        _shape(
            "dsv2-lite-prefill-2k",
            2048,
            "DeepSeek-V2-Lite (top-6 of 64, hidden 2048, factor 1.0), prefill",
            topk=6,
            hidden=2048,
            factor=1.0,
        ),
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([3, 31, 33, 200]),
        "topk": r.choice([3, 6, 8]),
        "hidden": r.choice([256, 1000, 2048]),
        "factor": r.choice([1.0, 2.5]),
    },
    make_inputs=_sum_inputs,
    call=_sum_call,
    reference=_sum_reference,
    mutated=("out",),
    tolerance_why="a sum of up to 8 bf16 values in fp32 and one multiply: the before side "
    "rounds the sum to bf16 and then the scaled value again, the after side once; dtype "
    "defaults (4 bf16 ulp)",
)

SPECS: tuple[Spec, ...] = (MOE_SUM_SCALE,)
