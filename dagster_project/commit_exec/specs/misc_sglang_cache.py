"""Specs for the misc SGLang rows of the execution census (issue 35), KV-cache kernels:
MLA KV-buffer writes, the NSA indexer's K cache, the DSA Q8KV8 gather, paged flash KV
writes, DeepSeek-V4 RoPE and EAGLE's top-1 draft (MoE kernels: ``misc_sglang_moe``).

Shapes name their source: DeepSeek-V3/V3.2 (MLA 512 + 64, indexer pages of 64 x 128
fp8 bytes), DeepSeek-V4 (128 heads, rope 64 of 512), Llama-3-8B / gpt-oss KV heads,
Llama-3 / DeepSeek vocabularies.
"""

from __future__ import annotations

import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .misc_sglang import _cpu_gen, _pdl_supported, _torch

# --- draft_topk1_postprocess (EAGLE top-1 drafting): split argmax over the vocabulary ---


def _topk1_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    bs, vocab = shape["batch"], shape["vocab"]
    return {
        "next_token_logits": torch.randn(bs, vocab, generator=gen, device=device) * 4,
        "positions": torch.randint(
            0, 30000, (bs,), generator=gen, device=device, dtype=torch.int64
        ),
    }


def _topk1_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    p, idx = mod.draft_topk1_postprocess(x["next_token_logits"], x["positions"])
    return {"topk_p": p, "topk_index": idx, "positions": x["positions"]}


def _topk1_reference(x: Inputs) -> Outputs:
    torch = _torch()
    logits = x["next_token_logits"]
    return {
        "topk_p": torch.ones(logits.shape[0], 1, device=logits.device),
        "topk_index": logits.argmax(-1, keepdim=True),
        "positions": x["positions"] + 1,
    }


DRAFT_TOPK1 = Spec(
    name="sglang_draft_topk1_postprocess",
    launcher="draft_topk1_postprocess",
    rows=(("sglang", "bd47ec97", "python/sglang/kernels/ops/speculative/topk1.py"),),
    shapes=(
        # the docstring names GLM / DeepSeek-V4 vocab widths; EAGLE drafts run at decode batch
        {"name": "dsv3-vocab-b32", "batch": 32, "vocab": 129280},
        {"name": "glm-vocab-b8", "batch": 8, "vocab": 151552},
        {"name": "llama3-vocab-b64", "batch": 64, "vocab": 128256},
        {"name": "dsv3-vocab-b1", "batch": 1, "vocab": 129280},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 8]),
        "vocab": r.choice([1000, 8191, 20000, 32000]),
    },
    make_inputs=_topk1_inputs,
    call=_topk1_call,
    reference=_topk1_reference,
    mutated=("positions",),
    tolerance_why="an argmax of fp32 logits (no rounding; finite logits, so the NaN guard the "
    "commit adds never fires): exact",
)


# --- set_mla_kv_buffer_triton: scatter MLA (nope | rope) rows into the paged KV buffer ---


def _mla_set_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    n, nope, rope = shape["tokens"], shape.get("nope", 512), shape.get("rope", 64)
    slots = shape.get("slots", 8192)
    loc = torch.randperm(slots, generator=_cpu_gen(gen, device))[:n].to(device)
    # k_nope and k_rope are column slices of one projection output (strided rows)
    kv_a = torch.randn(n, 1, nope + rope, generator=gen, device=device).to(torch.bfloat16)
    return {
        "kv_buffer": torch.randn(slots, 1, nope + rope, generator=gen, device=device).to(
            torch.bfloat16
        ),
        "loc": loc,
        "cache_k_nope": kv_a[..., :nope],
        "cache_k_rope": kv_a[..., nope:],
    }


def _mla_set_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    # the engine's SM90+ test, stubbed by the loader: answered for the real device
    mod.is_arch_support_pdl = _pdl_supported
    mod.set_mla_kv_buffer_triton(x["kv_buffer"], x["loc"], x["cache_k_nope"], x["cache_k_rope"])
    return {"kv_buffer": x["kv_buffer"]}


def _mla_set_reference(x: Inputs) -> Outputs:
    torch = _torch()
    out = x["kv_buffer"].clone()
    out[x["loc"]] = torch.cat([x["cache_k_nope"], x["cache_k_rope"]], -1)
    return {"kv_buffer": out}


