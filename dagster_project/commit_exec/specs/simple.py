"""Specs for launchers with a plain tensor signature (merge of attention states, MoE sum
reduce, L2 norm, AWQ GEMM, SiLU-mul fp8 group quant, prefill attention).

Shapes name their source. Models: Llama-3-8B (32 q heads, 8 kv heads, head 128, hidden
4096), DeepSeek-V3 (hidden 7168, 256 experts, top-8, MLA heads 128, expert intermediate
2048), Qwen3-Next (linear-attention heads 16 x 128), Mixtral-8x7B (hidden 4096, top-2).
"""

from __future__ import annotations

import math
import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec


def _torch() -> Any:
    import torch

    return torch


# --- merge_attn_states (vLLM): out = weighted merge of two partial attention results ---


def _merge_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, h, d = shape["tokens"], shape["heads"], shape["head"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))

    def rnd(*s: int, dtype: Any = dt) -> Any:
        return torch.randn(*s, generator=gen, device=device, dtype=torch.float32).to(dtype)

    prefix_lse = rnd(h, t, dtype=torch.float32) * 3
    suffix_lse = rnd(h, t, dtype=torch.float32) * 3
    if shape.get("inf_lse"):
        # a split that saw no keys has lse = -inf on some rows (the path the fix touches)
        suffix_lse[:, ::4] = float("-inf")
    return {
        "output": torch.empty(t, h, d, device=device, dtype=dt),
        "prefix_output": rnd(t, h, d),
        "prefix_lse": prefix_lse,
        "suffix_output": rnd(t, h, d),
        "suffix_lse": suffix_lse,
        "output_lse": torch.empty(h, t, device=device, dtype=torch.float32),
    }


def _merge_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    mod.merge_attn_states(
        x["output"],
        x["prefix_output"],
        x["prefix_lse"],
        x["suffix_output"],
        x["suffix_lse"],
        x["output_lse"],
    )
    return {"output": x["output"], "output_lse": x["output_lse"]}


def _merge_reference(x: Inputs) -> Outputs:
    torch = _torch()
    p, s = x["prefix_lse"].float(), x["suffix_lse"].float()
    m = torch.maximum(p, s)
    pe, se = torch.exp(p - m), torch.exp(s - m)
    lse = m + torch.log(pe + se)
    wp = (pe / (pe + se)).T.unsqueeze(-1)
    ws = (se / (pe + se)).T.unsqueeze(-1)
    out = x["prefix_output"].float() * wp + x["suffix_output"].float() * ws
    return {"output": out.to(x["output"].dtype), "output_lse": lse}


MERGE_ATTN_STATES = Spec(
    name="vllm_merge_attn_states",
    launcher="merge_attn_states",
    rows=(
        ("vllm", "280d62b8", "vllm/attention/ops/triton_merge_attn_states.py"),
        ("vllm", "d9d342d2", "vllm/attention/ops/triton_merge_attn_states.py"),
    ),
    shapes=(
        {"name": "llama3-8b-decode", "tokens": 64, "heads": 32, "head": 128},
        {"name": "llama3-8b-prefill", "tokens": 4096, "heads": 32, "head": 128},
        {"name": "dsv3-mla-prefill", "tokens": 2048, "heads": 128, "head": 128},
        {"name": "test-odd-head", "tokens": 256, "heads": 16, "head": 80, "dtype": "float16"},
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 7, 33, 300, 1500]),
        "heads": r.choice([4, 8, 32, 64]),
        "head": r.choice([64, 96, 128, 256]),
        "dtype": r.choice(["bfloat16", "float16"]),
    },
    make_inputs=_merge_inputs,
    call=_merge_call,
    reference=_merge_reference,
    mutated=("output", "output_lse"),
    tolerance_why="one exp/log per element, no accumulation: dtype defaults",
)


# --- moe_sum_reduce_triton (SGLang): out[t] = scale * sum_k in[t, k] ---


