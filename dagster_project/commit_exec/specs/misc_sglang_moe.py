"""Specs for the misc SGLang rows of the execution census (issue 35), MoE and GEMM
kernels: the Triton router, the fused shared-expert append, the 2024 fused-MoE GEMM,
DeepEP's permute, the EP grouped GEMM and the batch-invariant bmm.

Shapes name their source: DeepSeek-V3 (256 experts top-8, hidden 7168, expert
intermediate 2048, MLA heads of 128 + 512), Kimi-K2 (384 experts top-8), GLM-4.5 (160
experts top-8), Qwen3-Next (512 experts top-10), Qwen2-57B-A14B, Mixtral-8x7B.
"""

from __future__ import annotations

import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .misc_sglang import _pdl_supported, _torch
from .moe import randn_per_expert

# --- moe_fused_gate (Triton router): score, add bias, top-k, renormalise, scale ---


def _gate_router_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    m, n = shape["tokens"], shape["experts"]
    return {
        "scores": torch.randn(m, n, generator=gen, device=device) * 2,
        "bias": torch.randn(n, generator=gen, device=device) * 0.1,
        "topk": shape["topk"] + shape.get("shared", 0),
        "scoring_func": shape.get("scoring", "sigmoid"),
        "num_fused_shared_experts": shape.get("shared", 0),
        "renormalize": True,
        "routed_scaling_factor": shape.get("scale", 2.5),
        "apply_routed_scaling_factor_on_output": shape.get("apply_scale", False),
    }


def _gate_router_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    mod.is_arch_support_pdl = _pdl_supported
    w, i = call_by_name(mod.moe_fused_gate, x)
    return {"weights": w, "indices": i}


def _gate_router_reference(x: Inputs) -> Outputs:
    torch = _torch()
    s = x["scores"].float()
    act = s.sigmoid() if x["scoring_func"] == "sigmoid" else torch.nn.functional.softplus(s).sqrt()
    shared = x["num_fused_shared_experts"]
    k = x["topk"] - shared
    idx = (act + x["bias"]).topk(k, -1).indices
    w = act.gather(1, idx)
    total = w.sum(-1, keepdim=True)
    scale = x["routed_scaling_factor"]
    if shared:
        m, n = s.shape
        w = torch.cat([w, (total / scale).expand(m, shared)], -1)
        extra = torch.arange(n, n + shared, device=s.device).expand(m, shared)
        idx = torch.cat([idx, extra], -1)
    w = w / total
    if x["apply_routed_scaling_factor_on_output"]:
        w = w * scale
    return {"weights": w, "indices": idx.to(torch.int32)}


MOE_FUSED_GATE = Spec(
    name="sglang_moe_fused_gate_triton",
    launcher="moe_fused_gate",
    rows=(("sglang", "a2d7eb30", "python/sglang/jit_kernel/moe_fused_gate.py"),),
    shapes=(
        # ungrouped sigmoid routers with a correction bias (both sides support them):
        # Kimi-K2 (384 experts, top-8, scale 2.827), GLM-4.5 (160 experts, top-8, 2.5)
        {"name": "kimi-k2-decode-b64", "tokens": 64, "experts": 384, "topk": 8, "scale": 2.827},
        {"name": "kimi-k2-prefill-8k", "tokens": 8192, "experts": 384, "topk": 8, "scale": 2.827},
        {
            "name": "glm4.5-prefill-4k-shared",
            "tokens": 4096,
            "experts": 160,
            "topk": 8,
            "shared": 1,
        },
        {
            "name": "sqrtsoftplus-256e-decode",
            "tokens": 256,
            "experts": 256,
            "topk": 6,
            "scoring": "sqrtsoftplus",
            "apply_scale": True,
            "scale": 1.5,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 7, 100, 513]),
        "experts": r.choice([64, 128, 160, 256, 384]),
        "topk": r.choice([2, 6, 8]),
        "shared": r.choice([0, 1]),
        "apply_scale": r.choice([True, False]),
    },
    make_inputs=_gate_router_inputs,
    call=_gate_router_call,
    reference=_gate_router_reference,
    tolerance={"weights": (1e-5, 1e-5), "indices": (0.0, 0.0)},
    tolerance_why="indices exact (fp32 logits drawn at random never tie); weights are one "
    "sigmoid and a sum of <= 8 fp32 values, then one division: 1e-5",
)


# --- fused_append_shared_experts_with_weights: routed top-k plus the fused shared expert ---


