"""The 41 inference ops of the kernelinfer card: math, signatures, shapes and roofline work.

Each ``OpSpec`` carries what a task needs to be stated (signature, one-line math), sampled
(realistic shapes from public model configs, see ``reference/roofline.md`` §2 "Model
shapes") and timed (ideal FLOPs and single-pass bytes from §2). Variants add their own
inefficiencies on top of these ideal figures in ``variants``/``timing``.

Op families group ops that share a kernel skeleton, a variant ladder and a template file.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

Shape = dict[str, int]

#: Bytes per element. int4/fp4 are packed two per byte; their scale overhead is added by
#: the byte formulas (g128 fp16 scales for int4, one e4m3 scale per 16 values for NVFP4).
ELEM_BYTES: Mapping[str, float] = MappingProxyType(
    {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5, "fp4": 0.5}
)

FAMILIES: tuple[str, ...] = (
    "attn_decode",
    "attn_prefill",
    "gemm",
    "gemv",
    "rowwise",
    "elementwise",
    "sampling",
    "scan",
)


@dataclass(frozen=True)
class OpSpec:
    """Static description of one op.

    ``sample`` draws a shape dict (keys in ``shape_keys`` order); ``flops``/``bytes`` are the
    roofline numerators for the ideal kernel; ``out`` names the output tensor and its
    concrete dims (used for wrong-result messages).
    """

    name: str
    family: str
    category: str
    dtypes: tuple[str, ...]
    shape_keys: tuple[str, ...]
    signature: str
    desc: str
    sample: Callable[[random.Random], Shape]
    flops: Callable[[Shape, str], float]
    bytes: Callable[[Shape, str], float]
    out: Callable[[Shape], tuple[str, tuple[int, ...]]]
    #: which tensor-core path the ideal kernel uses: "act" (same as activation dtype),
    #: or an explicit path name ("int8", "fp8", "fp4", "fp16").
    mma_path: str = "act"
    #: dtypes that need a native MMA feature (fp8/fp4 ops), used by task sampling to prefer
    #: realistic GPU pairings; the op is still valid on other GPUs through dequant paths.
    fp8_attention: bool = False

    def signature_for(self, dtype: str) -> str:
        """Signature string with the task dtype substituted (``{dt}`` placeholders)."""
        kv = "fp8_e4m3" if dtype == "fp8" else dtype
        return self.signature.replace("{dt}", _act_dtype_name(self, dtype)).replace("{kv}", kv)

    def elem(self, dtype: str) -> float:
        return ELEM_BYTES[dtype]


def _act_dtype_name(op: OpSpec, dtype: str) -> str:
    # Attention with an fp8 KV cache keeps bf16 queries/outputs; quantized GEMMs keep fp16 acts.
    if dtype in ("fp8", "int8", "int4", "fp4") and op.family in ("attn_decode",):
        return "bf16"
    if dtype in ("int8", "int4", "fp4", "fp8"):
        return "fp16"
    return dtype


# --------------------------------------------------------------------------------------
# Model shapes (reference/roofline.md §2), with tensor-parallel splits for variety.
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelCfg:
    name: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    vocab: int
    experts: int = 0
    topk: int = 0
    expert_inter: int = 0


MODELS: tuple[ModelCfg, ...] = (
    ModelCfg("llama3_8b", 4096, 32, 8, 128, 14336, 128256),
    ModelCfg("llama3_70b", 8192, 64, 8, 128, 28672, 128256),
    ModelCfg("mixtral_8x7b", 4096, 32, 8, 128, 14336, 32000, 8, 2, 14336),
    ModelCfg("qwen3_8b", 4096, 32, 8, 128, 12288, 151936),
    ModelCfg("qwen3_30b_a3b", 2048, 32, 4, 128, 6144, 151936, 128, 8, 768),
    ModelCfg("qwen3_235b_a22b", 4096, 64, 4, 128, 12288, 151936, 128, 8, 1536),
    ModelCfg("deepseek_v3", 7168, 128, 128, 128, 18432, 129280, 256, 8, 2048),
    ModelCfg("mistral_7b", 4096, 32, 8, 128, 14336, 32000),
)
DENSE = tuple(m for m in MODELS if m.name != "deepseek_v3")
MOE = tuple(m for m in MODELS if m.experts)
GQA = tuple(m for m in MODELS if m.name != "deepseek_v3")

DECODE_B = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SMALL_M = (1, 2, 4, 8, 16, 32, 64)
PREFILL_M = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
KV_LENS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
TOKENS = (1, 4, 16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384)
VOCABS = (32000, 50257, 128256, 129280, 151936)


def _tp(rng: random.Random, heads: int, kv_heads: int) -> tuple[int, int]:
    """Split heads over a tensor-parallel degree that keeps at least one KV head."""
    tp = rng.choice((1, 1, 2, 4, 8))
    while tp > 1 and (heads % tp or kv_heads % tp):
        tp //= 2
    return heads // tp, max(1, kv_heads // tp)


def _weight_nk(rng: random.Random) -> tuple[int, int]:
    """(N, K) of a real projection: qkv, o, gate_up, down, lm_head, with TP splits."""
    m = rng.choice(DENSE)
    hq, hkv, d = m.heads, m.kv_heads, m.head_dim
    choices = [
        ((hq + 2 * hkv) * d, m.hidden),
        (m.hidden, hq * d),
        (2 * m.inter, m.hidden),
        (m.inter, m.hidden),
        (m.hidden, m.inter),
    ]
    n, k = rng.choice(choices)
    tp = rng.choice((1, 1, 2, 4, 8))
    if rng.random() < 0.5:
        n = max(256, n // tp)
    else:
        k = max(256, k // tp)
    return n, k


# --------------------------------------------------------------------------------------
# Shape samplers
# --------------------------------------------------------------------------------------


def _s_flash_decode(rng: random.Random) -> Shape:
    m = rng.choice(GQA)
    hq, hkv = _tp(rng, m.heads, m.kv_heads)
    return {
        "B": rng.choice(DECODE_B),
        "Hq": hq,
        "Hkv": hkv,
        "D": m.head_dim,
        "Skv": rng.choice(KV_LENS),
        "page": rng.choice((16, 16, 32, 64)),
    }


def _s_flash_prefill(rng: random.Random) -> Shape:
    m = rng.choice(GQA)
    hq, hkv = _tp(rng, m.heads, m.kv_heads)
    s = rng.choice((512, 1024, 2048, 4096, 8192, 16384, 32768))
    b = rng.choice(tuple(x for x in (1, 2, 4, 8, 16) if x * s <= 32768) or (1,))
    return {"B": b, "S": s, "Hq": hq, "Hkv": hkv, "D": m.head_dim}


def _s_swa_decode(rng: random.Random) -> Shape:
    w, d, hq0, hkv0 = rng.choice(
        ((4096, 128, 32, 8), (1024, 128, 16, 8), (128, 64, 64, 8), (1024, 256, 8, 4))
    )
    hq, hkv = _tp(rng, hq0, hkv0)
    return {
        "B": rng.choice(DECODE_B),
        "Hq": hq,
        "Hkv": hkv,
        "D": d,
        "Skv": rng.choice(KV_LENS),
        "W": w,
        "page": rng.choice((16, 32)),
    }


def _s_mla_decode(rng: random.Random) -> Shape:
    return {
        "B": rng.choice(DECODE_B),
        "Hq": rng.choice((16, 32, 64, 128)),
        "Sq": rng.choice((1, 1, 2)),
        "Skv": rng.choice(KV_LENS),
        "page": 64,
    }


def _s_tree_attn(rng: random.Random) -> Shape:
    m = rng.choice(GQA)
    hq, hkv = _tp(rng, m.heads, m.kv_heads)
    return {
        "B": rng.choice((1, 2, 4, 8, 16, 32)),
        "Tt": rng.choice((8, 16, 32, 64)),
        "Skv": rng.choice(KV_LENS[:6]),
        "Hq": hq,
        "Hkv": hkv,
        "D": m.head_dim,
    }


def _s_chunked_prefill(rng: random.Random) -> Shape:
    m = rng.choice(GQA)
    hq, hkv = _tp(rng, m.heads, m.kv_heads)
    return {
        "B": rng.choice((1, 2, 4)),
        "C": rng.choice((512, 1024, 2048, 4096, 8192)),
        "P": rng.choice((0, 2048, 8192, 32768, 65536, 131072)),
        "Hq": hq,
        "Hkv": hkv,
        "D": m.head_dim,
    }


def _s_cross_attn(rng: random.Random) -> Shape:
    senc, hq, hkv, d = rng.choice(
        ((1500, 20, 20, 64), (1500, 16, 16, 64), (1601, 32, 8, 128), (6404, 32, 8, 128))
    )
    return {
        "B": rng.choice((1, 2, 4, 8, 16, 32, 64)),
        "Sq": rng.choice((1, 1, 16, 64, 256, 448)),
        "Senc": senc,
        "Hq": hq,
        "Hkv": hkv,
        "D": d,
    }


def _s_fused_qkv_rope(rng: random.Random) -> Shape:
    m = rng.choice(GQA)
    hq, hkv = _tp(rng, m.heads, m.kv_heads)
    return {"T": rng.choice(TOKENS), "H": m.hidden, "Hq": hq, "Hkv": hkv, "D": m.head_dim}


def _s_gemm(ms: tuple[int, ...]) -> Callable[[random.Random], Shape]:
    def sample(rng: random.Random) -> Shape:
        n, k = _weight_nk(rng)
        return {"M": rng.choice(ms), "N": n, "K": k}

    return sample


def _s_gemm_awkward(rng: random.Random) -> Shape:
    # Persistent/stream-K targets: prefill M that leaves a ragged last wave.
    n, k = _weight_nk(rng)
    m = rng.choice((384, 640, 1152, 1536, 2304, 3072, 4608, 6144, 12288))
    return {"M": m, "N": n, "K": k}


def _s_blockwise(rng: random.Random) -> Shape:
    n, k = rng.choice(
        (
            (7168, 2048),
            (2048, 7168),
            (4096, 7168),
            (7168, 16384),
            (24576, 1536),
            (32768, 512),
            (7168, 18432),
            (18432, 7168),
            (1536, 7168),
            (576, 7168),
        )
    )
    return {"M": rng.choice((64, 128, 256, 512, 1024, 2048, 4096, 8192)), "N": n, "K": k}


def _s_gemv(rng: random.Random) -> Shape:
    n, k = _weight_nk(rng)
    if rng.random() < 0.15:
        m = rng.choice(DENSE)
        n, k = m.vocab, m.hidden
    return {"B": rng.choice((1, 1, 2, 4, 8, 16)), "N": n, "K": k}


def _s_paged_kv_copy(rng: random.Random) -> Shape:
    m = rng.choice(GQA)
    _, hkv = _tp(rng, m.heads, m.kv_heads)
    return {
        "n_blocks": rng.choice((16, 64, 256, 1024, 4096)),
        "page": rng.choice((16, 32, 64)),
        "Hkv": hkv,
        "D": m.head_dim,
        "L": rng.choice((1, 32, 48, 80)),
    }


def _s_kv_append(rng: random.Random) -> Shape:
    m = rng.choice(GQA)
    _, hkv = _tp(rng, m.heads, m.kv_heads)
    return {"T": rng.choice(TOKENS), "Hkv": hkv, "D": m.head_dim, "page": rng.choice((16, 32, 64))}


def _s_kv_quant(rng: random.Random) -> Shape:
    m = rng.choice(GQA)
    _, hkv = _tp(rng, m.heads, m.kv_heads)
    return {"T": rng.choice(TOKENS), "Hkv": hkv, "D": m.head_dim}


def _s_sampler(rng: random.Random) -> Shape:
    return {"B": rng.choice((1, 4, 8, 16, 32, 64, 128, 256, 512)), "V": rng.choice(VOCABS)}


def _s_topk(rng: random.Random) -> Shape:
    s = _s_sampler(rng)
    s["k"] = rng.choice((20, 40, 50, 64, 100, 1024))
    return s


def _s_moe_scatter(rng: random.Random) -> Shape:
    m = rng.choice(MOE)
    return {"T": rng.choice(TOKENS), "H": m.hidden, "E": m.experts, "k": m.topk}


def _s_moe_combine(rng: random.Random) -> Shape:
    m = rng.choice(MOE)
    return {"T": rng.choice(TOKENS), "H": m.hidden, "k": m.topk}


def _s_moe_grouped(rng: random.Random) -> Shape:
    m = rng.choice(MOE)
    n, k = rng.choice(((2 * m.expert_inter, m.hidden), (m.hidden, m.expert_inter)))
    tp = rng.choice((1, 2, 4))
    if n == 2 * m.expert_inter:
        n = max(256, n // tp)
    else:
        k = max(256, k // tp)
    return {
        "T": rng.choice((1, 4, 16, 64, 256, 1024, 4096, 8192)),
        "k": m.topk,
        "E": m.experts,
        "N": n,
        "K": k,
    }


def _s_mamba_scan(rng: random.Random) -> Shape:
    return {
        "B": rng.choice((1, 2, 4, 8, 16)),
        "L": rng.choice((2048, 4096, 8192, 16384, 32768, 65536, 131072)),
        "Din": rng.choice((1536, 2048, 2560, 4096, 5120)),
        "N": 16,
    }


def _s_mamba_step(rng: random.Random) -> Shape:
    return {
        "B": rng.choice(DECODE_B),
        "Din": rng.choice((1536, 2048, 2560, 4096, 5120)),
        "N": rng.choice((16, 16, 64, 128)),
    }


def _s_rmsnorm(rng: random.Random) -> Shape:
    h = rng.choice((512, 1536, 2048, 3072, 4096, 5120, 7168, 8192))
    return {"T": rng.choice(TOKENS), "H": h}


def _s_rope(rng: random.Random) -> Shape:
    m = rng.choice(GQA)
    hq, hkv = _tp(rng, m.heads, m.kv_heads)
    return {
        "T": rng.choice(TOKENS),
        "Hq": hq,
        "Hkv": hkv,
        "D": rng.choice((m.head_dim, m.head_dim, 64)),
    }


def _s_swiglu(rng: random.Random) -> Shape:
    n = rng.choice((14336, 28672, 12288, 2048, 5632, 11008, 1536, 768))
    tp = rng.choice((1, 1, 2, 4, 8))
    return {"M": rng.choice(TOKENS), "N": max(256, n // tp)}


def _s_embedding(rng: random.Random) -> Shape:
    m = rng.choice(MODELS)
    return {"T": rng.choice(TOKENS), "V": m.vocab, "H": m.hidden}


def _s_conv1d(rng: random.Random) -> Shape:
    return {
        "B": rng.choice((1, 2, 4, 8, 16)),
        "L": rng.choice((1, 2048, 4096, 8192, 16384, 32768)),
        "C": rng.choice((1536, 2048, 2560, 4096, 5120, 8448)),
        "W": 4,
    }


def _s_conv2d(rng: random.Random) -> Shape:
    hw, c = rng.choice(
        ((64, 512), (128, 512), (128, 256), (256, 256), (256, 128), (512, 128), (32, 512))
    )
    cout = rng.choice((c, c, c // 2 if c > 128 else c))
    return {"N": rng.choice((1, 1, 2, 4)), "H": hw, "W": hw, "Cin": c, "Cout": cout, "R": 3, "S": 3}


# --------------------------------------------------------------------------------------
# Work formulas (reference/roofline.md §2)
# --------------------------------------------------------------------------------------


def _e(dtype: str) -> float:
    return ELEM_BYTES[dtype]


def _act(dtype: str) -> float:
    """Activation element size: quantized weight formats keep 16-bit activations."""
    return 2.0 if dtype in ("int4", "fp4", "int8", "fp8") else ELEM_BYTES[dtype]


def _f_decode(s: Shape, dt: str) -> float:
    skv = min(s["Skv"], s.get("W", s["Skv"]))
    return 4.0 * s["B"] * s["Hq"] * skv * s["D"] + 5.0 * s["B"] * s["Hq"] * skv


def _b_decode(s: Shape, dt: str) -> float:
    skv = min(s["Skv"], s.get("W", s["Skv"]))
    return (
        2.0 * s["B"] * skv * s["Hkv"] * s["D"] * _e(dt)
        + 2.0 * s["B"] * s["Hq"] * s["D"] * _act(dt)
        + s["B"] * math.ceil(s["Skv"] / s["page"]) * 4.0
    )


def _f_mla(s: Shape, dt: str) -> float:
    return 2.0 * s["B"] * s["Hq"] * s["Sq"] * s["Skv"] * (576 + 512)


def _b_mla(s: Shape, dt: str) -> float:
    return s["B"] * s["Skv"] * 576 * _e(dt) + s["B"] * s["Hq"] * s["Sq"] * (576 + 512) * 2.0


def _f_prefill(s: Shape, dt: str) -> float:
    return 2.0 * s["B"] * s["Hq"] * s["S"] ** 2 * s["D"]


def _b_prefill(s: Shape, dt: str) -> float:
    return s["B"] * s["S"] * (2 * s["Hq"] + 2 * s["Hkv"]) * s["D"] * _e(dt)


def _f_tree(s: Shape, dt: str) -> float:
    return 4.0 * s["B"] * s["Hq"] * s["Tt"] * (s["Skv"] + s["Tt"]) * s["D"]


def _b_tree(s: Shape, dt: str) -> float:
    return (
        2.0 * s["B"] * (s["Skv"] + s["Tt"]) * s["Hkv"] * s["D"] * _e(dt)
        + 2.0 * s["B"] * s["Tt"] * s["Hq"] * s["D"] * _e(dt)
        + s["B"] * s["Tt"] ** 2 / 8.0
    )


def _f_chunked(s: Shape, dt: str) -> float:
    c, p = s["C"], s["P"]
    return 4.0 * s["B"] * s["Hq"] * s["D"] * (c * p + c * (c + 1) / 2.0)


def _b_chunked(s: Shape, dt: str) -> float:
    return 2.0 * s["B"] * (s["P"] + s["C"]) * s["Hkv"] * s["D"] * _e(dt) + 2.0 * s["B"] * s[
        "C"
    ] * s["Hq"] * s["D"] * _e(dt)


def _f_cross(s: Shape, dt: str) -> float:
    return 4.0 * s["B"] * s["Hq"] * s["Sq"] * s["Senc"] * s["D"]


def _b_cross(s: Shape, dt: str) -> float:
    return 2.0 * s["B"] * s["Senc"] * s["Hkv"] * s["D"] * _e(dt) + 2.0 * s["B"] * s["Sq"] * s[
        "Hq"
    ] * s["D"] * _e(dt)


def _f_qkv_rope(s: Shape, dt: str) -> float:
    q = s["Hq"] + 2 * s["Hkv"]
    return 2.0 * s["T"] * s["H"] * q * s["D"] + 3.0 * s["T"] * (s["Hq"] + s["Hkv"]) * s["D"]


def _b_qkv_rope(s: Shape, dt: str) -> float:
    q = s["Hq"] + 2 * s["Hkv"]
    e = _e(dt)
    return (
        s["T"] * s["H"] * e
        + s["H"] * q * s["D"] * e
        + s["T"] * q * s["D"] * e
        + s["T"] * s["D"] * e
    )


def _f_gemm(s: Shape, dt: str) -> float:
    return 2.0 * s["M"] * s["N"] * s["K"]


def _weight_bytes(n: float, k: float, dt: str) -> float:
    if dt == "int4":
        return n * k * 0.5 + n * (k / 128.0) * 2.0
    if dt == "fp4":
        return n * k * 0.5 + n * (k / 16.0)
    return n * k * _e(dt)


def _b_gemm16(s: Shape, dt: str) -> float:
    m, n, k, e = s["M"], s["N"], s["K"], _e(dt)
    return m * k * e + n * k * e + m * n * e


def _b_w8a8(s: Shape, dt: str) -> float:
    m, n, k = s["M"], s["N"], s["K"]
    return m * k + n * k + m * n * 2.0 + (m + n) * 4.0


def _b_w4a16(s: Shape, dt: str) -> float:
    m, n, k = s["M"], s["N"], s["K"]
    return m * k * 2.0 + _weight_bytes(n, k, "int4") + m * n * 2.0


def _b_w4a8(s: Shape, dt: str) -> float:
    m, n, k = s["M"], s["N"], s["K"]
    return m * k + _weight_bytes(n, k, "int4") + m * n * 2.0 + m * 4.0


def _b_fp4(s: Shape, dt: str) -> float:
    m, n, k = s["M"], s["N"], s["K"]
    return _weight_bytes(m, k, "fp4") + _weight_bytes(n, k, "fp4") + m * n * 2.0


def _f_blockwise(s: Shape, dt: str) -> float:
    return 2.0 * s["M"] * s["N"] * s["K"] * (1.0 + 1.0 / 128.0)


def _b_blockwise(s: Shape, dt: str) -> float:
    m, n, k = s["M"], s["N"], s["K"]
    return (
        m * k
        + n * k
        + m * n * 2.0
        + math.ceil(n / 128) * math.ceil(k / 128) * 4.0
        + m * math.ceil(k / 128) * 4.0
    )


def _f_gemv(s: Shape, dt: str) -> float:
    return 2.0 * s["N"] * s["K"] * s["B"]


def _b_gemv(s: Shape, dt: str) -> float:
    return (
        _weight_bytes(s["N"], s["K"], dt)
        + (s["K"] + s["N"]) * 2.0 * s["B"]
        + (s["N"] * 4.0 if dt in ("int8", "fp8") else 0.0)
    )


def _b_paged_copy(s: Shape, dt: str) -> float:
    return 2.0 * s["n_blocks"] * s["page"] * 2 * s["Hkv"] * s["D"] * _e(dt) * s["L"]


def _b_kv_append(s: Shape, dt: str) -> float:
    return 2.0 * s["T"] * 2 * s["Hkv"] * s["D"] * _e(dt) + s["T"] * 8.0


def _f_kv_quant(s: Shape, dt: str) -> float:
    return 4.0 * s["T"] * 2 * s["Hkv"] * s["D"]


def _b_kv_quant(s: Shape, dt: str) -> float:
    return s["T"] * 2 * s["Hkv"] * s["D"] * (_e(dt) + 1.0) + s["T"] * 2 * s["Hkv"] * 4.0


def _f_sampler(s: Shape, dt: str) -> float:
    return 5.0 * s["B"] * s["V"]


def _b_sampler(s: Shape, dt: str) -> float:
    # Ideal: one online-softmax read pass plus the selection pass over the logits.
    return 2.0 * s["B"] * s["V"] * _e(dt) + s["B"] * 8.0


def _b_softmax(s: Shape, dt: str) -> float:
    # logits in, fp32 probabilities out
    return s["B"] * s["V"] * (_e(dt) + 4.0)


def _b_moe_scatter(s: Shape, dt: str) -> float:
    return s["T"] * s["H"] * _e(dt) + s["T"] * s["k"] * s["H"] * _e(dt) + s["T"] * s["k"] * 8.0


def _f_moe_combine(s: Shape, dt: str) -> float:
    return 2.0 * s["T"] * s["k"] * s["H"]


def _b_moe_combine(s: Shape, dt: str) -> float:
    return s["T"] * s["k"] * s["H"] * _e(dt) + s["T"] * s["H"] * _e(dt) + s["T"] * s["k"] * 4.0


def experts_hit(t: int, k: int, e: int) -> float:
    """Expected number of distinct experts touched under uniform routing."""
    return e * (1.0 - (1.0 - k / e) ** t)


def _f_moe_grouped(s: Shape, dt: str) -> float:
    return 2.0 * s["T"] * s["k"] * s["N"] * s["K"]


def _b_moe_grouped(s: Shape, dt: str) -> float:
    hit = experts_hit(s["T"], s["k"], s["E"])
    return hit * _weight_bytes(s["N"], s["K"], dt) + s["T"] * s["k"] * (s["K"] + s["N"]) * _act(dt)


def _f_scan(s: Shape, dt: str) -> float:
    return 9.0 * s["B"] * s["L"] * s["Din"] * s["N"]


def _b_scan(s: Shape, dt: str) -> float:
    return s["B"] * s["L"] * (3 * s["Din"] + 2 * s["N"]) * _e(dt) + s["B"] * s["L"] * s["Din"] * _e(
        dt
    )


def _f_step(s: Shape, dt: str) -> float:
    return 6.0 * s["B"] * s["Din"] * s["N"]


def _b_step(s: Shape, dt: str) -> float:
    return 2.0 * s["B"] * s["Din"] * s["N"] * 4.0 + s["B"] * (3 * s["Din"] + 2 * s["N"]) * _e(dt)


def _f_rmsnorm(s: Shape, dt: str) -> float:
    return 4.0 * s["T"] * s["H"]


def _b_rmsnorm(s: Shape, dt: str) -> float:
    return 2.0 * s["T"] * s["H"] * _e(dt) + s["H"] * _e(dt)


def _f_rope(s: Shape, dt: str) -> float:
    return 3.0 * s["T"] * (s["Hq"] + s["Hkv"]) * s["D"]


def _b_rope(s: Shape, dt: str) -> float:
    return 2.0 * s["T"] * (s["Hq"] + s["Hkv"]) * s["D"] * _e(dt) + s["T"] * s["D"] * _e(dt)


def _f_swiglu(s: Shape, dt: str) -> float:
    return 5.0 * s["M"] * s["N"]


def _b_swiglu(s: Shape, dt: str) -> float:
    return 3.0 * s["M"] * s["N"] * _e(dt)


def _b_embedding(s: Shape, dt: str) -> float:
    return 2.0 * s["T"] * s["H"] * _e(dt) + s["T"] * 8.0


def _f_conv1d(s: Shape, dt: str) -> float:
    return 2.0 * s["B"] * s["L"] * s["C"] * s["W"]


def _b_conv1d(s: Shape, dt: str) -> float:
    return 2.0 * s["B"] * s["L"] * s["C"] * _e(dt) + s["C"] * s["W"] * _e(dt)


def _f_conv2d(s: Shape, dt: str) -> float:
    return 2.0 * s["N"] * s["H"] * s["W"] * s["Cout"] * s["Cin"] * s["R"] * s["S"]


def _b_conv2d(s: Shape, dt: str) -> float:
    e = _e(dt)
    return (
        s["N"] * s["H"] * s["W"] * s["Cin"] * e
        + s["R"] * s["S"] * s["Cin"] * s["Cout"] * e
        + s["N"] * s["H"] * s["W"] * s["Cout"] * e
    )


def _zero(s: Shape, dt: str) -> float:
    return 0.0


# --------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------


def _o(name: str, *keys: str | int) -> Callable[[Shape], tuple[str, tuple[int, ...]]]:
    def out(s: Shape) -> tuple[str, tuple[int, ...]]:
        return name, tuple(k if isinstance(k, int) else s[k] for k in keys)

    return out


def _o_fn(
    name: str, fn: Callable[[Shape], tuple[int, ...]]
) -> Callable[[Shape], tuple[str, tuple[int, ...]]]:
    return lambda s: (name, fn(s))


_HALF = ("fp16", "bf16")

_OPS: list[OpSpec] = [
    # ---------------------------------------------------------------- attention
    OpSpec(
        "flash_decode",
        "attn_decode",
        "attention",
        ("fp16", "bf16", "fp8"),
        ("B", "Hq", "Hkv", "D", "Skv", "page"),
        "flash_decode(q[B,Hq,D] {dt}, k_cache[num_blocks,page,Hkv,D] {kv}, "
        "v_cache[num_blocks,page,Hkv,D] {kv}, "
        "block_table[B,max_blocks] int32, seq_lens[B] int32) -> out[B,Hq,D] {dt}",
        "out[b,h] = softmax(q[b,h]·K[b,h/(Hq/Hkv)]ᵀ/√D)·V[b,h/(Hq/Hkv)] over the paged KV cache "
        "(GQA, one query token)",
        _s_flash_decode,
        _f_decode,
        _b_decode,
        _o("out", "B", "Hq", "D"),
        fp8_attention=True,
    ),
    OpSpec(
        "flash_prefill",
        "attn_prefill",
        "attention",
        _HALF,
        ("B", "S", "Hq", "Hkv", "D"),
        "flash_prefill(q[B,S,Hq,D] {dt}, k[B,S,Hkv,D] {dt}, v[B,S,Hkv,D] {dt}) "
        "-> out[B,S,Hq,D] {dt}",
        "out[b,i,h] = Σ_{j≤i} softmax_j(q[b,i,h]·k[b,j,h/(Hq/Hkv)]/√D)·v[b,j,h/(Hq/Hkv)] "
        "(causal GQA prefill)",
        _s_flash_prefill,
        _f_prefill,
        _b_prefill,
        _o("out", "B", "S", "Hq", "D"),
    ),
    OpSpec(
        "swa_decode",
        "attn_decode",
        "attention",
        _HALF,
        ("B", "Hq", "Hkv", "D", "Skv", "W", "page"),
        "swa_decode(q[B,Hq,D] {dt}, k_cache[num_blocks,page,Hkv,D] {dt}, "
        "v_cache[num_blocks,page,Hkv,D] {dt}, "
        "block_table[B,max_blocks] int32, seq_lens[B] int32) -> out[B,Hq,D] {dt}",
        "out[b,h] = softmax(q[b,h]·K[b,kv,Skv−W:Skv]ᵀ/√D)·V[b,kv,Skv−W:Skv] "
        "(sliding-window decode over the last W keys)",
        _s_swa_decode,
        _f_decode,
        _b_decode,
        _o("out", "B", "Hq", "D"),
    ),
    OpSpec(
        "mla_decode",
        "attn_decode",
        "attention",
        ("bf16", "fp8"),
        ("B", "Hq", "Sq", "Skv", "page"),
        "mla_decode(q[B,Sq,Hq,576] bf16, kv_cache[num_blocks,page,576] {kv}, "
        "block_table[B,max_blocks] int32, "
        "seq_lens[B] int32) -> out[B,Sq,Hq,512] bf16",
        "out[b,s,h] = softmax(q[b,s,h]·C[b]ᵀ/√192)·C[b][:, :512] with one shared 576-wide latent "
        "(DeepSeek absorbed MLA)",
        _s_mla_decode,
        _f_mla,
        _b_mla,
        _o("out", "B", "Sq", "Hq", 512),
        fp8_attention=True,
    ),
    OpSpec(
        "tree_attn",
        "attn_prefill",
        "attention",
        _HALF,
        ("B", "Tt", "Skv", "Hq", "Hkv", "D"),
        "tree_attn(q[B,Tt,Hq,D] {dt}, k[B,Skv+Tt,Hkv,D] {dt}, v[B,Skv+Tt,Hkv,D] {dt}, "
        "tree_mask[B,Tt,Tt] bool) "
        "-> out[B,Tt,Hq,D] {dt}",
        "out[b,t,h] = softmax over prefix keys and tree ancestors of t "
        "(mask)·V — speculative-decoding tree verification",
        _s_tree_attn,
        _f_tree,
        _b_tree,
        _o("out", "B", "Tt", "Hq", "D"),
    ),
    OpSpec(
        "chunked_prefill",
        "attn_prefill",
        "attention",
        _HALF,
        ("B", "C", "P", "Hq", "Hkv", "D"),
        "chunked_prefill(q[B,C,Hq,D] {dt}, k[B,P+C,Hkv,D] {dt}, v[B,P+C,Hkv,D] {dt}) "
        "-> out[B,C,Hq,D] {dt}",
        "out[b,i,h] = softmax_j(q[b,i,h]·k[b,j]/√D)·v[b,j] for j < P+i+1: a C-token chunk "
        "attending to a P-token prefix plus itself (causal)",
        _s_chunked_prefill,
        _f_chunked,
        _b_chunked,
        _o("out", "B", "C", "Hq", "D"),
    ),
    OpSpec(
        "cross_attn",
        "attn_prefill",
        "attention",
        _HALF,
        ("B", "Sq", "Senc", "Hq", "Hkv", "D"),
        "cross_attn(q[B,Sq,Hq,D] {dt}, k_enc[B,Senc,Hkv,D] {dt}, v_enc[B,Senc,Hkv,D] {dt}) "
        "-> out[B,Sq,Hq,D] {dt}",
        "out[b,i,h] = softmax_j(q[b,i,h]·k_enc[b,j]/√D)·v_enc[b,j] over all encoder positions "
        "(non-causal, cached encoder KV)",
        _s_cross_attn,
        _f_cross,
        _b_cross,
        _o("out", "B", "Sq", "Hq", "D"),
    ),
    OpSpec(
        "fused_qkv_rope",
        "gemm",
        "attention",
        _HALF,
        ("T", "H", "Hq", "Hkv", "D"),
        "fused_qkv_rope(x[T,H] {dt}, w_qkv[(Hq+2*Hkv)*D,H] {dt}, cos_sin[T,D] {dt}) "
        "-> qkv[T,(Hq+2*Hkv)*D] {dt}",
        "qkv = x·W_qkvᵀ, then q and k heads rotated pairwise by (cos, sin)[t] "
        "(rotary pairs adjacent after weight permutation)",
        _s_fused_qkv_rope,
        _f_qkv_rope,
        _b_qkv_rope,
        _o_fn("qkv", lambda s: (s["T"], (s["Hq"] + 2 * s["Hkv"]) * s["D"])),
    ),
    # ---------------------------------------------------------------- GEMM / GEMV
    OpSpec(
        "gemm_fp16",
        "gemm",
        "quant_gemm",
        _HALF,
        ("M", "N", "K"),
        "gemm_fp16(a[M,K] {dt}, w[N,K] {dt}) -> c[M,N] {dt}",
        "c = a·wᵀ with fp32 accumulation (nn.Linear layout)",
        _s_gemm(SMALL_M[3:] + PREFILL_M),
        _f_gemm,
        _b_gemm16,
        _o("c", "M", "N"),
    ),
    OpSpec(
        "gemm_splitk_fp16",
        "gemm",
        "quant_gemm",
        _HALF,
        ("M", "N", "K"),
        "gemm_splitk_fp16(a[M,K] {dt}, w[N,K] {dt}) -> c[M,N] {dt}",
        "c = a·wᵀ for decode-sized M, K split across CTAs with fp32 partial sums "
        "reduced at the end",
        _s_gemm(SMALL_M),
        _f_gemm,
        _b_gemm16,
        _o("c", "M", "N"),
    ),
    OpSpec(
        "gemm_persistent_fp16",
        "gemm",
        "quant_gemm",
        _HALF,
        ("M", "N", "K"),
        "gemm_persistent_fp16(a[M,K] {dt}, w[N,K] {dt}) -> c[M,N] {dt}",
        "c = a·wᵀ on prefill shapes whose tile count leaves a ragged last wave "
        "(persistent / stream-K target)",
        _s_gemm_awkward,
        _f_gemm,
        _b_gemm16,
        _o("c", "M", "N"),
    ),
    OpSpec(
        "int8_gemm",
        "gemm",
        "quant_gemm",
        ("int8",),
        ("M", "N", "K"),
        "int8_gemm(a[M,K] int8, w[N,K] int8, a_scale[M] fp32, w_scale[N] fp32) -> c[M,N] fp16",
        "c[m,n] = a_scale[m]·w_scale[n]·Σ_k a[m,k]·w[n,k] with int32 accumulation (W8A8, "
        "per-token × per-channel)",
        _s_gemm(SMALL_M[2:] + PREFILL_M),
        _f_gemm,
        _b_w8a8,
        _o("c", "M", "N"),
        mma_path="int8",
    ),
    OpSpec(
        "int8_gemv",
        "gemv",
        "quant_gemm",
        ("int8",),
        ("B", "N", "K"),
        "int8_gemv(x[B,K] fp16, w[N,K] int8, w_scale[N] fp32) -> y[B,N] fp16",
        "y[b,n] = w_scale[n]·Σ_k x[b,k]·w[n,k] (W8A16 decode GEMV, per-channel scales)",
        _s_gemv,
        _f_gemv,
        _b_gemv,
        _o("y", "B", "N"),
        mma_path="fp16",
    ),
    OpSpec(
        "int4_gemm",
        "gemm",
        "quant_gemm",
        ("int4",),
        ("M", "N", "K"),
        "int4_gemm(a[M,K] fp16, w_q[N,K/8] int32, w_scale[N,K/128] fp16) -> c[M,N] fp16",
        "c = a·dequant(w)ᵀ with w = (q − 8)·scale per 128-wide group (W4A16 GPTQ/AWQ-style)",
        _s_gemm(SMALL_M[3:] + PREFILL_M[:6]),
        _f_gemm,
        _b_w4a16,
        _o("c", "M", "N"),
        mma_path="fp16",
    ),
    OpSpec(
        "int4_gemv",
        "gemv",
        "quant_gemm",
        ("int4",),
        ("B", "N", "K"),
        "int4_gemv(x[B,K] fp16, w_q[N,K/8] int32, w_scale[N,K/128] fp16) -> y[B,N] fp16",
        "y[b,n] = Σ_k x[b,k]·(q[n,k] − 8)·scale[n,k/128] (W4A16 decode GEMV)",
        _s_gemv,
        _f_gemv,
        _b_gemv,
        _o("y", "B", "N"),
        mma_path="fp16",
    ),
    OpSpec(
        "fp8_gemm",
        "gemm",
        "quant_gemm",
        ("fp8",),
        ("M", "N", "K"),
        "fp8_gemm(a[M,K] fp8_e4m3, w[N,K] fp8_e4m3, a_scale[1] fp32, w_scale[1] fp32) "
        "-> c[M,N] fp16",
        "c = a_scale·w_scale·(a·wᵀ) with e4m3 inputs and fp32 accumulation "
        "(per-tensor scaled W8A8-FP8)",
        _s_gemm(SMALL_M[3:] + PREFILL_M),
        _f_gemm,
        _b_w8a8,
        _o("c", "M", "N"),
        mma_path="fp8",
    ),
    OpSpec(
        "fp8_gemv",
        "gemv",
        "quant_gemm",
        ("fp8",),
        ("B", "N", "K"),
        "fp8_gemv(x[B,K] fp16, w[N,K] fp8_e4m3, w_scale[N] fp32) -> y[B,N] fp16",
        "y[b,n] = w_scale[n]·Σ_k x[b,k]·float(w[n,k]) (FP8 weight-only decode GEMV)",
        _s_gemv,
        _f_gemv,
        _b_gemv,
        _o("y", "B", "N"),
        mma_path="fp16",
    ),
    OpSpec(
        "fp8_blockwise_gemm",
        "gemm",
        "quant_gemm",
        ("fp8",),
        ("M", "N", "K"),
        "fp8_blockwise_gemm(a[M,K] fp8_e4m3, a_scale[M,K/128] fp32, w[N,K] fp8_e4m3, "
        "w_scale[N/128,K/128] fp32) "
        "-> c[M,N] bf16",
        "c[m,n] = Σ_kb a_scale[m,kb]·w_scale[n/128,kb]·Σ_{k∈kb} a[m,k]·w[n,k] "
        "(1×128 act / 128×128 weight blocks, DeepGEMM-style)",
        _s_blockwise,
        _f_blockwise,
        _b_blockwise,
        _o("c", "M", "N"),
        mma_path="fp8",
    ),
    OpSpec(
        "fp8_gemm_persistent",
        "gemm",
        "quant_gemm",
        ("fp8",),
        ("M", "N", "K"),
        "fp8_gemm_persistent(a[M,K] fp8_e4m3, w[N,K] fp8_e4m3, a_scale[1] fp32, w_scale[1] fp32) "
        "-> c[M,N] bf16",
        "c = a_scale·w_scale·(a·wᵀ) on large prefill shapes, "
        "persistent tile scheduler over all SMs",
        _s_gemm_awkward,
        _f_gemm,
        _b_w8a8,
        _o("c", "M", "N"),
        mma_path="fp8",
    ),
    OpSpec(
        "fp4_gemm",
        "gemm",
        "quant_gemm",
        ("fp4",),
        ("M", "N", "K"),
        "fp4_gemm(a[M,K/2] fp4_e2m1x2, a_sf[M,K/16] fp8_e4m3, w[N,K/2] fp4_e2m1x2, "
        "w_sf[N,K/16] fp8_e4m3, alpha[1] fp32) "
        "-> c[M,N] bf16",
        "c = alpha·Σ_k (a·sa)[m,k]·(w·sw)[n,k] with NVFP4 operands: e2m1 values, "
        "one e4m3 scale per 16 elements",
        _s_gemm(SMALL_M[3:] + PREFILL_M),
        _f_gemm,
        _b_fp4,
        _o("c", "M", "N"),
        mma_path="fp4",
    ),
    OpSpec(
        "fp4_gemv",
        "gemv",
        "quant_gemm",
        ("fp4",),
        ("B", "N", "K"),
        "fp4_gemv(x[B,K] fp16, w[N,K/2] fp4_e2m1x2, w_sf[N,K/16] fp8_e4m3) -> y[B,N] fp16",
        "y[b,n] = Σ_k x[b,k]·e2m1(w[n,k])·sf[n,k/16] (NVFP4 weight-only decode GEMV)",
        _s_gemv,
        _f_gemv,
        _b_gemv,
        _o("y", "B", "N"),
        mma_path="fp16",
    ),
    OpSpec(
        "w4a8_gemm",
        "gemm",
        "quant_gemm",
        ("int4",),
        ("M", "N", "K"),
        "w4a8_gemm(a[M,K] int8, a_scale[M] fp32, w_q[N,K/8] int32, w_scale[N] fp32) -> c[M,N] fp16",
        "c[m,n] = a_scale[m]·w_scale[n]·Σ_k a[m,k]·(q[n,k] − 8) with int4 weights widened to int8 "
        "for IMMA (QServe-style W4A8)",
        _s_gemm(SMALL_M[3:] + PREFILL_M[:7]),
        _f_gemm,
        _b_w4a8,
        _o("c", "M", "N"),
        mma_path="int8",
    ),
    # ---------------------------------------------------------------- KV cache
    OpSpec(
        "paged_kv_copy",
        "elementwise",
        "kv_cache",
        _HALF + ("fp8",),
        ("n_blocks", "page", "Hkv", "D", "L"),
        "paged_kv_copy(k_cache[L,num_blocks,page,Hkv,D] {dt}, "
        "v_cache[L,num_blocks,page,Hkv,D] {dt}, "
        "block_mapping[n_blocks,2] int64) -> (k_cache, v_cache) updated in place",
        "k_cache[l,dst] = k_cache[l,src] and v_cache[l,dst] = v_cache[l,src] for every "
        "(src,dst) pair in block_mapping, all layers",
        _s_paged_kv_copy,
        _zero,
        _b_paged_copy,
        _o("k_cache", "L", "n_blocks", "page", "Hkv", "D"),
    ),
    OpSpec(
        "kv_append",
        "elementwise",
        "kv_cache",
        _HALF,
        ("T", "Hkv", "D", "page"),
        "kv_append(k[T,Hkv,D] {dt}, v[T,Hkv,D] {dt}, slot_mapping[T] int64) -> "
        "(k_cache[num_blocks,page,Hkv,D], "
        "v_cache[num_blocks,page,Hkv,D]) {dt} updated in place",
        "k_cache[slot[t]/page, slot[t]%page] = k[t] and likewise for v "
        "(reshape_and_cache of the new tokens)",
        _s_kv_append,
        _zero,
        _b_kv_append,
        _o("k_cache", "T", "Hkv", "D"),
    ),
    OpSpec(
        "kv_int8_quant",
        "rowwise",
        "kv_cache",
        _HALF,
        ("T", "Hkv", "D"),
        "kv_int8_quant(k[T,Hkv,D] {dt}, v[T,Hkv,D] {dt}) -> (k_q[T,Hkv,D] int8, v_q[T,Hkv,D] int8, "
        "scales[T,2,Hkv] fp32)",
        "scale[t,h] = max|x[t,h,:]|/127, x_q = round(x/scale) clamped to [−127,127], "
        "per token and KV head",
        _s_kv_quant,
        _f_kv_quant,
        _b_kv_quant,
        _o("k_q", "T", "Hkv", "D"),
    ),
    # ---------------------------------------------------------------- samplers
    OpSpec(
        "topk_sample",
        "sampling",
        "sampling",
        ("fp32", "bf16"),
        ("B", "V", "k"),
        "topk_sample(logits[B,V] {dt}, temperature[B] fp32, uniform[B] fp32) -> token[B] int32",
        "token[b] ~ softmax(logits[b]/T) restricted to its k largest entries "
        "(inverse-CDF draw with uniform[b])",
        _s_topk,
        _f_sampler,
        _b_sampler,
        _o("token", "B"),
    ),
    OpSpec(
        "nucleus_sample",
        "sampling",
        "sampling",
        ("fp32", "bf16"),
        ("B", "V"),
        "nucleus_sample(logits[B,V] {dt}, top_p[B] fp32, uniform[B] fp32) -> token[B] int32",
        "token[b] ~ p restricted to the smallest set of tokens whose probability mass reaches "
        "top_p[b] (top-p)",
        _s_sampler,
        _f_sampler,
        _b_sampler,
        _o("token", "B"),
    ),
    OpSpec(
        "minp_sample",
        "sampling",
        "sampling",
        ("fp32", "bf16"),
        ("B", "V"),
        "minp_sample(logits[B,V] {dt}, min_p[B] fp32, uniform[B] fp32) -> token[B] int32",
        "token[b] ~ p restricted to tokens with p ≥ min_p[b]·max(p) (min-p sampling)",
        _s_sampler,
        _f_sampler,
        _b_sampler,
        _o("token", "B"),
    ),
    OpSpec(
        "logits_softmax",
        "rowwise",
        "sampling",
        ("fp32", "bf16"),
        ("B", "V"),
        "logits_softmax(logits[B,V] {dt}, temperature[B] fp32) -> probs[B,V] fp32",
        "probs[b,v] = exp(logits[b,v]/T − max) / Σ exp(logits[b,:]/T − max)",
        _s_sampler,
        _f_sampler,
        _b_softmax,
        _o("probs", "B", "V"),
    ),
    # ---------------------------------------------------------------- MoE
    OpSpec(
        "moe_scatter",
        "elementwise",
        "moe",
        _HALF,
        ("T", "H", "E", "k"),
        "moe_scatter(x[T,H] {dt}, topk_ids[T,k] int32, sorted_slot[T*k] int32) "
        "-> x_perm[T*k,H] {dt}",
        "x_perm[sorted_slot[t·k+j]] = x[t] for every token t and chosen expert j "
        "(permute tokens into expert-contiguous rows)",
        _s_moe_scatter,
        _zero,
        _b_moe_scatter,
        _o_fn("x_perm", lambda s: (s["T"] * s["k"], s["H"])),
    ),
    OpSpec(
        "moe_combine",
        "elementwise",
        "moe",
        _HALF,
        ("T", "H", "k"),
        "moe_combine(y_perm[T*k,H] {dt}, topk_weights[T,k] fp32, sorted_slot[T*k] int32) "
        "-> y[T,H] {dt}",
        "y[t] = Σ_j topk_weights[t,j]·y_perm[sorted_slot[t·k+j]] "
        "(weighted un-permute of expert outputs)",
        _s_moe_combine,
        _f_moe_combine,
        _b_moe_combine,
        _o("y", "T", "H"),
    ),
    OpSpec(
        "moe_grouped_gemm",
        "gemm",
        "moe",
        _HALF + ("fp8",),
        ("T", "k", "E", "N", "K"),
        "moe_grouped_gemm(x_perm[T*k,K] {dt}, w[E,N,K] {kv}, expert_offsets[E+1] int32) "
        "-> y_perm[T*k,N] {dt}",
        "y_perm[r] = x_perm[r]·w[e(r)]ᵀ for rows grouped by expert (fused-MoE grouped GEMM, "
        "one launch for all experts)",
        _s_moe_grouped,
        _f_moe_grouped,
        _b_moe_grouped,
        _o_fn("y_perm", lambda s: (s["T"] * s["k"], s["N"])),
    ),
    # ---------------------------------------------------------------- SSM
    OpSpec(
        "mamba_scan",
        "scan",
        "ssm",
        _HALF,
        ("B", "L", "Din", "N"),
        "mamba_scan(u[B,L,Din] {dt}, delta[B,L,Din] {dt}, A[Din,N] fp32, Bm[B,L,N] {dt}, "
        "Cm[B,L,N] {dt}, "
        "D[Din] fp32, z[B,L,Din] {dt}) -> y[B,L,Din] {dt}",
        "h_t = exp(Δ_t·A)⊙h_{t−1} + Δ_t·B_t·u_t, y_t = (C_t·h_t + D·u_t)·silu(z_t) "
        "(Mamba-1 selective scan, fused)",
        _s_mamba_scan,
        _f_scan,
        _b_scan,
        _o("y", "B", "L", "Din"),
    ),
    OpSpec(
        "mamba_step",
        "scan",
        "ssm",
        _HALF,
        ("B", "Din", "N"),
        "mamba_step(state[B,Din,N] fp32, u[B,Din] {dt}, delta[B,Din] {dt}, A[Din,N] fp32, "
        "Bm[B,N] {dt}, "
        "Cm[B,N] {dt}, D[Din] fp32, z[B,Din] {dt}) -> y[B,Din] {dt} (state updated in place)",
        "state = exp(Δ·A)⊙state + Δ·B·u; y = (C·state + D·u)·silu(z) — one decode step of the "
        "selective SSM",
        _s_mamba_step,
        _f_step,
        _b_step,
        _o("y", "B", "Din"),
    ),
    # ---------------------------------------------------------------- misc
    OpSpec(
        "rmsnorm",
        "rowwise",
        "misc",
        _HALF,
        ("T", "H"),
        "rmsnorm(x[T,H] {dt}, weight[H] {dt}, eps fp32) -> out[T,H] {dt}",
        "out[t] = x[t] / sqrt(mean(x[t]²) + eps) ⊙ weight",
        _s_rmsnorm,
        _f_rmsnorm,
        _b_rmsnorm,
        _o("out", "T", "H"),
    ),
    OpSpec(
        "rope",
        "elementwise",
        "misc",
        _HALF,
        ("T", "Hq", "Hkv", "D"),
        "rope(q[T,Hq,D] {dt}, k[T,Hkv,D] {dt}, cos_sin_cache[max_pos,D] {dt}, positions[T] int64) "
        "-> (q, k) rotated in place",
        "(x1, x2) ← (x1·cos − x2·sin, x2·cos + x1·sin) on the two halves of every q and k head at "
        "positions[t] (NeoX rotary)",
        _s_rope,
        _f_rope,
        _b_rope,
        _o("q", "T", "Hq", "D"),
    ),
    OpSpec(
        "swiglu_act",
        "elementwise",
        "misc",
        _HALF,
        ("M", "N"),
        "swiglu_act(gate_up[M,2*N] {dt}) -> out[M,N] {dt}",
        "out[m,n] = silu(gate_up[m,n])·gate_up[m,N+n] with silu(x) = x/(1+e^−x)",
        _s_swiglu,
        _f_swiglu,
        _b_swiglu,
        _o("out", "M", "N"),
    ),
    OpSpec(
        "embedding_gather",
        "elementwise",
        "misc",
        _HALF,
        ("T", "V", "H"),
        "embedding_gather(ids[T] int64, table[V,H] {dt}) -> out[T,H] {dt}",
        "out[t] = table[ids[t]] (token embedding lookup)",
        _s_embedding,
        _zero,
        _b_embedding,
        _o("out", "T", "H"),
    ),
    OpSpec(
        "conv1d_causal",
        "elementwise",
        "misc",
        _HALF,
        ("B", "L", "C", "W"),
        "conv1d_causal(x[B,L,C] {dt}, weight[C,W] {dt}, bias[C] {dt}) -> out[B,L,C] {dt}",
        "out[b,t,c] = silu(bias[c] + Σ_{j<W} weight[c,j]·x[b,t−W+1+j,c]) (depthwise causal conv, "
        "Mamba front-end)",
        _s_conv1d,
        _f_conv1d,
        _b_conv1d,
        _o("out", "B", "L", "C"),
    ),
    OpSpec(
        "conv2d_nhwc",
        "gemm",
        "misc",
        _HALF,
        ("N", "H", "W", "Cin", "Cout", "R", "S"),
        "conv2d_nhwc(x[N,H,W,Cin] {dt}, w[Cout,R,S,Cin] {dt}, bias[Cout] {dt}) "
        "-> y[N,H,W,Cout] {dt}",
        "y[n,p,q,o] = bias[o] + Σ_{r,s,c} x[n,p+r−1,q+s−1,c]·w[o,r,s,c] (3×3, stride 1, "
        "same padding; implicit GEMM)",
        _s_conv2d,
        _f_conv2d,
        _b_conv2d,
        _o("y", "N", "H", "W", "Cout"),
    ),
    OpSpec(
        "gemv_fp16",
        "gemv",
        "misc",
        ("fp16",),
        ("B", "N", "K"),
        "gemv_fp16(x[B,K] fp16, w[N,K] fp16) -> y[B,N] fp16",
        "y[b,n] = Σ_k x[b,k]·w[n,k] (decode GEMV, e.g. lm_head or a projection at batch ≤ 16)",
        _s_gemv,
        _f_gemv,
        _b_gemv,
        _o("y", "B", "N"),
    ),
]

OPS: Mapping[str, OpSpec] = MappingProxyType({op.name: op for op in _OPS})
OP_NAMES: tuple[str, ...] = tuple(OPS)

#: The 17 (op, impl) pairs the kernelswarm card covers (14 CUDA + 3 Triton impls).
KERNELSWARM_OPS: tuple[tuple[str, str], ...] = (
    ("flash_decode", "cuda"),
    ("swa_decode", "cuda"),
    ("gemm_fp16", "cuda"),
    ("int8_gemm", "cuda"),
    ("fp8_gemm", "cuda"),
    ("int4_gemv", "cuda"),
    ("rmsnorm", "cuda"),
    ("rope", "cuda"),
    ("swiglu_act", "cuda"),
    ("topk_sample", "cuda"),
    ("nucleus_sample", "cuda"),
    ("mamba_scan", "cuda"),
    ("moe_scatter", "cuda"),
    ("kv_append", "cuda"),
    ("fused_qkv_rope", "triton"),
    ("flash_decode", "triton"),
    ("rmsnorm", "triton"),
)


def get_op(name: str) -> OpSpec:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}") from None


def footprint_bytes(op: OpSpec, shape: Shape, dtype: str) -> float:
    """Device memory a task needs (inputs + outputs), used to keep shapes on-GPU."""
    return op.bytes(shape, dtype)


def shape_str(shape: Shape) -> str:
    """``k=v,…`` rendering used in session ids and prompts."""
    return ",".join(f"{k}={v}" for k, v in shape.items())


assert len(OPS) == 41, len(OPS)
assert len(KERNELSWARM_OPS) == 17
