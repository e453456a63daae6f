"""Specs for the misc SGLang rows of the execution census (issue 35), index and metadata
helpers around sparse (DSA) and TRT-LLM attention: top-k index to page-table transform,
draft-extend length expansion, and the TRT-LLM MHA CUDA-graph metadata update.

Shapes name their source: DeepSeek-V3.2 (index top-k 2048, page size 1 for the
transform), MTP speculative decoding (2-4 draft tokens per request), Llama-3-8B /
Qwen3 decode graphs (pages of 16/32/64).
"""

from __future__ import annotations

import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .misc_sglang import _cpu_gen, _torch

_TOPK = 2048


def _ragged(n: int, batch: int, gen: Any, device: Any) -> list[int]:
    """``batch`` lengths around ``n`` (1..n): a mixed batch, never uniform."""
    torch = _torch()
    lens = torch.randint(max(1, n // 4), n + 1, (batch,), generator=gen, device=device)
    return [int(v) for v in lens.tolist()]


# --- transform_index_page_table_prefill_fast (DSA): top-k token indices to KV slots ---


def _transform_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    bs, ext, prefix = shape["batch"], shape["extend"], shape["prefix"]
    extend = _ragged(ext, bs, gen, device)
    width = prefix + ext
    slots = bs * width + 64
    page_table = (
        torch.randperm(slots, generator=_cpu_gen(gen, device))[: bs * width]
        .view(bs, width)
        .to(device=device, dtype=torch.int32)
    )
    rows = []
    for e in extend:
        # a query at position p sees keys [0, p]: up to 2048 of them selected, -1 padding
        ctx = torch.arange(prefix + 1, prefix + e + 1, device=device)[:, None]
        pick = (torch.rand(e, _TOPK, generator=gen, device=device) * ctx).long()
        rows.append(torch.where(torch.arange(_TOPK, device=device) < ctx, pick, -1))
    return {
        "page_table": page_table,
        "topk_indices": torch.cat(rows).to(torch.int32),
        "extend_lens_cpu": extend,
        "page_size": 1,
    }


def _transform_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    return {"result": call_by_name(mod.transform_index_page_table_prefill_fast, x)}


def _transform_reference(x: Inputs) -> Outputs:
    torch = _torch()
    req = torch.repeat_interleave(
        torch.arange(len(x["extend_lens_cpu"]), device=x["page_table"].device),
        torch.tensor(x["extend_lens_cpu"], device=x["page_table"].device),
    )
    topk = x["topk_indices"].long()
    got = x["page_table"][req[:, None], topk.clamp(min=0)]
    return {"result": torch.where(topk >= 0, got, torch.full_like(got, -1))}


TRANSFORM_INDEX_PREFILL = Spec(
    name="sglang_dsa_transform_index_prefill",
    launcher="transform_index_page_table_prefill_fast",
    rows=(("sglang", "1b63155e", "python/sglang/kernels/ops/attention/dsa/transform_index.py"),),
    shapes=(
        # DeepSeek-V3.2 chunked prefill: ragged extend lengths over a cached prefix
        {"name": "dsv32-prefill-b4-2k", "batch": 4, "extend": 2048, "prefix": 2048},
        {"name": "dsv32-prefill-b16-512", "batch": 16, "extend": 512, "prefix": 4096},
        {"name": "dsv32-prefill-b1-8k", "batch": 1, "extend": 8192, "prefix": 0},
        {"name": "dsv32-mtp-verify-b64", "batch": 64, "extend": 4, "prefix": 3000},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2, 3]),
        "extend": r.choice([1, 5, 20]),
        "prefix": r.choice([0, 100, 2500]),
    },
    make_inputs=_transform_inputs,
    call=_transform_call,
    reference=_transform_reference,
    tolerance={"result": (0.0, 0.0)},
    tolerance_why="an integer gather: exact",
)


# --- seqlens_expand_triton (draft extend): per query token, the kv length it sees ---


def _expand_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    bs, q = shape["batch"], shape["extend"]
    extend = _ragged(q, bs, gen, device) if shape.get("ragged") else [q] * bs
    kv = torch.randint(q, shape["max_kv"] + 1, (bs,), generator=gen, device=device)
    return {
        "extend_seq_lens": torch.tensor(extend, dtype=torch.int32, device=device),
        "seq_lens": kv.to(torch.int32),
        "total_len": sum(extend),
        "max_q_len": max(extend),
    }