def _append_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    m, e, k = shape["tokens"], shape["experts"], shape["topk"]
    ids = torch.rand(m, e, generator=gen, device=device).topk(k, -1).indices.to(torch.int32)
    w = torch.rand(m, k, generator=gen, device=device)
    return {
        "topk_ids": ids,
        "topk_weights": w / w.sum(-1, keepdim=True),
        "gate_logits": (torch.randn(m, 1, generator=gen, device=device) * 2).to(torch.bfloat16),
        "num_fused_shared_experts": 1,
        "N": e,
        "scale": shape.get("scale", 1.0),
    }


def _append_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    """After the commit the launcher takes the shared expert's raw gate logits and applies
    sigmoid, the fp32 cast and the 1/ep scale itself; before it the model ran those as
    separate ops and passed the result, as the ``before`` side does here."""
    torch = _torch()
    fn = mod.fused_append_shared_experts_with_weights
    args = (x["topk_ids"], x["topk_weights"])
    if "apply_sigmoid" in fn.__code__.co_varnames:
        ids, w = fn(*args, x["gate_logits"], 1, N=x["N"], apply_sigmoid=True, scale=x["scale"])
    else:
        shared = torch.sigmoid(x["gate_logits"].float()) * x["scale"]
        ids, w = fn(*args, shared, 1, N=x["N"])
    return {"ids": ids, "weights": w}


def _append_reference(x: Inputs) -> Outputs:
    torch = _torch()
    m = x["topk_ids"].shape[0]
    ids = x["topk_ids"]
    shared_id = torch.full((m, 1), x["N"], dtype=ids.dtype, device=ids.device)
    shared_w = torch.sigmoid(x["gate_logits"].float()) * x["scale"]
    return {
        "ids": torch.cat([x["topk_ids"], shared_id], -1),
        "weights": torch.cat([x["topk_weights"], shared_w], -1),
    }


APPEND_SHARED_EXPERT = Spec(
    name="sglang_fused_append_shared_experts_with_weights",
    launcher="fused_append_shared_experts_with_weights",
    rows=(
        (
            "sglang",
            "96368a5f",
            "python/sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_kernels.py",
        ),
    ),
    shapes=(
        # sigmoid-gated shared experts: Qwen3-Next-80B (512 experts, top-10), Qwen2-57B-A14B
        # (64 experts, top-8); the 1/ep scale of expert parallelism over 8 ranks
        {"name": "qwen3-next-decode-b64", "tokens": 64, "experts": 512, "topk": 10},
        {"name": "qwen3-next-prefill-8k", "tokens": 8192, "experts": 512, "topk": 10},
        {
            "name": "qwen2-57b-prefill-4k-ep8",
            "tokens": 4096,
            "experts": 64,
            "topk": 8,
            "scale": 0.125,
        },
        {"name": "qwen2-57b-decode-b1", "tokens": 1, "experts": 64, "topk": 8},
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 5, 100, 700]),
        "experts": r.choice([60, 64, 128, 512]),
        "topk": r.choice([4, 8, 10]),
        "scale": r.choice([1.0, 0.25]),
    },
    make_inputs=_append_inputs,
    call=_append_call,
    reference=_append_reference,
    tolerance={"ids": (0.0, 0.0), "weights": (1e-6, 1e-6)},
    tolerance_why="ids are copied (exact); the appended weight is one fp32 sigmoid of a bf16 "
    "logit times a power-of-two scale on both sides: fp32 rounding only",
)


# --- bmm_batch_invariant (deterministic mode): (B, M, K) x (B, K, N), fixed tiling ---


