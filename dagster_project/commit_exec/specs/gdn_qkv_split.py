"""Spec for SGLang 3ea1ba5b (issue 35): splitting the GDN layer's packed post-conv ``q | k |
v`` projection into the three contiguous ``[1, T, H, D]`` tensors the FLA chunked-prefill
kernels take, in one Triton kernel (``jit_kernel/triton/gdn_fused_proj.py``'s new
``fused_qkv_split_gdn_prefill``).

The commit only adds the launcher; what it replaces is the prefill path at ``sha^``
(``linear/gdn_backend.py``): ``torch.split`` and ``view`` of the packed tensor, then one
contiguous copy per part when the FLA launchers' input guard receives the strided views
(the three ``aten::copy_`` the launcher's docstring says it replaces). The before side runs
exactly that split, views and copies; the after side calls the new launcher, as the
backend does where ``q + k + v`` dims are at most 8,192. The packed tensor is a transposed
view, as the causal conv hands it on (the channel axis contiguous per token: stride
``(1, T)``). Torch reference: the three column ranges, reshaped (our own writing). No path
is left unchanged: the runner times an A/A control.

Shapes: Qwen3-Next-80B-A3B's GDN layers (16 q/k heads and 32 v heads of 128: 8,192
channels), at tensor parallel 2 and 4, prefill chunks of 2k to 16k tokens.
"""

from __future__ import annotations

from typing import Any

from .base import Inputs, Outputs, Shape, Spec

_QWEN3_NEXT = "Qwen3-Next-80B-A3B GDN (16 q/k heads, 32 v heads of 128)"


def _torch() -> Any:
    import torch

    return torch


def _split_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, hq, hv, d = shape["tokens"], shape["hq"], shape["hv"], shape.get("head", 128)
    dims = (hq * d, hq * d, hv * d)
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    backing = torch.randn(sum(dims), t, generator=gen, device=device).to(dt)
    return {"mixed_qkv": backing.t(), "heads": (hq, hq, hv), "head": d}


def _split_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    (hq, hk, hv), d, mixed = x["heads"], x["head"], x["mixed_qkv"]
    fused = getattr(mod, "fused_qkv_split_gdn_prefill", None)
    if fused is not None:  # after: one kernel
        q, k, v = fused(mixed, hq, hk, hv, d, d, d)
    else:  # before: the backend's split and views, the FLA input guard's three copies
        t = mixed.shape[0]
        q, k, v = _split_views(mixed, (hq, hk, hv), d)
        q, k, v = (p.view(1, t, -1, d).contiguous() for p in (q, k, v))
    return {"q": q, "k": k, "v": v}


def _split_views(mixed: Any, heads: tuple[int, int, int], d: int) -> Any:
    torch = _torch()
    return torch.split(mixed, [h * d for h in heads], dim=-1)


def _split_reference(x: Inputs) -> Outputs:
    (hq, hk, hv), d, mixed = x["heads"], x["head"], x["mixed_qkv"]
    t = mixed.shape[0]
    q_end, k_end = hq * d, (hq + hk) * d
    return {
        "q": mixed[:, :q_end].reshape(1, t, hq, d).contiguous(),
        "k": mixed[:, q_end:k_end].reshape(1, t, hk, d).contiguous(),
        "v": mixed[:, k_end:].reshape(1, t, hv, d).contiguous(),
    }


def _shape(name: str, tokens: int, hq: int, hv: int, why: str) -> Shape:
    return {"name": name, "source": f"{_QWEN3_NEXT}, {why}", "tokens": tokens, "hq": hq, "hv": hv}


GDN_QKV_SPLIT = Spec(
    name="sglang_gdn_fused_qkv_split",
    launcher="fused_qkv_split_gdn_prefill",
    rows=(("sglang", "3ea1ba5b", "python/sglang/jit_kernel/triton/gdn_fused_proj.py"),),
    shapes=(
        _shape("qwen3-next-prefill-8k", 8192, 16, 32, "an 8k-token prefill chunk"),
        _shape("qwen3-next-prefill-2k", 2048, 16, 32, "a 2k-token prefill chunk"),
        _shape("qwen3-next-tp2-prefill-16k", 16384, 8, 16, "TP 2, a 16k-token chunk"),
        _shape("qwen3-next-tp4-prefill-8k", 8192, 4, 8, "TP 4, an 8k-token chunk"),
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 37, 300]),
        "hq": r.choice([1, 2]),
        "hv": r.choice([2, 4]),
        "head": r.choice([64, 128]),
    },
    make_inputs=_split_inputs,
    call=_split_call,
    reference=_split_reference,
    tolerance={"q": (0.0, 0.0), "k": (0.0, 0.0), "v": (0.0, 0.0)},
    tolerance_why="a copy of the same bf16 values into three tensors: exact",
)

SPECS: tuple[Spec, ...] = (GDN_QKV_SPLIT,)
