"""Specs whose launchers are called by parameter name (``bind.call_by_name``): per-token
group quantisation (fp8, int8), vLLM's unified paged attention, Mamba2's
``selective_state_update``. Shapes name their source (models: Llama-3-8B, DeepSeek-V3,
Qwen3-32B, Mamba-Codestral-7B / Nemotron-H, gpt-oss with its sliding window)."""

from __future__ import annotations

import inspect
import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name


def _torch() -> Any:
    import torch

    return torch


def _cpu_gen(gen: Any, device: Any) -> Any:
    """A CPU generator seeded from ``gen`` (permutations are drawn on the CPU; harness 1
    passed the device generator there, which CUDA generators refuse)."""
    torch = _torch()
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=device).item())
    return torch.Generator().manual_seed(seed)


# --- per_token_group_quant_fp8 / _int8 (vLLM): x -> (q, scale per group of 128) ---


def _group_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    x = torch.randn(shape["tokens"], shape["hidden"], generator=gen, device=device) * 3
    x[:, : shape["hidden"] // 64] *= 20  # outlier channels: groups with very different scales
    return {"x": x.to(torch.bfloat16), "group_size": shape.get("group", 128)}


class _TritonFallbackPlatform:
    """``current_platform`` with ``is_cuda()`` False, everything else the loader's: the
    launchers of later vLLM files prefer the compiled ``torch.ops._C`` op on CUDA
    (``if current_platform.is_cuda() and x.is_contiguous()``), which is not built here;
    the file's own Triton fallback is the kernel the harness can run."""

    def __init__(self, platform: Any) -> None:
        self._platform = platform

    def __getattr__(self, name: str) -> Any:
        return getattr(self._platform, name)

    def is_cuda(self) -> bool:
        return False


#: Rows whose launcher's only change is the scale tensor's layout for DeepGEMM
#: (``tma_aligned_scales``, d08b356e): called with column-major, TMA-aligned scales, the
#: path the change is on (its callers' DeepGEMM input quantisation); the before side,
#: without the parameter, writes plain column-major scales.
_COLUMN_MAJOR_TMA = ("d08b356e",)


def _group_call(fn_name: str) -> Any:
    def call(mod: Any, x: Inputs, sha: str) -> Outputs:
        fn = getattr(mod, fn_name)
        values = {**x, "column_major_scales": False, "eps": 1e-10}
        if sha.startswith(_COLUMN_MAJOR_TMA):
            values.update(column_major_scales=True, tma_aligned_scales=True)
        platform = getattr(mod, "current_platform", None)
        if platform is not None and "torch.ops._C." in inspect.getsource(fn):
            mod.current_platform = _TritonFallbackPlatform(platform)
        try:
            q, s = call_by_name(fn, values)
        finally:
            if platform is not None:
                mod.current_platform = platform
        return {"q": q.float(), "scale": s.float().contiguous()}

    return call


def _group_reference(qmax: float, integer: bool) -> Any:
    def ref(x: Inputs) -> Outputs:
        torch = _torch()
        t, h = x["x"].shape
        g = x["x"].float().view(t, h // x["group_size"], x["group_size"])
        s = g.abs().amax(-1, keepdim=True).clamp_min(1e-10) / qmax
        q = (g / s).clamp(-qmax, qmax)
        q = q.round() if integer else q.to(torch.float8_e4m3fn).float()
        return {"q": q.view(t, h), "scale": s.view(t, -1)}

    return ref


_GROUP_SHAPES = (
    {"name": "dsv3-decode", "tokens": 64, "hidden": 7168},
    {"name": "dsv3-prefill", "tokens": 4096, "hidden": 7168},
    {"name": "qwen3-32b-prefill", "tokens": 2048, "hidden": 5120},
    {"name": "dsv3-moe-down-in", "tokens": 512, "hidden": 2048},
)


def _group_random(r: random.Random) -> Shape:
    return {
        "name": "random",
        "tokens": r.choice([1, 9, 300, 1500]),
        "hidden": r.choice([1024, 4096, 7168]),
    }


PER_TOKEN_GROUP_FP8 = Spec(
    name="vllm_per_token_group_quant_fp8",
    launcher="per_token_group_quant_fp8",
    rows=tuple(
        ("vllm", sha, "vllm/model_executor/layers/quantization/utils/fp8_utils.py")
        for sha in ("5cf2daea", "42d440c2", "774d0c01", "af0444bf", "d08b356e")
    ),
    shapes=_GROUP_SHAPES,
    random_shape=_group_random,
    make_inputs=_group_inputs,
    call=_group_call("per_token_group_quant_fp8"),
    reference=_group_reference(448.0, integer=False),
    tolerance={"q": (2.0**-9, 0.126), "scale": (1e-9, 1e-5)},
    tolerance_why="q is fp8 e4m3: a value on a rounding boundary may round either way when "
    "the scale differs in its last float bit (one fp8 step: 12.5% relative, and near zero "
    "one subnormal step, 2^-9, absolute; harness 1 lacked the absolute part and failed one "
    "element in 29M); scales are one fp32 max and one division: 1e-5 relative",
    not_runnable={
        "774d0c01": (
            "needs_cuda_extension_build",
            "the commit's change is a new CUDA kernel (csrc/quantization/fp8/"
            "per_token_group_quant.cu) that the after side calls as torch.ops._C."
            "per_token_group_fp8_quant on CUDA; its Triton fallback is the before side's "
            "kernel unchanged, so only the package's compiled extension measures the commit",
        ),
    },
)

PER_TOKEN_GROUP_INT8 = Spec(
    name="vllm_per_token_group_quant_int8",
    launcher="per_token_group_quant_int8",
    rows=(("vllm", "75d29cf4", "vllm/model_executor/layers/quantization/utils/int8_utils.py"),),
    shapes=_GROUP_SHAPES,
    random_shape=_group_random,
    make_inputs=_group_inputs,
    call=_group_call("per_token_group_quant_int8"),
    reference=_group_reference(127.0, integer=True),
    tolerance={"q": (1.0, 0.0), "scale": (1e-9, 1e-5)},
    tolerance_why="int8 rounding of a value within float error of .5 may go either way: one "
    "integer step; scales 1e-5 relative",
    not_runnable={
        "75d29cf4": (
            "needs_cuda_extension_build",
            "the commit's change is a CUDA kernel (csrc/quantization/compressed_tensors/"
            "int8_quant_kernels.cu, per_token_group_quant_8bit.h) that the after side calls as "
            "torch.ops._C.per_token_group_quant_int8 on CUDA; the Triton kernel is unchanged, "
            "so only the package's compiled extension measures the commit",
        ),
    },
)


# --- unified_attention (vLLM, paged KV, varlen queries) ---


def _ua_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, ql, kl = shape["batch"], shape["q_len"], shape["kv_len"]
    hq, hk, d, bs = shape["hq"], shape["hk"], shape["head"], 16
    dt = torch.bfloat16
    q_lens = [ql] * b
    kv_lens = [kl + i * 7 for i in range(b)]
    blocks_per = -(-max(kv_lens) // bs)
    nblocks = b * blocks_per + 8
    perm = torch.randperm(nblocks, generator=_cpu_gen(gen, device))[: b * blocks_per]
    cu = [0]
    for n in q_lens:
        cu.append(cu[-1] + n)
    return {
        "q": torch.randn(cu[-1], hq, d, generator=gen, device=device).to(dt),
        "k": torch.randn(nblocks, bs, hk, d, generator=gen, device=device).to(dt),
        "v": torch.randn(nblocks, bs, hk, d, generator=gen, device=device).to(dt),
        "out": torch.empty(cu[-1], hq, d, device=device, dtype=dt),
        "cu_seqlens_q": torch.tensor(cu, dtype=torch.int32, device=device),
        "max_seqlen_q": ql,
        "seqused_k": torch.tensor(kv_lens, dtype=torch.int32, device=device),
        "max_seqlen_k": max(kv_lens),
        "softmax_scale": d**-0.5,
        "causal": True,
        "window_size": (shape.get("window", -1), 0 if shape.get("window") else -1),
        "block_table": perm.view(b, blocks_per).to(device=device, dtype=torch.int32),
        "softcap": 0.0,
        "q_descale": None,
        "k_descale": None,
        "v_descale": None,
    }


def _ua_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.unified_attention, x)
    return {"out": x["out"]}


def _ua_reference(x: Inputs) -> Outputs:
    torch = _torch()
    outs = []
    cu, lens = x["cu_seqlens_q"].tolist(), x["seqused_k"].tolist()
    hq, hk = x["q"].shape[1], x["k"].shape[2]
    bs = x["k"].shape[1]
    win = x["window_size"][0]
    for i, kl in enumerate(lens):
        blocks = x["block_table"][i, : -(-kl // bs)].long()
        k = x["k"][blocks].reshape(-1, hk, x["k"].shape[-1])[:kl].float()
        v = x["v"][blocks].reshape(-1, hk, x["v"].shape[-1])[:kl].float()
        q = x["q"][cu[i] : cu[i + 1]].float()
        ql = q.shape[0]
        qpos = torch.arange(kl - ql, kl, device=q.device)[:, None]
        kpos = torch.arange(kl, device=q.device)[None, :]
        mask = kpos <= qpos
        if win > 0:
            mask &= kpos > qpos - win - 1
        k = k.repeat_interleave(hq // hk, 1).transpose(0, 1)
        v = v.repeat_interleave(hq // hk, 1).transpose(0, 1)
        o = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(0, 1), k, v, attn_mask=mask, scale=x["softmax_scale"]
        )
        outs.append(o.transpose(0, 1))
    return {"out": torch.cat(outs).to(x["out"].dtype)}


UNIFIED_ATTENTION = Spec(
    name="vllm_unified_attention",
    launcher="unified_attention",
    rows=tuple(
        ("vllm", sha, "vllm/attention/ops/triton_unified_attention.py")
        for sha in ("01c22335", "22dd9c27", "9a161307", "a2a5f79e")
    )
    + (("vllm", "b8bf5c45", "vllm/v1/attention/ops/triton_unified_attention.py"),),
    shapes=(
        {
            "name": "llama3-8b-decode",
            "batch": 32,
            "q_len": 1,
            "kv_len": 1024,
            "hq": 32,
            "hk": 8,
            "head": 128,
        },
        {
            "name": "llama3-8b-prefill",
            "batch": 2,
            "q_len": 1024,
            "kv_len": 1024,
            "hq": 32,
            "hk": 8,
            "head": 128,
        },
        {
            "name": "qwen3-32b-chunked",
            "batch": 4,
            "q_len": 256,
            "kv_len": 2048,
            "hq": 64,
            "hk": 8,
            "head": 128,
        },
        {
            "name": "gpt-oss-swa-decode",
            "batch": 16,
            "q_len": 1,
            "kv_len": 4096,
            "hq": 64,
            "hk": 8,
            "head": 64,
            "window": 128,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 8]),
        "q_len": r.choice([1, 1, 5, 64]),
        "kv_len": r.choice([100, 700, 3000]),
        "hq": 16,
        "hk": r.choice([2, 4, 16]),
        "head": r.choice([64, 128]),
    },
    make_inputs=_ua_inputs,
    call=_ua_call,
    reference=_ua_reference,
    mutated=("out",),
    tolerance={"out": (2e-2, 2e-2)},
    tolerance_why="online softmax over <= 4k keys, fp32 accumulators, bf16 P@V and output: "
    "bf16 default plus an absolute floor for outputs near zero",
)


# --- selective_state_update (Mamba2 decode step): state and out are both written ---


def _ssu_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, h, p, n, g = (
        shape["batch"],
        shape["heads"],
        shape["head_dim"],
        shape["dstate"],
        shape["groups"],
    )
    f32, bf = torch.float32, torch.bfloat16

    def rnd(*s: int, dtype: Any = bf, scale: float = 1.0) -> Any:
        return (torch.randn(*s, generator=gen, device=device) * scale).to(dtype)

    A = -torch.rand(h, generator=gen, device=device).to(f32)
    return {
        "state": rnd(b, h, p, n, dtype=f32, scale=0.5),
        "x": rnd(b, h, p),
        "dt": rnd(b, h, dtype=bf)[:, :, None].expand(b, h, p),  # tie_hdim: dt per head
        "A": A[:, None, None].expand(h, p, n),
        "B": rnd(b, g, n),
        "C": rnd(b, g, n),
        "D": rnd(h, dtype=f32)[:, None].expand(h, p),
        "z": rnd(b, h, p),
        "dt_bias": rnd(h, dtype=f32)[:, None].expand(h, p),
        "dt_softplus": True,
        "state_batch_indices": None,
        "pad_slot_id": -1,
        "out": torch.empty(b, h, p, device=device, dtype=bf),
    }


def _ssu_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    got = call_by_name(mod.selective_state_update, x)
    out = got if got is not None else x["out"]
    return {"out": out, "state": x["state"]}


SELECTIVE_STATE_UPDATE = Spec(
    name="mamba_selective_state_update",
    launcher="selective_state_update",
    rows=(
        ("vllm", "b690e348", "vllm/model_executor/layers/mamba/ops/mamba_ssm.py"),
        ("vllm", "f4a0921c", "vllm/model_executor/layers/mamba/ops/mamba_ssm.py"),
        ("vllm", "7faba503", "vllm/model_executor/layers/mamba/ops/mamba_ssm.py"),
        ("sglang", "38ae22e0", "python/sglang/srt/layers/attention/mamba/ops/mamba_ssm.py"),
    ),
    shapes=(
        {
            "name": "codestral-7b-b1",
            "batch": 1,
            "heads": 128,
            "head_dim": 64,
            "dstate": 128,
            "groups": 8,
        },
        {
            "name": "codestral-7b-b64",
            "batch": 64,
            "heads": 128,
            "head_dim": 64,
            "dstate": 128,
            "groups": 8,
        },
        {
            "name": "nemotron-h-b32",
            "batch": 32,
            "heads": 128,
            "head_dim": 64,
            "dstate": 128,
            "groups": 8,
        },
        {"name": "test-small", "batch": 4, "heads": 8, "head_dim": 32, "dstate": 16, "groups": 1},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([2, 7, 48]),
        "heads": r.choice([16, 64]),
        "head_dim": r.choice([32, 64]),
        "dstate": r.choice([16, 64, 128]),
        "groups": r.choice([1, 4]),
    },
    make_inputs=_ssu_inputs,
    call=_ssu_call,
    mutated=("state", "out"),
    tolerance={"state": (1e-4, 1e-4), "out": (1.6e-2, 1.6e-2)},
    tolerance_why="one recurrence step: the fp32 state from one exp and a multiply-add (fp32 "
    "default); out is a bf16 sum over dstate<=128 (bf16 default)",
)


SPECS: tuple[Spec, ...] = (
    PER_TOKEN_GROUP_FP8,
    PER_TOKEN_GROUP_INT8,
    UNIFIED_ATTENTION,
    SELECTIVE_STATE_UPDATE,
)


# --- gated RMSNorm of the FLA layers (Qwen3-Next, Nemotron-H): y = rmsnorm(x) * silu(z) ---


def _gated_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, h = shape["tokens"], shape["hidden"]
    bf = torch.bfloat16
    return {
        "x": torch.randn(t, h, generator=gen, device=device).to(bf),
        "z": torch.randn(t, h, generator=gen, device=device).to(bf),
        "weight": (1 + 0.1 * torch.randn(h, generator=gen, device=device)).to(bf),
        "bias": None,
        "eps": 1e-6,
        "group_size": shape.get("group"),
        "norm_before_gate": True,
        "is_rms_norm": True,
    }


def _gated_call(name: str) -> Any:
    def call(mod: Any, x: Inputs, sha: str) -> Outputs:
        got = call_by_name(getattr(mod, name), x)
        return {"y": got[0] if isinstance(got, tuple) else got}

    return call


def _gated_reference(x: Inputs) -> Outputs:
    torch = _torch()
    v = x["x"].float()
    g = x["group_size"] or v.shape[-1]
    vg = v.view(v.shape[0], -1, g)
    y = (vg * torch.rsqrt(vg.pow(2).mean(-1, keepdim=True) + x["eps"])).view_as(v)
    y = y * x["weight"].float() * torch.nn.functional.silu(x["z"].float())
    return {"y": y.to(x["x"].dtype)}


_GATED_SHAPES = (
    {"name": "qwen3-next-decode", "tokens": 64 * 32, "hidden": 128},
    {"name": "qwen3-next-prefill", "tokens": 4096 * 32, "hidden": 128},
    {"name": "nemotron-h-grouped", "tokens": 2048, "hidden": 8192, "group": 1024},
    {"name": "test-wide", "tokens": 333, "hidden": 4096},
)


def _gated_random(r: random.Random) -> Shape:
    return {"name": "random", "tokens": r.choice([7, 900, 20000]), "hidden": r.choice([128, 256])}


_GATED_TOL = "one mean of squares over <= 8192 values in fp32, rsqrt and a sigmoid: bf16 default"

GATED_RMSNORM_SGLANG = Spec(
    name="sglang_fla_gated_rmsnorm",
    launcher="_layer_norm_fwd",
    rows=tuple(
        ("sglang", s, "python/sglang/srt/layers/attention/fla/layernorm_gated.py")
        for s in ("d1ec93e3", "38ae22e0")
    ),
    shapes=_GATED_SHAPES,
    random_shape=_gated_random,
    make_inputs=_gated_inputs,
    call=_gated_call("_layer_norm_fwd"),
    reference=_gated_reference,
    tolerance_why=_GATED_TOL,
)

GATED_RMSNORM_VLLM = Spec(
    name="vllm_fla_gated_rmsnorm",
    launcher="layer_norm_fwd",
    rows=(("vllm", "82e64c7a", "vllm/model_executor/layers/fla/ops/layernorm_guard.py"),),
    shapes=_GATED_SHAPES,
    random_shape=_gated_random,
    make_inputs=_gated_inputs,
    call=_gated_call("layer_norm_fwd"),
    reference=_gated_reference,
    tolerance_why=_GATED_TOL,
)

SPECS = (*SPECS, GATED_RMSNORM_SGLANG, GATED_RMSNORM_VLLM)


# --- chunk-local cumulative sum of the FLA gated-delta-rule layers (gates g, per chunk) ---


def _cumsum_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, t, h = shape["batch"], shape["seq"], shape["heads"]
    dims = (b, t, h, shape["dk"]) if shape.get("dk") else (b, t, h)
    # log-space gates: negative, as the layers feed them (logsigmoid of a projection)
    g = torch.nn.functional.logsigmoid(torch.randn(*dims, generator=gen, device=device))
    return {"g": g.float(), "chunk_size": 64, "reverse": shape.get("reverse", False)}


def _cumsum_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    return {"out": call_by_name(mod.chunk_local_cumsum, x)}


def _cumsum_reference(x: Inputs) -> Outputs:
    g, c = x["g"].double(), x["chunk_size"]
    t = g.shape[1]
    pad = (-t) % c
    gp = _torch().nn.functional.pad(g.movedim(1, -1), (0, pad)).movedim(-1, 1)
    chunks = gp.reshape(g.shape[0], -1, c, *g.shape[2:])
    out = chunks.flip(2).cumsum(2).flip(2) if x["reverse"] else chunks.cumsum(2)
    return {"out": out.reshape(gp.shape)[:, :t].float()}


CHUNK_LOCAL_CUMSUM = Spec(
    name="fla_chunk_local_cumsum",
    launcher="chunk_local_cumsum",
    rows=(
        ("vllm", "cb10b7e8", "vllm/model_executor/layers/fla/ops/cumsum.py"),
        ("sglang", "48daa831", "python/sglang/srt/layers/attention/fla/cumsum.py"),
        ("sglang", "a61a14f4", "python/sglang/srt/layers/attention/fla/cumsum.py"),
    ),
    shapes=(
        {"name": "qwen3-next-gdn-scalar-4k", "batch": 1, "seq": 4096, "heads": 32},
        {"name": "qwen3-next-gdn-scalar-b8", "batch": 8, "seq": 1024, "heads": 32},
        {"name": "kimi-linear-kda-vector", "batch": 1, "seq": 4096, "heads": 32, "dk": 128},
        {"name": "test-reverse-odd", "batch": 2, "seq": 1000, "heads": 4, "reverse": True},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3]),
        "seq": r.choice([63, 500, 2049]),
        "heads": r.choice([4, 16]),
        "dk": r.choice([None, 64]),
    },
    make_inputs=_cumsum_inputs,
    call=_cumsum_call,
    reference=_cumsum_reference,
    tolerance={"out": (1e-4, 1e-4)},
    tolerance_why="fp32 prefix sums of <= 64 values of magnitude <= ~5 (a scan in a different "
    "order, or tl.cumsum against a sequential sum): a few fp32 ulps of sums up to ~300",
)

SPECS = (*SPECS, CHUNK_LOCAL_CUMSUM)
