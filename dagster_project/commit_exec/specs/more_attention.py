"""Attention rows census 1 called host-side only (issue 35, task 35d): the commit changes a
helper that picks the launch configuration (block sizes, warps), not a kernel or the launch
site, so the launcher is called as ``specs.misc_sglang`` / ``specs.misc_vllm_attn`` call it,
with their inputs and torch references (one spec per row family, rows those specs leave).

* SGLang ``extend_attention_fwd``, ``_get_block_sizes_for_extend_attention`` at f57f8a8a
  (Gemma4 on H200: Hopper, ``128 < head_dim <= 256`` -> BLOCK_M 64 instead of 128) and
  c1067f88 (AMD gfx950 only: on the H100 we run, both sides take the same branch; the row
  says what the commit does off its target hardware). Control: head 128, a branch neither
  commit changes.
* vLLM ``prefix_prefill.context_attention_fwd`` at 64862d10 (ROCm only: 4 warps instead of 8
  when ``current_platform.is_rocm()``) and 6bd1dd9d (a ``SKIP_DECODE`` constexpr that lets the
  new chunked-prefill caller skip decode rows; called as that caller calls it,
  ``skip_decode=True``, on prefill-only batches where every row is computed on both sides).
  These older launchers take the prefix lengths as ``b_ctx_len`` too.
"""

from __future__ import annotations

import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .misc_sglang import _extend_call, _extend_inputs, _extend_reference
from .misc_vllm_attn import _prefix_inputs, _prefix_reference

_EXT_OLD = "python/sglang/srt/layers/attention/triton_ops/extend_attention.py"

_GEMMA = "Gemma-style attention with head_dim 256 (the commit's Gemma4 target)"

EXTEND_ATTENTION_BLOCKS = Spec(
    name="sglang_extend_attention_block_sizes",
    launcher="extend_attention_fwd",
    rows=(("sglang", "f57f8a8a", _EXT_OLD), ("sglang", "c1067f88", _EXT_OLD)),
    shapes=(
        {
            "name": "gemma-d256-chunked-prefill",
            "source": _GEMMA + ", 2 x 2k over a 4k prefix",
            "batch": 2,
            "extend": 2048,
            "prefix": 4096,
            "hq": 16,
            "hk": 8,
            "head": 256,
        },
        {
            "name": "gemma-d256-b8-1k",
            "source": _GEMMA + ", test_extend_attention's B/N_CTX pattern (8 requests, 512 + 512)",
            "batch": 8,
            "extend": 512,
            "prefix": 512,
            "hq": 16,
            "hk": 8,
            "head": 256,
        },
        {
            "name": "gemma-d256-no-prefix",
            "source": _GEMMA + ", a fresh 4 x 1k prefill",
            "batch": 4,
            "extend": 1024,
            "prefix": 0,
            "hq": 32,
            "hk": 16,
            "head": 256,
        },
        {
            "name": "gemma-d256-mixed-fp16",
            "source": _GEMMA + ", fp16, 16 short requests",
            "batch": 16,
            "extend": 256,
            "prefix": 1024,
            "hq": 8,
            "hk": 4,
            "head": 256,
            "dtype": "float16",
        },
    ),
    control={
        "name": "control-llama3-8b-d128",
        "source": "Llama-3-8B (head 128), 4 x 1k over 1k",
        "batch": 4,
        "extend": 1024,
        "prefix": 1024,
        "hq": 32,
        "hk": 8,
        "head": 128,
    },
    control_reason="head_dim 128: Hopper keeps BLOCK_M, BLOCK_N = 128, 64 in both versions "
    "of both commits (f57f8a8a splits only 128 < Lq <= 256; c1067f88 changes only HIP)",
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2, 3]),
        "extend": r.choice([17, 40, 70]),
        "prefix": r.choice([0, 33, 90]),
        "hq": r.choice([4, 8]),
        "hk": r.choice([2, 4]),
        "head": r.choice([128, 256]),
        # fp16: the CPU interpreter stores an fp32 tile into a bf16 pointer as raw bits
        "dtype": "float16",
    },
    make_inputs=_extend_inputs,
    call=_extend_call,
    reference=_extend_reference,
    mutated=("o_extend",),
    tolerance={"o_extend": (2e-2, 2e-2)},
    tolerance_why="online softmax over <= 6k keys in fp32 with a bf16 P@V; the commit changes "
    "BLOCK_M only (the key order within a query row is unchanged), so before and after agree "
    "to a few bf16 ulps: bf16 default plus an absolute floor, as specs.misc_sglang",
)


def _old_prefix_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """``specs.misc_vllm_attn``'s prefix-prefill batch plus the older API's ``b_ctx_len``
    (each sequence's cached prefix; ``b_seq_len`` stays prefix + new tokens)."""
    torch = _torch()
    x = _prefix_inputs(shape, gen, device)
    q_lens = (x["b_start_loc"][1:] - x["b_start_loc"][:-1]).to(device)
    x["b_ctx_len"] = (x["b_seq_len"] - q_lens).to(torch.int32)
    x["skip_decode"] = True  # 6bd1dd9d's caller (chunked_prefill_paged_decode.py)
    return x


def _old_prefix_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.context_attention_fwd, x)
    return {"o": x["o"]}


def _torch() -> Any:
    import torch

    return torch


_PP = "vllm/attention/ops/prefix_prefill.py"
_LLAMA = "Llama-3-8B (32 q / 8 kv heads of 128), paged blocks of 16"

PREFIX_PREFILL_OLD_API = Spec(
    name="vllm_prefix_prefill_ctx_len_api",
    launcher="context_attention_fwd",
    rows=(("vllm", "64862d10", _PP), ("vllm", "6bd1dd9d", _PP)),
    shapes=(
        {
            "name": "llama3-8b-prefix-b4",
            "source": _LLAMA + ", 4 x 512 over 2k",
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
            "source": _LLAMA + ", a 2k chunk over 6k",
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
            "source": "Llama-3-70B at TP 8 (8 q / 1 kv head)",
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
            "source": "tests/kernels/test_prefix_prefill.py style MHA batch",
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
        "ctx": r.choice([16, 40, 100]),
        "query": r.choice([2, 17, 33]),  # >= 2: no decode rows (see the module docstring)
        "hq": r.choice([4, 8]),
        "hk": r.choice([1, 2, 4]),
        "head": r.choice([64, 128]),
        "block": 16,
        "dtype": "float16",  # the CPU interpreter computes bf16 wrongly (specs.misc_vllm_attn)
    },
    make_inputs=_old_prefix_inputs,
    call=_old_prefix_call,
    reference=_prefix_reference,
    mutated=("o",),
    tolerance={"o": (2e-2, 2e-2)},
    tolerance_why="online softmax over <= 8k keys in fp32, P@V in the activation dtype; the "
    "commits change warps or add a skipped branch, not the key order: a few ulps of bf16, "
    "plus an absolute floor for near-zero outputs (as the newer prefix-prefill spec)",
)


SPECS: tuple[Spec, ...] = (EXTEND_ATTENTION_BLOCKS, PREFIX_PREFILL_OLD_API)

_ = random
