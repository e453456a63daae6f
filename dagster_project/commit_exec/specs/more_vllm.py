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

* ``solve_tril`` of vLLM's FLA ops, ``(I + A)^-1`` per 64-token chunk of the GDN/KDA WY
  form: at 9fce7bee ("Accelerate solve_tril with TMA": a 16x16 solve plus a merge in two
  launches becomes one launch that may read and write through TMA descriptors) and at
  cb10b7e8 (the launcher takes precomputed ``chunk_indices``, removing a device-to-host
  sync; census 1 saw host-side code only). The launchers' kernels are picked through a
  variable (``merge_fn[...]``), which census 1 does not follow. ``is_tma_supported`` (a flag
  of ``fla/utils.py``, a stubbed sibling) is set as that file sets it: on a Hopper GPU with a
  Triton that has tensor descriptors, TMA; on the CPU check, the block-pointer path; the
  TMA descriptor constructor of ``fla/op.py`` is Triton's own.

* ``get_default_config`` of vLLM's fused MoE (22a97e66, "Improve default triton fused moe
  configs"): census 1 saw host code only, but the configs it returns are the GEMM's tile
  sizes, warps and stages. Each side's ``get_default_config`` picks the config (as
  ``try_get_optimal_moe_config`` does for a GPU without a tuned JSON for the shape) and its
  ``invoke_fused_moe_triton_kernel`` runs the bf16 w13 GEMM with it; the routing tables
  are aligned beforehand for every block M a config can pick (16 to 128), so the timed
  call is config selection plus the GEMM, as in ``fused_experts``.