MLA_SET_KV = Spec(
    name="sglang_set_mla_kv_buffer",
    launcher="set_mla_kv_buffer_triton",
    rows=tuple(
        ("sglang", s, "python/sglang/srt/mem_cache/utils.py")
        for s in ("9d878c1f", "05d1ab51", "dca9ba63")
    ),
    shapes=(
        # DeepSeek-V3 MLA: kv_lora_rank 512 + rope 64, one latent head; decode batches
        # (below 768 locations: dca9ba63 keeps the Triton path, above it calls a JIT op)
        {"name": "dsv3-decode-b32", "tokens": 32},
        {"name": "dsv3-decode-b128", "tokens": 128, "slots": 65536},
        {"name": "dsv3-decode-b512", "tokens": 512, "slots": 65536},
        {"name": "dsv3-decode-b1", "tokens": 1},
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 5, 64, 300, 700]),
        "slots": r.choice([1024, 4096]),
    },
    make_inputs=_mla_set_inputs,
    call=_mla_set_call,
    reference=_mla_set_reference,
    mutated=("kv_buffer",),
    tolerance={"kv_buffer": (0.0, 0.0)},
    tolerance_why="a copy: exact",
)


# --- NSA indexer K cache (DeepSeek-V3.2): pages of 64 tokens x (128 fp8 bytes + 4 scale) ---

_NSA_PAGE, _NSA_DIM = 64, 128


def _nsa_buf(pages: int, gen: Any, device: Any) -> Any:
    torch = _torch()
    return torch.randint(
        0, 256, (pages, _NSA_PAGE * (_NSA_DIM + 4)), generator=gen, device=device
    ).to(torch.uint8)


def _nsa_get_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, n = shape["batch"], shape["seq"]
    lens = [max(1, n - (i * 997) % max(1, n // 2)) for i in range(b)]
    width = -(-max(lens) // _NSA_PAGE)
    pages = b * width + 16
    perm = torch.randperm(pages, generator=_cpu_gen(gen, device))[: b * width]
    return {
        "buf": _nsa_buf(pages, gen, device),
        "page_indices": perm.view(b, width).to(device=device, dtype=torch.int32),
        "seq_lens": torch.tensor(lens, dtype=torch.int64, device=device),
        "seq_lens_list": lens,
        "seq_len_sum": sum(lens),
        "max_seq_len": max(lens),
        "page_size": _NSA_PAGE,
        "index_head_dim": _NSA_DIM,
    }


def _nsa_get_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    """After the batched launcher (760ae933) one call gathers every request; before it the
    indexer called the per-request launcher in a loop and concatenated, as here."""
    fn = mod._get_k_and_s_triton
    if "seq_lens" in fn.__code__.co_varnames[: fn.__code__.co_argcount]:
        k, s = call_by_name(fn, x)
        return {"k": k, "s": s}
    torch = _torch()
    parts = [
        fn(
            buf=x["buf"],
            page_indices=x["page_indices"][i],
            seq_len=n,
            page_size=x["page_size"],
            index_head_dim=x["index_head_dim"],
        )
        for i, n in enumerate(x["seq_lens_list"])
    ]
    return {"k": torch.cat([p[0] for p in parts]), "s": torch.cat([p[1] for p in parts])}


def _nsa_get_reference(x: Inputs) -> Outputs:
    torch = _torch()
    ks, ss = [], []
    for i, n in enumerate(x["seq_lens_list"]):
        tok = torch.arange(n, device=x["buf"].device)
        page = x["page_indices"][i][tok // _NSA_PAGE].long()
        off = tok % _NSA_PAGE
        rows = x["buf"][page]
        k_cols = (off * _NSA_DIM)[:, None] + torch.arange(_NSA_DIM, device=tok.device)
        s_cols = (_NSA_PAGE * _NSA_DIM + off * 4)[:, None] + torch.arange(4, device=tok.device)
        ks.append(rows.gather(1, k_cols))
        ss.append(rows.gather(1, s_cols))
    return {"k": torch.cat(ks), "s": torch.cat(ss)}


NSA_GET_K_AND_S = Spec(
    name="sglang_nsa_get_k_and_s",
    launcher="_get_k_and_s_triton",
    rows=(
        ("sglang", "760ae933", "python/sglang/srt/layers/attention/nsa/index_buf_accessor.py"),
        ("sglang", "1b63155e", "python/sglang/kernels/ops/attention/dsa/index_buf_accessor.py"),
    ),
    shapes=(
        # DeepSeek-V3.2 indexer: page 64, 128-byte fp8 key + fp32 scale; ragged prefill
        {"name": "dsv32-prefill-b4-8k", "batch": 4, "seq": 8192},
        {"name": "dsv32-prefill-b1-32k", "batch": 1, "seq": 32768},
        {"name": "dsv32-prefill-b16-2k", "batch": 16, "seq": 2048},
        {"name": "dsv32-prefill-b8-600", "batch": 8, "seq": 600},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2, 3]),
        "seq": r.choice([5, 64, 100, 700]),
    },
    make_inputs=_nsa_get_inputs,
    call=_nsa_get_call,
    reference=_nsa_get_reference,
    tolerance={"k": (0.0, 0.0), "s": (0.0, 0.0)},
    tolerance_why="a byte gather: exact",
)


def _nsa_set_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    n, pages = shape["tokens"], shape["pages"]
    loc = torch.randperm(pages * _NSA_PAGE, generator=_cpu_gen(gen, device))[:n]
    k = torch.randn(n, _NSA_DIM, generator=gen, device=device) * 100
    return {
        "buf": _nsa_buf(pages, gen, device),
        "loc": loc.to(device),
        "index_k": k.to(torch.float8_e4m3fn),
        "index_k_scale": torch.rand(n, 1, generator=gen, device=device) + 0.01,
        "page_size": _NSA_PAGE,
    }


def _nsa_set_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod._set_k_and_s_triton, x)
    return {"buf": x["buf"]}


def _nsa_set_reference(x: Inputs) -> Outputs:
    torch = _torch()
    buf = x["buf"].clone()
    page, off = x["loc"] // _NSA_PAGE, x["loc"] % _NSA_PAGE
    dev = buf.device
    k_cols = (off * _NSA_DIM)[:, None] + torch.arange(_NSA_DIM, device=dev)
    s_cols = (_NSA_PAGE * _NSA_DIM + off * 4)[:, None] + torch.arange(4, device=dev)
    buf[page[:, None], k_cols] = x["index_k"].view(torch.uint8)
    buf[page[:, None], s_cols] = x["index_k_scale"].contiguous().view(torch.uint8)
    return {"buf": buf}


NSA_SET_K_AND_S = Spec(
    name="sglang_nsa_set_k_and_s",
    launcher="_set_k_and_s_triton",
    rows=(("sglang", "afe285f7", "python/sglang/srt/layers/attention/nsa/index_buf_accessor.py"),),
    shapes=(
        # DeepSeek-V3.2 indexer K writes: one row per new token (decode and prefill)
        {"name": "dsv32-decode-b64", "tokens": 64, "pages": 4096},
        {"name": "dsv32-decode-b256", "tokens": 256, "pages": 4096},
        {"name": "dsv32-prefill-8k", "tokens": 8192, "pages": 4096},
        {"name": "dsv32-prefill-32k", "tokens": 32768, "pages": 8192},
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 7, 100, 500]),
        "pages": r.choice([16, 64]),
    },
    make_inputs=_nsa_set_inputs,
    call=_nsa_set_call,
    reference=_nsa_set_reference,
    mutated=("buf",),
    tolerance={"buf": (0.0, 0.0)},
    tolerance_why="a byte scatter: exact (the commit only changes HIP asserts; CUDA runs the "
    "same kernel on both sides)",
)


