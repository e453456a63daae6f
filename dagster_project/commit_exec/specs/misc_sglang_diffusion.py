"""Specs for the misc SGLang rows of the execution census (issue 35), diffusion and norm
kernels: adaLN scale/shift modulation, LTX-2 and interleaved RoPE, group-norm + SiLU,
Gemma q/k/v RMSNorm and the shared-expert sigmoid gate.

Shapes name their source: Qwen-Image / Flux (hidden 3072, 24 heads x 128), Wan2.1
(14B: hidden 5120, 40 heads; 1.3B: 12 heads), LTX-2 (video 32 x 128, audio 32 x 64),
Gemma-3 (27B: 32/16 heads x 128; 12B: 16/8 x 256), Qwen3-Next / Qwen2-57B shared experts.
"""

from __future__ import annotations

import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .misc_sglang import _torch

# --- fuse_scale_shift_kernel (diffusion): y = x * (1 + scale) + shift (adaLN modulation) ---


def _scale_shift_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, tokens, c = shape["batch"], shape["tokens"], shape["hidden"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    frames = shape.get("frames", 0)
    mod_shape = (b, frames, 1, c) if frames else (b, c)

    def rnd(*s: int, scale: float = 1.0) -> Any:
        return (torch.randn(*s, generator=gen, device=device) * scale).to(dt)

    return {
        "x": rnd(b, tokens, c),
        "scale": rnd(*mod_shape, scale=0.3),
        "shift": rnd(*mod_shape, scale=0.3),
    }


def _scale_shift_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    return {"y": mod.fuse_scale_shift_kernel(x["x"], x["scale"], x["shift"])}


def _scale_shift_reference(x: Inputs) -> Outputs:
    xs, sc, sh = x["x"].float(), x["scale"].float(), x["shift"].float()
    if sc.dim() == 4:  # [B, F, 1, C]: each frame's rows share one modulation row
        reps = xs.shape[1] // sc.shape[1]
        sc = sc.squeeze(2).repeat_interleave(reps, 1)
        sh = sh.squeeze(2).repeat_interleave(reps, 1)
    else:
        sc, sh = sc[:, None, :], sh[:, None, :]
    return {"y": (xs * (1 + sc) + sh).to(x["x"].dtype)}


SCALE_SHIFT = Spec(
    name="sglang_diffusion_fuse_scale_shift",
    launcher="fuse_scale_shift_kernel",
    rows=(("sglang", "647428d8", "python/sglang/multimodal_gen/runtime/layers/triton_ops.py"),),
    shapes=(
        # Qwen-Image (the title): hidden 3072, a 1024x1024 image is 64x64 = 4096 tokens
        {"name": "qwen-image-1024px", "batch": 1, "tokens": 4096, "hidden": 3072},
        {"name": "qwen-image-b2-512px", "batch": 2, "tokens": 1024, "hidden": 3072},
        # Wan2.1-14B (hidden 5120), 480p x 81 frames = 21 latent frames x 1560 tokens
        {
            "name": "wan2.1-14b-per-frame",
            "batch": 1,
            "tokens": 21 * 1560,
            "hidden": 5120,
            "frames": 21,
        },
        {
            "name": "flux-1024px-fp16",
            "batch": 1,
            "tokens": 4096 + 512,
            "hidden": 3072,
            "dtype": "float16",
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2]),
        "tokens": r.choice([64, 300, 1000]),
        "hidden": r.choice([256, 640, 1536]),
        "frames": r.choice([0, 0, 4]),
        "dtype": "float16",
    },
    make_inputs=_scale_shift_inputs,
    call=_scale_shift_call,
    reference=_scale_shift_reference,
    tolerance_why="one multiply-add per element in the input dtype: dtype defaults",
)


# --- apply_ltx2_split_rotary_emb: split-half RoPE with per-head cos/sin tables ---