def _expand_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    return {"out": call_by_name(mod.seqlens_expand_triton, x)}


def _expand_reference(x: Inputs) -> Outputs:
    torch = _torch()
    parts = [
        torch.arange(kv - q + 1, kv + 1, dtype=torch.int32, device=x["seq_lens"].device)
        for q, kv in zip(x["extend_seq_lens"].tolist(), x["seq_lens"].tolist(), strict=True)
    ]
    return {"out": torch.cat(parts)}


SEQLENS_EXPAND = Spec(
    name="sglang_seqlens_expand",
    launcher="seqlens_expand_triton",
    rows=(("sglang", "bbc53703", "python/sglang/srt/layers/attention/triton_ops/pad.py"),),
    shapes=(
        # MTP draft extend of DeepSeek-V3.2: 3-4 tokens per request, contexts to 32k
        {"name": "dsv32-mtp3-b64", "batch": 64, "extend": 3, "max_kv": 32768},
        {"name": "dsv32-mtp4-b256", "batch": 256, "extend": 4, "max_kv": 8192},
        {"name": "eagle-ragged-b32", "batch": 32, "extend": 8, "max_kv": 4096, "ragged": True},
        {"name": "dsv32-mtp1-b1", "batch": 1, "extend": 1, "max_kv": 128000},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 7, 50]),
        "extend": r.choice([1, 3, 9]),
        "max_kv": r.choice([20, 5000]),
        "ragged": r.choice([False, True]),
    },
    make_inputs=_expand_inputs,
    call=_expand_call,
    reference=_expand_reference,
    tolerance={"out": (0.0, 0.0)},
    tolerance_why="integer lengths: exact (every request's kv length covers its queries, as "
    "in serving; the commit's clamp only changes padded rows that violate that)",
)


# --- update_trtllm_mha_graph_metadata: seqlens, cumsums and page table in one launch ---


def _trtllm_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    bs, max_len, page = shape["batch"], shape["max_len"], shape["page"]
    pool = 2 * bs + 3
    pages = -(-max_len // page)
    i32 = torch.int32
    lens = torch.randint(
        1, max_len - shape.get("offset", 0) + 1, (bs,), generator=gen, device=device
    )
    # req_to_token rows hold page-aligned runs of token slots, as a paged allocator writes
    starts = torch.randint(0, 2**16, (pool, pages), generator=gen, device=device) * page
    req_to_token = (starts[:, :, None] + torch.arange(page, device=device)).view(pool, -1)
    cu_k = torch.full((bs + 1,), -7, dtype=i32, device=device)
    cu_k[0] = 0  # the graph buffer's leading zero, set once at capture (not by the kernel)
    return {
        "req_pool_indices": torch.randperm(pool, generator=_cpu_gen(gen, device))[:bs].to(device),
        "seq_lens": lens,
        "req_to_token": req_to_token[:, :max_len].contiguous().to(i32),
        "cache_seqlens": torch.full((bs,), -7, dtype=i32, device=device),
        "cu_seqlens_k": cu_k,
        "page_table": torch.full((bs, pages), -7, dtype=i32, device=device),
        "bs": bs,
        "seqlen_offset": shape.get("offset", 0),
        "max_seq_pages": pages,
        "page_size": page,
    }


def _live_pages(x: Inputs, table: Any, seqlens: Any) -> Any:
    """Columns past ``cdiv(cache_seqlen, page)`` zeroed: the kernel's contract (after the
    commit) leaves them stale and the attention kernels never read them."""
    torch = _torch()
    live = -(-seqlens.long() // x["page_size"])
    cols = torch.arange(table.shape[1], device=table.device)[None, :]
    return torch.where(cols < live[:, None], table, torch.zeros_like(table))


def _trtllm_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.update_trtllm_mha_graph_metadata, x)
    return {
        "cache_seqlens": x["cache_seqlens"],
        "cu_seqlens_k": x["cu_seqlens_k"],
        "page_table": _live_pages(x, x["page_table"], x["cache_seqlens"]),
    }


def _trtllm_reference(x: Inputs) -> Outputs:
    torch = _torch()
    cache = (x["seq_lens"] + x["seqlen_offset"]).to(torch.int32)
    cu = torch.cat([cache.new_zeros(1), cache.cumsum(0, dtype=torch.int32)])
    page = x["page_size"]
    rows = x["req_to_token"][x["req_pool_indices"]][:, ::page] // page
    return {
        "cache_seqlens": cache,
        "cu_seqlens_k": cu,
        "page_table": _live_pages(x, rows[:, : x["max_seq_pages"]], cache),
    }


TRTLLM_GRAPH_METADATA = Spec(
    name="sglang_trtllm_mha_graph_metadata",
    launcher="update_trtllm_mha_graph_metadata",
    rows=(
        ("sglang", "1b63155e", "python/sglang/kernels/ops/kvcache/trtllm_mha_graph_metadata.py"),
    ),
    shapes=(
        # decode CUDA-graph replays (Llama-3-8B / Qwen3 serving): page 16/32/64, long contexts
        {"name": "decode-b64-32k-page64", "batch": 64, "max_len": 32768, "page": 64},
        {"name": "decode-b256-8k-page16", "batch": 256, "max_len": 8192, "page": 16},
        {"name": "decode-b16-128k-page64", "batch": 16, "max_len": 131072, "page": 64},
        {
            "name": "target-verify-b32-16k-page32",
            "batch": 32,
            "max_len": 16384,
            "page": 32,
            "offset": 4,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 5, 20]),
        "max_len": r.choice([64, 1000, 4096]),
        "page": r.choice([16, 64]),
        "offset": r.choice([0, 3]),
    },
    make_inputs=_trtllm_inputs,
    call=_trtllm_call,
    reference=_trtllm_reference,
    mutated=("cache_seqlens", "cu_seqlens_k", "page_table"),
    tolerance_why="integer lengths, prefix sums and page indices: exact",
)