# --- apply_rotary_emb_triton (DeepSeek-V4): in-place GPT-J RoPE on the rope slice ---


def _v4_rope_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, h, d, rope = shape["tokens"], shape["heads"], shape["head"], shape["rope"]
    max_pos = shape.get("max_pos", 8192)
    inv = 1.0 / (10000.0 ** (torch.arange(0, rope, 2, device=device).float() / rope))
    ang = torch.arange(max_pos, device=device).float()[:, None] * inv[None, :]
    dims = (t, h, d) if h else (t, d)
    return {
        "o": torch.randn(*dims, generator=gen, device=device).to(torch.bfloat16),
        "freqs_cis": torch.polar(torch.ones_like(ang), ang),
        "positions": torch.randint(0, max_pos, (t,), generator=gen, device=device),
        "rope": rope,
        "inverse": shape.get("inverse", True),
    }


def _v4_rope_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    # DeepseekV4 turns the batched kernels on at model build (a no-op before they existed)
    if hasattr(mod, "set_batched_rope"):
        mod.set_batched_rope(True)
    view = x["o"][..., -x["rope"] :]  # the rope part of each head, rows strided
    mod.apply_rotary_emb_triton(view, x["freqs_cis"], x["positions"], x["inverse"])
    return {"o": x["o"]}