def _moe_sum_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, k, h = shape["tokens"], shape["topk"], shape["hidden"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    x = torch.randn(t, k, h, generator=gen, device=device, dtype=torch.float32).to(dt)
    return {"input": x, "output": torch.empty(t, h, device=device, dtype=dt), "scale": 2.5}


def _moe_sum_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    mod.moe_sum_reduce_triton(x["input"], x["output"], x["scale"])
    return {"output": x["output"]}


MOE_SUM_REDUCE = Spec(
    name="sglang_moe_sum_reduce",
    launcher="moe_sum_reduce_triton",
    rows=(
        (
            "sglang",
            "cb3918a0",
            "python/sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_kernels.py",
        ),
    ),
    shapes=(
        {"name": "dsv3-decode", "tokens": 64, "topk": 8, "hidden": 7168},
        {"name": "dsv3-prefill", "tokens": 4096, "topk": 8, "hidden": 7168},
        {"name": "mixtral-prefill", "tokens": 8192, "topk": 2, "hidden": 4096},
        {"name": "qwen3-moe", "tokens": 512, "topk": 8, "hidden": 2048},
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 13, 200, 1000, 3000]),
        "topk": r.choice([2, 4, 6, 8]),
        "hidden": r.choice([1024, 2048, 2880, 4096, 5120, 7168]),
    },
    make_inputs=_moe_sum_inputs,
    call=_moe_sum_call,
    reference=lambda x: {"output": (x["input"].float().sum(1) * x["scale"]).to(x["input"].dtype)},
    mutated=("output",),
    tolerance={"output": (3.2e-2, 1.6e-2)},
    tolerance_why="a sum of up to 8 bf16 values times 2.5: two ulps of bf16 at the output's "
    "magnitude (values ~N(0, 8*6.25)), relative 2 ulp",
)


# --- l2norm_fwd (SGLang FLA): x / ||x|| per row ---


