"""Specs for the misc SGLang rows of the execution census (issue 35): extend (prefill with
a KV-cache prefix) attention and the DSA decode-graph metadata kernels, plus the helpers
the other ``misc_sglang_*`` modules share (diffusion/norm kernels live in
``misc_sglang_diffusion``, KV-cache and routing kernels in ``misc_sglang_cache``).

Shapes name their source. Models: Llama-3-8B (32 q heads, 8 kv heads, head 128),
Qwen2.5-7B (28/4 heads), Gemma-3 / gpt-oss (sliding window 512/128), DeepSeek-V3.2
(index top-k 2048, real pages of 64).
"""

from __future__ import annotations

import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name


def _torch() -> Any:
    import torch

    return torch


def _cpu_gen(gen: Any, device: Any) -> Any:
    """A CPU generator seeded from ``gen`` (permutations are drawn on the CPU: CUDA
    generators refuse ``randperm`` on another device)."""
    torch = _torch()
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=device).item())
    return torch.Generator().manual_seed(seed)


def _is_stub(obj: Any) -> bool:
    return type(obj).__name__ == "Stub"


def _pdl_supported() -> bool:
    """Programmatic dependent launch needs SM90+; on the CPU interpreter it stays off (the
    interpreter has no ``gdc_wait``)."""
    torch = _torch()
    return bool(torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9)


# --- extend_attention_fwd: prefill of new tokens against a cached prefix plus themselves ---


def _kv_strides(buf: Any, page_size: int) -> tuple[int, int, int, int]:
    """Slot, head, page and token strides of a ``[slots, heads, dim]`` KV buffer (the
    helper the later files import from their decode-attention sibling, which the loader
    stubs): with one slot per page every stride is the slot stride."""
    slot = buf.stride(0)
    return slot, buf.stride(1), slot * page_size, slot


def _no_aux(score_mod: Any, aux_tensors: Any) -> tuple[Any, int, int, int]:
    """The score-mod unpacker with no score mod (the only case the spec drives)."""
    return None, 0, 0, 0