def _v4_rope_reference(x: Inputs) -> Outputs:
    torch = _torch()
    o = x["o"].clone()
    rope = x["rope"]
    f = x["freqs_cis"][x["positions"]]
    f = f.conj() if x["inverse"] else f
    part = o[..., -rope:].float()
    pairs = torch.view_as_complex(part.reshape(*part.shape[:-1], rope // 2, 2).contiguous())
    f = f[:, None, :] if o.dim() == 3 else f
    rot = torch.view_as_real(pairs * f).flatten(-2)
    o[..., -rope:] = rot.to(o.dtype)
    return {"o": o}


V4_ROPE = Spec(
    name="sglang_dsv4_rope",
    launcher="apply_rotary_emb_triton",
    rows=(
        ("sglang", "47cad39f", "python/sglang/srt/layers/deepseek_v4_rope.py"),
        ("sglang", "af9027f6", "python/sglang/srt/layers/deepseek_v4_rope.py"),
    ),
    shapes=(
        # the commits' microbenchmark: attention output of 128 heads, rope 64 of 512 (inverse)
        {"name": "dsv4-attn-out-8k", "tokens": 8192, "heads": 128, "head": 512, "rope": 64},
        {"name": "dsv4-attn-out-decode-b64", "tokens": 64, "heads": 128, "head": 512, "rope": 64},
        {
            "name": "dsv4-q-rope-2k",
            "tokens": 2048,
            "heads": 128,
            "head": 512,
            "rope": 64,
            "inverse": False,
        },
        # a single-head (2-D) latent key rope
        {
            "name": "dsv4-kv-rope-4k",
            "tokens": 4096,
            "heads": 0,
            "head": 512,
            "rope": 64,
            "inverse": False,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 33, 200]),
        "heads": r.choice([0, 4, 16]),
        "head": r.choice([128, 192]),
        "rope": 64,
        "max_pos": 1024,
        "inverse": r.choice([True, False]),
    },
    make_inputs=_v4_rope_inputs,
    call=_v4_rope_call,
    reference=_v4_rope_reference,
    mutated=("o",),
    tolerance_why="one complex multiply per pair in fp32, rounded to bf16: bf16 default",
)


# --- gather_dequant_requant_fp8_paged (DSA Q8KV8 prefill): paged 656-byte fp8 MLA rows ---


def _q8kv8_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    slots, n = shape["slots"], shape["tokens"]
    u8 = torch.uint8
    # one cache row: 512 fp8 nope | 4 fp32 group scales | 64 bf16 rope (656 bytes)
    nope = (torch.randn(slots, 512, generator=gen, device=device) * 40).to(torch.float8_e4m3fn)
    scales = torch.rand(slots, 4, generator=gen, device=device) * 0.05 + 0.005
    rope = torch.randn(slots, 64, generator=gen, device=device).to(torch.bfloat16)
    row = torch.cat([nope.view(u8), scales.view(u8), rope.view(u8)], -1)
    picks = torch.randint(0, slots, (n,), generator=gen, device=device, dtype=torch.int32)
    return {
        "quant_k_cache": row.view(torch.float8_e4m3fn).view(slots, 1, 656),
        "page_table_1_flattened": picks,
        "group_size": 128,
        "extra_rows": shape.get("extra", 0),
    }


def _q8kv8_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    out = call_by_name(mod.gather_dequant_requant_fp8_paged, x)
    return {"out": out}


def _q8kv8_reference(x: Inputs) -> Outputs:
    torch = _torch()
    raw = x["quant_k_cache"].view(-1, 656).view(torch.uint8)[x["page_table_1_flattened"].long()]
    nope = raw[:, :512].contiguous().view(torch.float8_e4m3fn).float()
    scale = raw[:, 512:528].contiguous().view(torch.float32)
    rope = raw[:, 528:].contiguous().view(torch.bfloat16).float()
    deq = (nope.view(-1, 4, 128) * scale[:, :, None]).view(-1, 512)
    rows = torch.cat([deq, rope], -1).to(torch.float8_e4m3fn)
    pad = torch.zeros(x["extra_rows"], 576, device=rows.device).to(torch.float8_e4m3fn)
    return {"out": torch.cat([rows, pad]).view(-1, 1, 576)}


Q8KV8_GATHER = Spec(
    name="sglang_dsa_q8kv8_gather_requant",
    launcher="gather_dequant_requant_fp8_paged",
    rows=(("sglang", "e4a40a71", "python/sglang/kernels/ops/attention/dsa/dequant_k_cache.py"),),
    shapes=(
        # DeepSeek-V3.2 / GLM-5 sparse prefill: the top-k (2048) selected KV rows per chunk
        {"name": "dsv32-prefill-gather-16k", "slots": 65536, "tokens": 16384},
        {"name": "dsv32-prefill-gather-64k", "slots": 131072, "tokens": 65536},
        {"name": "dsv32-topk-2048", "slots": 32768, "tokens": 2048},
        {"name": "dsv32-gather-8k-pad", "slots": 32768, "tokens": 8192, "extra": 2048},
    ),
    random_shape=lambda r: {
        "name": "random",
        "slots": r.choice([100, 1000]),
        "tokens": r.choice([1, 37, 300]),
        "extra": r.choice([0, 16]),
    },
    make_inputs=_q8kv8_inputs,
    call=_q8kv8_call,
    reference=_q8kv8_reference,
    tolerance={"out": (2.0**-9, 0.126)},
    tolerance_why="fp8 e4m3 output of one fp32 multiply per element: one rounding step "
    "either way (12.5% relative; 2^-9 absolute, the subnormal step)",
)


# --- launch_reshape_and_cache_flash: token-major K/V rows into a paged (flash) KV cache ---


def _rcf_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, h, d, page, blocks = (
        shape["tokens"],
        shape["heads"],
        shape["head"],
        shape["page"],
        shape["blocks"],
    )
    slots = blocks * page
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    slot_mapping = torch.randperm(slots, generator=_cpu_gen(gen, device))[:t].to(device)
    x = {
        "key": torch.randn(t, h, d, generator=gen, device=device).to(dt),
        "value": torch.randn(t, h, d, generator=gen, device=device).to(dt),
        "key_cache": torch.randn(blocks, page, h, d, generator=gen, device=device).to(dt),
        "value_cache": torch.randn(blocks, page, h, d, generator=gen, device=device).to(dt),
        "slot_mapping": slot_mapping,
        "swa_slot_mapping": None,
    }
    if shape.get("swa"):
        # full-attention slots remapped into the sliding-window pool; -1 = evicted
        remap = torch.randperm(slots, generator=_cpu_gen(gen, device)).to(device)
        remap[::7] = -1
        x["swa_slot_mapping"] = remap
    return x


def _rcf_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.launch_reshape_and_cache_flash, x)
    return {"key_cache": x["key_cache"], "value_cache": x["value_cache"]}