def _l2_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, d = shape["rows"], shape["dim"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    return {"x": torch.randn(t, d, generator=gen, device=device, dtype=torch.float32).to(dt)}


def _l2_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    return {"y": mod.l2norm_fwd(x["x"])}


L2NORM = Spec(
    name="sglang_fla_l2norm",
    launcher="l2norm_fwd",
    rows=(("sglang", "42a058c7", "python/sglang/kernels/ops/attention/fla/l2norm.py"),),
    shapes=(
        {"name": "qwen3-next-decode", "rows": 64 * 16, "dim": 128},
        {"name": "qwen3-next-prefill", "rows": 4096 * 16, "dim": 128},
        {"name": "kimi-linear-prefill", "rows": 2048 * 32, "dim": 128},
        {"name": "test-dim-64", "rows": 1000, "dim": 64, "dtype": "float32"},
    ),
    random_shape=lambda r: {
        "name": "random",
        "rows": r.choice([3, 100, 5000, 33000]),
        "dim": r.choice([64, 128, 256]),
    },
    make_inputs=_l2_inputs,
    call=_l2_call,
    reference=lambda x: {
        "y": (x["x"].float() / (x["x"].float().pow(2).sum(-1, keepdim=True) + 1e-6).sqrt()).to(
            x["x"].dtype
        )
    },
    tolerance_why="one reduction of <= 256 squares in fp32, then a division: dtype defaults",
)


# --- AWQ int4 GEMM (vLLM): C = A @ dequant(qweight, scales, qzeros) ---


def _awq_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    m, k, n, g = shape["m"], shape["k"], shape["n"], shape.get("group", 128)
    i32 = torch.int32

    def packed(rows: int, cols: int) -> Any:
        return torch.randint(
            -(2**31), 2**31 - 1, (rows, cols), generator=gen, device=device, dtype=i32
        )

    return {
        "input": (torch.randn(m, k, generator=gen, device=device) * 0.5).half(),
        "qweight": packed(k, n // 8),
        "scales": (torch.rand(k // g, n, generator=gen, device=device) * 0.02 + 0.005).half(),
        "qzeros": packed(k // g, n // 8),
        "split_k": shape.get("split_k", 8),
    }


#: rms of one product a * w of ``_awq_inputs`` (see the spec's tolerance_why).
AWQ_PRODUCT_RMS = 0.5 * (2 * (16**2 - 1) / 12) ** 0.5 * ((0.025**3 - 0.005**3) / 0.06) ** 0.5
#: fp16 roundings per side a split-K AWQ GEMM may add to an output (the launcher's split_k).
AWQ_SPLIT = 8
AWQ_RTOL = 2e-2


def awq_tolerance(shape: Shape) -> dict[str, tuple[float, float]]:
    """``(atol, rtol)`` of the AWQ output at this shape: fp16 rounding of split-K partials
    scales with the output's magnitude, sqrt(K) * AWQ_PRODUCT_RMS (tolerance_why)."""
    sigma = shape["k"] ** 0.5 * AWQ_PRODUCT_RMS
    return {"c": (AWQ_SPLIT * 2.0**-10 * 4 * sigma, AWQ_RTOL)}


def _awq_footprint(shape: Shape) -> int:
    """Bytes of the inputs (fp16 A, int32 packed weight and zeros, fp16 scales) and the
    reference's k x n temporaries (unpacked int32 nibbles, their reordered copy, zeros,
    scales, the difference and the fp32 dequantised weight: at most 8 alive) plus the
    fp32 output."""
    m, k, n = shape["m"], shape["k"], shape["n"]
    inputs = 2 * m * k + 4 * k * n // 8 + 2 * (k // 128) * n + 4 * (k // 128) * n // 8
    return inputs + 8 * 4 * k * n + 4 * 2 * m * k + 4 * 2 * m * n


def _awq_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    out = mod.awq_gemm_triton(x["input"], x["qweight"], x["scales"], x["qzeros"], x["split_k"])
    return {"c": out}


_AWQ_ORDER = (0, 4, 1, 5, 2, 6, 3, 7)


def _awq_unpack(q: Any) -> Any:
    torch = _torch()
    shifts = torch.arange(0, 32, 4, device=q.device, dtype=torch.int32)
    vals = (q[:, :, None] >> shifts[None, None, :]) & 0xF
    order = torch.tensor(_AWQ_ORDER, device=q.device)
    return vals[:, :, order].reshape(q.shape[0], -1)


def _awq_reference(x: Inputs) -> Outputs:
    torch = _torch()
    w, z = _awq_unpack(x["qweight"]), _awq_unpack(x["qzeros"])
    g = x["qweight"].shape[0] // x["qzeros"].shape[0]
    z = z.repeat_interleave(g, 0)
    s = x["scales"].float().repeat_interleave(g, 0)
    deq = (w - z).float() * s
    return {"c": (x["input"].float() @ deq).to(torch.float16)}


AWQ_GEMM = Spec(
    name="vllm_awq_gemm",
    launcher="awq_gemm_triton",
    rows=(
        ("vllm", "9db52eab", "vllm/model_executor/layers/quantization/awq_triton.py"),
        ("vllm", "ec4aaad8", "vllm/model_executor/layers/quantization/awq_triton.py"),
    ),
    shapes=(
        {"name": "test-m1", "m": 1, "k": 4096, "n": 4096},
        {"name": "llama3-8b-qkv-m16", "m": 16, "k": 4096, "n": 6144},
        {"name": "llama3-8b-down-m64", "m": 64, "k": 14336, "n": 4096},
        {"name": "llama3-8b-up-m128", "m": 128, "k": 4096, "n": 14336},
    ),
    random_shape=lambda r: {
        "name": "random",
        "m": r.choice([1, 3, 24, 100]),
        "k": r.choice([1024, 2048, 4096]),
        "n": r.choice([1024, 2048, 4096]),
        "split_k": r.choice([1, 2, 4, 8]),
    },
    make_inputs=_awq_inputs,
    call=_awq_call,
    reference=_awq_reference,
    footprint=_awq_footprint,
    tolerance_at=awq_tolerance,
    tolerance_why=(
        "c = sum over K of a*w with a ~ N(0, 0.25) and w = (q - z) * s (q, z uniform on 0..15, "
        "s ~ U(0.005, 0.025)): one product has rms AWQ_PRODUCT_RMS = 0.5 * 6.52 * 0.0161 = "
        "0.0524, so c has rms sqrt(K) * 0.0524 (3.4 at K = 4096, 6.3 at K = 14336) and its "
        "largest elements reach 4x that. Both versions accumulate split-K partials in fp16 "
        "(rounded partials, atomic or in-register fp16 adds): up to AWQ_SPLIT = 8 roundings per "
        "side, each at most half an fp16 ulp (2^-10 relative) of the output's 4-sigma "
        "magnitude, two sides: atol(K) = 8 * 2^-10 * 4 * sqrt(K) * 0.0524 (0.052 at K = 1024, "
        "0.105 at K = 4096, 0.196 at K = 14336), plus 2e-2 relative. A fixed 0.05 failed the "
        "Llama-3-8B down projection (K = 14336, max |after - before| 0.09-0.11 in s01/s02), "
        "while a bug that drops one 32-wide K slice moves each output by ~0.3 rms"
    ),
)


# --- prefill attention (vLLM triton_prefill_attention.context_attention_fwd) ---


def _prefill_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, s, hq, hk, d = shape["batch"], shape["seq"], shape["hq"], shape["hk"], shape["head"]
    lens = [max(1, s - (i * s) // (2 * b)) for i in range(b)]
    starts = [0]
    for n in lens[:-1]:
        starts.append(starts[-1] + n)
    total = sum(lens)
    dt = torch.bfloat16

    def rnd(h: int) -> Any:
        return torch.randn(total, h, d, generator=gen, device=device).to(dt)

    return {
        "q": rnd(hq),
        "k": rnd(hk),
        "v": rnd(hk),
        "o": torch.empty(total, hq, d, device=device, dtype=dt),
        "b_start_loc": torch.tensor(starts, device=device, dtype=torch.int32),
        "b_seq_len": torch.tensor(lens, device=device, dtype=torch.int32),
        "max_len": max(lens),
    }


def _prefill_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    mod.context_attention_fwd(
        x["q"],
        x["k"],
        x["v"],
        x["o"],
        x["b_start_loc"],
        x["b_seq_len"],
        x["max_len"],
        is_causal=True,
    )
    return {"o": x["o"]}


def _prefill_reference(x: Inputs) -> Outputs:
    torch = _torch()
    outs = []
    hq, hk = x["q"].shape[1], x["k"].shape[1]
    for st, n in zip(x["b_start_loc"].tolist(), x["b_seq_len"].tolist(), strict=True):
        q = x["q"][st : st + n].float().transpose(0, 1)
        k = x["k"][st : st + n].float().transpose(0, 1).repeat_interleave(hq // hk, 0)
        v = x["v"][st : st + n].float().transpose(0, 1).repeat_interleave(hq // hk, 0)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        outs.append(o.transpose(0, 1))
    return {"o": torch.cat(outs).to(x["o"].dtype)}


PREFILL_ATTENTION = Spec(
    name="vllm_context_attention_fwd",
    launcher="context_attention_fwd",
    rows=(("vllm", "8cc26acd", "vllm/v1/attention/ops/triton_prefill_attention.py"),),
    shapes=(
        {"name": "test-small", "batch": 2, "seq": 128, "hq": 8, "hk": 8, "head": 64},
        {"name": "llama3-8b-1k", "batch": 4, "seq": 1024, "hq": 32, "hk": 8, "head": 128},
        {"name": "llama3-8b-4k", "batch": 1, "seq": 4096, "hq": 32, "hk": 8, "head": 128},
        {"name": "qwen2-vl-vit", "batch": 8, "seq": 576, "hq": 16, "hk": 16, "head": 80},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 5]),
        "seq": r.choice([17, 200, 777, 2000]),
        "hq": 16,
        "hk": r.choice([4, 16]),
        "head": r.choice([64, 128]),
    },
    make_inputs=_prefill_inputs,
    call=_prefill_call,
    reference=_prefill_reference,
    mutated=("o",),
    tolerance={"o": (2e-2, 2e-2)},
    tolerance_why="online softmax over <= 4096 keys in fp32 with a bf16 P@V: the bf16 "
    "default (4 ulp) plus an absolute floor for outputs near zero",
)


# --- silu_mul_fp8_quant_deep_gemm (vLLM batched DeepGEMM MoE) ---


def _silu_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    e, t, h = shape["experts"], shape["tokens"], shape["hidden"]
    y = torch.randn(e, t, 2 * h, generator=gen, device=device).to(torch.bfloat16)
    counts = torch.randint(0, t + 1, (e,), generator=gen, device=device, dtype=torch.int32)
    return {"y": y, "tokens_per_expert": counts}


def _silu_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    q, s = mod.silu_mul_fp8_quant_deep_gemm(x["y"], x["tokens_per_expert"], 128)
    # only the rows each expert really has are defined
    mask = _valid_rows(x["tokens_per_expert"], q.shape[1], q.device)[:, :, None] > 0
    # rows past an expert's count are undefined (never written): zero them on both sides,
    # with where() (harness 1 multiplied, and inf * 0 is NaN)
    return {
        "q": torch_where(mask, q.float(), 0.0),
        "scale": torch_where(mask, s.float(), 0.0),
    }


def torch_where(mask: Any, values: Any, other: float) -> Any:
    return _torch().where(mask, values, _torch().full_like(values, other))


def _valid_rows(counts: Any, t: int, device: Any) -> Any:
    torch = _torch()
    return (torch.arange(t, device=device)[None, :] < counts[:, None]).float()


SILU_MUL_FP8_QUANT = Spec(
    name="vllm_silu_mul_fp8_quant_deep_gemm",
    launcher="silu_mul_fp8_quant_deep_gemm",
    rows=(
        ("vllm", "dcc6cfb9", "vllm/model_executor/layers/fused_moe/batched_deep_gemm_moe.py"),
        ("vllm", "3bbe11cc", "vllm/model_executor/layers/fused_moe/batched_deep_gemm_moe.py"),
    ),
    shapes=(
        {"name": "dsv3-ep8-decode", "experts": 32, "tokens": 64, "hidden": 2048},
        {"name": "dsv3-ep8-256", "experts": 32, "tokens": 256, "hidden": 2048},
        {"name": "qwen3-30b-ep", "experts": 16, "tokens": 128, "hidden": 768},
        {"name": "dsv3-ep16-1k", "experts": 16, "tokens": 1024, "hidden": 2048},
    ),
    random_shape=lambda r: {
        "name": "random",
        "experts": r.choice([4, 8, 16]),
        "tokens": r.choice([8, 48, 200, 512]),
        "hidden": r.choice([512, 1024, 2048]),
    },
    make_inputs=_silu_inputs,
    call=_silu_call,
    tolerance={"q": (0.0, 0.126), "scale": (1e-6, 1e-3)},
    tolerance_why="q is fp8 e4m3 (3 mantissa bits): a value on a rounding boundary may take "
    "either neighbour when the scale differs by float rounding, so one fp8 step (12.5%) "
    "relative; the group scales are fp32 max/448: 1e-3 relative",
)


SPECS: tuple[Spec, ...] = (
    MERGE_ATTN_STATES,
    MOE_SUM_REDUCE,
    L2NORM,
    AWQ_GEMM,
    PREFILL_ATTENTION,
    SILU_MUL_FP8_QUANT,
)

_ = (math, random)
