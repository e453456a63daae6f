"""Spec for SGLang 760ae933's ``mem_cache/memory_pool.py`` row (issue 35): the NSA indexer
reads every request's fp8 keys and scales from the paged pool in one batched call.

The commit changes ``NSATokenToKVPool.get_index_k_scale_buffer`` from one request (a
``seq_len`` and its page row) to the whole batch (the lengths tensor, their sum and maximum)
and the launcher it reaches in ``nsa/index_buf_accessor.py`` (a sibling, at each side's
commit) to match; ``specs.misc_sglang_cache``'s ``sglang_nsa_get_k_and_s`` runs that
launcher, this one runs the pool method the indexer calls. Before: the indexer looped over
the requests (their lengths read on the host), one call each, and concatenated the pieces,
as the before side does here; after: one call. Both on a minimal pool holding the layer's
buffer and the fields the accessor reads. Inputs, reference and shapes are
``sglang_nsa_get_k_and_s``'s (DeepSeek-V3.2's indexer cache, ragged prefill batches).
"""

from __future__ import annotations

import types
from typing import Any

from .base import Inputs, Outputs, Spec
from .misc_sglang_cache import NSA_GET_K_AND_S, _nsa_get_inputs, _nsa_get_reference

_ACCESSOR = "python/sglang/srt/layers/attention/nsa/index_buf_accessor.py"


def _pool_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    import torch

    pool = types.SimpleNamespace(
        index_k_with_scale_buffer=[x["buf"]],
        start_layer=0,
        page_size=x["page_size"],
        index_head_dim=x["index_head_dim"],
    )
    method = mod.NSATokenToKVPool.get_index_k_scale_buffer
    if "seq_len_tensor" in method.__code__.co_varnames:  # after: the whole batch at once
        k, s = method(pool, 0, x["seq_lens"], x["page_indices"], x["seq_len_sum"], x["max_seq_len"])
        return {"k": k, "s": s}
    parts = [  # before: the indexer's loop over the requests, then one concatenation
        method(pool, 0, n, x["page_indices"][i]) for i, n in enumerate(x["seq_lens_list"])
    ]
    return {"k": torch.cat([p[0] for p in parts]), "s": torch.cat([p[1] for p in parts])}


NSA_POOL_GET_K_AND_S = Spec(
    name="sglang_nsa_pool_get_index_k_scale",
    launcher="NSATokenToKVPool.get_index_k_scale_buffer",
    rows=(("sglang", "760ae933", "python/sglang/srt/mem_cache/memory_pool.py"),),
    siblings={"": (_ACCESSOR,)},
    shapes=tuple(
        {**s, "source": "DeepSeek-V3.2 indexer cache (page 64, fp8 key 128 + fp32 scale)"}
        for s in NSA_GET_K_AND_S.shapes
    ),
    random_shape=NSA_GET_K_AND_S.random_shape,
    make_inputs=_nsa_get_inputs,
    call=_pool_call,
    reference=_nsa_get_reference,
    tolerance={"k": (0.0, 0.0), "s": (0.0, 0.0)},
    tolerance_why="a byte gather of fp8 keys and fp32 scales (no arithmetic): exact",
)

SPECS: tuple[Spec, ...] = (NSA_POOL_GET_K_AND_S,)