def _bmm_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, m, k, n = shape["batch"], shape["m"], shape["k"], shape["n"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    return {
        "a": torch.randn(b, m, k, generator=gen, device=device).to(dt),
        "b": (torch.randn(b, k, n, generator=gen, device=device) * k**-0.5).to(dt),
    }


def _bmm_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    return {"c": mod.bmm_batch_invariant(x["a"], x["b"])}


BMM_BATCH_INVARIANT = Spec(
    name="sglang_bmm_batch_invariant",
    launcher="bmm_batch_invariant",
    rows=(("sglang", "c14cc47e", "python/sglang/srt/batch_invariant_ops/batch_invariant_ops.py"),),
    shapes=(
        # DeepSeek-V3 MLA weight absorption under deterministic inference: per head,
        # q_nope (tokens x 128) @ W_kc (128 x 512) and attn (tokens x 512) @ W_vc (512 x 128)
        {"name": "dsv3-tp8-q-absorb-decode", "batch": 16, "m": 64, "k": 128, "n": 512},
        {"name": "dsv3-tp8-q-absorb-prefill", "batch": 16, "m": 4096, "k": 128, "n": 512},
        {"name": "dsv3-tp1-v-absorb-prefill", "batch": 128, "m": 1024, "k": 512, "n": 128},
        {
            "name": "dsv3-tp8-v-absorb-fp16",
            "batch": 16,
            "m": 256,
            "k": 512,
            "n": 128,
            "dtype": "float16",
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2, 3]),
        "m": r.choice([1, 33, 130]),
        "k": r.choice([64, 128]),
        "n": r.choice([64, 200]),
        # fp16/fp32: the CPU interpreter stores an fp32 tile into a bf16 pointer as raw bits
        "dtype": r.choice(["float16", "float32"]),
    },
    make_inputs=_bmm_inputs,
    call=_bmm_call,
    reference=lambda x: {"c": (x["a"].float() @ x["b"].float()).to(x["a"].dtype)},
    tolerance={"c": (2e-2, 2e-2)},
    tolerance_why="dot products over K <= 512 accumulated in fp32 (tf32 for fp32 inputs on "
    "the GPU: 10-bit mantissa, so |err| ~ 2^-11 * sqrt(K) ~ 1e-2 on outputs ~N(0,1)), "
    "rounded to the input dtype: 2e-2 absolute and relative",
)


# --- invoke_fused_moe_kernel of 2024 (fused_moe/ and fused_moe_triton/): the bf16 path ---


def _moe_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    from .moe import _inputs

    x = _inputs(shape, gen, device)
    if shape.get("dtype") == "float16":
        import triton.language as tl

        for name in ("A", "B", "C"):
            x[name] = x[name].half()
        x["compute_type"] = tl.float16
    return x


def _moe_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    from .moe import _call

    return dict(_call(mod, x, sha))


def _moe_reference(x: Inputs) -> Outputs:
    """moe.py's per-expert reference (its docstring says why not a gathered einsum)."""
    from .moe import _reference

    return dict(_reference(x))


def _moe_footprint(shape: Shape) -> int:
    from .moe import footprint

    return footprint(shape)


