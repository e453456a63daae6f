"""Specs for the misc SGLang rows of the execution census (issue 35): extend (prefill with
a KV-cache prefix) attention, diffusion modulation and rotary kernels, MLA KV-cache
writes, MoE routing helpers and DSA metadata kernels.

Shapes name their source. Models: Llama-3-8B (32 q heads, 8 kv heads, head 128),
Qwen2.5-7B (28/4 heads), DeepSeek-V3 (MLA kv_lora 512 + rope 64, 256 experts top-8,
hidden 7168), Gemma-3 / gpt-oss (sliding window 512/128), Qwen-Image / Wan / LTX-2
(diffusion transformers, hidden 3072/5120/4096, head 128).
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


SPECS: tuple[Spec, ...] = (EXTEND_ATTENTION, EXTEND_ATTENTION_SWA)

_ = random
