"""Split-KV decode attention of SGLang (``triton_ops/decode_attention.py``) and vLLM's copy
(``triton_decode_attention.py``): one query token per request against a paged KV cache.

The launcher changed shape over two years: token tables (``req_to_token`` + ``b_req_idx``
+ ``b_start_loc``), then CSR indices (``kv_indptr``/``kv_indices``); ``attn_logits`` was
``[heads, total_tokens]`` before split-KV and ``[batch, heads, splits, Dv + 1]`` after;
vLLM added ``page_size``, ``lse`` and ``is_mla``. ``_adapt`` reads *this side's* signature
and builds each argument from one KV cache and one set of lengths, so both sides of a row
see the same data under their own conventions (the adapter per side the spec asks for)."""

from __future__ import annotations

import inspect
import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name

#: Split count used where the launcher takes one (the engines' default for decode).
KV_SPLITS = 8


def _torch() -> Any:
    import torch

    return torch


def _cpu_gen(gen: Any, device: Any) -> Any:
    """A CPU generator seeded from ``gen`` (permutations are drawn on the CPU; harness 1
    passed the device generator there, which CUDA generators refuse)."""
    torch = _torch()
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=device).item())
    return torch.Generator().manual_seed(seed)


def _inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, hq, hk, d = shape["batch"], shape["hq"], shape["hk"], shape["head"]
    dv = shape.get("head_v", d)
    lens = [max(1, shape["kv_len"] - (i * 37) % max(1, shape["kv_len"] // 2)) for i in range(b)]
    total = sum(lens)
    slots = total + 64
    perm = torch.randperm(slots, generator=_cpu_gen(gen, device))[:total].to(torch.int64)
    max_len = max(lens)
    req_to_token = torch.zeros(b, max_len, dtype=torch.int32)
    start, starts = 0, []
    for i, n in enumerate(lens):
        req_to_token[i, :n] = perm[start : start + n].to(torch.int32)
        starts.append(start)
        start += n
    dt = torch.bfloat16
    return {
        "q": torch.randn(b, hq, d, generator=gen, device=device).to(dt),
        "k_buffer": torch.randn(slots, hk, d, generator=gen, device=device).to(dt),
        "v_buffer": torch.randn(slots, hk, dv, generator=gen, device=device).to(dt),
        "o": torch.empty(b, hq, dv, device=device, dtype=dt),
        "req_to_token": req_to_token.to(device),
        "b_req_idx": torch.arange(b, dtype=torch.int32, device=device),
        "b_start_loc": torch.tensor(starts, dtype=torch.int32, device=device),
        "b_seq_len": torch.tensor(lens, dtype=torch.int32, device=device),
        "kv_indptr": torch.tensor(
            [0, *[s + n for s, n in zip(starts, lens, strict=True)]],
            dtype=torch.int32,
            device=device,
        ),
        "kv_indices": perm.to(device=device, dtype=torch.int64),
        "max_len_in_batch": max_len,
        "total_num_tokens": total,
        "sm_scale": d**-0.5,
        "logit_cap": 0.0,
        "page_size": 1,
    }


def _adapt(fn: Any, x: Inputs) -> dict[str, Any]:
    """The values this side's signature needs (scratch buffers by convention)."""
    torch = _torch()
    params = inspect.signature(fn).parameters
    b, hq = x["q"].shape[0], x["q"].shape[1]
    dv = x["v_buffer"].shape[-1]
    values = dict(x)
    if "num_kv_splits" in params:
        values["num_kv_splits"] = KV_SPLITS
        values["max_kv_splits"] = KV_SPLITS
        values["attn_logits"] = torch.empty(
            b, hq, KV_SPLITS, dv + 1, device=x["q"].device, dtype=torch.float32
        )
        if "max_kv_splits" in params:  # per-request split counts; logits and lse apart
            dev = x["q"].device
            values["num_kv_splits"] = torch.full((b,), KV_SPLITS, dtype=torch.int32, device=dev)
            values["attn_logits"] = (
                torch.empty(b, hq, KV_SPLITS, dv, device=dev, dtype=torch.float32),
                torch.empty(b, hq, KV_SPLITS, device=dev, dtype=torch.float32),
            )
    else:
        values["attn_logits"] = torch.empty(
            hq, x["total_num_tokens"], device=x["q"].device, dtype=torch.float32
        )
    if "lse" in params:
        values["lse"] = torch.empty(b, hq, device=x["q"].device, dtype=torch.float32)
    if "logit_cap" in params and params["logit_cap"].default == -1:
        values["logit_cap"] = -1
    return values


def _call(mod: Any, x: Inputs, sha: str) -> Outputs:
    fn = mod.decode_attention_fwd
    call_by_name(fn, _adapt(fn, x))
    return {"o": x["o"]}


def _reference(x: Inputs) -> Outputs:
    torch = _torch()
    hq, hk = x["q"].shape[1], x["k_buffer"].shape[1]
    outs = []
    for i, n in enumerate(x["b_seq_len"].tolist()):
        idx = x["req_to_token"][i, :n].long()
        k = x["k_buffer"][idx].float().repeat_interleave(hq // hk, 1).transpose(0, 1)
        v = x["v_buffer"][idx].float().repeat_interleave(hq // hk, 1).transpose(0, 1)
        q = x["q"][i].float()[:, None, :]
        o = torch.softmax((q @ k.transpose(1, 2)) * x["sm_scale"], -1) @ v
        outs.append(o[:, 0])
    return {"o": torch.stack(outs).to(x["o"].dtype)}


_SG = "python/sglang/srt/layers/attention/triton_ops/decode_attention.py"
_VL = "vllm/attention/ops/triton_decode_attention.py"

DECODE_ATTENTION = Spec(
    name="decode_attention_fwd",
    launcher="decode_attention_fwd",
    rows=tuple(
        ("sglang", s, _SG) for s in ("2d4ce1b7", "087ab832", "7dc66fcb", "d9eb9358", "c0e9a36c")
    )
    + tuple(("vllm", s, _VL) for s in ("75e94309", "8294773e")),
    shapes=(
        {"name": "llama3-8b-b32-1k", "batch": 32, "kv_len": 1024, "hq": 32, "hk": 8, "head": 128},
        {"name": "llama3-8b-b8-8k", "batch": 8, "kv_len": 8192, "hq": 32, "hk": 8, "head": 128},
        {"name": "mha-b64-512", "batch": 64, "kv_len": 512, "hq": 16, "hk": 16, "head": 128},
        {"name": "qwen2-7b-b16-4k", "batch": 16, "kv_len": 4096, "hq": 28, "hk": 4, "head": 128},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 5, 24]),
        "kv_len": r.choice([33, 700, 3000]),
        "hq": r.choice([8, 32]),
        "hk": r.choice([1, 8]),
        "head": r.choice([64, 128]),
    },
    make_inputs=_inputs,
    call=_call,
    reference=_reference,
    mutated=("o",),
    tolerance={"o": (2e-2, 2e-2)},
    tolerance_why="softmax over <= 8k keys split into partial softmaxes merged in fp32 (split "
    "count differs between versions: not bitwise), bf16 output: bf16 default plus an "
    "absolute floor",
)

SPECS: tuple[Spec, ...] = (DECODE_ATTENTION,)

_ = random
