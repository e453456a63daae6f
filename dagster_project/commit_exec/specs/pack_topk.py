"""Spec for vLLM b69bf2f0 (issue 35): packing MoE routing for the TRT-LLM MoE kernels under
``torch.compile`` (``fused_moe/utils.py``'s new ``trtllm_moe_pack_topk_ids_weights``).

The TRT-LLM fp8 and nvfp4 MoE backends hand the kernel one int32 per (token, expert): the
expert id in the high 16 bits and the routing weight's bf16 bits in the low 16. Before the
commit each backend computed that eagerly (a cast, a shift, a cast to bf16, a bit view, an
or: one kernel each); the commit moves the expression into ``utils.py`` under
``torch.compile(dynamic=True, backend=current_platform.simple_compile_backend)`` (inductor on
CUDA: the loader's platform stand-in answers so), which fuses it into one generated kernel.
The before side evaluates the expression eagerly, as the nvfp4 backend wrote it at ``sha^``
(the function does not exist there); the after side calls the compiled function. The runner
calls each side before timing, which compiles it. Torch reference: the packing in int64
(our own writing). No path is left unchanged: the runner times an A/A control. The
backends it serves run on Blackwell; the op itself runs anywhere and is measured on the
H100.

Shapes: DeepSeek-R1 / V3 routing (top-8 of 256) in decode and prefill batches, Qwen3-235B
(top-8 of 128).
"""

from __future__ import annotations

from typing import Any

from .base import Inputs, Outputs, Shape, Spec


def _torch() -> Any:
    import torch

    return torch


def _pack_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """topk ids (int32, distinct experts per token) and their softmax weights (fp32), as
    the router hands them on."""
    torch = _torch()
    t, k, e = shape["tokens"], shape["topk"], shape["experts"]
    logits = torch.randn(t, e, generator=gen, device=device)
    weights, ids = torch.topk(torch.softmax(logits, -1), k, dim=-1)
    return {"topk_ids": ids.to(torch.int32), "topk_weights": weights / weights.sum(-1, True)}


def _pack_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    torch = _torch()
    ids, weights = x["topk_ids"], x["topk_weights"]
    packed = getattr(mod, "trtllm_moe_pack_topk_ids_weights", None)
    if packed is not None:  # after: the compiled function
        return {"packed": packed(ids, weights)}
    # before: the backend's eager expression
    return {"packed": (ids.to(torch.int32) << 16) | weights.to(torch.bfloat16).view(torch.int16)}


def _pack_reference(x: Inputs) -> Outputs:
    torch = _torch()
    bits = x["topk_weights"].to(torch.bfloat16).view(torch.int16).to(torch.int64) & 0xFFFF
    return {"packed": (x["topk_ids"].to(torch.int64) * 65536 + bits).to(torch.int32)}


def _shape(name: str, tokens: int, topk: int, experts: int, why: str) -> Shape:
    return {"name": name, "source": why, "tokens": tokens, "topk": topk, "experts": experts}


PACK_TOPK = Spec(
    name="vllm_trtllm_moe_pack_topk",
    launcher="trtllm_moe_pack_topk_ids_weights",
    rows=(("vllm", "b69bf2f0", "vllm/model_executor/layers/fused_moe/utils.py"),),
    shapes=(
        _shape("dsr1-decode-b1", 1, 8, 256, "DeepSeek-R1 (top-8 of 256), decode, one request"),
        _shape("dsr1-decode-b256", 256, 8, 256, "DeepSeek-R1, decode, 256 requests"),
        _shape("dsr1-prefill-8k", 8192, 8, 256, "DeepSeek-R1, an 8k-token prefill chunk"),
        _shape("qwen3-235b-prefill-4k", 4096, 8, 128, "Qwen3-235B-A22B (top-8 of 128), prefill"),
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([3, 50, 700]),
        "topk": r.choice([2, 6, 8]),
        "experts": r.choice([16, 64]),
    },
    make_inputs=_pack_inputs,
    call=_pack_call,
    reference=_pack_reference,
    tolerance={"packed": (0.0, 0.0)},
    tolerance_why="integer bit packing of the same bf16 rounding of each weight: exact",
)

SPECS: tuple[Spec, ...] = (PACK_TOPK,)