def _ltx2_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, t, h, d = shape["batch"], shape["tokens"], shape["heads"], shape["head"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    angle = torch.rand(b, h, t, d // 2, generator=gen, device=device) * 6.2832
    return {
        "x": torch.randn(b, t, h * d, generator=gen, device=device).to(dt),
        "cos": angle.cos().to(dt),
        "sin": angle.sin().to(dt),
    }


def _ltx2_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    return {"out": mod.apply_ltx2_split_rotary_emb(x["x"], x["cos"], x["sin"])}


def _ltx2_reference(x: Inputs) -> Outputs:
    torch = _torch()
    b, t, _ = x["x"].shape
    h, half = x["cos"].shape[1], x["cos"].shape[-1]
    xs = x["x"].view(b, t, h, 2 * half).transpose(1, 2)  # [b, h, t, d]
    x1, x2 = xs[..., :half], xs[..., half:]
    cos, sin = x["cos"], x["sin"]
    # the model's order: x * cos rounded to bf16, then the sine term added in fp32
    bf16 = torch.bfloat16
    o1 = (x1 * cos).to(bf16).float() - x2.float() * sin.float()
    o2 = (x2 * cos).to(bf16).float() + x1.float() * sin.float()
    out = torch.cat([o1, o2], -1).transpose(1, 2).reshape(b, t, h * 2 * half)
    return {"out": out.to(x["x"].dtype)}


LTX2_ROTARY = Spec(
    name="sglang_ltx2_split_rotary",
    launcher="apply_ltx2_split_rotary_emb",
    rows=(("sglang", "93bacc25", "python/sglang/jit_kernel/diffusion/triton/ltx2_rotary.py"),),
    shapes=(
        # LTX-2 video stream: 32 heads x 128; 121 frames at 768x512 -> 16x16x24 latents
        {"name": "ltx2-video-6k", "batch": 1, "tokens": 6144, "heads": 32, "head": 128},
        {"name": "ltx2-video-b2-1.5k", "batch": 2, "tokens": 1536, "heads": 32, "head": 128},
        # LTX-2 audio stream: 32 heads x 64
        {"name": "ltx2-audio", "batch": 1, "tokens": 256, "heads": 32, "head": 64},
        {"name": "test-odd-heads", "batch": 1, "tokens": 500, "heads": 24, "head": 96},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2]),
        "tokens": r.choice([7, 64, 200]),
        "heads": r.choice([3, 8, 20, 32]),
        "head": r.choice([64, 128]),
        # fp16: the CPU interpreter stores an fp32 tile into a bf16 pointer as raw bits
        "dtype": "float16",
    },
    make_inputs=_ltx2_inputs,
    call=_ltx2_call,
    reference=_ltx2_reference,
    tolerance={"out": (1.6e-2, 1.6e-2)},
    tolerance_why="the kernel rounds x * cos to bf16 before the fp32 add (the model's order), "
    "so one bf16 step (4 ulp relative with an absolute floor) whatever the I/O dtype",
)


# --- sigmoid_gate_mul: shared-expert gate, out = x * sigmoid(gate) ---


def _gate_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    n, d = shape["tokens"], shape["hidden"]
    return {
        "x": torch.randn(n, d, generator=gen, device=device).to(torch.bfloat16),
        "gate": (torch.randn(n, 1, generator=gen, device=device) * 2).to(torch.bfloat16),
    }


def _gate_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    """The commit adds a broadcast launcher for the ``(N, 1)`` gate of the shared expert;
    before it the file's one kernel needed the gate expanded to ``x``'s shape, which is
    what the ``before`` side is called with."""
    fused = getattr(mod, "sigmoid_gate_mul_broadcast", None)
    if fused is not None:
        return {"out": fused(x["x"], x["gate"])}
    return {"out": mod.sigmoid_gate_mul(x["x"], x["gate"].expand_as(x["x"]).contiguous())}


SIGMOID_GATE_MUL = Spec(
    name="sglang_sigmoid_gate_mul",
    launcher="sigmoid_gate_mul",
    rows=(("sglang", "149fabcc", "python/sglang/jit_kernel/triton/sigmoid_gate_mul.py"),),
    shapes=(
        # Qwen3-Next-80B-A3B (hidden 2048) and Qwen2-57B-A14B (hidden 3584) shared experts
        {"name": "qwen3-next-decode", "tokens": 64, "hidden": 2048},
        {"name": "qwen3-next-prefill", "tokens": 8192, "hidden": 2048},
        {"name": "qwen2-57b-prefill", "tokens": 4096, "hidden": 3584},
        {"name": "qwen2-57b-decode-b1", "tokens": 1, "hidden": 3584},
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 9, 100, 1000]),
        "hidden": r.choice([512, 1000, 2048, 3584]),
    },
    make_inputs=_gate_inputs,
    call=_gate_call,
    reference=lambda x: {"out": (x["x"].float() * x["gate"].float().sigmoid()).to(x["x"].dtype)},
    tolerance_why="one sigmoid and one multiply per element: bf16 default (the expanded "
    "gate of the before side is computed in the input dtype, the broadcast one in fp32)",
)


