"""Specs for SGLang rows whose changed kernel is launched from an engine method (census 1
said ``no_launcher_found``) or a small plain launcher (issue 35, task 35d): the spec
launches the kernel itself with the grid and arguments of the call site at the sha, an
adapter per side where the commit changed the grid or the argument list.

* ``create_flashmla_kv_indices_triton`` (bd47869b): the page table of each request for
  FlashMLA / TRT-LLM MLA; the commit moves the loop over 4096-token page blocks to a second
  grid axis (call sites: ``trtllm_mla_backend.py``, ``flashmla_backend.py`` at the sha).
* ``create_flashinfer_kv_indices_triton`` (edad3731): the flat KV index list FlashInfer's
  decode/prefill plans read (call site: ``flashinfer_backend.py``, its own file).
* ``pre_reorder_triton_kernel`` / ``post_reorder_triton_kernel`` (c087ddd6): the EP MoE
  scatter of tokens to their experts' rows and the weighted gather back (call sites:
  ``ep_moe/layer.py`` at the sha, ``BLOCK_SIZE=512``).
* ``alloc_extend_kernel`` / ``alloc_decode_kernel`` (0b2aa8a7): the paged KV allocator;
  the commit drops the kernel's ``ret_values`` store (the host then computes the page count
  from CPU lengths instead of a blocking ``.item()``); the spec times the kernels, so the
  host-side sync it removes is outside what is measured (the method is not loadable alone).
* ``zero_experts_compute_triton`` (c5d2b01c): LongCat-Flash's zero-computation experts.

Models: DeepSeek-V3/R1 (MLA, 256 experts top-8, hidden 7168), LongCat-Flash (512 experts
plus 256 zero experts, top-12, hidden 6144), Llama-3-8B / Qwen3 (FlashInfer paged KV).
"""

from __future__ import annotations

import contextlib
import random
import types
from collections.abc import Iterator
from typing import Any

from .base import Inputs, Outputs, Shape, Spec


def _torch() -> Any:
    import torch

    return torch


def _cpu_gen(gen: Any, device: Any) -> Any:
    """A CPU generator seeded from ``gen`` (``randperm`` refuses a CUDA generator for a CPU
    permutation, and the permutation is small)."""
    torch = _torch()
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=device).item())
    return torch.Generator().manual_seed(seed)


