"""Spec for vLLM 9e19f833 (issue 35): Qwen3-Next's non-speculative GDN decode from the
packed ``mixed_qkv`` projection in one kernel (``fla/ops/fused_recurrent.py``'s new
``fused_recurrent_gated_delta_rule_packed_decode``).

The commit only adds the launcher (the census finds no launcher in both versions); what it
replaces is the model's decode path at ``sha^`` (``Qwen3NextGatedDeltaNet._forward_core``):
``rearrange_mixed_qkv`` (split into q, k, v, one contiguous copy each) and then
``fla/ops/fused_sigmoid_gating.py``'s ``fused_sigmoid_gating_delta_rule_update`` on the
state pool. The before side runs exactly that, with the sibling at ``sha^``; the after side
calls the new launcher on the packed tensor as the commit's ``_forward_core_decode_non_spec``
does (output written into the caller's buffer). Oracle: the repo's test at the sha compares
the two paths; the torch reference is ``fla``'s fp64 recurrence with the gating computed
from ``a``, ``b`` (our own writing). Shapes: Qwen3-Next-80B-A3B (16 key and 32 value heads
of 128) as in ``fla``'s decode specs, one token per request (the packed path is decode
without speculative tokens only).
"""

from __future__ import annotations

from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .fla import (
    _DECODE_SHAPES,
    _GDN_TOL,
    _GDN_WHY,
    _decode_inputs,
    _decode_random,
    _sigmoid_reference,
    _torch,
    _vk_layout,
)

_VL_FLA = "vllm/model_executor/layers/fla/ops"
_SIGMOID = "vllm.model_executor.layers.fla.ops.fused_sigmoid_gating"


def _packed_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """``fla._decode_inputs`` (one token per request) plus the packed projection the layer
    holds after its short conv: per token ``[q heads | k heads | v heads]`` in one row."""
    x = _decode_inputs({**shape, "tokens": 1}, gen, device)
    torch = _torch()
    total = x["v"].shape[1]
    x["mixed_qkv"] = torch.cat([x[n][0].reshape(total, -1) for n in ("q", "k", "v")], -1)
    return x


def _packed_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    torch = _torch()
    total, hv, d = x["v"].shape[1], x["v"].shape[2], x["v"].shape[3]
    packed = getattr(mod, "fused_recurrent_gated_delta_rule_packed_decode", None)
    vk = _vk_layout(mod)
    state = x["state_vk"] if vk else x["state_kv"]
    if packed is not None:  # after: the commit's fast path
        out = torch.empty(total, 1, hv, d, dtype=x["v"].dtype, device=x["v"].device)
        packed(
            mixed_qkv=x["mixed_qkv"],
            a=x["a"],
            b=x["b"],
            A_log=x["A_log"],
            dt_bias=x["dt_bias"],
            scale=x["scale"],
            initial_state=state,
            out=out,
            ssm_state_indices=x["state_idx"],
            use_qk_l2norm_in_kernel=True,
        )
        o = out.reshape(x["v"].shape)
    else:  # before: rearrange_mixed_qkv, then the fused sigmoid-gating update
        kd, vd = x["q"].shape[2] * x["q"].shape[3], hv * d
        q, k, v = torch.split(x["mixed_qkv"], [kd, kd, vd], dim=-1)
        q, k = (t.reshape(1, total, -1, x["q"].shape[3]).contiguous() for t in (q, k))
        v = v.reshape(1, total, hv, d).contiguous()
        fused = mod._ce_sibling(_SIGMOID).fused_sigmoid_gating_delta_rule_update
        o, _ = fused(
            A_log=x["A_log"],
            a=x["a"],
            b=x["b"],
            dt_bias=x["dt_bias"],
            q=q,
            k=k,
            v=v,
            initial_state=state,
            inplace_final_state=True,
            cu_seqlens=x["cu_seqlens"],
            ssm_state_indices=x["state_idx"],
            use_qk_l2norm_in_kernel=True,
        )
        o = o.reshape(x["v"].shape)
    return {"o": o, "state": state.transpose(-1, -2) if vk else state}


def _no_tokens(shape: Shape) -> bool:
    return "tokens" not in shape


GDN_PACKED_DECODE = Spec(
    name="vllm_gdn_packed_decode",
    launcher="fused_recurrent_gated_delta_rule_packed_decode",
    rows=(("vllm", "9e19f833", f"{_VL_FLA}/fused_recurrent.py"),),
    siblings={"": (f"{_VL_FLA}/fused_sigmoid_gating.py",)},
    shapes=tuple(
        {**s, "source": "Qwen3-Next-80B-A3B, non-speculative decode"}
        for s in _DECODE_SHAPES
        if _no_tokens(s)
    ),
    random_shape=lambda r: {**_decode_random(r), "tokens": 1},
    make_inputs=_packed_inputs,
    call=_packed_call,
    reference=_sigmoid_reference,
    mutated=("state_kv", "state_vk"),
    tolerance={**_GDN_TOL, "state": (6e-3, 2e-3)},
    tolerance_why="as the GDN sigmoid-gating decode spec (gating in fp32 inside both "
    "kernels): "
    + _GDN_WHY
    + "; except that the packed kernel rounds beta = sigmoid(b) to b's dtype (bf16, as "
    "vLLM's unfused gating hands it on) where the before side keeps it fp32: one bf16 "
    "rounding (2^-9 relative) of the state's update beta (v - h k) k, whose entries reach "
    "~2 (|v - h k| up to ~6, l2-normalised k entries up to ~0.35), i.e. up to ~4e-3 on "
    "the state: atol 6e-3 there (the CPU check's largest difference: 1.7e-3)",
)

SPECS: tuple[Spec, ...] = (GDN_PACKED_DECODE,)