(Not covered: b2785579's ``sgmv_expand.py``: its files build the A pointer as a 1-tuple, a
trailing comma Triton 3.6 rejects; checked on the CPU, as ``specs.lora`` notes.)
"""

from __future__ import annotations

import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .fla import _act_dtype
from .fla_chunk import _chunk_tables
from .lora import _MOE_LORA_SHAPES, _moe_lora_spec
from .moe import align, randn_per_expert

#: fp16 named shapes like ``specs.lora.FUSED_MOE_LORA`` (2ec401bc is after the split-K
#: commit 29de3cde, whose bf16-only B pointer the fp16 CPU check below would expose).
FUSED_MOE_LORA_SPLIT_CONFIG = _moe_lora_spec(
    "vllm_fused_moe_lora_split_config", ("2ec401bc",), _MOE_LORA_SHAPES, "float16"
)


def _torch() -> Any:
    import torch

    return torch


def _tril_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """A varlen batch's A: per 64-token chunk, strictly lower triangular (a token sees the
    earlier tokens of its chunk), entries of the size ``beta k_i . k_j decay`` takes with
    unit keys of 128 dims (~0.1); fp32, as ``chunk_scaled_dot_kkt_fwd`` hands it on."""
    torch = _torch()
    lens, h = list(shape["lens"]), shape["h"]
    x: Inputs = _chunk_tables(lens, device)
    t = sum(lens)
    pos = torch.cat([torch.arange(n) % 64 for n in lens]).to(device)
    keep = torch.arange(64, device=device)[None, :] < pos[:, None]  # [T, 64]
    a = torch.randn(1, t, h, 64, generator=gen, device=device) * 0.1
    x.update(A=a * keep[None, :, None, :], output_dtype=_act_dtype(device))
    return x


def _tma_flags(mod: Any, device: Any) -> None:
    """``fla/utils.py``'s ``is_tma_supported`` and ``fla/op.py``'s descriptor constructor,
    as those siblings define them (the loader stubs both); TMA descriptors ask Triton for
    scratch memory, so an allocator is set when they are used."""
    import triton
    import triton.language as tl

    torch = _torch()
    tma = bool(
        device.type == "cuda"
        and torch.cuda.get_device_capability(device)[0] >= 9
        and hasattr(tl, "make_tensor_descriptor")
    )
    mod.is_tma_supported = tma
    if tma:
        mod.make_tensor_descriptor = tl.make_tensor_descriptor
        triton.set_allocator(
            lambda size, _align, _stream: torch.empty(size, dtype=torch.int8, device=device)
        )


def _tril_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    if not isinstance(getattr(mod, "is_tma_supported", None), bool):
        _tma_flags(mod, x["A"].device)
    return {"Ai": call_by_name(mod.solve_tril, x)}


def _tril_reference(x: Inputs) -> Outputs:
    """Per chunk and head, ``inverse(I + A_chunk)``, batched: chunks padded to 64 rows with
    the identity, inverted in fp64, the valid rows written back."""
    torch = _torch()
    a = x["A"][0].double()  # [T, H, 64]
    t, h, _ = a.shape
    out = torch.zeros_like(a)
    cu = x["cu_seqlens"].tolist()
    starts = [
        (c, min(64, cu[s + 1] - c)) for s in range(len(cu) - 1) for c in range(cu[s], cu[s + 1], 64)
    ]
    blocks = torch.eye(64, dtype=torch.float64, device=a.device).repeat(len(starts), h, 1, 1)
    for i, (c, n) in enumerate(starts):
        blocks[i, :, :n, :n] += a[c : c + n, :, :n].transpose(0, 1)
    inv = torch.linalg.inv(blocks)
    for i, (c, n) in enumerate(starts):
        out[c : c + n, :, :n] = inv[i, :, :n, :n].transpose(0, 1)
    return {"Ai": out[None].to(x["output_dtype"])}


_VL_TRIL = "vllm/model_executor/layers/fla/ops/solve_tril.py"
_QWEN3_NEXT = "Qwen3-Next-80B-A3B GDN (32 value heads), chunk 64"

SOLVE_TRIL = Spec(
    name="vllm_fla_solve_tril",
    launcher="solve_tril",
    rows=(("vllm", "9fce7bee", _VL_TRIL), ("vllm", "cb10b7e8", _VL_TRIL)),
    shapes=(
        {
            "name": "qwen3-next-prefill-4k",
            "source": _QWEN3_NEXT + ", one 4k prompt",
            "lens": (4096,),
            "h": 32,
        },
        {
            "name": "qwen3-next-prefill-mixed",
            "source": _QWEN3_NEXT + ", a mixed varlen batch",
            "lens": (1500, 37, 2048, 300),
            "h": 32,
        },
        {
            "name": "qwen3-next-tp4-8x1k",
            "source": _QWEN3_NEXT + " at TP 4 (8 heads)",
            "lens": (1024,) * 8,
            "h": 8,
        },
        {
            "name": "qwen3-next-tp2-16k",
            "source": _QWEN3_NEXT + " at TP 2 (16 heads)",
            "lens": (16384,),
            "h": 16,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "lens": tuple(r.choice([1, 50, 64, 130]) for _ in range(r.choice([1, 2]))),
        "h": r.choice([1, 2]),
    },
    make_inputs=_tril_inputs,
    call=_tril_call,
    reference=_tril_reference,
    tolerance_why="16x16 forward substitutions and merges in fp32 ('ieee' dot precision) of "
    "entries ~0.1, rounded once to the activation dtype: dtype defaults (4 bf16 ulp) against "
    "an fp64 inverse",
)

# --- fused MoE default configs (22a97e66) ---

_BLOCK_MS = (16, 32, 64, 128)


def _moe_cfg_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    import triton.language as tl

    torch = _torch()
    m, e, hidden, inter, topk = (shape[k] for k in ("tokens", "experts", "k", "inter", "topk"))
    scores = torch.rand(m, e, generator=gen, device=device) + torch.linspace(
        1.0, 0.0, e, device=device
    )
    topk_ids = scores.topk(topk, dim=1).indices
    bf = torch.bfloat16
    x: Inputs = {
        "A": (torch.randn(m, hidden, generator=gen, device=device) * 0.5).to(bf),
        "B": randn_per_expert(e, 2 * inter, hidden, hidden**-0.5, bf, gen, device),
        "C": torch.empty(m, topk, 2 * inter, device=device, dtype=bf),
        "A_scale": None,
        "B_scale": None,
        "B_zp": None,
        "B_bias": None,
        "bias": None,
        "topk_weights": torch.rand(m, topk, generator=gen, device=device),
        "topk_ids": topk_ids.to(torch.int32),
        "mul_routed_weight": False,
        "top_k": topk,
        "compute_type": tl.bfloat16,
        "use_fp8_w8a8": False,
        "use_int8_w8a8": False,
        "use_int8_w8a16": False,
        "use_int4_w4a16": False,
        "per_channel_quant": False,
        "block_shape": None,
        # get_default_config's arguments as try_get_optimal_moe_config passes them
        "M": m,
        "E": e,
        "N": inter,
        "K": hidden,
        "topk": topk,
        "dtype": None,
    }
    for bm in _BLOCK_MS:
        x[f"aligned_{bm}"] = align(topk_ids, e, bm)
    return x


def _moe_cfg_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    config = call_by_name(mod.get_default_config, x)
    sorted_ids, expert_ids, total = x[f"aligned_{config['BLOCK_SIZE_M']}"]
    fn = getattr(mod, "invoke_fused_moe_triton_kernel", None) or mod.invoke_fused_moe_kernel
    call_by_name(
        fn,
        dict(
            x,
            config=config,
            sorted_token_ids=sorted_ids,
            expert_ids=expert_ids,
            num_tokens_post_padded=total,
        ),
    )
    return {"C": x["C"]}


def _moe_cfg_reference(x: Inputs) -> Outputs:
    torch = _torch()
    a, ids = x["A"].float(), x["topk_ids"].long()
    out = torch.zeros(*ids.shape, x["B"].shape[1], device=a.device)
    for e in ids.unique().tolist():
        tok, slot = (ids == e).nonzero(as_tuple=True)
        out[tok, slot] = a[tok] @ x["B"][e].float().T
    return {"C": out.to(x["C"].dtype)}


_VL_MOE = "vllm/model_executor/layers/fused_moe/fused_moe.py"

FUSED_MOE_DEFAULT_CONFIG = Spec(
    name="vllm_fused_moe_default_config",
    launcher="get_default_config",
    rows=(("vllm", "22a97e66", _VL_MOE),),
    shapes=(
        {
            "name": "qwen3-30b-a3b-decode-8",
            "source": "Qwen3-30B-A3B w13 (128 experts, top-8, "
            "hidden 2048, moe intermediate 768), decode batch 8",
            "tokens": 8,
            "experts": 128,
            "topk": 8,
            "k": 2048,
            "inter": 768,
        },
        {
            "name": "qwen3-30b-a3b-prefill-2k",
            "source": "Qwen3-30B-A3B w13, a 2k prefill chunk",
            "tokens": 2048,
            "experts": 128,
            "topk": 8,
            "k": 2048,
            "inter": 768,
        },
        {
            "name": "mixtral-8x7b-m64",
            "source": "Mixtral-8x7B w13 (8 experts, top-2, hidden "
            "4096, intermediate 14336), batch 64",
            "tokens": 64,
            "experts": 8,
            "topk": 2,
            "k": 4096,
            "inter": 14336,
        },
        {
            "name": "dsv2-lite-m256",
            "source": "DeepSeek-V2-Lite w13 (64 experts, top-6, hidden "
            "2048, intermediate 1408), batch 256",
            "tokens": 256,
            "experts": 64,
            "topk": 6,
            "k": 2048,
            "inter": 1408,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([3, 20, 70, 200]),
        "experts": r.choice([8, 16]),
        "topk": r.choice([2, 4]),
        "k": r.choice([256, 512]),
        "inter": r.choice([128, 256]),
    },
    make_inputs=_moe_cfg_inputs,
    call=_moe_cfg_call,
    reference=_moe_cfg_reference,
    mutated=("C",),
    tolerance={"C": (2e-2, 2e-2)},
    tolerance_why="bf16 GEMM with fp32 accumulation over K <= 4096 of unit-variance outputs; "
    "the configs change the K tile (32 -> 64/128) and so the summation order: a few bf16 "
    "ulps plus a floor, as specs.moe (no split-K: SPLIT_K is 1 in every default)",
)

SPECS: tuple[Spec, ...] = (FUSED_MOE_LORA_SPLIT_CONFIG, SOLVE_TRIL, FUSED_MOE_DEFAULT_CONFIG)

_ = random