# --- group-norm + SiLU, chunked launch for large groups (diffusion VAE decoders) ---


def _gn_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    dims = (shape["batch"], shape["channels"], *shape["spatial"])
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    c = shape["channels"]
    return {
        "x_contiguous": (torch.randn(*dims, generator=gen, device=device) * 2 + 0.5).to(dt),
        "weight": (torch.rand(c, generator=gen, device=device) + 0.5).to(dt),
        "bias": (torch.randn(c, generator=gen, device=device) * 0.1).to(dt),
        "num_groups": shape["groups"],
        "eps": 1e-6,
    }


def _gn_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    return {"y": call_by_name(mod._launch_chunked, x)}


def _gn_reference(x: Inputs) -> Outputs:
    f = _torch().nn.functional
    xs = x["x_contiguous"]
    y = f.group_norm(xs.float(), x["num_groups"], x["weight"].float(), x["bias"].float(), x["eps"])
    return {"y": f.silu(y).to(xs.dtype)}


GROUP_NORM_SILU = Spec(
    name="sglang_group_norm_silu_chunked",
    launcher="_launch_chunked",
    rows=(("sglang", "1360848e", "python/sglang/jit_kernel/diffusion/triton/group_norm_silu.py"),),
    shapes=(
        # video VAE decoders at full resolution, 32 groups (spatial % 8192 == 0: new path)
        {
            "name": "vae3d-128ch-4x512x512",
            "batch": 1,
            "channels": 128,
            "groups": 32,
            "spatial": (4, 512, 512),
        },
        {
            "name": "vae3d-256ch-4x256x256",
            "batch": 1,
            "channels": 256,
            "groups": 32,
            "spatial": (4, 256, 256),
        },
        {
            "name": "vae2d-128ch-1024px",
            "batch": 1,
            "channels": 128,
            "groups": 32,
            "spatial": (1024, 1024),
        },
        {
            "name": "vae3d-96ch-wan-480p",
            "batch": 1,
            "channels": 96,
            "groups": 32,
            "spatial": (4, 480, 832),
        },
    ),
    control={
        "name": "vae2d-512ch-600x600",
        "batch": 1,
        "channels": 512,
        "groups": 32,
        "spatial": (600, 600),
    },
    control_reason="spatial size not a multiple of the 8192-element chunk: the apply step "
    "keeps the per-element affine kernel on both sides",
    random_shape=lambda r: {
        "name": "random",
        "batch": 1,
        "channels": 32,
        "groups": 32,
        "spatial": r.choice([(8192 * 64,), (8192 * 65,), (300, 1000)]),
        "dtype": r.choice(["float32", "float16"]),
    },
    make_inputs=_gn_inputs,
    call=_gn_call,
    reference=_gn_reference,
    tolerance={"y": (2e-2, 2e-2)},
    tolerance_why="mean and variance over up to 2^22 elements in fp32 partial sums (chunk "
    "order differs from torch's), then one affine and SiLU rounded to the input dtype: "
    "bf16 default plus an absolute floor",
)


# --- apply_rotary_embedding (diffusion): interleaved-pair RoPE, cos/sin per token ---