def _cdiv(a: int, b: int) -> int:
    return -(a // -b)


def _lens(gen: Any, device: Any, batch: int, lo: int, hi: int) -> Any:
    """``batch`` int32 lengths in [lo, hi]: a mixed batch, never uniform."""
    torch = _torch()
    return torch.randint(lo, hi + 1, (batch,), generator=gen, device=device, dtype=torch.int32)


def _req_to_token(gen: Any, device: Any, pool: int, width: int, page: int) -> Any:
    """SGLang's ``req_to_token`` (pool rows x max context, int32 slot ids): each request's
    tokens sit in whole pages drawn at random from the KV pool, a token's slot being
    ``page_id * page + offset`` as the paged allocator hands them out."""
    torch = _torch()
    pages_per_row = _cdiv(width, page)
    ids = torch.randperm(pool * pages_per_row + 16, generator=_cpu_gen(gen, device))
    ids = ids[: pool * pages_per_row].view(pool, pages_per_row, 1).to(device)
    slots = ids * page + torch.arange(page, device=device).view(1, 1, page)
    return slots.view(pool, -1)[:, :width].to(torch.int32).contiguous()


# --- create_flashmla_kv_indices_triton (bd47869b): per-request page ids, -1 padded ---


def _flashmla_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    bs, ctx, page = shape["batch"], shape["context"], shape["page"]
    pool = bs + 8
    seq = _lens(gen, device, bs, max(1, ctx // 8), ctx)
    rows = torch.randperm(pool, generator=_cpu_gen(gen, device))[:bs].to(device)
    max_blocks = _cdiv(ctx, page)
    return {
        "req_to_token": _req_to_token(gen, device, pool, ctx, page),
        "req_pool_indices": rows.to(torch.int32),
        "seq_lens": seq,
        "block_kv_indices": torch.full((bs, max_blocks), -1, dtype=torch.int32, device=device),
        "page": page,
    }


def _flashmla_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    out, page = x["block_kv_indices"], x["page"]
    bs, width = out.shape
    blocks = getattr(mod, "get_num_kv_index_blocks_flashmla", None)
    # before: one program per request loops over its page blocks; after (the call sites at
    # bd47869b): one program per (request, page block)
    grid = (bs,) if blocks is None else (bs, blocks(width, page))
    mod.create_flashmla_kv_indices_triton[grid](
        x["req_to_token"],
        x["req_pool_indices"],
        x["seq_lens"],
        None,
        out,
        x["req_to_token"].stride(0),
        width,
        PAGED_SIZE=page,
    )
    return {"block_kv_indices": out}


def _flashmla_reference(x: Inputs) -> Outputs:
    out, page = x["block_kv_indices"].clone(), x["page"]
    for b, (row, n) in enumerate(
        zip(x["req_pool_indices"].tolist(), x["seq_lens"].tolist(), strict=True)
    ):
        pages = x["req_to_token"][row, 0:n:page] // page
        out[b, : pages.numel()] = pages
    return {"block_kv_indices": out}


_DSV3_MLA = "DeepSeek-V3/R1 decode on the TRT-LLM MLA / FlashMLA backends (pages of 32/64)"

FLASHMLA_KV_INDICES = Spec(
    name="sglang_flashmla_kv_indices",
    launcher="create_flashmla_kv_indices_triton",
    rows=(("sglang", "bd47869b", "python/sglang/srt/layers/attention/triton_ops/kv_indices.py"),),
    shapes=(
        {
            "name": "dsv3-decode-b64-32k",
            "source": _DSV3_MLA,
            "batch": 64,
            "context": 32768,
            "page": 64,
        },
        {
            "name": "dsv3-decode-b8-128k",
            "source": _DSV3_MLA,
            "batch": 8,
            "context": 131072,
            "page": 64,
        },
        {
            "name": "dsv3-decode-b256-8k-p32",
            "source": _DSV3_MLA + ", TRT-LLM page 32",
            "batch": 256,
            "context": 8192,
            "page": 32,
        },
        {
            "name": "dsv3-decode-b16-64k-p32",
            "source": _DSV3_MLA,
            "batch": 16,
            "context": 65536,
            "page": 32,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 9]),
        "context": r.choice([100, 900, 5000]),
        "page": r.choice([32, 64]),
    },
    make_inputs=_flashmla_inputs,
    call=_flashmla_call,
    reference=_flashmla_reference,
    mutated=("block_kv_indices",),
    tolerance={"block_kv_indices": (0.0, 0.0)},
    tolerance_why="an integer gather and division by the page size: exact",
)


# --- create_flashinfer_kv_indices_triton (edad3731): flat KV slot list per request ---


def _flashinfer_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    bs, ctx = shape["batch"], shape["context"]
    pool = bs + 8
    seq = _lens(gen, device, bs, max(1, ctx // 8), ctx)
    indptr = torch.zeros(bs + 1, dtype=torch.int32, device=device)
    indptr[1:] = torch.cumsum(seq, 0)
    rows = torch.randperm(pool, generator=_cpu_gen(gen, device))[:bs].to(device)
    return {
        # page size 1 (FlashInfer's default in SGLang): any slot order
        "req_to_token": _req_to_token(gen, device, pool, shape["max_context"], 1),
        "req_pool_indices": rows.to(torch.int32),
        "seq_lens": seq,
        "kv_indptr": indptr,
        "kv_indices": torch.full((int(seq.sum()),), -1, dtype=torch.int32, device=device),
    }


def _flashinfer_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    out = x["kv_indices"]
    # the last argument is max_context_len (before) / the row stride (after): the same value
    # at every call site, ``req_to_token.shape[1]`` of a contiguous pool
    mod.create_flashinfer_kv_indices_triton[(x["seq_lens"].numel(),)](
        x["req_to_token"],
        x["req_pool_indices"],
        x["seq_lens"],
        x["kv_indptr"],
        None,
        out,
        x["req_to_token"].shape[1],
    )
    return {"kv_indices": out}


def _flashinfer_reference(x: Inputs) -> Outputs:
    torch = _torch()
    parts = [
        x["req_to_token"][row, :n]
        for row, n in zip(x["req_pool_indices"].tolist(), x["seq_lens"].tolist(), strict=True)
    ]
    return {"kv_indices": torch.cat(parts)}


_FI_DECODE = "FlashInfer decode plan (Llama-3-8B / Qwen3 serving, context 4k-32k)"

FLASHINFER_KV_INDICES = Spec(
    name="sglang_flashinfer_kv_indices",
    launcher="create_flashinfer_kv_indices_triton",
    rows=(("sglang", "edad3731", "python/sglang/srt/layers/attention/flashinfer_backend.py"),),
    shapes=(
        {
            "name": "decode-b64-4k",
            "source": _FI_DECODE,
            "batch": 64,
            "context": 4096,
            "max_context": 8192,
        },
        {
            "name": "decode-b256-2k",
            "source": _FI_DECODE,
            "batch": 256,
            "context": 2048,
            "max_context": 4096,
        },
        {
            "name": "decode-b16-32k",
            "source": _FI_DECODE,
            "batch": 16,
            "context": 32768,
            "max_context": 32768,
        },
        {
            "name": "prefill-b4-8k",
            "source": "FlashInfer prefill plan, 4 prompts of <= 8k",
            "batch": 4,
            "context": 8192,
            "max_context": 16384,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 5, 17]),
        "context": r.choice([7, 300, 1100]),
        "max_context": 2048,
    },
    make_inputs=_flashinfer_inputs,
    call=_flashinfer_call,
    reference=_flashinfer_reference,
    mutated=("kv_indices",),
    tolerance={"kv_indices": (0.0, 0.0)},
    tolerance_why="an integer copy: exact",
)


# --- pre/post_reorder_triton_kernel (c087ddd6): EP MoE scatter and weighted gather ---


def _reorder_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, h, e, k, ep = shape["tokens"], shape["hidden"], shape["experts"], shape["topk"], shape["ep"]
    scores = torch.rand(t, e, generator=gen, device=device)
    topk_ids = scores.topk(k, dim=1).indices.to(torch.int32)
    # run_moe_ep_preproess at the sha: a stable sort of the flat ids; src2dst is its inverse
    order = torch.sort(topk_ids.view(-1).long(), stable=True).indices
    src2dst = torch.empty(t * k, dtype=torch.int32, device=device)
    src2dst[order] = torch.arange(t * k, dtype=torch.int32, device=device)
    local = e // ep  # this rank's experts: the first EP shard
    bf = getattr(torch, shape.get("dtype", "bfloat16"))
    return {
        "hidden_states": torch.randn(t, h, generator=gen, device=device).to(bf),
        "gateup_input": torch.zeros(t * k, h, dtype=bf, device=device),
        "src2dst": src2dst,
        "topk_ids": topk_ids,
        "topk_weights": torch.rand(t, k, generator=gen, device=device),
        "down_output": torch.randn(t * k, h, generator=gen, device=device).to(bf),
        "output": torch.empty(t, h, dtype=bf, device=device),
        "start_expert_id": 0,
        "end_expert_id": local - 1,
    }


def _reorder_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    t, h = x["hidden_states"].shape
    k = x["topk_ids"].shape[1]
    lo, hi = x["start_expert_id"], x["end_expert_id"]
    mod.pre_reorder_triton_kernel[(t,)](
        x["hidden_states"],
        x["gateup_input"],
        x["src2dst"],
        x["topk_ids"],
        None,
        lo,
        hi,
        k,
        h,
        BLOCK_SIZE=512,
    )
    mod.post_reorder_triton_kernel[(t,)](
        x["down_output"],
        x["output"],
        x["src2dst"],
        x["topk_ids"],
        x["topk_weights"],
        lo,
        hi,
        k,
        h,
        BLOCK_SIZE=512,
    )
    return {"gateup_input": x["gateup_input"], "output": x["output"]}


def _reorder_reference(x: Inputs) -> Outputs:
    torch = _torch()
    ids = x["topk_ids"].long()
    dst = x["src2dst"].long().view(ids.shape)
    mine = (ids >= x["start_expert_id"]) & (ids <= x["end_expert_id"])
    gate = x["gateup_input"].clone()
    tok = torch.arange(ids.shape[0], device=ids.device)[:, None].expand(ids.shape)
    gate[dst[mine]] = x["hidden_states"][tok[mine]]
    w = (x["topk_weights"] * mine).to(torch.float32)
    out = (x["down_output"].float()[dst] * w[..., None]).sum(1)
    return {"gateup_input": gate, "output": out.to(x["output"].dtype)}


_EP = "DeepSeek-V3/R1 under expert parallelism (256 experts, top-8, hidden 7168)"

EP_REORDER = Spec(
    name="sglang_ep_moe_reorder",
    launcher="pre_reorder_triton_kernel",
    rows=(("sglang", "c087ddd6", "python/sglang/srt/layers/moe/ep_moe/kernels.py"),),
    shapes=(
        {
            "name": "dsv3-ep8-decode-128",
            "source": _EP + ", EP 8",
            "tokens": 128,
            "hidden": 7168,
            "experts": 256,
            "topk": 8,
            "ep": 8,
        },
        {
            "name": "dsv3-ep8-prefill-2k",
            "source": _EP + ", EP 8",
            "tokens": 2048,
            "hidden": 7168,
            "experts": 256,
            "topk": 8,
            "ep": 8,
        },
        {
            "name": "dsv3-ep16-prefill-4k",
            "source": _EP + ", EP 16",
            "tokens": 4096,
            "hidden": 7168,
            "experts": 256,
            "topk": 8,
            "ep": 16,
        },
        {
            "name": "mixtral-ep2-prefill-1k",
            "source": "Mixtral-8x7B, EP 2 (8 experts, top-2)",
            "tokens": 1024,
            "hidden": 4096,
            "experts": 8,
            "topk": 2,
            "ep": 2,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 7, 40]),
        "hidden": r.choice([512, 1024, 1536]),
        "experts": r.choice([8, 16]),
        "topk": r.choice([2, 4]),
        "ep": r.choice([1, 2, 4]),
        # the CPU interpreter mis-adds a bf16 accumulator (tl.zeros of a bf16 dtype): the
        # held-out shape runs fp16, which the engine serves too
        "dtype": "float16",
    },
    make_inputs=_reorder_inputs,
    call=_reorder_call,
    reference=_reorder_reference,
    mutated=("gateup_input", "output"),
    tolerance={"gateup_input": (0.0, 0.0), "output": (6.4e-2, 3.2e-2)},
    tolerance_why="the scatter copies bf16 values: exact; the gather sums up to 8 weighted "
    "rows in a bf16 accumulator (the kernel's InDtype), one rounding per add: up to 8 bf16 "
    "ulps (2^-8 each) of sums of O(1) terms against the fp32 reference; before and after "
    "add in the same order",
)


# --- alloc_extend_kernel / alloc_decode_kernel (0b2aa8a7): the paged KV allocator ---


def _alloc_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    bs, page, mode = shape["batch"], shape["page"], shape["mode"]
    pre = _lens(gen, device, bs, 0, shape["prefix"]).long()
    if mode == "decode":
        pre = pre.clamp(min=1)
        seq = pre + 1
    else:
        seq = pre + _lens(gen, device, bs, 1, shape["extend"]).long()
    used = int(((pre + page - 1) // page).sum())
    new = int(((seq + page - 1) // page).sum()) - used
    pages = torch.randperm(used + new + 64, generator=_cpu_gen(gen, device)).to(device) + 1
    own, free = pages[:used], pages[used:]
    # each request's last token sits in its last owned page (one page list per request)
    ends = torch.cumsum((pre + page - 1) // page, 0) - 1
    last_page = own[ends.clamp(min=0)] if used else torch.zeros_like(pre)
    last_loc = torch.where(pre > 0, last_page * page + (pre - 1) % page, pre - 1)
    total = int((seq - pre).sum())
    return {
        "prefix_lens": pre,
        "seq_lens": seq,
        "last_loc": last_loc,
        "free_pages": free,
        "out_indices": torch.full((total,), -1, dtype=torch.int64, device=device),
        "page": page,
        "mode": mode,
    }


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _alloc_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    torch = _torch()
    out, bs = x["out_indices"], x["seq_lens"].numel()
    kernel = mod.alloc_decode_kernel if x["mode"] == "decode" else mod.alloc_extend_kernel
    head = [x["seq_lens"], x["last_loc"], x["free_pages"], out]
    if x["mode"] != "decode":
        head.insert(0, x["prefix_lens"])
    if "ret_values" in kernel.arg_names:  # before: the kernel also stores the page count
        head.append(torch.empty((), dtype=torch.int64, device=out.device))
    tail = [_next_pow2(bs), x["page"]]
    if x["mode"] != "decode":
        tail.append(_next_pow2(out.numel()))
    kernel[(bs,)](*head, *tail)
    return {"out_indices": out}


def _alloc_reference(x: Inputs) -> Outputs:
    """Per request: its old partial page continues from ``last_loc``, then whole new pages
    from the free list in request order, the last one partly."""
    out: list[int] = []
    page, free = x["page"], x["free_pages"].tolist()
    cursor = 0
    for p, s, last in zip(
        x["prefix_lens"].tolist(), x["seq_lens"].tolist(), x["last_loc"].tolist(), strict=True
    ):
        part1 = min(s, _cdiv(p, page) * page) - p
        out.extend(last + 1 + i for i in range(part1))
        for pos in range(p + part1, s):
            if (pos - p - part1) % page == 0:
                cur = free[cursor]
                cursor += 1
            out.append(cur * page + (pos - p - part1) % page)
    torch = _torch()
    return {"out_indices": torch.tensor(out, dtype=torch.int64, device=x["seq_lens"].device)}


_ALLOC = "SGLang paged allocator (PagedTokenToKVPoolAllocator at the sha)"

KV_ALLOC = Spec(
    name="sglang_paged_kv_alloc",
    launcher="alloc_decode_kernel",
    rows=(("sglang", "0b2aa8a7", "python/sglang/srt/mem_cache/allocator.py"),),
    shapes=(
        {
            "name": "decode-b256-p64",
            "source": _ALLOC + ", decode batch 256, page 64",
            "mode": "decode",
            "batch": 256,
            "page": 64,
            "prefix": 4096,
            "extend": 1,
        },
        {
            "name": "decode-b32-p16",
            "source": _ALLOC + ", decode batch 32, page 16",
            "mode": "decode",
            "batch": 32,
            "page": 16,
            "prefix": 8192,
            "extend": 1,
        },
        {
            "name": "extend-b8-p64",
            "source": _ALLOC + ", chunked prefill of 8 prompts",
            "mode": "extend",
            "batch": 8,
            "page": 64,
            "prefix": 2048,
            "extend": 1024,
        },
        {
            "name": "extend-b64-p16-spec",
            "source": _ALLOC + ", EAGLE verify (4 tokens per req)",
            "mode": "extend",
            "batch": 64,
            "page": 16,
            "prefix": 3000,
            "extend": 4,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "mode": r.choice(["decode", "extend"]),
        "batch": r.choice([1, 5, 12]),
        "page": r.choice([16, 32, 64]),
        "prefix": r.choice([10, 200]),
        "extend": r.choice([1, 3, 70]),
    },
    make_inputs=_alloc_inputs,
    call=_alloc_call,
    reference=_alloc_reference,
    mutated=("out_indices",),
    tolerance={"out_indices": (0.0, 0.0)},
    tolerance_why="integer slot arithmetic: exact",
)


# --- zero_experts_compute_triton (c5d2b01c): LongCat-Flash zero-computation experts ---


def _zero_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, h, e, z, k = shape["tokens"], shape["hidden"], shape["experts"], shape["zero"], shape["topk"]
    ids = torch.rand(t, e + z, generator=gen, device=device).topk(k, dim=1).indices
    return {
        "expert_indices": ids,
        "expert_scales": torch.rand(t, k, generator=gen, device=device),
        "num_experts": e,
        "zero_expert_type": "identity",
        "hidden_states": torch.randn(t, h, generator=gen, device=device).to(torch.bfloat16),
    }


def _zero_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    torch = _torch()
    routed = x["expert_indices"] < x["num_experts"]
    out = mod.zero_experts_compute_triton(
        x["expert_indices"],
        x["expert_scales"],
        x["num_experts"],
        x["zero_expert_type"],
        x["hidden_states"],
    )
    # The commit's one change to the mutated ids is the sentinel written over zero-expert
    # slots (0 -> -1, so the routed GEMM skips them instead of running expert 0): by design,
    # so those slots are compared as "not routed" and every routed slot exactly.
    ids = torch.where(routed, x["expert_indices"], torch.full_like(x["expert_indices"], -7))
    return {"output": out, "expert_scales": x["expert_scales"], "routed_ids": ids}


def _zero_reference(x: Inputs) -> Outputs:
    torch = _torch()
    ids, scales = x["expert_indices"], x["expert_scales"]
    zero = ids >= x["num_experts"]
    out = x["hidden_states"].float() * (scales * zero).sum(1, keepdim=True)
    return {
        "output": out.to(x["hidden_states"].dtype),
        "expert_scales": torch.where(zero, torch.zeros_like(scales), scales),
        "routed_ids": torch.where(~zero, ids, torch.full_like(ids, -7)),
    }


_LONGCAT = "LongCat-Flash (512 experts + 256 zero experts, top-12, hidden 6144)"

ZERO_EXPERTS = Spec(
    name="sglang_zero_experts_compute",
    launcher="zero_experts_compute_triton",
    rows=(("sglang", "c5d2b01c", "python/sglang/srt/layers/moe/ep_moe/kernels.py"),),
    shapes=(
        {
            "name": "longcat-decode-64",
            "source": _LONGCAT,
            "tokens": 64,
            "hidden": 6144,
            "experts": 512,
            "zero": 256,
            "topk": 12,
        },
        {
            "name": "longcat-decode-256",
            "source": _LONGCAT,
            "tokens": 256,
            "hidden": 6144,
            "experts": 512,
            "zero": 256,
            "topk": 12,
        },
        {
            "name": "longcat-prefill-4k",
            "source": _LONGCAT,
            "tokens": 4096,
            "hidden": 6144,
            "experts": 512,
            "zero": 256,
            "topk": 12,
        },
        {
            "name": "longcat-prefill-1k",
            "source": _LONGCAT,
            "tokens": 1024,
            "hidden": 6144,
            "experts": 512,
            "zero": 256,
            "topk": 12,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 9, 60]),
        "hidden": r.choice([256, 768]),
        "experts": r.choice([16, 64]),
        "zero": r.choice([8, 32]),
        "topk": r.choice([4, 12]),
    },
    make_inputs=_zero_inputs,
    call=_zero_call,
    reference=_zero_reference,
    mutated=("expert_indices", "expert_scales"),
    tolerance={"output": (3.2e-2, 1.6e-2), "expert_scales": (0.0, 0.0), "routed_ids": (0.0, 0.0)},
    tolerance_why="the output sums up to 12 fp32 products of one bf16 row, rounded once to "
    "bf16 (2 ulp relative plus a floor for near-zero sums); scales are copied or zeroed and "
    "ids are integers: exact",
)


# --- fused_layernorm_modulate (89144567, Sana/diffusion): LN(x) * (1 + scale) + shift ---


def _ln_mod_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, n, d = shape["batch"], shape["seq"], shape["hidden"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))

    def rnd(*size: int, scale: float = 1.0) -> Any:
        return (torch.randn(*size, generator=gen, device=device) * scale).to(dt)

    # adaLN modulation rows, one per sample (small, as a trained projection gives them)
    return {
        "x": rnd(b, n, d),
        "scale": rnd(b, d, scale=0.1),
        "shift": rnd(b, d, scale=0.1),
        "eps": 1e-6,
    }


def _ln_mod_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    # after: the direct launcher is ``fused_layernorm_modulate_raw`` (the old name became a
    # torch custom-op wrapper of it); before: ``fused_layernorm_modulate`` itself
    fn = getattr(mod, "fused_layernorm_modulate_raw", None) or mod.fused_layernorm_modulate
    return {"y": fn(x["x"], x["scale"], x["shift"], x["eps"])}


def _ln_mod_reference(x: Inputs) -> Outputs:
    torch = _torch()
    d = x["x"].shape[-1]
    y = torch.nn.functional.layer_norm(x["x"].float(), (d,), eps=x["eps"])
    y = y * (1 + x["scale"].float()[:, None]) + x["shift"].float()[:, None]
    return {"y": y.to(x["x"].dtype)}


_LN_MOD = "python/sglang/kernels/ops/diffusion/triton/layernorm_modulate.py"

LAYERNORM_MODULATE = Spec(
    name="sglang_diffusion_layernorm_modulate",
    launcher="fused_layernorm_modulate",
    rows=(("sglang", "89144567", _LN_MOD),),
    shapes=(
        {
            "name": "flux-1k-image",
            "source": "FLUX.1 (hidden 3072), 1024x1024 image: 4096 tokens",
            "batch": 1,
            "seq": 4096,
            "hidden": 3072,
        },
        {
            "name": "qwen-image-b2",
            "source": "Qwen-Image (hidden 3072), CFG batch 2",
            "batch": 2,
            "seq": 4096,
            "hidden": 3072,
        },
        {
            "name": "sd35-medium-b2",
            "source": "SD3.5-Medium (hidden 1536), CFG batch 2",
            "batch": 2,
            "seq": 4096,
            "hidden": 1536,
        },
        {
            "name": "wan21-14b-video",
            "source": "Wan2.1-14B (hidden 5120), 81-frame 480p clip",
            "batch": 1,
            "seq": 8190,
            "hidden": 5120,
        },
    ),
    control={
        "name": "control-1x4096x4096",
        "source": "the kernel's own tuning shape (1, 4096, 4096)",
        "batch": 1,
        "seq": 4096,
        "hidden": 4096,
    },
    control_reason="hidden 4096 is a multiple of 512 (no tail chunk: the commit's masked "
    "tail path is pruned at compile time) and >= 4096 (4 warps before and after): the "
    "kernel compiles to the same code on both sides",
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2]),
        "seq": r.choice([3, 17, 64]),
        "hidden": r.choice([512, 1024, 2048]),  # before requires hidden % 512 == 0
    },
    make_inputs=_ln_mod_inputs,
    call=_ln_mod_call,
    reference=_ln_mod_reference,
    tolerance_why="one Welford mean/variance per row in fp32 (aten's order, bit-exact by "
    "the kernel's claim), then an affine in fp32 rounded once to bf16: dtype defaults (4 "
    "bf16 ulp) against the fp32 torch reference",
)


# --- pre/post reorder for the CUTLASS w4afp8 MoE (9535015d): the glue around the GEMMs ---


@contextlib.contextmanager
def _h100_properties_on_cpu(device: Any) -> Iterator[None]:
    """On the CPU check only (no CUDA), ``torch.cuda.get_device_properties`` answers with an
    H100's SM count and threads per SM, so the after side's launch-config helper (upstream
    code, which reads them) picks the grid it picks on the card; on a GPU nothing changes."""
    torch = _torch()
    if device.type == "cuda":
        yield
        return
    real = torch.cuda.get_device_properties
    torch.cuda.get_device_properties = lambda *_a, **_k: types.SimpleNamespace(
        multi_processor_count=132, max_threads_per_multi_processor=2048
    )
    try:
        yield
    finally:
        torch.cuda.get_device_properties = real


def _w4_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    x = _reorder_inputs({"dtype": "bfloat16", **shape}, gen, device)
    local = shape["experts"] // shape["ep"]
    ids = x["topk_ids"]
    # the caller maps experts of other ranks to the sentinel ``num_local_experts``
    ids = torch.where(ids < local, ids, torch.full_like(ids, local)).to(torch.int32)
    order = torch.sort(ids.view(-1).long(), stable=True).indices
    src2dst = torch.empty_like(x["src2dst"])
    src2dst[order] = torch.arange(order.numel(), dtype=torch.int32, device=device)
    fp8 = shape.get("fp8", True)
    gate_dt = torch.float8_e4m3fn if fp8 else x["hidden_states"].dtype
    amax = x["hidden_states"].abs().amax().float().clamp(min=1e-4)
    return {
        "input": x["hidden_states"],
        "gateup_input": torch.zeros(x["gateup_input"].shape, dtype=gate_dt, device=device),
        "src2dst": src2dst,
        "topk_ids": ids,
        # a per-tensor activation scale, amax / 448 (e4m3's largest finite value): no input
        # leaves the fp8 range, as a calibrated w4afp8 scale guarantees
        "a1_scales": (amax / 448).reshape(1) if fp8 else None,
        "topk_weights": x["topk_weights"],
        "down_output": x["down_output"],
        "output": x["output"],
        "num_local_experts": local,
    }


def _w4_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    m, k = x["input"].shape
    topk, local = x["topk_ids"].shape[1], x["num_local_experts"]
    if hasattr(mod, "pre_reorder_for_cutlass_moe"):  # after: launch helpers pick the grid
        with _h100_properties_on_cpu(x["input"].device):
            mod.pre_reorder_for_cutlass_moe(
                x["input"],
                x["gateup_input"],
                x["src2dst"],
                x["topk_ids"],
                x["a1_scales"],
                local,
                topk,
                m,
                k,
            )
            # routed scaling 1.0: the before version scaled outside the kernel
            mod.post_reorder_for_cutlass_moe(
                x["down_output"],
                x["output"],
                x["src2dst"],
                x["topk_ids"],
                x["topk_weights"],
                local,
                topk,
                m,
                k,
                1.0,
            )
    else:  # before: one program per token, BLOCK_SIZE 512 (cutlass_w4a8_moe.py at 9535015d^)
        mod.pre_reorder_triton_kernel_for_cutlass_moe[(m,)](
            input_ptr=x["input"],
            gateup_input_ptr=x["gateup_input"],
            src2dst_ptr=x["src2dst"],
            topk_ids_ptr=x["topk_ids"],
            a1_scales_ptr=x["a1_scales"],
            num_local_experts=local,
            topk=topk,
            hidden_size=k,
            BLOCK_SIZE=512,
        )
        mod.post_reorder_triton_kernel_for_cutlass_moe[(m,)](
            down_output_ptr=x["down_output"],
            output_ptr=x["output"],
            src2dst_ptr=x["src2dst"],
            topk_ids_ptr=x["topk_ids"],
            topk_weights_ptr=x["topk_weights"],
            topk=topk,
            num_local_experts=local,
            hidden_size=k,
            BLOCK_SIZE=512,
        )
    return {"gateup_input": x["gateup_input"], "output": x["output"]}


def _w4_reference(x: Inputs) -> Outputs:
    torch = _torch()
    ids, local = x["topk_ids"].long(), x["num_local_experts"]
    dst = x["src2dst"].long().view(ids.shape)
    mine = ids != local
    gate = x["gateup_input"].float().clone()
    tok = torch.arange(ids.shape[0], device=ids.device)[:, None].expand(ids.shape)
    scale = 1.0 if x["a1_scales"] is None else 1.0 / float(x["a1_scales"])
    gate[dst[mine]] = x["input"][tok[mine]].float() * scale
    w = (x["topk_weights"] * mine).to(torch.float32)
    out = (x["down_output"].float()[dst] * w[..., None]).sum(1)
    return {
        "gateup_input": gate.to(x["gateup_input"].dtype),
        "output": out.to(x["output"].dtype),
    }


_R1_W4 = "DeepSeek-R1 w4afp8 under EP (256 experts, top-8, hidden 7168)"

CUTLASS_W4_REORDER = Spec(
    name="sglang_cutlass_w4afp8_reorder",
    launcher="pre_reorder_triton_kernel_for_cutlass_moe",
    rows=(("sglang", "9535015d", "python/sglang/srt/layers/moe/ep_moe/kernels.py"),),
    shapes=(
        {
            "name": "r1-w4afp8-ep8-decode-64",
            "source": _R1_W4 + ", EP 8, decode",
            "tokens": 64,
            "hidden": 7168,
            "experts": 256,
            "topk": 8,
            "ep": 8,
        },
        {
            "name": "r1-w4afp8-ep8-decode-256",
            "source": _R1_W4 + ", EP 8, decode batch 256",
            "tokens": 256,
            "hidden": 7168,
            "experts": 256,
            "topk": 8,
            "ep": 8,
        },
        {
            "name": "r1-w4afp8-ep8-prefill-4k",
            "source": _R1_W4 + ", EP 8, prefill chunk",
            "tokens": 4096,
            "hidden": 7168,
            "experts": 256,
            "topk": 8,
            "ep": 8,
        },
        {
            "name": "r1-w4afp8-tp-prefill-1k",
            "source": _R1_W4 + ", no EP (all experts local)",
            "tokens": 1024,
            "hidden": 7168,
            "experts": 256,
            "topk": 8,
            "ep": 1,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 7, 40]),
        "hidden": r.choice([512, 1024, 1536]),
        "experts": r.choice([8, 16]),
        "topk": r.choice([2, 4]),
        "ep": r.choice([1, 2, 4]),
        # fp16 scatter, no activation scale: the CPU interpreter rounds fp32 -> e4m3 wrongly
        # (specs.misc_vllm_attn) and mis-adds a bf16 accumulator; the named shapes run the
        # bf16 activations and the fp8 scatter of the real path
        "fp8": False,
        "dtype": "float16",
    },
    make_inputs=_w4_inputs,
    call=_w4_call,
    reference=_w4_reference,
    mutated=("gateup_input", "output"),
    tolerance={"gateup_input": (0.0, 0.126), "output": (6.4e-2, 3.2e-2)},
    tolerance_why="the scatter rounds x / a1_scale once to e4m3 (one fp8 step, 12.5% "
    "relative, or bf16-exact without a scale); the gather sums up to 8 weighted rows, in a "
    "bf16 accumulator before (up to 8 bf16 ulps of O(1) sums, as sglang_ep_moe_reorder) and "
    "fp32 after",
)


# --- _zero_topk_weights_padded_region (e0dc8b71): zero the routing weights of pad rows ---


def _pad_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, k = shape["tokens"], shape["topk"]
    return {
        "topk_weights": torch.rand(t, k, generator=gen, device=device),
        # the real token count of a batch padded to a CUDA-graph size (device scalar)
        "num_token_non_padded": torch.tensor([shape["real"]], dtype=torch.int32, device=device),
    }


def _pad_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    mod._zero_topk_weights_padded_region(x["topk_weights"], x["num_token_non_padded"])
    return {"topk_weights": x["topk_weights"]}


def _pad_reference(x: Inputs) -> Outputs:
    w = x["topk_weights"].clone()
    w[int(x["num_token_non_padded"][0]) :] = 0.0
    return {"topk_weights": w}


_GRAPH_PAD = "DeepSeek-V3 (top-8) batch padded to a CUDA-graph size"

TOPK_PAD_ZERO = Spec(
    name="sglang_topk_weights_pad_zero",
    launcher="_zero_topk_weights_padded_region",
    rows=(("sglang", "e0dc8b71", "python/sglang/srt/layers/moe/topk.py"),),
    shapes=(
        {
            "name": "dsv3-graph-128-of-100",
            "source": _GRAPH_PAD + " 128, 100 real tokens",
            "tokens": 128,
            "topk": 8,
            "real": 100,
        },
        {
            "name": "dsv3-graph-512-of-300",
            "source": _GRAPH_PAD + " 512, 300 real tokens",
            "tokens": 512,
            "topk": 8,
            "real": 300,
        },
        {
            "name": "dsv3-dp-prefill-8k",
            "source": "DeepSeek-V3 DP attention, a prefill batch padded to 8192 (8000 real)",
            "tokens": 8192,
            "topk": 8,
            "real": 8000,
        },
        {
            "name": "qwen3-moe-graph-64-of-1",
            "source": "Qwen3-30B-A3B (top-8), one decode token in a 64-slot graph",
            "tokens": 64,
            "topk": 8,
            "real": 1,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([8, 40, 200]),
        "topk": r.choice([2, 6, 8]),
        "real": r.choice([0, 3, 7]),
    },
    make_inputs=_pad_inputs,
    call=_pad_call,
    reference=_pad_reference,
    mutated=("topk_weights",),
    tolerance={"topk_weights": (0.0, 0.0)},
    tolerance_why="rows copied or set to 0.0: exact",
)


# --- _mask_topk_ids_padded_region with fill 0 (de2d01c8): the DeepEP shared-expert path ---


def _pad_ids_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, k, e = shape["tokens"], shape["topk"], shape["experts"]
    return {
        "topk_ids": torch.randint(0, e, (t, k), generator=gen, device=device).to(torch.int32),
        "num_token_non_padded": torch.tensor([shape["real"]], dtype=torch.int32, device=device),
    }


def _pad_ids_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    # fill 0, as _post_process_topk_ids calls it before the DeepEP remap (int32 ids with
    # fill -1 go to sgl_kernel's CUDA op on both sides instead)
    mod._mask_topk_ids_padded_region(x["topk_ids"], x["num_token_non_padded"], fill_value=0)
    return {"topk_ids": x["topk_ids"]}


def _pad_ids_reference(x: Inputs) -> Outputs:
    ids = x["topk_ids"].clone()
    ids[int(x["num_token_non_padded"][0]) :] = 0
    return {"topk_ids": ids}


TOPK_PAD_IDS = Spec(
    name="sglang_topk_ids_pad_fill",
    launcher="_mask_topk_ids_padded_region",
    rows=(("sglang", "de2d01c8", "python/sglang/srt/layers/moe/topk.py"),),
    shapes=(
        {
            "name": "dsv3-deepep-graph-128-of-100",
            "source": _GRAPH_PAD + " 128 under DeepEP with a fused shared expert (fill 0)",
            "tokens": 128,
            "topk": 9,
            "experts": 257,
            "real": 100,
        },
        {
            "name": "dsv3-deepep-graph-512-of-300",
            "source": _GRAPH_PAD + " 512, DeepEP",
            "tokens": 512,
            "topk": 9,
            "experts": 257,
            "real": 300,
        },
        {
            "name": "dsv3-deepep-prefill-8k",
            "source": "DeepSeek-V3 DeepEP prefill padded to 8192 (8000 real)",
            "tokens": 8192,
            "topk": 9,
            "experts": 257,
            "real": 8000,
        },
        {
            "name": "qwen3-moe-graph-64-of-1",
            "source": "Qwen3-30B-A3B (top-8), one token in a 64-slot graph",
            "tokens": 64,
            "topk": 8,
            "experts": 128,
            "real": 1,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([8, 40, 200]),
        "topk": r.choice([2, 6, 9]),
        "experts": r.choice([8, 64]),
        "real": r.choice([0, 3, 7]),
    },
    make_inputs=_pad_ids_inputs,
    call=_pad_ids_call,
    reference=_pad_ids_reference,
    mutated=("topk_ids",),
    tolerance={"topk_ids": (0.0, 0.0)},
    tolerance_why="integer rows copied or set to the fill value: exact",
)


# --- MRotaryEmbedding._forward_triton (f03bfa4c): multimodal RoPE, gather fused in ---


def _mrope_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """Qwen-VL style: 3 position rows (temporal / height / width), equal for text tokens and
    a grid for image tokens; the cos/sin cache as ``RotaryEmbedding`` builds it (base 1e6)."""
    torch = _torch()
    t, hq, hk, d = shape["tokens"], shape["hq"], shape["hk"], shape["head"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    text = torch.arange(t, device=device)
    grid = torch.stack([text // 256, (text // 16) % 16, text % 16])
    image = (torch.arange(t, device=device) % 3) == 0  # a share of image tokens
    positions = torch.where(image[None, :], grid + 32, text[None, :].expand(3, t))
    max_pos = int(positions.max()) + 16
    inv_freq = 1.0 / (1e6 ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))
    freqs = torch.arange(max_pos, device=device, dtype=torch.float32)[:, None] * inv_freq
    return {
        "positions": positions.contiguous(),
        "query": torch.randn(t, hq * d, generator=gen, device=device).to(dt),
        "key": torch.randn(t, hk * d, generator=gen, device=device).to(dt),
        "cos_sin_cache": torch.cat([freqs.cos(), freqs.sin()], -1).to(dt),
        "mrope_section": list(shape["section"]),
        "mrope_interleaved": bool(shape.get("interleaved", False)),
        "head": d,
    }


def _mrope_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    """Each side's ``MRotaryEmbedding._forward_triton`` (the method the layer's forward
    takes on CUDA) on a minimal layer: the attributes it reads and the class's own
    ``_match_cos_sin_cache_dtype``."""
    cls = mod.MRotaryEmbedding
    layer = types.SimpleNamespace(
        cos_sin_cache=x["cos_sin_cache"],
        mrope_section=x["mrope_section"],
        mrope_interleaved=x["mrope_interleaved"],
        head_size=x["head"],
        rotary_dim=x["head"],
        is_neox_style=True,
    )
    layer._match_cos_sin_cache_dtype = types.MethodType(cls._match_cos_sin_cache_dtype, layer)
    q, k = cls._forward_triton(layer, x["positions"], x["query"], x["key"])
    return {"query": q, "key": k}


def _mrope_reference(x: Inputs) -> Outputs:
    torch = _torch()
    d, sec = x["head"], x["mrope_section"]
    cos, sin = x["cos_sin_cache"].float()[x["positions"]].chunk(2, dim=-1)  # [3, T, d/2]
    if x["mrope_interleaved"]:  # frequency j takes axis j % 3 within the sections
        axis = torch.arange(d // 2, device=cos.device) % 3
        axis[: sec[1] * 3][1::3], axis[: sec[2] * 3][2::3] = 1, 2
        axis[sec[1] * 3 :][axis[sec[1] * 3 :] == 1] = 0
        axis[sec[2] * 3 :][axis[sec[2] * 3 :] == 2] = 0
    else:  # chunked: the first section from T, the next from H, the rest from W
        axis = torch.repeat_interleave(
            torch.arange(3, device=cos.device), torch.tensor(sec, device=cos.device)
        )
    pick = torch.arange(d // 2, device=cos.device)
    cos, sin = cos[axis, :, pick].T, sin[axis, :, pick].T  # [T, d/2]

    def rotate(v: Any) -> Any:
        v = v.float().view(v.shape[0], -1, d)
        a, b = v[..., : d // 2], v[..., d // 2 :]
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.cat([a * c - b * s, b * c + a * s], -1).flatten(1)

    return {
        "query": rotate(x["query"]).to(x["query"].dtype),
        "key": rotate(x["key"]).to(x["key"].dtype),
    }


_QWEN25_VL = "Qwen2.5-VL-7B (28 q / 4 kv heads of 128, mrope_section [16, 24, 24])"
_QWEN3_VL = "Qwen3-VL-30B-A3B (32 q / 4 kv heads of 128, interleaved [24, 20, 20])"

MROPE_FUSED = Spec(
    name="sglang_mrope_forward_triton",
    launcher="MRotaryEmbedding._forward_triton",
    rows=(
        ("sglang", "f03bfa4c", "python/sglang/srt/layers/rotary_embedding.py"),
        # the same method under torch.compile (``get_compiler_backend`` shim: inductor)
        ("sglang", "f389f017", "python/sglang/srt/layers/rotary_embedding.py"),
        ("sglang", "f9696641", "python/sglang/srt/layers/rotary_embedding.py"),
    ),
    shapes=(
        {
            "name": "qwen25-vl-7b-prefill-4k",
            "source": _QWEN25_VL + ", image + text prefill",
            "tokens": 4096,
            "hq": 28,
            "hk": 4,
            "head": 128,
            "section": (16, 24, 24),
        },
        {
            "name": "qwen25-vl-7b-decode-64",
            "source": _QWEN25_VL + ", decode batch 64",
            "tokens": 64,
            "hq": 28,
            "hk": 4,
            "head": 128,
            "section": (16, 24, 24),
        },
        {
            "name": "qwen3-vl-30b-prefill-8k",
            "source": _QWEN3_VL + ", prefill",
            "tokens": 8192,
            "hq": 32,
            "hk": 4,
            "head": 128,
            "section": (24, 20, 20),
            "interleaved": True,
        },
        {
            "name": "qwen25-vl-72b-tp8-prefill-2k",
            "source": "Qwen2.5-VL-72B at TP 8 (8 q / 1 kv head)",
            "tokens": 2048,
            "hq": 8,
            "hk": 1,
            "head": 128,
            "section": (16, 24, 24),
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 7, 50]),
        "hq": r.choice([2, 4]),
        "hk": r.choice([1, 2]),
        "head": 64,
        "section": (8, 12, 12),
        "interleaved": r.choice([False, True]),
        "dtype": "float16",  # the CPU interpreter's bf16 stores (specs.misc_vllm_attn)
    },
    make_inputs=_mrope_inputs,
    call=_mrope_call,
    reference=_mrope_reference,
    mutated=("query", "key"),
    tolerance_why="two products and a sum per element in the cache's dtype, rounded once: "
    "dtype defaults (4 ulp)",
)


# --- MHATokenToKVPool.move_kv_cache (5a9170d9): copy accepted draft tokens' KV, all layers ---

#: Minimal pools by (buffer address, shape, side): the pointer table and copy config a pool
#: builds once. The buffer itself is not held: a later buffer of the same shape at the same
#: address has the same per-layer addresses, so its entry stays right; bounded in size.
_POOLS: dict[tuple[Any, ...], Any] = {}
_POOLS_MAX = 4096  # above any rotation (<= 64 sets per side) times the shapes of a row


def _move_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """Every layer's K and V buffers as one tensor ``[2 * layers, slots, heads, dim]`` (the
    pool's per-layer buffers, one slot row of ``heads * dim`` elements each); ``n`` draft
    slots copied onto ``n`` fresh slots, as EAGLE's verify moves accepted tokens."""
    torch = _torch()
    layers, slots, h, d, n = (shape[k] for k in ("layers", "slots", "heads", "dim", "moves"))
    kv = torch.randn(2 * layers, slots, h, d, generator=gen, device=device).to(torch.bfloat16)
    pick = torch.randperm(slots - 1, generator=_cpu_gen(gen, device))[: 2 * n] + 1
    return {"kv": kv, "src_loc": pick[:n].to(device), "tgt_loc": pick[n:].to(device)}


def _pool(mod: Any, kv: Any, side: str) -> Any:
    """A pool with the attributes ``move_kv_cache`` reads, built as ``_create_buffers`` builds
    them (cached per buffer, as a pool builds them once); the after side's copy config from
    its own ``_init_kv_copy_and_warmup``."""
    torch = _torch()
    key = (kv.data_ptr(), tuple(kv.shape), kv.dtype, side)
    if key not in _POOLS:
        if len(_POOLS) >= _POOLS_MAX:
            _POOLS.clear()
        pool = types.SimpleNamespace(
            data_ptrs=torch.tensor(
                [kv[i].data_ptr() for i in range(kv.shape[0])],
                dtype=torch.uint64,
                device=kv.device,
            ),
            data_strides=torch.tensor(
                [kv[0, 0].numel() * kv.element_size()] * kv.shape[0], device=kv.device
            ),
            device=kv.device,
            _kv_copy_config=None,
        )
        init = getattr(mod.MHATokenToKVPool, "_init_kv_copy_and_warmup", None)
        if init is not None:
            init(pool)
        _POOLS[key] = pool
    return _POOLS[key]


def _move_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    side = "tiled" if hasattr(mod.MHATokenToKVPool, "_init_kv_copy_and_warmup") else "rows"
    mod.MHATokenToKVPool.move_kv_cache(_pool(mod, x["kv"], side), x["tgt_loc"], x["src_loc"])
    return {"kv": x["kv"]}


def _move_reference(x: Inputs) -> Outputs:
    kv = x["kv"].clone()
    kv[:, x["tgt_loc"]] = kv[:, x["src_loc"]]
    return {"kv": kv}


_MOVE = "EAGLE verify moving accepted draft tokens' KV (SGLang spec decoding)"

MOVE_KV_CACHE = Spec(
    name="sglang_move_kv_cache",
    launcher="MHATokenToKVPool.move_kv_cache",
    rows=(("sglang", "5a9170d9", "python/sglang/srt/mem_cache/memory_pool.py"),),
    shapes=(
        {
            "name": "llama3-8b-b16-topk4",
            "source": _MOVE + ", Llama-3-8B (32 layers, 8 kv heads of 128), 16 requests x 4 tokens",
            "layers": 32,
            "slots": 4096,
            "heads": 8,
            "dim": 128,
            "moves": 64,
        },
        {
            "name": "llama3-8b-b1-topk4",
            "source": _MOVE + ", Llama-3-8B, one request",
            "layers": 32,
            "slots": 4096,
            "heads": 8,
            "dim": 128,
            "moves": 4,
        },
        {
            "name": "llama3-70b-tp8-b64",
            "source": _MOVE + ", Llama-3-70B at TP 8 (80 layers, 1 kv head)",
            "layers": 80,
            "slots": 2048,
            "heads": 1,
            "dim": 128,
            "moves": 256,
        },
        {
            "name": "qwen3-32b-b32",
            "source": _MOVE + ", Qwen3-32B (64 layers, 8 kv heads)",
            "layers": 64,
            "slots": 2048,
            "heads": 8,
            "dim": 128,
            "moves": 128,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "layers": r.choice([1, 2, 3]),
        "slots": r.choice([64, 200]),
        "heads": r.choice([1, 2]),
        "dim": r.choice([64, 128]),
        "moves": r.choice([1, 5, 20]),
    },
    make_inputs=_move_inputs,
    call=_move_call,
    reference=_move_reference,
    mutated=("kv",),
    tolerance={"kv": (0.0, 0.0)},
    tolerance_why="byte copies of whole slot rows: exact",
)


# --- NSA indexer K/S gather (043f1317): GetK / GetS.execute, torch gather -> Triton ---


def _nsa_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """The NSA indexer's paged buffer as ``NSATokenToKVPool`` lays it out: per page, the
    fp8 keys of its tokens (``page * 128`` bytes) then their fp32 scales (``page * 4``
    bytes), uint8; a request's pages drawn at random from the pool."""
    torch = _torch()
    seq, page, dim = shape["seq"], shape["page"], 128
    pages = -(-seq // page)
    pool_pages = pages + 32
    buf = torch.randint(
        0, 256, (pool_pages, page * dim + page * 4), generator=gen, device=device
    ).to(torch.uint8)
    order = torch.randperm(pool_pages, generator=_cpu_gen(gen, device))[:pages]
    pool = types.SimpleNamespace(
        page_size=page, index_head_dim=dim, quant_block_size=128, device=buf.device
    )
    return {
        "pool": pool,
        "buf": buf,
        "seq_len": seq,
        "page_indices": order.to(device=device, dtype=torch.int32),
    }


def _nsa_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    args = (x["pool"], x["buf"], x["seq_len"], x["page_indices"])
    return {"k": mod.GetK.execute(*args), "s": mod.GetS.execute(*args)}


def _nsa_reference(x: Inputs) -> Outputs:
    page, dim, seq = x["pool"].page_size, 128, x["seq_len"]
    rows = x["buf"][x["page_indices"].long()]
    k = rows[:, : page * dim].reshape(-1, dim)[:seq]
    s = rows[:, page * dim :].reshape(-1, 4)[:seq]
    return {"k": k, "s": s}


_DSV32 = "DeepSeek-V3.2 NSA indexer (128-byte fp8 keys, pages of 64), one request's context"

NSA_INDEX_GATHER = Spec(
    name="sglang_nsa_index_k_s_gather",
    launcher="GetK.execute",
    rows=(("sglang", "043f1317", "python/sglang/srt/layers/attention/nsa/index_buf_accessor.py"),),
    shapes=(
        {"name": "dsv32-ctx-4k", "source": _DSV32 + " of 4k", "seq": 4096, "page": 64},
        {"name": "dsv32-ctx-16k", "source": _DSV32 + " of 16k", "seq": 16384, "page": 64},
        {"name": "dsv32-ctx-64k", "source": _DSV32 + " of 64k", "seq": 65536, "page": 64},
        {
            "name": "dsv32-ctx-ragged",
            "source": _DSV32 + ", a partial last page",
            "seq": 10000,
            "page": 64,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "seq": r.choice([1, 63, 65, 300]),
        "page": 64,
    },
    make_inputs=_nsa_inputs,
    call=_nsa_call,
    reference=_nsa_reference,
    tolerance={"k": (0.0, 0.0), "s": (0.0, 0.0)},
    tolerance_why="byte gathers of keys and scales: exact",
)


SPECS: tuple[Spec, ...] = (
    FLASHMLA_KV_INDICES,
    FLASHINFER_KV_INDICES,
    EP_REORDER,
    KV_ALLOC,
    ZERO_EXPERTS,
    LAYERNORM_MODULATE,
    CUTLASS_W4_REORDER,
    TOPK_PAD_ZERO,
    TOPK_PAD_IDS,
    MROPE_FUSED,
    MOVE_KV_CACHE,
    NSA_INDEX_GATHER,
)

_ = random