FUSED_MOE_2024 = Spec(
    name="sglang_fused_moe_gemm_bf16_2024",
    launcher="invoke_fused_moe_kernel",
    rows=(
        # 5f65e2b8 adds optional weight padding (off unless MOE_PADDING=1, as here);
        # 95f93f49 adds unmasked K loads when K is a multiple of BLOCK_SIZE_K
        ("sglang", "5f65e2b8", "python/sglang/srt/layers/fused_moe/fused_moe.py"),
        ("sglang", "95f93f49", "python/sglang/srt/layers/fused_moe_triton/fused_moe.py"),
        # e4a40a71 only lets block-fp8 callers pass a pre-quantised A: bf16 runs unchanged
        ("sglang", "e4a40a71", "python/sglang/kernels/ops/moe/fused_moe_triton_kernels.py"),
    ),
    shapes=(
        # the inputs (skewed routing, torch block alignment) of moe.py's bf16 GEMM spec
        {
            "name": "mixtral-8x7b-w1-m64",
            "tokens": 64,
            "experts": 8,
            "topk": 2,
            "k": 4096,
            "n": 2048,
        },
        {
            "name": "mixtral-8x7b-w1-m1024",
            "tokens": 1024,
            "experts": 8,
            "topk": 2,
            "k": 4096,
            "n": 2048,
        },
        {
            "name": "qwen2-57b-w1-m256",
            "tokens": 256,
            "experts": 64,
            "topk": 8,
            "k": 3584,
            "n": 5120,
        },
        {
            "name": "dsv2-lite-w2-m512",
            "tokens": 512,
            "experts": 64,
            "topk": 6,
            "k": 1408,
            "n": 2048,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([3, 48, 200]),
        "experts": r.choice([8, 16]),
        "topk": 2,
        "k": r.choice([256, 512, 1000]),
        "n": r.choice([128, 256]),
        # fp16: the CPU interpreter stores an fp32 tile into a bf16 pointer as raw bits
        "dtype": "float16",
    },
    make_inputs=_moe_inputs,
    call=_moe_call,
    reference=_moe_reference,
    footprint=_moe_footprint,
    mutated=("C",),
    tolerance={"C": (2e-2, 2e-2)},
    tolerance_why="bf16 GEMM with fp32 accumulation over K <= 4096 (unit-variance outputs): "
    "a few bf16 ulps (1.6e-2) plus an absolute floor",
)


# --- DeepEP permute (2025 ep_moe): sort routed slots by expert, copy rows to expert order ---


def _deepep_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, e_all, k, h = shape["tokens"], shape["experts"], shape["topk"], shape["hidden"]
    local = e_all // shape["ep"]
    ids = torch.rand(t, e_all, generator=gen, device=device).topk(k, -1).indices
    # DeepEP hands each rank its experts re-numbered locally, -1 for slots routed elsewhere
    ids = torch.where(ids < local, ids, torch.full_like(ids, -1))
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    return {
        "hidden_states": torch.randn(t, h, generator=gen, device=device).to(dt),
        "topk_idx": ids.to(torch.int64),
        "num_experts": local,
    }


def _deepep_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    """The token dispatcher's ``deepep_permute`` at the sha: preprocess, then one program
    per token copying its row to every local destination (BLOCK_SIZE 512)."""
    torch = _torch()
    hs, ids = x["hidden_states"], x["topk_idx"]
    order, src2dst, seg = mod.deepep_run_moe_deep_preprocess(ids, x["num_experts"])
    gateup = torch.empty(order.numel(), hs.shape[1], device=hs.device, dtype=hs.dtype)
    mod.deepep_permute_triton_kernel[(hs.shape[0],)](
        hs, gateup, src2dst, ids, None, ids.shape[1], hs.shape[1], BLOCK_SIZE=512
    )
    return {"reorder_topk_ids": order, "src2dst": src2dst, "seg_indptr": seg, "gateup": gateup}


def _deepep_reference(x: Inputs) -> Outputs:
    torch = _torch()
    ids, hs = x["topk_idx"].flatten(), x["hidden_states"]
    order, perm = torch.sort(ids, stable=True)
    invalid = int((ids < 0).sum())
    src2dst = torch.empty_like(perm)
    src2dst[perm] = torch.arange(perm.numel(), device=perm.device) - invalid
    edges = torch.arange(x["num_experts"] + 1, device=ids.device)
    seg = torch.searchsorted(order, edges) - invalid
    gateup = torch.zeros(perm.numel() - invalid, hs.shape[1], device=hs.device, dtype=hs.dtype)
    valid = ids >= 0
    gateup[src2dst[valid]] = hs[
        torch.arange(ids.numel(), device=ids.device)[valid] // x["topk_idx"].shape[1]
    ]
    return {
        "reorder_topk_ids": order[invalid:],
        "src2dst": src2dst,
        "seg_indptr": seg,
        "gateup": gateup,
    }


DEEPEP_PERMUTE = Spec(
    name="sglang_deepep_permute",
    launcher="deepep_run_moe_deep_preprocess",
    rows=(("sglang", "c2bd094d", "python/sglang/srt/layers/moe/ep_moe/kernels.py"),),
    shapes=(
        # DeepSeek-V3 over DeepEP: 256 experts top-8, hidden 7168, expert parallel 8/16/32
        {
            "name": "dsv3-ep8-prefill-4k",
            "tokens": 4096,
            "experts": 256,
            "topk": 8,
            "hidden": 7168,
            "ep": 8,
        },
        {
            "name": "dsv3-ep16-prefill-8k",
            "tokens": 8192,
            "experts": 256,
            "topk": 8,
            "hidden": 7168,
            "ep": 16,
        },
        {
            "name": "dsv3-ep32-1k",
            "tokens": 1024,
            "experts": 256,
            "topk": 8,
            "hidden": 7168,
            "ep": 32,
        },
        {
            "name": "qwen3-235b-ep8-2k",
            "tokens": 2048,
            "experts": 128,
            "topk": 8,
            "hidden": 4096,
            "ep": 8,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([3, 50, 300]),
        "experts": r.choice([64, 256]),
        "topk": r.choice([6, 8]),
        "hidden": r.choice([512, 1000, 2048]),
        "ep": r.choice([4, 8]),
        "dtype": r.choice(["bfloat16", "float16"]),
    },
    make_inputs=_deepep_inputs,
    call=_deepep_call,
    reference=_deepep_reference,
    tolerance={
        "reorder_topk_ids": (0.0, 0.0),
        "src2dst": (0.0, 0.0),
        "seg_indptr": (0.0, 0.0),
        "gateup": (0.0, 0.0),
    },
    tolerance_why="a stable sort, prefix offsets and a row copy in the input dtype: exact "
    "(src2dst changes from int32 to int64 in the commit; values are compared)",
)


# --- grouped_gemm_triton (EP MoE): rows sorted by local expert times that expert's weight ---


def _grouped_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    e, m, k, n = shape["experts"], shape["tokens"], shape["k"], shape["n"]
    # skewed expert loads (a few hot experts), one segment per local expert
    w = torch.rand(e, generator=gen, device=device) ** 3 + 0.01
    counts = (w / w.sum() * m).floor().long()
    counts[0] += m - int(counts.sum())
    seg = torch.zeros(e + 1, dtype=torch.int64, device=device)
    seg[1:] = counts.cumsum(0)
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    return {
        "a": (torch.randn(m, k, generator=gen, device=device) * 0.5).to(dt),
        "b": randn_per_expert(e, n, k, k**-0.5, dt, gen, device),
        "c": torch.empty(m, n, device=device, dtype=dt),
        "batch_size": e,
        "weight_column_major": True,
        "seg_indptr": seg,
        "weight_indices": torch.arange(e, dtype=torch.int64, device=device),
    }


def _grouped_footprint(shape: Shape) -> int:
    """Bytes of a, b, c (16-bit), one expert's fp32 draw, and the reference's fp32 parts
    (the whole output twice: the parts and their concatenation) with one fp32 weight."""
    e, m, k, n = shape["experts"], shape["tokens"], shape["k"], shape["n"]
    inputs = 2 * (m * k + e * n * k + m * n) + 8 * (2 * e + 1)
    draw = 2 * 4 * max(m * k, n * k)
    reference = 4 * (m * k + 2 * m * n + n * k) + 2 * m * n
    return inputs + max(draw, reference)


def _grouped_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.grouped_gemm_triton, x)
    return {"c": x["c"]}


def _grouped_reference(x: Inputs) -> Outputs:
    torch = _torch()
    seg = x["seg_indptr"].tolist()
    parts = [x["a"][seg[i] : seg[i + 1]].float() @ x["b"][i].float().T for i in range(len(seg) - 1)]
    return {"c": torch.cat(parts).to(x["c"].dtype)}


GROUPED_GEMM = Spec(
    name="sglang_ep_grouped_gemm_triton",
    launcher="grouped_gemm_triton",
    rows=(("sglang", "f194e14f", "python/sglang/srt/layers/moe/ep_moe/kernels.py"),),
    shapes=(
        # DeepSeek-V3 under expert parallelism 8: 32 local experts, hidden 7168, expert
        # intermediate 2048 (gate_up N = 4096, down K = 2048)
        {"name": "dsv3-ep8-gateup-4k", "experts": 32, "tokens": 4096, "k": 7168, "n": 4096},
        {"name": "dsv3-ep8-down-4k", "experts": 32, "tokens": 4096, "k": 2048, "n": 7168},
        {"name": "dsv3-ep8-gateup-256", "experts": 32, "tokens": 256, "k": 7168, "n": 4096},
        {"name": "mixtral-ep2-gateup-2k", "experts": 4, "tokens": 2048, "k": 4096, "n": 28672},
    ),
    random_shape=lambda r: {
        "name": "random",
        "experts": r.choice([2, 4, 8]),
        "tokens": r.choice([7, 100, 300]),
        "k": r.choice([256, 512]),
        "n": r.choice([128, 384]),
        # fp16: the CPU interpreter stores an fp32 tile into a bf16 pointer as raw bits
        "dtype": "float16",
    },
    make_inputs=_grouped_inputs,
    call=_grouped_call,
    reference=_grouped_reference,
    footprint=_grouped_footprint,
    mutated=("c",),
    tolerance={"c": (2e-2, 2e-2)},
    tolerance_why="bf16 GEMM with fp32 accumulation over K <= 7168 (unit-variance outputs): "
    "a few bf16 ulps (1.6e-2) plus an absolute floor",
)

SPECS: tuple[Spec, ...] = (
    MOE_FUSED_GATE,
    APPEND_SHARED_EXPERT,
    BMM_BATCH_INVARIANT,
    FUSED_MOE_2024,
    DEEPEP_PERMUTE,
    GROUPED_GEMM,
)

_ = random