# --- normal_decode_set_metadata (FlashAttention backend decode graphs): the same update ---


def _fa_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    x = _trtllm_inputs(shape, gen, device)
    x["cache_seqlens_int32"] = x.pop("cache_seqlens")
    x["seq_len_delta"] = x.pop("seqlen_offset")
    x["strided_indices"] = torch.arange(
        0, x["req_to_token"].shape[1], x["page_size"], device=device
    )
    return x


def _fa_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.normal_decode_set_metadata, x)
    return {
        "cache_seqlens": x["cache_seqlens_int32"],
        "cu_seqlens_k": x["cu_seqlens_k"],
        "page_table": _live_pages(x, x["page_table"], x["cache_seqlens_int32"]),
    }


def _fa_reference(x: Inputs) -> Outputs:
    return _trtllm_reference({**x, "seqlen_offset": x["seq_len_delta"]})


FA_DECODE_METADATA = Spec(
    name="sglang_fa_normal_decode_set_metadata",
    launcher="normal_decode_set_metadata",
    rows=(("sglang", "1b63155e", "python/sglang/kernels/ops/attention/metadata.py"),),
    shapes=(
        # FlashAttention-backend decode graph replays; page 1 takes the specialised kernel
        {"name": "decode-b64-32k-page1", "batch": 64, "max_len": 32768, "page": 1},
        {"name": "decode-b256-8k-page16", "batch": 256, "max_len": 8192, "page": 16},
        {"name": "decode-b16-128k-page64", "batch": 16, "max_len": 131072, "page": 64},
        {
            "name": "eagle-draft-b32-16k-page1",
            "batch": 32,
            "max_len": 16384,
            "page": 1,
            "offset": 2,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 5, 20]),
        "max_len": r.choice([64, 1000, 4096]),
        "page": r.choice([1, 16, 64]),
        "offset": r.choice([0, 1, 3]),
    },
    make_inputs=_fa_inputs,
    call=_fa_call,
    reference=_fa_reference,
    mutated=("cache_seqlens_int32", "cu_seqlens_k", "page_table"),
    tolerance_why="integer lengths, prefix sums and page indices: exact",
)


# --- update_flashinfer_indices (2024): the paged KV index list FlashInfer's decode plans on ---


class _PlanRecorder:
    """Stands in for a FlashInfer decode wrapper: ``begin_forward`` keeps the index arrays
    it is planned with (the launcher's only outputs), ``end_forward`` does nothing."""

    def __init__(self) -> None:
        self.args: tuple[Any, ...] = ()

    def begin_forward(self, *args: Any, **kwargs: Any) -> None:
        self.args = args

    def end_forward(self) -> None:
        return None