def _rope_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, t, h, d = shape["batch"], shape["tokens"], shape["heads"], shape["head"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    angle = torch.rand(t, d // 2, generator=gen, device=device) * 6.2832
    return {
        "x": torch.randn(b, t, h, d, generator=gen, device=device).to(dt),
        "cos": angle.cos(),
        "sin": angle.sin(),
    }


def _rope_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    return {"out": mod.apply_rotary_embedding(x["x"], x["cos"], x["sin"])}


def _rope_reference(x: Inputs) -> Outputs:
    torch = _torch()
    xs = x["x"].float()
    x1, x2 = xs[..., 0::2], xs[..., 1::2]
    cos, sin = x["cos"][None, :, None, :], x["sin"][None, :, None, :]
    out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)
    return {"out": out.to(x["x"].dtype)}


DIFFUSION_ROPE = Spec(
    name="sglang_diffusion_rotary",
    launcher="apply_rotary_embedding",
    rows=(("sglang", "6f2b51ad", "python/sglang/jit_kernel/diffusion/triton/rotary.py"),),
    shapes=(
        # Wan2.1-14B: 40 heads x 128, 480p x 81 frames = 32760 tokens
        {"name": "wan2.1-14b-480p", "batch": 1, "tokens": 32760, "heads": 40, "head": 128},
        # HunyuanVideo / Qwen-Image / Flux: 24 heads x 128
        {"name": "qwen-image-1024px", "batch": 1, "tokens": 4096, "heads": 24, "head": 128},
        {"name": "flux-b2-1024px", "batch": 2, "tokens": 4608, "heads": 24, "head": 128},
        # Wan2.1-1.3B: 12 heads x 128
        {
            "name": "wan2.1-1.3b-fp16",
            "batch": 1,
            "tokens": 8190,
            "heads": 12,
            "head": 128,
            "dtype": "float16",
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2]),
        "tokens": r.choice([5, 64, 150]),
        "heads": r.choice([3, 12]),
        "head": r.choice([64, 128]),
        "dtype": r.choice(["bfloat16", "float16"]),
    },
    make_inputs=_rope_inputs,
    call=_rope_call,
    reference=_rope_reference,
    tolerance_why="two products and one add per element in fp32 (fma in one version), one "
    "rounding to the input dtype: dtype defaults",
)


# --- gemma_qkv_rmsnorm: per-head RMSNorm of q, k (weighted) and v (unweighted), in place ---


def _qkv_norm_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    m, hq, hk, d = shape["tokens"], shape["hq"], shape["hk"], shape["head"]
    return {
        # one fused qkv projection output, split into strided views by the call
        "qkv": torch.randn(m, (hq + 2 * hk) * d, generator=gen, device=device).to(torch.bfloat16),
        "q_weight": (torch.rand(d, generator=gen, device=device) + 0.5).to(torch.bfloat16),
        "k_weight": (torch.rand(d, generator=gen, device=device) + 0.5).to(torch.bfloat16),
        "num_q_heads": hq,
        "num_kv_heads": hk,
        "head_dim": d,
        "eps": 1e-6,
    }


def _qkv_split(x: Inputs) -> tuple[Any, Any, Any]:
    hq, hk, d = x["num_q_heads"], x["num_kv_heads"], x["head_dim"]
    q, k, v = x["qkv"].split([hq * d, hk * d, hk * d], dim=-1)
    return q, k, v


def _qkv_norm_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    q, k, v = _qkv_split(x)
    call_by_name(mod.gemma_qkv_rmsnorm, {**x, "q": q, "k": k, "v": v})
    return {"qkv": x["qkv"]}


def _qkv_norm_reference(x: Inputs) -> Outputs:
    torch = _torch()
    d, m = x["head_dim"], x["qkv"].shape[0]

    def norm(t: Any, w: Any) -> Any:
        h = t.float().view(m, -1, d)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + x["eps"])
        return (h * w.float() if w is not None else h).view(m, -1)

    q, k, v = _qkv_split(x)
    out = torch.cat([norm(q, x["q_weight"]), norm(k, x["k_weight"]), norm(v, None)], -1)
    return {"qkv": out.to(x["qkv"].dtype)}


GEMMA_QKV_RMSNORM = Spec(
    name="sglang_gemma_qkv_rmsnorm",
    launcher="gemma_qkv_rmsnorm",
    rows=(("sglang", "f57f8a8a", "python/sglang/srt/layers/gemma4_fused_ops.py"),),
    shapes=(
        # the commit launches one program per (token, head) for M <= 256 (decode)
        {"name": "gemma-27b-decode-b64", "tokens": 64, "hq": 32, "hk": 16, "head": 128},
        {"name": "gemma-12b-decode-b256", "tokens": 256, "hq": 16, "hk": 8, "head": 256},
        {"name": "gemma-27b-decode-b1", "tokens": 1, "hq": 32, "hk": 16, "head": 128},
        {"name": "gemma-12b-decode-b32", "tokens": 32, "hq": 16, "hk": 8, "head": 256},
    ),
    control={"name": "gemma-27b-prefill-4k", "tokens": 4096, "hq": 32, "hk": 16, "head": 128},
    control_reason="more than 256 tokens keeps the one-program-per-token launch on both sides",
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 7, 100, 300]),
        "hq": r.choice([8, 16]),
        "hk": r.choice([2, 4, 8]),
        "head": r.choice([128, 256]),
    },
    make_inputs=_qkv_norm_inputs,
    call=_qkv_norm_call,
    reference=_qkv_norm_reference,
    mutated=("qkv",),
    tolerance_why="a mean of <= 256 squares in fp32 then one scale, rounded to bf16: bf16 default",
)


