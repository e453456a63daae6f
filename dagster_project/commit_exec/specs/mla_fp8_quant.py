"""Spec for SGLang bdde2375 (issue 35): per-tensor fp8 quantisation of DeepSeek MLA's
absorbed activations in two Triton kernels (``quantization/fp8_kernel.py``'s new
``per_tensor_quant_mla_fp8``).

The commit only adds the launcher; what it replaces is the call at ``sha^`` in DeepSeek-V2's
fp8 absorbed-MLA path (``q_nope`` before the ``w_kc`` bmm, the attention output before
``w_vc``): ``quantization/fp8_utils.py``'s ``input_to_float8`` on the head-major transposed
view (an ``aminmax``, a scale, a scaled clamp and a cast in torch). The before side runs that
sibling at ``sha^``; the after side the new launcher on the same view, as the commit's model
code does. Both return the fp8 tensor ``[heads, tokens, dim]`` and the dequantisation scale.
Torch reference: per-tensor quantisation in fp32 (our own writing).

Shapes: DeepSeek-V3 / R1 MLA at tensor parallel 8 (16 heads; ``qk_nope_head_dim`` 128 for
``q_nope``, ``kv_lora_rank`` 512 for the attention output), decode and prefill batches.
"""

from __future__ import annotations

from typing import Any

from .base import Inputs, Outputs, Shape, Spec

_DSV3 = "DeepSeek-V3 fp8 absorbed MLA at TP 8 (16 heads)"
_FP8_UTILS = "python/sglang/srt/layers/quantization/fp8_utils.py"


def _torch() -> Any:
    import torch

    return torch


def _quant_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """The activation ``[tokens, heads, dim]`` (bf16, a few large channels as real
    activations have), handed on as its head-major transposed view."""
    torch = _torch()
    t, h, d = shape["tokens"], shape["heads"], shape["dim"]
    x = torch.randn(t, h, d, generator=gen, device=device)
    x[..., :: max(1, d // 8)] *= 6.0
    return {"x": x.to(torch.bfloat16).transpose(0, 1)}


def _quant_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    torch = _torch()
    fused = getattr(mod, "per_tensor_quant_mla_fp8", None)
    if fused is not None:  # after: the two-kernel launcher
        q, s = fused(x["x"], dtype=torch.float8_e4m3fn)
    else:  # before: the model's torch quantisation, fp8_utils at sha^
        utils = mod._ce_sibling("sglang.srt.layers.quantization.fp8_utils")
        q, s = utils.input_to_float8(x["x"], torch.float8_e4m3fn)
    return {"x_q": q, "scale": s.reshape(1).float()}


def _quant_reference(x: Inputs) -> Outputs:
    torch = _torch()
    v = x["x"].float()
    fp8_max = torch.finfo(torch.float8_e4m3fn).max
    scale = v.abs().amax().clamp(min=1e-12) / fp8_max
    q = (v / scale).clamp(-fp8_max, fp8_max).to(torch.float8_e4m3fn)
    return {"x_q": q, "scale": scale.reshape(1)}


def _shape(name: str, tokens: int, dim: int, why: str) -> Shape:
    return {"name": name, "source": f"{_DSV3}, {why}", "tokens": tokens, "heads": 16, "dim": dim}


MLA_FP8_QUANT = Spec(
    name="sglang_per_tensor_quant_mla_fp8",
    launcher="per_tensor_quant_mla_fp8",
    rows=(("sglang", "bdde2375", "python/sglang/srt/layers/quantization/fp8_kernel.py"),),
    siblings={"": (_FP8_UTILS,)},
    shapes=(
        _shape("dsv3-tp8-q-nope-decode-b64", 64, 128, "q_nope, decode, 64 requests"),
        _shape("dsv3-tp8-q-nope-decode-b256", 256, 128, "q_nope, decode, 256 requests"),
        _shape("dsv3-tp8-attn-out-decode-b128", 128, 512, "attention output, decode"),
        _shape("dsv3-tp8-q-nope-prefill-4k", 4096, 128, "q_nope, a 4k-token prefill chunk"),
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 9, 100]),
        "heads": r.choice([1, 4, 16]),
        "dim": r.choice([64, 128, 512]),
    },
    make_inputs=_quant_inputs,
    call=_quant_call,
    reference=_quant_reference,
    tolerance={"x_q": (2e-3, 0.126), "scale": (0.0, 8e-3)},
    tolerance_why="the before side rounds the scale 448/amax to bf16, which torch's bf16 "
    "division can reach through two roundings (448 * bf16(1/amax): seen 18.875 for 18.963, "
    "0.47%), and each x * scale to bf16, before the cast to e4m3; the after side keeps both "
    "in fp32: scales agree to two bf16 ulps (2 * 2^-8, 8e-3 relative) and a quantised value "
    "may land one e4m3 step away (12.5% relative, or one subnormal step, 2^-9, near zero)",
)

SPECS: tuple[Spec, ...] = (MLA_FP8_QUANT,)