def _extend_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, hq, hk, d = shape["batch"], shape["hq"], shape["hk"], shape["head"]
    ext, pre = shape["extend"], shape["prefix"]
    # ragged batch: lengths fall from the nominal value (a mixed prefill batch)
    e_lens = [max(1, ext - (i * 53) % max(1, ext // 2)) for i in range(b)]
    p_lens = [max(0, pre - (i * 71) % max(1, pre // 2 + 1)) for i in range(b)]
    total_e, total_p = sum(e_lens), sum(p_lens)
    slots = total_p + 64
    perm = torch.randperm(slots, generator=_cpu_gen(gen, device))[:total_p]
    max_total = max(p + e for p, e in zip(p_lens, e_lens, strict=True))
    req_to_tokens = torch.zeros(b, max_total, dtype=torch.int32)
    start = 0
    for i, n in enumerate(p_lens):
        req_to_tokens[i, :n] = perm[start : start + n].to(torch.int32)
        start += n
    dt = getattr(torch, shape.get("dtype", "bfloat16"))

    def rnd(*s: int) -> Any:
        return torch.randn(*s, generator=gen, device=device).to(dt)

    def cums(lens: list[int]) -> Any:
        out = [0]
        for n in lens:
            out.append(out[-1] + n)
        return torch.tensor(out, dtype=torch.int32, device=device)

    qo_indptr = cums(e_lens)
    return {
        "q_extend": rnd(total_e, hq, d),
        "k_extend": rnd(total_e, hk, d),
        "v_extend": rnd(total_e, hk, d),
        "o_extend": torch.empty(total_e, hq, d, device=device, dtype=dt),
        "k_buffer": rnd(slots, hk, d),
        "v_buffer": rnd(slots, hk, d),
        "qo_indptr": qo_indptr,
        "kv_indptr": cums(p_lens),
        "kv_indices": perm.to(device=device, dtype=torch.int64),
        "custom_mask": None,
        "is_causal": True,
        "mask_indptr": torch.zeros(b + 1, dtype=torch.int64, device=device),
        "max_len_extend": max(e_lens),
        "k_scale": 1.0,
        "v_scale": 1.0,
        "sm_scale": d**-0.5,
        "logit_cap": 0.0,
        "sliding_window_size": shape.get("window", -1),
        # the token-table convention of the oldest launcher
        "req_to_tokens": req_to_tokens.to(device),
        "b_req_idx": torch.arange(b, dtype=torch.int32, device=device),
        "b_seq_len": torch.tensor(
            [p + e for p, e in zip(p_lens, e_lens, strict=True)], dtype=torch.int32, device=device
        ),
        "b_seq_len_extend": torch.tensor(e_lens, dtype=torch.int32, device=device),
        "b_start_loc_extend": qo_indptr[:-1].clone(),
    }


def _extend_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    for name, real in (("_extract_kv_strides", _kv_strides), ("unpack_aux_tensors", _no_aux)):
        if _is_stub(getattr(mod, name, None)):
            setattr(mod, name, real)
    call_by_name(mod.extend_attention_fwd, x)
    return {"o_extend": x["o_extend"]}


def _extend_reference(x: Inputs) -> Outputs:
    torch = _torch()
    hq, hk = x["q_extend"].shape[1], x["k_extend"].shape[1]
    window = x["sliding_window_size"]
    qo, kvp = x["qo_indptr"].tolist(), x["kv_indptr"].tolist()
    outs = []
    for i in range(len(qo) - 1):
        idx = x["kv_indices"][kvp[i] : kvp[i + 1]]
        k = torch.cat([x["k_buffer"][idx], x["k_extend"][qo[i] : qo[i + 1]]]).float()
        v = torch.cat([x["v_buffer"][idx], x["v_extend"][qo[i] : qo[i + 1]]]).float()
        q = x["q_extend"][qo[i] : qo[i + 1]].float()
        n_pre, n_q = kvp[i + 1] - kvp[i], qo[i + 1] - qo[i]
        q_pos = torch.arange(n_q, device=q.device)[:, None] + n_pre
        k_pos = torch.arange(k.shape[0], device=q.device)[None, :]
        allowed = k_pos <= q_pos
        if window > 0:
            allowed &= (q_pos - k_pos) <= window
        k = k.repeat_interleave(hq // hk, 1).transpose(0, 1)
        v = v.repeat_interleave(hq // hk, 1).transpose(0, 1)
        s = (q.transpose(0, 1) @ k.transpose(1, 2)) * x["sm_scale"]
        s = s.masked_fill(~allowed[None], float("-inf"))
        outs.append((torch.softmax(s, -1) @ v).transpose(0, 1))
    return {"o_extend": torch.cat(outs).to(x["o_extend"].dtype)}


_EXT_OLD = "python/sglang/srt/layers/attention/triton_ops/extend_attention.py"
_EXT_NEW = "python/sglang/kernels/ops/attention/extend_attention.py"

EXTEND_ATTENTION = Spec(
    name="sglang_extend_attention_fwd",
    launcher="extend_attention_fwd",
    rows=(
        ("sglang", "67c424cc", _EXT_OLD),
        ("sglang", "634a3561", _EXT_OLD),
        ("sglang", "ddcf9fe3", _EXT_OLD),
        ("sglang", "1b63155e", _EXT_NEW),
        ("sglang", "18e6c61c", _EXT_NEW),
    ),
    shapes=(
        # test_extend_attention at the sha: B=19, N_CTX=1024, heads 32/8 (here 8 requests)
        {
            "name": "test-b8-1k",
            "batch": 8,
            "extend": 512,
            "prefix": 512,
            "hq": 32,
            "hk": 8,
            "head": 128,
        },
        {
            "name": "llama3-8b-chunked-prefill",
            "batch": 2,
            "extend": 2048,
            "prefix": 4096,
            "hq": 32,
            "hk": 8,
            "head": 128,
        },
        {
            "name": "qwen2.5-7b-mixed-fp16",
            "batch": 16,
            "extend": 256,
            "prefix": 1024,
            "hq": 28,
            "hk": 4,
            "head": 128,
            "dtype": "float16",
        },
        {
            "name": "llama3-8b-no-prefix",
            "batch": 4,
            "extend": 1024,
            "prefix": 0,
            "hq": 32,
            "hk": 8,
            "head": 128,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2, 3]),
        "extend": r.choice([17, 40, 70]),
        "prefix": r.choice([0, 33, 90]),
        "hq": r.choice([4, 8]),
        "hk": r.choice([2, 4]),
        "head": r.choice([64, 128]),
        # fp16: the CPU interpreter stores an fp32 tile into a bf16 pointer as raw bits
        "dtype": "float16",
    },
    make_inputs=_extend_inputs,
    call=_extend_call,
    reference=_extend_reference,
    mutated=("o_extend",),
    tolerance={"o_extend": (2e-2, 2e-2)},
    tolerance_why="online softmax over <= 6k keys in fp32 with a bf16 P@V (block sizes and "
    "tile skipping differ by version, so not bitwise): bf16 default plus an absolute floor",
)

EXTEND_ATTENTION_SWA = Spec(
    name="sglang_extend_attention_swa",
    launcher="extend_attention_fwd",
    rows=(("sglang", "0475448e", _EXT_OLD),),
    shapes=(
        # the commit skips tiles wholly outside the sliding window: windowed shapes
        {
            "name": "gpt-oss-w128-prefill",
            "batch": 4,
            "extend": 1024,
            "prefix": 1024,
            "hq": 64,
            "hk": 8,
            "head": 64,
            "window": 128,
        },
        {
            "name": "gemma3-w512-prefill",
            "batch": 2,
            "extend": 2048,
            "prefix": 2048,
            "hq": 16,
            "hk": 8,
            "head": 128,
            "window": 512,
        },
        {
            "name": "gpt-oss-w128-chunk",
            "batch": 8,
            "extend": 256,
            "prefix": 3072,
            "hq": 64,
            "hk": 8,
            "head": 64,
            "window": 128,
        },
        {
            "name": "test-w64",
            "batch": 3,
            "extend": 300,
            "prefix": 200,
            "hq": 8,
            "hk": 2,
            "head": 128,
            "window": 64,
        },
    ),
    control={
        "name": "llama3-8b-full-attention",
        "batch": 4,
        "extend": 1024,
        "prefix": 1024,
        "hq": 32,
        "hk": 8,
        "head": 128,
    },
    control_reason="no sliding window and no custom mask: the tile-skip test is compiled out",
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2]),
        "extend": r.choice([40, 90]),
        "prefix": r.choice([0, 50, 130]),
        "hq": 4,
        "hk": r.choice([1, 2]),
        "head": 64,
        "window": r.choice([16, 32, 48]),
        "dtype": "float16",
    },
    make_inputs=_extend_inputs,
    call=_extend_call,
    reference=_extend_reference,
    mutated=("o_extend",),
    tolerance={"o_extend": (2e-2, 2e-2)},
    tolerance_why="online softmax in fp32 over the window's keys with a bf16 P@V: bf16 "
    "default plus an absolute floor",
)

# --- DSA (DeepSeek-V3.2 sparse attention) CUDA-graph metadata: seqlens and page tables ---


def _dsa_common(shape: Shape, gen: Any, device: Any, rows: int) -> Inputs:
    torch = _torch()
    bs, width, ps = shape["batch"], shape["max_len"], shape["page"]
    lo = max(shape.get("extend", 1), width // 8)
    lens = torch.randint(lo, width + 1, (bs,), generator=gen, device=device)
    pool = bs * 2 + 3
    i32 = torch.int32

    def empty(*s: int) -> Any:
        # stale graph buffers: a fill value no live entry can take
        return torch.full(s, -7, dtype=i32, device=device)

    return {
        "seq_lens": lens,
        "req_pool_indices": torch.randperm(pool, generator=_cpu_gen(gen, device))[:bs].to(device),
        "req_to_token": torch.randint(
            0, 2**20, (pool, width), generator=gen, device=device, dtype=i32
        ),
        "cache_seqlens": empty(bs),
        "cu_seqlens_k": empty(bs + 1),
        "page_table_1": empty(rows, width),
        "seqlens_expanded": empty(rows),
        "dsa_cache_seqlens": empty(rows),
        "dsa_cu_seqlens_k": empty(rows + 1),
        # with page size 1 the launcher uses page_table_1 as the real table (this one unused)
        "real_page_table": empty(rows, -(-width // ps)),
        "bs": bs,
        "max_len": width,
        "max_seqlen_k": width,
        "dsa_index_topk": shape.get("topk", 2048),
        "real_page_size": ps,
    }


def _dsa_decode_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    return _dsa_common(shape, gen, device, shape["batch"])


def _dsa_extend_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    bs, ext = shape["batch"], shape["extend"]
    x = _dsa_common(shape, gen, device, bs * ext)
    x.update(
        extend_seq_lens=torch.full((bs,), ext, dtype=torch.int32, device=device),
        total_len=bs * ext,
        max_extend_len=ext,
        max_total_len=bs * ext,
        static_extend_len=True,
    )
    return x


def _live(x: Inputs, row_lens: Any, table: Any, step: int) -> Any:
    """``table`` with columns at or past each row's kv length zeroed: nothing reads them
    (the repo's test compares the live prefix only; the commits skip the dead blocks)."""
    torch = _torch()
    cols = torch.arange(table.shape[1], device=table.device)[None, :] * step
    return torch.where(cols < row_lens[:, None], table, torch.zeros_like(table))


def _dsa_outputs(x: Inputs, row_lens: Any, rows: int) -> Outputs:
    ps = x["real_page_size"]
    real = x["real_page_table"] if ps > 1 else x["page_table_1"]
    out = {
        "cache_seqlens": x["cache_seqlens"],
        "cu_seqlens_k": x["cu_seqlens_k"],
        "dsa_cache_seqlens": x["dsa_cache_seqlens"][:rows],
        "dsa_cu_seqlens_k": x["dsa_cu_seqlens_k"][: rows + 1],
        "real_page_table": _live(x, row_lens, real[:rows], ps),
    }
    return out


def _dsa_args(fn: Any, x: Inputs) -> Inputs:
    """The fused decode graph drops the wide page-size-1 table when the real table has
    larger pages, wherever the launcher accepts ``None`` for it (be70bfbd added that)."""
    import inspect

    ann = str(inspect.signature(fn).parameters["page_table_1"].annotation)
    if x["real_page_size"] > 1 and "Optional" in ann:
        return {**x, "page_table_1": None}
    return x


def _dsa_decode_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    fn = mod.fused_dsa_decode_metadata
    call_by_name(fn, _dsa_args(fn, x))
    return _dsa_outputs(x, x["seq_lens"], x["bs"])


def _dsa_extend_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    fn = mod.fused_dsa_draft_extend_metadata
    call_by_name(fn, _dsa_args(fn, x))
    rows = x["total_len"]
    row_lens = x["seq_lens"].repeat_interleave(x["extend_seq_lens"].long())
    out = _dsa_outputs(x, row_lens, rows)
    out["seqlens_expanded"] = x["seqlens_expanded"][:rows]
    return out


def _dsa_expected(x: Inputs, row_lens: Any, expanded: Any, table: Any) -> Outputs:
    torch = _torch()
    i32, ps = torch.int32, x["real_page_size"]

    def cu(v: Any) -> Any:
        return torch.cat([v.new_zeros(1), v.cumsum(0, dtype=i32)])

    cache = x["seq_lens"].to(i32)
    dsa = expanded.clamp(max=x["dsa_index_topk"]).to(i32)
    real = table[:, ::ps] // ps if ps > 1 else table
    return {
        "cache_seqlens": cache,
        "cu_seqlens_k": cu(cache),
        "dsa_cache_seqlens": dsa,
        "dsa_cu_seqlens_k": cu(dsa),
        "real_page_table": _live(x, row_lens, real, ps),
    }


def _dsa_decode_reference(x: Inputs) -> Outputs:
    table = x["req_to_token"][x["req_pool_indices"], : x["max_len"]]
    return _dsa_expected(x, x["seq_lens"], x["seq_lens"], table)


def _dsa_extend_reference(x: Inputs) -> Outputs:
    torch = _torch()
    reps = x["extend_seq_lens"].long()
    table = x["req_to_token"][x["req_pool_indices"], : x["max_seqlen_k"]]
    row_lens = x["seq_lens"].repeat_interleave(reps)
    expanded = torch.cat(
        [
            torch.arange(int(n) - int(q) + 1, int(n) + 1, device=row_lens.device)
            for n, q in zip(x["seq_lens"].tolist(), reps.tolist(), strict=True)
        ]
    ).to(torch.int32)
    out = _dsa_expected(x, row_lens, expanded, table.repeat_interleave(reps, 0))
    out["seqlens_expanded"] = expanded
    return out


_DSA_OLD = "python/sglang/srt/layers/attention/triton_ops/dsa_metadata.py"
_DSA_NEW = "python/sglang/kernels/ops/attention/dsa_metadata.py"
_DSA_WHY = "integer lengths, prefix sums and page-table copies: exact"
#: The graph buffers every launcher fills in place.
_DSA_MUTATED = (
    "cache_seqlens",
    "cu_seqlens_k",
    "page_table_1",
    "seqlens_expanded",
    "dsa_cache_seqlens",
    "dsa_cu_seqlens_k",
    "real_page_table",
)

DSA_DECODE_METADATA = Spec(
    name="sglang_dsa_decode_metadata",
    launcher="fused_dsa_decode_metadata",
    rows=(("sglang", "be70bfbd", _DSA_OLD), ("sglang", "1b63155e", _DSA_NEW)),
    shapes=(
        # DeepSeek-V3.2 decode CUDA graphs: index top-k 2048, real page 64 (and page 1)
        {"name": "dsv32-decode-b64-32k", "batch": 64, "max_len": 32768, "page": 64},
        {"name": "dsv32-decode-b256-8k", "batch": 256, "max_len": 8192, "page": 64},
        {"name": "dsv32-decode-b16-128k", "batch": 16, "max_len": 131072, "page": 64},
        {"name": "dsv32-decode-b32-page1", "batch": 32, "max_len": 16384, "page": 1},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 8]),
        "max_len": r.choice([200, 769, 1500]),
        "page": r.choice([1, 64]),
        "topk": 64,
    },
    make_inputs=_dsa_decode_inputs,
    call=_dsa_decode_call,
    reference=_dsa_decode_reference,
    mutated=_DSA_MUTATED,
    tolerance_why=_DSA_WHY,
)

DSA_DRAFT_EXTEND_METADATA = Spec(
    name="sglang_dsa_draft_extend_metadata",
    launcher="fused_dsa_draft_extend_metadata",
    rows=(("sglang", "bbc53703", _DSA_OLD), ("sglang", "08cb081e", _DSA_NEW)),
    shapes=(
        # MTP draft extend of DeepSeek-V3.2 (static width: num draft tokens per request)
        {"name": "dsv32-mtp3-b64-32k", "batch": 64, "extend": 3, "max_len": 32768, "page": 64},
        {"name": "dsv32-mtp4-b128-8k", "batch": 128, "extend": 4, "max_len": 8192, "page": 64},
        {"name": "dsv32-mtp3-b8-128k", "batch": 8, "extend": 3, "max_len": 131072, "page": 64},
        {"name": "dsv32-mtp2-b32-page1", "batch": 32, "extend": 2, "max_len": 16384, "page": 1},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 6]),
        "extend": r.choice([2, 3, 4]),
        "max_len": r.choice([193, 500, 1300]),
        "page": r.choice([1, 64]),
        "topk": 64,
    },
    make_inputs=_dsa_extend_inputs,
    call=_dsa_extend_call,
    reference=_dsa_extend_reference,
    mutated=_DSA_MUTATED,
    tolerance_why=_DSA_WHY,
)


# --- decode_attention_fwd of 2024 (token tables, one logits buffer): grouped GQA kernels ---


def _old_decode_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """The KV cache and token tables of ``decode._inputs`` (the split-KV decode spec), in
    this shape's dtype, plus the fp16 logits scratch this launcher takes as ``att_m``."""
    from .decode import _inputs

    torch = _torch()
    x = _inputs(shape, gen, device)
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    for name in ("q", "k_buffer", "v_buffer", "o"):
        x[name] = x[name].to(dt)
    hq = x["q"].shape[1]
    x["att_m"] = torch.empty(hq, x["total_num_tokens"], device=device, dtype=torch.float16)
    x["logit_cap"] = -1
    return x


def _old_decode_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.decode_attention_fwd, x)
    return {"o": x["o"]}


def _old_decode_reference(x: Inputs) -> Outputs:
    from .decode import _reference

    return _reference(x)


OLD_DECODE_ATTENTION = Spec(
    name="sglang_decode_attention_2024",
    launcher="decode_attention_fwd",
    rows=(("sglang", "df191254", "python/sglang/srt/layers/decode_attention.py"),),
    shapes=(
        # the commit adds grouped kernels for GQA/MQA (one program per kv head and block)
        {"name": "llama3-8b-b32-1k", "batch": 32, "kv_len": 1024, "hq": 32, "hk": 8, "head": 128},
        {"name": "llama3-8b-b8-4k", "batch": 8, "kv_len": 4096, "hq": 32, "hk": 8, "head": 128},
        {"name": "qwen2-7b-b16-2k", "batch": 16, "kv_len": 2048, "hq": 28, "hk": 4, "head": 128},
        {
            "name": "mqa-b64-512-fp16",
            "batch": 64,
            "kv_len": 512,
            "hq": 16,
            "hk": 1,
            "head": 128,
            "dtype": "float16",
        },
    ),
    control={"name": "mha-b32-1k", "batch": 32, "kv_len": 1024, "hq": 16, "hk": 16, "head": 128},
    control_reason="one kv head per q head (MHA) keeps the ungrouped kernels on both sides",
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 6]),
        "kv_len": r.choice([17, 200, 700]),
        "hq": r.choice([8, 16]),
        "hk": r.choice([1, 2, 8]),
        "head": r.choice([64, 128]),
        # fp16: the CPU interpreter stores an fp32 tile into a bf16 pointer as raw bits
        "dtype": "float16",
    },
    make_inputs=_old_decode_inputs,
    call=_old_decode_call,
    reference=_old_decode_reference,
    mutated=("o", "att_m"),
    tolerance={"o": (3e-2, 3e-2)},
    tolerance_why="q.k is summed in fp16 (the launcher's reduce type) over 128 dims and the "
    "logits stored as fp16 before the softmax: fp16 logits of magnitude ~10 carry ~5e-3 "
    "error, i.e. ~0.5% on the softmax weights; 3e-2 absolute and relative on the output",
)


SPECS: tuple[Spec, ...] = (
    EXTEND_ATTENTION,
    EXTEND_ATTENTION_SWA,
    DSA_DECODE_METADATA,
    DSA_DRAFT_EXTEND_METADATA,
    OLD_DECODE_ATTENTION,
)

_ = random