# --- layer-norm + select-one-of-two adaLN modulation (Qwen-Image edit's per-token choice) ---


def _select01_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, n, c = shape["batch"], shape["tokens"], shape["hidden"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))

    def mod(scale: float) -> Any:
        return (torch.randn(b, c, generator=gen, device=device) * scale).to(dt)

    index = torch.zeros(b, n, dtype=torch.int32, device=device)
    index[:, n // 2 :] = 1  # the reference-image half of the sequence takes modulation 1
    return {
        "x": (torch.randn(b, n, c, generator=gen, device=device) * 2 + 0.3).to(dt),
        "weight": None,
        "bias": None,
        "scale0": mod(0.3),
        "shift0": mod(0.3),
        "gate0": mod(1.0),
        "scale1": mod(0.3),
        "shift1": mod(0.3),
        "gate1": mod(1.0),
        "index": index,
        "eps": 1e-6,
    }


def _select01_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    out, gate = call_by_name(mod.fuse_layernorm_scale_shift_gate_select01_kernel, x)
    return {"out": out, "gate": gate}


def _select01_reference(x: Inputs) -> Outputs:
    torch = _torch()
    xs = x["x"].float()
    normed = torch.nn.functional.layer_norm(xs, xs.shape[-1:], eps=x["eps"])
    pick = x["index"].bool()[..., None]

    def sel(a: str, b: str) -> Any:
        return torch.where(pick, x[b].float()[:, None, :], x[a].float()[:, None, :])

    out = normed * (1 + sel("scale0", "scale1")) + sel("shift0", "shift1")
    return {"out": out.to(x["x"].dtype), "gate": sel("gate0", "gate1").to(x["x"].dtype)}


SELECT01_MODULATION = Spec(
    name="sglang_layernorm_select01_modulation",
    launcher="fuse_layernorm_scale_shift_gate_select01_kernel",
    rows=(("sglang", "68f7f001", "python/sglang/jit_kernel/diffusion/triton/scale_shift.py"),),
    shapes=(
        # Qwen-Image (the title): hidden 3072; edit = target + reference image tokens
        {"name": "qwen-image-edit-1024px", "batch": 1, "tokens": 8192, "hidden": 3072},
        {"name": "qwen-image-edit-512px-b2", "batch": 2, "tokens": 2048, "hidden": 3072},
        {"name": "qwen-image-edit-1328px", "batch": 1, "tokens": 2 * 6889, "hidden": 3072},
        {
            "name": "qwen-image-edit-fp16",
            "batch": 1,
            "tokens": 4096,
            "hidden": 3072,
            "dtype": "float16",
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2]),
        "tokens": r.choice([3, 64, 300]),
        "hidden": r.choice([128, 640, 3072]),
        # fp16: the CPU interpreter stores an fp32 tile into a bf16 pointer as raw bits
        "dtype": "float16",
    },
    make_inputs=_select01_inputs,
    call=_select01_call,
    reference=_select01_reference,
    tolerance={"out": (2e-2, 2e-2)},
    tolerance_why="layer-norm statistics over <= 3072 values in fp32, then one affine, "
    "rounded to the input dtype: bf16 default plus an absolute floor (outputs ~N(0, 2)); "
    "the gate is a copy (dtype default)",
)


SPECS: tuple[Spec, ...] = (
    SCALE_SHIFT,
    LTX2_ROTARY,
    SIGMOID_GATE_MUL,
    GROUP_NORM_SILU,
    DIFFUSION_ROPE,
    GEMMA_QKV_RMSNORM,
    SELECT01_MODULATION,
)

_ = random
