"""The fused-MoE GEMM launcher of vLLM and SGLang (``invoke_fused_moe_kernel``, vLLM's
later ``invoke_fused_moe_triton_kernel``): bf16 tokens times each routed expert's weight.

Routing is skewed (a Zipf-like expert popularity, as in real MoE traffic, never uniform),
the block alignment (``moe_align_block_size``, a CUDA op in the engines) is re-written here
in torch: per expert, its (token, k) slots padded to a multiple of ``BLOCK_SIZE_M`` with the
sentinel ``M * top_k``. The launcher is called by parameter name with every quantisation
flag off, so each row is measured on the bf16 path (a commit that only changes an fp8 or
int4 path measures ~1.0x there: that is what the bf16 path does)."""

from __future__ import annotations

import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name

CONFIG = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}


def _torch() -> Any:
    import torch

    return torch


def align(topk_ids: Any, experts: int, block_m: int) -> tuple[Any, Any, Any]:
    """(sorted_token_ids, expert_ids, num_tokens_post_padded) as the engines' op returns."""
    torch = _torch()
    flat = topk_ids.flatten()
    sentinel = flat.numel()
    ids, blocks = [], []
    for e in range(experts):
        slots = (flat == e).nonzero().flatten().to(torch.int32)
        pad = (-slots.numel()) % block_m
        if slots.numel() == 0:
            continue
        ids.append(
            torch.cat([slots, torch.full((pad,), sentinel, dtype=torch.int32, device=flat.device)])
        )
        blocks.extend([e] * ((slots.numel() + pad) // block_m))
    sorted_ids = torch.cat(ids)
    cap = sentinel + experts * (block_m - 1)
    out = torch.full((cap,), sentinel, dtype=torch.int32, device=flat.device)
    out[: sorted_ids.numel()] = sorted_ids
    expert_ids = torch.full((-(-cap // block_m),), -1, dtype=torch.int32, device=flat.device)
    expert_ids[: len(blocks)] = torch.tensor(blocks, dtype=torch.int32, device=flat.device)
    total = torch.tensor([sorted_ids.numel()], dtype=torch.int32, device=flat.device)
    return out, expert_ids, total


def randn_per_expert(
    e: int, rows: int, cols: int, scale: float, dtype: Any, gen: Any, device: Any
) -> Any:
    """``randn(e, rows, cols) * scale`` in ``dtype``, drawn one expert at a time so the fp32
    temporaries are one expert's (2 * rows * cols * 4 bytes), never the whole stack's (at
    Qwen2-57B's 64 x 5120 x 3584 the whole-stack draw held 9.4 GB of fp32 for 2.3 GB of
    bf16 weights)."""
    torch = _torch()
    out = torch.empty(e, rows, cols, dtype=dtype, device=device)
    for i in range(e):
        out[i] = torch.randn(rows, cols, generator=gen, device=device) * scale
    return out


def _inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    import triton.language as tl

    torch = _torch()
    m, e, k, n, topk = shape["tokens"], shape["experts"], shape["k"], shape["n"], shape["topk"]
    popularity = 1.0 / torch.arange(1, e + 1, dtype=torch.float32) ** 0.8
    probs = popularity[
        torch.randperm(
            e,
            generator=torch.Generator().manual_seed(
                int(torch.randint(0, 2**31, (1,), generator=gen, device=device).item())
            ),
        )
    ]
    topk_ids = torch.multinomial(probs.expand(m, e), topk, replacement=False).to(device)
    topk_weights = torch.rand(m, topk, generator=gen, device=device)
    sorted_ids, expert_ids, total = align(topk_ids, e, CONFIG["BLOCK_SIZE_M"])
    bf = torch.bfloat16
    return {
        "A": (torch.randn(m, k, generator=gen, device=device) * 0.5).to(bf),
        "B": randn_per_expert(e, n, k, k**-0.5, bf, gen, device),
        "bias": None,
        "C": torch.empty(m, topk, n, device=device, dtype=bf),
        "A_scale": None,
        "B_scale": None,
        "B_zp": None,
        "topk_weights": topk_weights,
        "topk_ids": topk_ids.to(torch.int32),
        "sorted_token_ids": sorted_ids,
        "expert_ids": expert_ids,
        "num_tokens_post_padded": total,
        "mul_routed_weight": False,
        "top_k": topk,
        "config": dict(CONFIG),
        "compute_type": tl.bfloat16,
        "use_fp8": False,
        "use_fp8_w8a8": False,
        "use_int8_w8a8": False,
        "use_int8_w8a16": False,
        "use_int4_w4a16": False,
        "per_channel_quant": False,
        "block_shape": None,
    }


def _call(mod: Any, x: Inputs, sha: str) -> Outputs:
    fn = getattr(mod, "invoke_fused_moe_kernel", None) or mod.invoke_fused_moe_triton_kernel
    call_by_name(fn, x)
    return {"C": x["C"]}


def _reference(x: Inputs) -> Outputs:
    """Per expert, its routed (token, slot) pairs times its weight: one expert's weight in
    fp32 at a time. (Gathering a weight copy per routed pair, ``einsum(A, B[topk_ids])``,
    needs m * top_k * n * k floats: 68 GB at Mixtral m = 1024, 140 GiB at Qwen2-57B m = 256,
    the out-of-memory errors of stop 35.)"""
    torch = _torch()
    a, ids = x["A"].float(), x["topk_ids"].long()
    out = torch.zeros(*ids.shape, x["B"].shape[1], device=a.device)
    for e in ids.unique().tolist():
        tok, slot = (ids == e).nonzero(as_tuple=True)
        out[tok, slot] = a[tok] @ x["B"][e].float().T
    return {"C": out.to(x["C"].dtype)}


def footprint(shape: Shape) -> int:
    """Bytes ``_inputs`` and ``_reference`` hold at once at a shape (an upper bound): the
    16-bit A, B, C and the routing, the larger of one expert's fp32 draw and the
    reference's fp32 A, output and one expert's fp32 weight with its routed rows."""
    m, e, k, n, topk = shape["tokens"], shape["experts"], shape["k"], shape["n"], shape["topk"]
    inputs = 2 * (m * k + e * n * k + m * topk * n) + 4 * 8 * (
        m * topk + e * CONFIG["BLOCK_SIZE_M"]
    )
    draw = 2 * 4 * max(m * k, n * k)
    reference = 4 * (m * k + 2 * m * topk * n + n * k + m * k + m * n) + 2 * m * topk * n
    return inputs + max(draw, reference)


_SG_MID = "python/sglang/srt/layers/moe/fused_moe_triton/fused_moe.py"
_SG_NEW = "python/sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_kernels.py"
_SG_RUNNER = "python/sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_kernels.py"
_VL = "vllm/model_executor/layers/fused_moe/fused_moe.py"

FUSED_MOE = Spec(
    name="fused_moe_gemm_bf16",
    launcher="invoke_fused_moe_kernel",
    rows=(
        ("sglang", "087ab832", "python/sglang/srt/layers/fused_moe/fused_moe.py"),
        ("sglang", "e0917e6b", _SG_MID),
        ("sglang", "924ca7c9", _SG_MID),
        ("sglang", "d2b8c412", _SG_NEW),
        ("sglang", "ee4d2287", _SG_NEW),
        ("sglang", "67b61a4e", _SG_NEW),
        ("sglang", "82a1b645", _SG_NEW),
        ("sglang", "fa0ef6e4", _SG_NEW),
        ("sglang", "ee5ccde0", _SG_NEW),
        ("sglang", "c9f582a2", _SG_RUNNER),
        ("vllm", "12628d3c", _VL),
        ("vllm", "7a888271", _VL),
        ("vllm", "27b78c73", _VL),
        ("vllm", "e59ca942", _VL),
        ("vllm", "15ba07ef", _VL),
        ("vllm", "f9c069c8", _VL),
        ("vllm", "a4d5d663", _VL),
        ("vllm", "b68fd899", _VL),
    ),
    shapes=(
        {
            "name": "mixtral-8x7b-w1-m64",
            "tokens": 64,
            "experts": 8,
            "topk": 2,
            "k": 4096,
            "n": 2048,
        },
        {
            "name": "mixtral-8x7b-w1-m1024",
            "tokens": 1024,
            "experts": 8,
            "topk": 2,
            "k": 4096,
            "n": 2048,
        },
        {
            "name": "qwen3-30b-a3b-w1-m256",
            "tokens": 256,
            "experts": 128,
            "topk": 8,
            "k": 2048,
            "n": 1536,
        },
        {
            "name": "dsv2-lite-w2-m512",
            "tokens": 512,
            "experts": 64,
            "topk": 6,
            "k": 1408,
            "n": 2048,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([3, 48, 333, 900]),
        "experts": r.choice([8, 16, 64]),
        "topk": r.choice([2, 4, 6]),
        "k": r.choice([1024, 2048]),
        "n": r.choice([512, 1024, 1536]),
    },
    make_inputs=_inputs,
    call=_call,
    reference=_reference,
    footprint=footprint,
    mutated=("C",),
    tolerance={"C": (2e-2, 2e-2)},
    tolerance_why="bf16 GEMM with fp32 accumulation over K <= 4096 (inputs scaled to unit "
    "variance outputs): block sizes and K order may differ between versions, so a few bf16 "
    "ulps (1.6e-2) plus an absolute floor; no split-K atomics on this path",
)

SPECS: tuple[Spec, ...] = (FUSED_MOE,)

_ = random
