"""Specs for the misc vLLM attention rows (issue 35): the v1 merge of attention states,
multimodal RoPE, the v1 split-KV decode attention with its MLA path, the Triton/ROCm
backend's paged decode, prefix-prefill attention, and the KV-cache write.

Models: Llama-3-8B (32 q heads, 8 kv heads, head 128), Qwen3-Next full-attention layers
(16 q heads, 2 kv heads, head 256), DeepSeek-V3 MLA (latent 512 + rope 64, 128 heads, 16
per rank at TP8), Qwen2-VL-7B / Qwen2.5-VL-72B / Qwen3-VL-8B (mrope sections).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .misc_vllm_common import _cpu_device_properties, _perm, _torch
from .simple import MERGE_ATTN_STATES

# --- merge_attn_states, v1 path (vLLM 3bc2734d): the new fp8 output scale is optional ---

#: 3bc2734d adds an optional ``output_scale`` (fp8 output); ``before`` has no such path, so
#: both sides run the bf16/fp16 path the commit rewrote around (the shared-path question).
MERGE_ATTN_STATES_V1 = dataclasses.replace(
    MERGE_ATTN_STATES,
    name="vllm_merge_attn_states_v1",
    rows=(("vllm", "3bc2734d", "vllm/v1/attention/ops/triton_merge_attn_states.py"),),
)


# --- triton_mrope (vLLM multimodal rotary embedding, Qwen2-VL layout) ---


def _mrope_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, nq, nk, hd = shape["tokens"], shape["hq"], shape["hk"], shape["head"]
    section = shape["section"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    # text tokens share one position on all three axes; image tokens get (t, h, w) grids
    pos = torch.randint(0, 8192, (3, t), generator=gen, device=device)
    pos[:, : t // 2] = pos[0, : t // 2]
    inv_freq = 1.0 / (1e6 ** (torch.arange(0, hd, 2, device=device).float() / hd))
    angles = pos.float()[..., None] * inv_freq  # [3, T, hd/2]
    return {
        "q": torch.randn(t, nq * hd, generator=gen, device=device).to(dt),
        "k": torch.randn(t, nk * hd, generator=gen, device=device).to(dt),
        "cos": angles.cos().to(dt),
        "sin": angles.sin().to(dt),
        "mrope_section": list(section),
        "head_size": hd,
        "rotary_dim": hd,
        "mrope_interleaved": False,
    }


def _mrope_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    q, k = call_by_name(mod.triton_mrope, x)
    return {"q": q, "k": k}


def _mrope_reference(x: Inputs) -> Outputs:
    torch = _torch()
    hd = x["head_size"]
    t_sec, h_sec, _ = x["mrope_section"]
    cols = torch.arange(hd // 2, device=x["q"].device)
    axis = (cols >= t_sec).long() + (cols >= t_sec + h_sec).long()  # 0 = t, 1 = h, 2 = w
    cos = x["cos"].float().gather(0, axis[None, None, :].expand(1, x["cos"].shape[1], -1))[0]
    sin = x["sin"].float().gather(0, axis[None, None, :].expand(1, x["sin"].shape[1], -1))[0]

    def rotate(v: Any) -> Any:
        v = v.float().view(v.shape[0], -1, hd)
        a, b = v[..., : hd // 2], v[..., hd // 2 :]
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.cat((a * c - b * s, b * c + a * s), -1).reshape(v.shape[0], -1)

    return {"q": rotate(x["q"]).to(x["q"].dtype), "k": rotate(x["k"]).to(x["k"].dtype)}


TRITON_MROPE = Spec(
    name="vllm_triton_mrope",
    launcher="triton_mrope",
    rows=(("vllm", "cea91a32", "vllm/model_executor/layers/rotary_embedding/mrope.py"),),
    shapes=(
        {
            "name": "qwen2-vl-7b-decode",
            "tokens": 64,
            "hq": 28,
            "hk": 4,
            "head": 128,
            "section": (16, 24, 24),
        },
        {
            "name": "qwen2-vl-7b-prefill",
            "tokens": 4096,
            "hq": 28,
            "hk": 4,
            "head": 128,
            "section": (16, 24, 24),
        },
        {
            "name": "qwen2.5-vl-72b-prefill",
            "tokens": 2048,
            "hq": 64,
            "hk": 8,
            "head": 128,
            "section": (16, 24, 24),
        },
        {
            "name": "qwen3-vl-8b-prefill",
            "tokens": 1024,
            "hq": 32,
            "hk": 8,
            "head": 128,
            "section": (24, 20, 20),
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 9, 100, 333]),
        "hq": r.choice([4, 16, 28]),
        "hk": r.choice([1, 4]),
        "head": 128,
        "section": r.choice([(16, 24, 24), (24, 20, 20)]),
        # fp16: Triton's CPU interpreter computes bf16 arithmetic wrongly (garbage on both
        # sides), so the held-out shape stays checkable there; named shapes are bf16
        "dtype": "float16",
    },
    make_inputs=_mrope_inputs,
    call=_mrope_call,
    reference=_mrope_reference,
    mutated=("q", "k"),  # rotated in place (the launcher returns the same tensors)
    tolerance={"q": (3e-2, 1.6e-2), "k": (3e-2, 1.6e-2)},
    tolerance_why="bf16 cos/sin (the engine's cache dtype) and bf16 q/k: the kernel rounds "
    "each product and the sum to bf16 (up to 3 roundings of values ~|3|, ulp 2^-7) where "
    "the reference rounds once: 3e-2 absolute plus the bf16 relative default",
)


# --- decode_attention_fwd, v1 copy with the MLA single-c_kv path (vLLM d9408ffb) ---


def _mla_decode_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """The split-KV decode inputs of ``decode``; an MLA shape's value cache is the first
    ``head_v`` dims of the one latent cache (how vLLM's Triton MLA backend passes it), so
    ``after``'s new ``is_mla`` path (values read as the transposed keys) and ``before``
    (values loaded from that view) see the same numbers."""
    from .decode import _inputs

    x = _inputs(shape, gen, device)
    dt = getattr(_torch(), shape.get("dtype", "bfloat16"))
    for name in ("q", "k_buffer", "v_buffer", "o"):
        x[name] = x[name].to(dt)
    dt = getattr(_torch(), shape.get("dtype", "bfloat16"))
    for name in ("q", "k_buffer", "v_buffer", "o"):
        x[name] = x[name].to(dt)
    if shape.get("mla"):
        x["v_buffer"] = x["k_buffer"][..., : shape["head_v"]]
        x["is_mla"] = True
    return x


def _mla_decode_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    from .decode import _call

    return _call(mod, x, sha)


def _mla_decode_reference(x: Inputs) -> Outputs:
    from .decode import _reference

    return _reference(x)


DECODE_ATTENTION_V1_MLA = Spec(
    name="vllm_v1_decode_attention_mla",
    launcher="decode_attention_fwd",
    rows=(("vllm", "d9408ffb", "vllm/v1/attention/ops/triton_decode_attention.py"),),
    shapes=(
        {
            "name": "dsv3-mla-tp8-b32-4k",
            "batch": 32,
            "kv_len": 4096,
            "hq": 16,
            "hk": 1,
            "head": 576,
            "head_v": 512,
            "mla": True,
        },
        {
            "name": "dsv3-mla-tp1-b8-8k",
            "batch": 8,
            "kv_len": 8192,
            "hq": 128,
            "hk": 1,
            "head": 576,
            "head_v": 512,
            "mla": True,
        },
        {"name": "llama3-8b-b32-1k", "batch": 32, "kv_len": 1024, "hq": 32, "hk": 8, "head": 128},
        {"name": "qwen2-7b-b16-4k", "batch": 16, "kv_len": 4096, "hq": 28, "hk": 4, "head": 128},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 6]),
        "kv_len": r.choice([33, 300, 1000]),
        "hq": r.choice([16, 32]),
        "hk": 1,
        **r.choice([{"head": 576, "head_v": 512, "mla": True}, {"head": 128}, {"head": 64}]),
        # fp16: Triton's CPU interpreter computes bf16 dots wrongly (garbage on both sides),
        # so the held-out shape stays checkable there; the named shapes are bf16
        "dtype": "float16",
    },
    make_inputs=_mla_decode_inputs,
    call=_mla_decode_call,
    reference=_mla_decode_reference,
    mutated=("o",),
    tolerance={"o": (2e-2, 2e-2)},
    tolerance_why="softmax over <= 8k keys in 8 partial softmaxes merged in fp32, a bf16 "
    "P@V of up to 512 dims: bf16 default plus an absolute floor for outputs near zero",
)


# --- paged KV cache helpers (vLLM's 5-D key / 4-D value cache of the Triton backends) ---


def _paged_cache(lens: list[int], hk: int, d: int, bs: int, dt: Any, gen: Any, device: Any):
    """Logical per-sequence K/V written into a paged cache with shuffled blocks: key cache
    ``[blocks, H, D/x, bs, x]`` (x = 16 bytes of elements), value cache
    ``[blocks, H, D, bs]``, and the block table; returns (k_logical, v_logical,
    key_cache, value_cache, block_table)."""
    torch = _torch()
    per = [-(-n // bs) for n in lens]
    n_blocks = sum(per) + 3
    x = 16 // torch.empty((), dtype=dt).element_size()
    order = _perm(n_blocks, gen, device)
    table = torch.zeros(len(lens), max(per), dtype=torch.int32, device=device)
    k_log, v_log = [], []
    key_cache = torch.randn(n_blocks, hk, d // x, bs, x, generator=gen, device=device).to(dt)
    value_cache = torch.randn(n_blocks, hk, d, bs, generator=gen, device=device).to(dt)
    used = 0
    for i, n in enumerate(lens):
        blocks = order[used : used + per[i]]
        used += per[i]
        table[i, : per[i]] = blocks.to(torch.int32)
        k = torch.randn(n, hk, d, generator=gen, device=device).to(dt)
        v = torch.randn(n, hk, d, generator=gen, device=device).to(dt)
        pos = torch.arange(n, device=device)
        blk, off = blocks[pos // bs], pos % bs
        key_cache[blk, :, :, off, :] = k.view(n, hk, d // x, x)
        value_cache[blk, :, :, off] = v
        k_log.append(k)
        v_log.append(v)
    return k_log, v_log, key_cache, value_cache, table


def _attend(q: Any, k: Any, v: Any, scale: float) -> Any:
    """Softmax attention of query rows [Hq, D] (the last positions, causal) over k/v
    [n, Hkv, D] in fp32: each query head reads its kv head (GQA)."""
    torch = _torch()
    group = q.shape[-2] // k.shape[1]
    kk = k.float().repeat_interleave(group, 1).transpose(0, 1)  # [Hq, n, D]
    vv = v.float().repeat_interleave(group, 1).transpose(0, 1)
    s = torch.einsum("qhd,hnd->hqn", q.float(), kk) * scale
    return torch.einsum("hqn,hnd->qhd", torch.softmax(s, -1), vv)


# --- chunked_prefill_paged_decode (vLLM Triton/ROCm attention backend), decode batches ---


def _paged_decode_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, ctx, hq, hk, d, bs = (shape[k] for k in ("batch", "ctx", "hq", "hk", "head", "block"))
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    lens = [max(1, ctx - (i * 131) % max(1, ctx // 2)) for i in range(b)]
    k_log, v_log, kc, vc, table = _paged_cache(lens, hk, d, bs, dt, gen, device)
    one = torch.ones((), device=device, dtype=torch.float32)
    return {
        "query": torch.randn(b, hq, d, generator=gen, device=device).to(dt),
        # the new tokens' k/v (already in the cache; read by the prefill branch only)
        "key": torch.stack([k[-1] for k in k_log]),
        "value": torch.stack([v[-1] for v in v_log]),
        "output": torch.zeros(b, hq, d, device=device, dtype=dt),
        "kv_cache_dtype": "auto",
        "key_cache": kc,
        "value_cache": vc,
        "block_table": table,
        "query_start_loc": torch.arange(b + 1, device=device, dtype=torch.int32),
        "seq_lens": torch.tensor(lens, device=device, dtype=torch.int32),
        "max_seq_len": max(lens),
        "max_query_len": 1,
        "k_scale": one,
        "v_scale": one,
        "sm_scale": d**-0.5,
        "k_logical": k_log,
        "v_logical": v_log,
    }


def _paged_decode_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.chunked_prefill_paged_decode, x)
    return {"output": x["output"]}


def _paged_decode_reference(x: Inputs) -> Outputs:
    outs = [
        _attend(x["query"][i : i + 1], k, v, x["sm_scale"])[0]
        for i, (k, v) in enumerate(zip(x["k_logical"], x["v_logical"], strict=True))
    ]
    return {"output": _torch().stack(outs).to(x["output"].dtype)}


_CPD = "vllm/attention/ops/chunked_prefill_paged_decode.py"

CHUNKED_PREFILL_PAGED_DECODE = Spec(
    name="vllm_chunked_prefill_paged_decode",
    launcher="chunked_prefill_paged_decode",
    rows=(("vllm", "fb4c7f8e", _CPD), ("vllm", "9a161307", _CPD), ("vllm", "1a19e9cd", _CPD)),
    shapes=(
        {
            "name": "llama3-8b-b32-1k",
            "batch": 32,
            "ctx": 1024,
            "hq": 32,
            "hk": 8,
            "head": 128,
            "block": 16,
        },
        {
            "name": "llama3-8b-b8-8k",
            "batch": 8,
            "ctx": 8192,
            "hq": 32,
            "hk": 8,
            "head": 128,
            "block": 16,
        },
        {
            "name": "qwen3-next-attn-b16-4k",
            "batch": 16,
            "ctx": 4096,
            "hq": 16,
            "hk": 2,
            "head": 256,
            "block": 64,
        },
        {
            "name": "mha-b64-512",
            "batch": 64,
            "ctx": 512,
            "hq": 16,
            "hk": 16,
            "head": 128,
            "block": 32,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 5]),
        "ctx": r.choice([17, 100, 600]),
        **r.choice([{"hq": 8, "hk": 2}, {"hq": 4, "hk": 4}]),
        "head": r.choice([64, 128]),
        "block": r.choice([16, 32]),
        # fp16: Triton's CPU interpreter computes bf16 dots wrongly; named shapes are bf16
        "dtype": "float16",
    },
    make_inputs=_paged_decode_inputs,
    call=_paged_decode_call,
    reference=_paged_decode_reference,
    mutated=("output",),
    tolerance={"output": (2e-2, 2e-2)},
    tolerance_why="online softmax over <= 8k cached keys in fp32 with a bf16 P@V: bf16 "
    "default relative plus an absolute floor for outputs near zero",
)


# --- triton_reshape_and_cache_flash (vLLM): new K/V rows into an NHD paged cache ---


def _reshape_cache_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, h, d, bs, fp8 = shape["tokens"], shape["hk"], shape["head"], shape["block"], shape["fp8"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    n_blocks = -(-t // bs) * 2 + 4
    slots = _perm(n_blocks * bs, gen, device)[:t].to(torch.int64)
    slots[1::9] = -1  # padded tokens (CUDA-graph batches) are skipped
    qkv = torch.randn(t, (shape["hq"] + 2 * h) * d, generator=gen, device=device).to(dt)
    q_end, k_end = shape["hq"] * d, (shape["hq"] + h) * d
    cache_dt = torch.float8_e4m3fn if fp8 else dt
    return {
        # k and v are strided views into the fused qkv projection, as the layer passes them
        "key": qkv[:, q_end:k_end].view(t, h, d),
        "value": qkv[:, k_end:].view(t, h, d),
        "key_cache": torch.zeros(n_blocks, bs, h, d, device=device).to(cache_dt),
        "value_cache": torch.zeros(n_blocks, bs, h, d, device=device).to(cache_dt),
        "slot_mapping": slots,
        "kv_cache_dtype": "fp8" if fp8 else "auto",
        "k_scale": torch.full((), 0.05, device=device),
        "v_scale": torch.full((), 0.08, device=device),
    }


def _reshape_cache_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    with _cpu_device_properties(x["key"].device):
        call_by_name(mod.triton_reshape_and_cache_flash, x)
    return {"key_cache": x["key_cache"], "value_cache": x["value_cache"]}


def _reshape_cache_reference(x: Inputs) -> Outputs:
    out = {}
    fp8 = x["kv_cache_dtype"] != "auto"
    ok = x["slot_mapping"] >= 0
    slots = x["slot_mapping"][ok]
    for name, src, scale in (("key_cache", "key", "k_scale"), ("value_cache", "value", "v_scale")):
        cache = x[name].clone()
        flat = cache.view(-1, *cache.shape[2:])
        rows = x[src][ok].float()
        flat[slots] = (rows / x[scale] if fp8 else rows).to(cache.dtype)
        out[name] = cache
    return out


TRITON_RESHAPE_AND_CACHE_FLASH = Spec(
    name="vllm_triton_reshape_and_cache_flash",
    launcher="triton_reshape_and_cache_flash",
    rows=(("vllm", "1a19e9cd", "vllm/attention/ops/triton_reshape_and_cache_flash.py"),),
    shapes=(
        {
            "name": "llama3-8b-decode-b64",
            "tokens": 64,
            "hq": 32,
            "hk": 8,
            "head": 128,
            "block": 16,
            "fp8": False,
        },
        {
            "name": "llama3-8b-prefill-4k",
            "tokens": 4096,
            "hq": 32,
            "hk": 8,
            "head": 128,
            "block": 16,
            "fp8": False,
        },
        {
            "name": "qwen3-next-attn-prefill-fp8",
            "tokens": 2048,
            "hq": 16,
            "hk": 2,
            "head": 256,
            "block": 64,
            "fp8": True,
        },
        {
            "name": "llama3-70b-tp8-fp8-decode",
            "tokens": 128,
            "hq": 8,
            "hk": 1,
            "head": 128,
            "block": 16,
            "fp8": True,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 9, 100, 700]),
        "hq": 8,
        "hk": r.choice([1, 2, 8]),
        "head": r.choice([64, 128, 256]),
        "block": r.choice([16, 32]),
        # fp16 without an fp8 cache: Triton's CPU interpreter computes bf16 wrongly and
        # rounds fp32 -> e4m3 past a power of two to half the value (on both sides), so
        # the held-out shape stays checkable there; named shapes cover bf16 and fp8
        "fp8": False,
        "dtype": "float16",
    },
    make_inputs=_reshape_cache_inputs,
    call=_reshape_cache_call,
    reference=_reshape_cache_reference,
    mutated=("key_cache", "value_cache"),
    tolerance_why="copies (exact) or one fp8 e4m3 rounding of value / scale (the kernel may "
    "multiply by the reciprocal scale): the fp8 default (one step)",
)


# --- context_attention_fwd of prefix_prefill (vLLM): new tokens over a paged prefix ---


def _prefix_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, ctx, ql, hq, hk, d, bs = (
        shape[k] for k in ("batch", "ctx", "query", "hq", "hk", "head", "block")
    )
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    ctx_lens = [max(1, ctx - (i * 97) % max(1, ctx // 2)) for i in range(b)]
    q_lens = [max(1, ql - (i * 53) % max(1, ql // 2)) for i in range(b)]
    # the cache holds the prefix; the new tokens' k/v come in k and v
    k_log, v_log, kc, vc, table = _paged_cache(ctx_lens, hk, d, bs, dt, gen, device)
    total = sum(q_lens)
    starts = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32)
    seq = [c + n for c, n in zip(ctx_lens, q_lens, strict=True)]
    one = torch.ones((), device=device, dtype=torch.float32)
    return {
        "q": torch.randn(total, hq, d, generator=gen, device=device).to(dt),
        "k": torch.randn(total, hk, d, generator=gen, device=device).to(dt),
        "v": torch.randn(total, hk, d, generator=gen, device=device).to(dt),
        "o": torch.zeros(total, hq, d, device=device, dtype=dt),
        "kv_cache_dtype": "auto",
        "k_cache": kc,
        "v_cache": vc,
        "b_loc": table,
        "b_start_loc": starts.to(device),
        "b_seq_len": torch.tensor(seq, device=device, dtype=torch.int32),
        "max_seq_len": max(seq),
        "max_input_len": max(q_lens),
        "k_scale": one,
        "v_scale": one,
        "sm_scale": d**-0.5,
        "k_logical": k_log,
        "v_logical": v_log,
    }


def _prefix_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.context_attention_fwd, x)
    return {"o": x["o"]}


def _prefix_reference(x: Inputs) -> Outputs:
    """Per sequence: the new tokens attend to the whole prefix and causally to each other."""
    torch = _torch()
    out = torch.zeros_like(x["o"], dtype=torch.float32)
    st = x["b_start_loc"].tolist()
    hq = x["q"].shape[1]
    for i, (kc, vc) in enumerate(zip(x["k_logical"], x["v_logical"], strict=True)):
        a, e = st[i], st[i + 1]
        c, n = kc.shape[0], e - a
        group = hq // kc.shape[1]
        k = torch.cat((kc, x["k"][a:e])).float().repeat_interleave(group, 1).transpose(0, 1)
        v = torch.cat((vc, x["v"][a:e])).float().repeat_interleave(group, 1).transpose(0, 1)
        q = x["q"][a:e].float().transpose(0, 1)  # [H, n, D]
        s = q @ k.transpose(1, 2) * x["sm_scale"]  # [H, n, c + n]
        cols = torch.arange(c + n, device=s.device)
        rows = torch.arange(n, device=s.device)
        s = s.masked_fill(cols[None, :] > c + rows[:, None], float("-inf"))
        out[a:e] = (torch.softmax(s, -1) @ v).transpose(0, 1)
    return {"o": out.to(x["o"].dtype)}


_PP = "vllm/attention/ops/prefix_prefill.py"

PREFIX_PREFILL_CONTEXT_ATTENTION = Spec(
    name="vllm_prefix_prefill_context_attention_fwd",
    launcher="context_attention_fwd",
    rows=(("vllm", "9a161307", _PP), ("vllm", "1a19e9cd", _PP)),
    shapes=(
        {
            "name": "llama3-8b-prefix-b4",
            "batch": 4,
            "ctx": 2048,
            "query": 512,
            "hq": 32,
            "hk": 8,
            "head": 128,
            "block": 16,
        },
        {
            "name": "llama3-8b-chunk-b1",
            "batch": 1,
            "ctx": 6144,
            "query": 2048,
            "hq": 32,
            "hk": 8,
            "head": 128,
            "block": 16,
        },
        {
            "name": "llama3-70b-tp8-b2",
            "batch": 2,
            "ctx": 1024,
            "query": 1024,
            "hq": 8,
            "hk": 1,
            "head": 128,
            "block": 32,
        },
        {
            "name": "mha-b8",
            "batch": 8,
            "ctx": 256,
            "query": 128,
            "hq": 16,
            "hk": 16,
            "head": 128,
            "block": 32,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2, 3]),
        "ctx": r.choice([16, 70, 300]),
        "query": r.choice([5, 40, 130]),
        **r.choice([{"hq": 8, "hk": 2}, {"hq": 4, "hk": 4}]),
        "head": r.choice([64, 128]),
        "block": r.choice([16, 32]),
        # fp16: Triton's CPU interpreter computes bf16 dots wrongly; named shapes are bf16
        "dtype": "float16",
    },
    make_inputs=_prefix_inputs,
    call=_prefix_call,
    reference=_prefix_reference,
    mutated=("o",),
    tolerance={"o": (2e-2, 2e-2)},
    tolerance_why="online softmax over <= 8k keys (prefix from the cache, then causal new "
    "tokens) in fp32 with bf16 P@V: bf16 default plus an absolute floor near zero",
)


SPECS: tuple[Spec, ...] = (
    MERGE_ATTN_STATES_V1,
    TRITON_MROPE,
    DECODE_ATTENTION_V1_MLA,
    CHUNKED_PREFILL_PAGED_DECODE,
    TRITON_RESHAPE_AND_CACHE_FLASH,
    PREFIX_PREFILL_CONTEXT_ATTENTION,
)
