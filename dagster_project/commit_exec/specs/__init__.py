"""Harness specs, one per launcher family (``base.Spec``); ``spec_for`` finds a row's."""

from __future__ import annotations

from .base import DEFAULT_TOLERANCE, Spec, shape_label
from .bound import SPECS as _BOUND
from .decode import SPECS as _DECODE
from .fla import SPECS as _FLA
from .fla_chunk import SPECS as _FLA_CHUNK
from .fla_op import SPECS as _FLA_OP
from .gdn_packed import SPECS as _GDN_PACKED
from .gdn_qkv_split import SPECS as _GDN_QKV_SPLIT
from .indexer_decode import SPECS as _INDEXER_DECODE
from .kda import SPECS as _KDA
from .kda_chunk import SPECS as _KDA_CHUNK
from .lora import SPECS as _LORA
from .lora_sglang import SPECS as _LORA_SGLANG
from .lora_vllm_ops import SPECS as _LORA_VLLM_OPS
from .mamba_ssd import SPECS as _MAMBA_SSD
from .misc_sglang import SPECS as _MISC_SGLANG
from .misc_sglang_cache import SPECS as _MISC_SGLANG_CACHE
from .misc_sglang_diffusion import SPECS as _MISC_SGLANG_DIFFUSION
from .misc_sglang_index import SPECS as _MISC_SGLANG_INDEX
from .misc_sglang_moe import SPECS as _MISC_SGLANG_MOE
from .misc_vllm import SPECS as _MISC_VLLM
from .mla_fp8_quant import SPECS as _MLA_FP8_QUANT
from .mla_set_kv import SPECS as _MLA_SET_KV
from .moe import SPECS as _MOE
from .moe_sum_scale import SPECS as _MOE_SUM_SCALE
from .more_attention import SPECS as _MORE_ATTENTION
from .more_flashinfer import SPECS as _MORE_FLASHINFER
from .more_sglang import SPECS as _MORE_SGLANG
from .more_vllm import SPECS as _MORE_VLLM
from .nsa_pool import SPECS as _NSA_POOL
from .pack_topk import SPECS as _PACK_TOPK
from .simple import SPECS as _SIMPLE
from .trtllm_mla_indices import SPECS as _TRTLLM_MLA_INDICES
from .vision_rope import SPECS as _VISION_ROPE

#: Every spec; a row is executable when one of them covers it.
SPECS: tuple[Spec, ...] = (
    _SIMPLE
    + _BOUND
    + _DECODE
    + _MOE
    + _LORA
    + _LORA_SGLANG
    + _LORA_VLLM_OPS
    + _FLA
    + _FLA_CHUNK
    + _GDN_PACKED
    + _INDEXER_DECODE
    + _MLA_SET_KV
    + _NSA_POOL
    + _VISION_ROPE
    + _PACK_TOPK
    + _FLA_OP
    + _TRTLLM_MLA_INDICES
    + _GDN_QKV_SPLIT
    + _MLA_FP8_QUANT
    + _MOE_SUM_SCALE
    + _KDA
    + _KDA_CHUNK
    + _MAMBA_SSD
    + _MISC_VLLM
    + _MISC_SGLANG
    + _MISC_SGLANG_CACHE
    + _MISC_SGLANG_DIFFUSION
    + _MISC_SGLANG_INDEX
    + _MISC_SGLANG_MOE
    + _MORE_SGLANG
    + _MORE_VLLM
    + _MORE_ATTENTION
    + _MORE_FLASHINFER
)


def spec_for(repo: str, sha: str, path: str) -> Spec | None:
    """The spec covering this row, or None."""
    for spec in SPECS:
        if spec.covers(repo, sha, path):
            return spec
    return None


__all__ = ["DEFAULT_TOLERANCE", "SPECS", "Spec", "shape_label", "spec_for"]
