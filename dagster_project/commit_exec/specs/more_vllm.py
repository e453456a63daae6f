"""Specs for vLLM rows the first spec rounds left (issue 35, task 35d).

* ``_fused_moe_lora`` at 2ec401bc ("Load tuned fused_moe_lora shrink and expand kernel
  configs separately"): the MoE-LoRA launcher splits into a shrink and an expand stage, each
  with its own config (block sizes, warps, stages, split-K). Census 1 called the row
  host-side only (no kernel and no direct launch site changed: the launches moved into new
  helpers). The inputs, reference and tolerance are ``specs.lora``'s fused-MoE-LoRA ones (the
  repo's ``tests/lora/test_fused_moe_lora_kernel.py`` shapes); the per-stage configs are the
  ones vLLM's defaults give (``specs.lora._moe_lora_inputs``), so the row measures the
  refactor at default configs (the tuned JSON configs the commit loads are not shipped with
  the file).

(Not covered: b2785579's ``sgmv_expand.py``: its files build the A pointer as a 1-tuple, a
trailing comma Triton 3.6 rejects; checked on the CPU, as ``specs.lora`` notes.)
"""

from __future__ import annotations

from .base import Spec
from .lora import _MOE_LORA_SHAPES, _moe_lora_spec

#: fp16 named shapes like ``specs.lora.FUSED_MOE_LORA`` (2ec401bc is after the split-K
#: commit 29de3cde, whose bf16-only B pointer the fp16 CPU check below would expose).
FUSED_MOE_LORA_SPLIT_CONFIG = _moe_lora_spec(
    "vllm_fused_moe_lora_split_config", ("2ec401bc",), _MOE_LORA_SHAPES, "float16"
)

SPECS: tuple[Spec, ...] = (FUSED_MOE_LORA_SPLIT_CONFIG,)
