"""Spec for SGLang bd47869b's ``trtllm_mla_backend.py`` row (issue 35): the TRT-LLM MLA
backend's page table for a decode batch, ``TRTLLMMLABackend._create_block_kv_indices``.

The commit parallelises ``create_flashmla_kv_indices_triton`` over page blocks (a second
grid axis, ``get_num_kv_index_blocks_flashmla``) and changes this method's launch to use it;
``sglang_flashmla_kv_indices`` (``specs.more_sglang``) runs the kernel's own row. Here each
side's method runs on a minimal backend (the request-to-token table and the page size it
reads) with the kernel and the grid helper from ``layers/attention/utils.py`` and
``triton_ops/kv_indices.py`` at that side's commit (siblings). Inputs, shapes, reference and
tolerance are that spec's (DeepSeek-V3/R1 decode, pages of 32 and 64). The backend serves
Blackwell GPUs; the method's kernel is Triton and runs on the H100.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

from .base import Inputs, Outputs, Spec
from .more_sglang import FLASHMLA_KV_INDICES

_ATTN = "python/sglang/srt/layers/attention"


def _backend_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    bs, width = x["block_kv_indices"].shape
    backend = types.SimpleNamespace(req_to_token=x["req_to_token"], page_size=x["page"])
    out = mod.TRTLLMMLABackend._create_block_kv_indices(
        backend, bs, width, x["req_pool_indices"], x["seq_lens"], x["seq_lens"].device
    )
    return {"block_kv_indices": out}


TRTLLM_MLA_BLOCK_INDICES = dataclasses.replace(
    FLASHMLA_KV_INDICES,
    name="sglang_trtllm_mla_block_kv_indices",
    launcher="TRTLLMMLABackend._create_block_kv_indices",
    rows=(("sglang", "bd47869b", f"{_ATTN}/trtllm_mla_backend.py"),),
    siblings={"": (f"{_ATTN}/utils.py", f"{_ATTN}/triton_ops/kv_indices.py")},
    call=_backend_call,
    mutated=(),
)

SPECS: tuple[Spec, ...] = (TRTLLM_MLA_BLOCK_INDICES,)