def _fi_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    bs, ctx = shape["batch"], shape["max_len"]
    pool = 2 * bs + 3
    lens = torch.randint(max(1, ctx // 8), ctx + 1, (bs,), generator=gen, device=device)
    return {
        "req_to_token": torch.randint(
            0, 2**20, (pool, ctx), generator=gen, device=device, dtype=torch.int32
        ),
        "req_pool_indices": torch.randperm(pool, generator=_cpu_gen(gen, device))[:bs].to(device),
        "seq_lens": lens.to(torch.int32),
        "prefix_lens": torch.zeros(bs, dtype=torch.int32, device=device),
        "heads": shape["heads"],
        "kv_heads": shape["kv_heads"],
    }


def _fi_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    """A decode step of the 2024 FlashInfer backend: the model runner carries the request
    table and the model's head layout; the decode wrapper records its plan."""
    import types

    torch = _torch()
    recorder = _PlanRecorder()
    config = types.SimpleNamespace(
        num_attention_heads=x["heads"],
        head_dim=128,
        get_num_kv_heads=lambda tp: x["kv_heads"] // tp,
    )
    runner = types.SimpleNamespace(
        model_config=config,
        tp_size=1,
        sliding_window_size=None,
        req_to_token_pool=types.SimpleNamespace(req_to_token=x["req_to_token"]),
        flashinfer_decode_wrapper=recorder,
        kv_cache_dtype=torch.bfloat16,
        dtype=torch.bfloat16,
    )
    mod.update_flashinfer_indices(
        mod.ForwardMode.DECODE, runner, x["req_pool_indices"], x["seq_lens"], x["prefix_lens"]
    )
    kv_indptr, kv_indices = recorder.args[0], recorder.args[1]
    return {"kv_indptr": kv_indptr, "kv_indices": kv_indices}


def _fi_reference(x: Inputs) -> Outputs:
    torch = _torch()
    rows = x["req_to_token"][x["req_pool_indices"]]
    lens = x["seq_lens"].tolist()
    indptr = torch.zeros(len(lens) + 1, dtype=torch.int32, device=rows.device)
    indptr[1:] = x["seq_lens"].cumsum(0)
    return {
        "kv_indptr": indptr,
        "kv_indices": torch.cat([rows[i, :n] for i, n in enumerate(lens)]),
    }


FLASHINFER_INDICES = Spec(
    name="sglang_update_flashinfer_indices_2024",
    launcher="update_flashinfer_indices",
    rows=(("sglang", "d134c139", "python/sglang/srt/model_executor/forward_batch_info.py"),),
    shapes=(
        # decode steps of Llama-3-8B serving (32 q / 8 kv heads): the per-request host loop
        # the commit replaces grows with the batch
        {
            "name": "llama3-8b-decode-b64-4k",
            "batch": 64,
            "max_len": 4096,
            "heads": 32,
            "kv_heads": 8,
        },
        {
            "name": "llama3-8b-decode-b256-2k",
            "batch": 256,
            "max_len": 2048,
            "heads": 32,
            "kv_heads": 8,
        },
        {
            "name": "llama3-8b-decode-b8-32k",
            "batch": 8,
            "max_len": 32768,
            "heads": 32,
            "kv_heads": 8,
        },
        {"name": "llama3-8b-decode-b1-8k", "batch": 1, "max_len": 8192, "heads": 32, "kv_heads": 8},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 5, 30]),
        "max_len": r.choice([100, 1000, 3000]),
        "heads": 32,
        "kv_heads": 8,
    },
    make_inputs=_fi_inputs,
    call=_fi_call,
    reference=_fi_reference,
    tolerance={"kv_indptr": (0.0, 0.0), "kv_indices": (0.0, 0.0)},
    tolerance_why="an index gather and a prefix sum: exact",
)


SPECS: tuple[Spec, ...] = (
    TRANSFORM_INDEX_PREFILL,
    SEQLENS_EXPAND,
    TRTLLM_GRAPH_METADATA,
    FA_DECODE_METADATA,
    FLASHINFER_INDICES,
)

_ = random