def _rcf_reference(x: Inputs) -> Outputs:
    kc, vc = x["key_cache"].clone(), x["value_cache"].clone()
    slots = x["slot_mapping"]
    if x["swa_slot_mapping"] is not None:
        slots = x["swa_slot_mapping"][slots]
    keep = slots >= 0
    page = kc.shape[1]
    s = slots[keep]
    kc[s // page, s % page] = x["key"][keep]
    vc[s // page, s % page] = x["value"][keep]
    return {"key_cache": kc, "value_cache": vc}


RESHAPE_AND_CACHE_FLASH = Spec(
    name="sglang_reshape_and_cache_flash",
    launcher="launch_reshape_and_cache_flash",
    rows=(("sglang", "b9a68c30", "python/sglang/srt/layers/attention/utils.py"),),
    shapes=(
        # Llama-3-8B KV (8 heads x 128), pages of 16 and 64; gpt-oss SWA layers (8 x 64)
        {
            "name": "llama3-8b-decode-b64",
            "tokens": 64,
            "heads": 8,
            "head": 128,
            "page": 16,
            "blocks": 4096,
        },
        {
            "name": "llama3-8b-prefill-8k",
            "tokens": 8192,
            "heads": 8,
            "head": 128,
            "page": 64,
            "blocks": 1024,
        },
        {
            "name": "gpt-oss-swa-prefill-4k",
            "tokens": 4096,
            "heads": 8,
            "head": 64,
            "page": 16,
            "blocks": 2048,
            "swa": True,
        },
        {
            "name": "qwen2.5-7b-decode-b256",
            "tokens": 256,
            "heads": 4,
            "head": 128,
            "page": 16,
            "blocks": 4096,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 30, 200]),
        "heads": r.choice([1, 5, 8]),
        "head": r.choice([64, 80, 128]),
        "page": r.choice([1, 16]),
        "blocks": 64,
        "swa": r.choice([False, True]),
    },
    make_inputs=_rcf_inputs,
    call=_rcf_call,
    reference=_rcf_reference,
    mutated=("key_cache", "value_cache"),
    tolerance={"key_cache": (0.0, 0.0), "value_cache": (0.0, 0.0)},
    tolerance_why="a scatter copy without scales: exact",
)

SPECS: tuple[Spec, ...] = (
    DRAFT_TOPK1,
    MLA_SET_KV,
    NSA_GET_K_AND_S,
    NSA_SET_K_AND_S,
    V4_ROPE,
    Q8KV8_GATHER,
    RESHAPE_AND_CACHE_FLASH,
)

_ = random
