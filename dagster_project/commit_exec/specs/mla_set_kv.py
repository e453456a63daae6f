"""Spec for SGLang 799c4bb5 (issue 35): writing DeepSeek MLA's latent KV into the cache
with one Triton kernel (``mem_cache/memory_pool.py``'s new
``MLATokenToKVPool.set_mla_kv_buffer``).

The commit adds the method and its kernel; what it replaces is the path at ``sha^``:
DeepSeek-V2's attention concatenated the normalised latent (``k_nope``, 512 wide) and the
rotated rope part (``k_pe``, 64 wide, a strided view of the projection's output) into one
tensor, and the attention backend stored it with ``MLATokenToKVPool.set_kv_buffer``. The
before side runs exactly that (the concatenation as the model wrote it, then that side's
``set_kv_buffer``); the after side calls ``set_mla_kv_buffer`` with the two parts, as the
commit's backends do. Both on a minimal pool holding one layer's buffer (``size +
page_size`` slots of 576, padded slot 0 never written) and the dtype fields ``__init__``
sets (fp8 caches store as uint8). Compared: the whole buffer. Torch reference: the
concatenation written at the slots. No path of the method is left unchanged by the commit:
the runner times an A/A control.

Shapes: DeepSeek-V3 / R1 MLA (``kv_lora_rank`` 512, ``qk_rope_head_dim`` 64), bf16 and fp8
KV caches, prefill and decode batches.
"""

from __future__ import annotations

import types
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .fla import _cpu_gen

_DSV3 = "DeepSeek-V3 MLA (kv_lora_rank 512, rope 64)"


def _torch() -> Any:
    import torch

    return torch


def _mla_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, size = shape["tokens"], shape.get("pool", 65536)
    bf = torch.bfloat16
    dtype = getattr(torch, shape.get("dtype", "bfloat16"))
    store = torch.uint8 if dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else dtype
    latent = torch.randn(t, 1, 576, generator=gen, device=device).to(bf)
    slots = torch.randperm(size, generator=_cpu_gen(gen, device))  # as the allocator hands out
    return {
        "k_nope": torch.randn(t, 1, 512, generator=gen, device=device).to(bf),
        "k_pe": latent[..., 512:],  # the rope part stays a view of the projection output
        "loc": (slots[:t] + 1).to(device),  # slot 0 is the padded dummy slot
        "kv_buffer": torch.zeros(size + 1, 1, 576, dtype=store, device=device),
        "dtype": dtype,
        "store_dtype": store,
    }


def _mla_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    torch = _torch()
    cls = mod.MLATokenToKVPool
    pool = types.SimpleNamespace(
        kv_buffer=[x["kv_buffer"]], dtype=x["dtype"], store_dtype=x["store_dtype"]
    )
    layer = types.SimpleNamespace(layer_id=0)
    if hasattr(cls, "set_mla_kv_buffer"):  # after: the fused write
        cls.set_mla_kv_buffer(pool, layer, x["loc"], x["k_nope"], x["k_pe"])
    else:  # before: the model's concatenation, then the backend's set_kv_buffer
        k = torch.cat([x["k_nope"], x["k_pe"]], dim=-1)
        cls.set_kv_buffer(pool, layer, x["loc"], k, x["k_nope"])
    return {"kv_buffer": x["kv_buffer"]}


def _mla_reference(x: Inputs) -> Outputs:
    torch = _torch()
    buf = x["kv_buffer"].clone()
    k = torch.cat([x["k_nope"], x["k_pe"]], dim=-1).to(x["dtype"])
    buf[x["loc"]] = k.view(x["store_dtype"])
    return {"kv_buffer": buf}


def _shape(name: str, tokens: int, why: str, **extra: Any) -> Shape:
    return {"name": name, "source": f"{_DSV3}, {why}", "tokens": tokens, **extra}


MLA_SET_KV = Spec(
    name="sglang_mla_pool_set_mla_kv_buffer",
    launcher="MLATokenToKVPool.set_mla_kv_buffer",
    rows=(("sglang", "799c4bb5", "python/sglang/srt/mem_cache/memory_pool.py"),),
    shapes=(
        _shape("dsv3-prefill-4k", 4096, "a 4k-token prefill chunk"),
        _shape("dsv3-decode-b64", 64, "decode, 64 requests"),
        _shape("dsv3-decode-b256", 256, "decode, 256 requests"),
        _shape("dsv3-fp8kv-decode-b128", 128, "fp8 (e4m3) KV cache, decode", dtype="float8_e4m3fn"),
        _shape("dsv3-prefill-16k", 16384, "a 16k-token prefill chunk", pool=262144),
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 7, 100, 1000]),
        "pool": r.choice([2048, 4096]),
        "dtype": r.choice(["bfloat16", "float8_e4m3fn"]),
    },
    make_inputs=_mla_inputs,
    call=_mla_call,
    reference=_mla_reference,
    mutated=("kv_buffer",),
    tolerance={"kv_buffer": (0.0, 0.0)},
    tolerance_why="a copy (and for fp8 caches one cast to e4m3 of the same values, stored "
    "as its bytes): exact",
)

SPECS: tuple[Spec, ...] = (MLA_SET_KV,)
