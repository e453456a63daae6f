"""Specs for the misc SGLang rows of the execution census (issue 35): extend (prefill with
a KV-cache prefix) attention, diffusion modulation and rotary kernels, MLA KV-cache
writes, MoE routing helpers and DSA metadata kernels.

Shapes name their source. Models: Llama-3-8B (32 q heads, 8 kv heads, head 128),
Qwen2.5-7B (28/4 heads), DeepSeek-V3 (MLA kv_lora 512 + rope 64, 256 experts top-8,
hidden 7168), Gemma-3 / gpt-oss (sliding window 512/128), Qwen-Image / Wan / LTX-2
(diffusion transformers, hidden 3072/5120/4096, head 128).
"""

from __future__ import annotations

import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name


def _torch() -> Any:
    import torch

    return torch


def _cpu_gen(gen: Any, device: Any) -> Any:
    """A CPU generator seeded from ``gen`` (permutations are drawn on the CPU: CUDA
    generators refuse ``randperm`` on another device)."""
    torch = _torch()
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=device).item())
    return torch.Generator().manual_seed(seed)


def _is_stub(obj: Any) -> bool:
    return type(obj).__name__ == "Stub"


# --- extend_attention_fwd: prefill of new tokens against a cached prefix plus themselves ---


def _kv_strides(buf: Any, page_size: int) -> tuple[int, int, int, int]:
    """Slot, head, page and token strides of a ``[slots, heads, dim]`` KV buffer (the
    helper the later files import from their decode-attention sibling, which the loader
    stubs): with one slot per page every stride is the slot stride."""
    slot = buf.stride(0)
    return slot, buf.stride(1), slot * page_size, slot


def _no_aux(score_mod: Any, aux_tensors: Any) -> tuple[Any, int, int, int]:
    """The score-mod unpacker with no score mod (the only case the spec drives)."""
    return None, 0, 0, 0


def _extend_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, hq, hk, d = shape["batch"], shape["hq"], shape["hk"], shape["head"]
    ext, pre = shape["extend"], shape["prefix"]
    # ragged batch: lengths fall from the nominal value (a mixed prefill batch)
    e_lens = [max(1, ext - (i * 53) % max(1, ext // 2)) for i in range(b)]
    p_lens = [max(0, pre - (i * 71) % max(1, pre // 2 + 1)) for i in range(b)]
    total_e, total_p = sum(e_lens), sum(p_lens)
    slots = total_p + 64
    perm = torch.randperm(slots, generator=_cpu_gen(gen, device))[:total_p]
    max_total = max(p + e for p, e in zip(p_lens, e_lens, strict=True))
    req_to_tokens = torch.zeros(b, max_total, dtype=torch.int32)
    start = 0
    for i, n in enumerate(p_lens):
        req_to_tokens[i, :n] = perm[start : start + n].to(torch.int32)
        start += n
    dt = getattr(torch, shape.get("dtype", "bfloat16"))

    def rnd(*s: int) -> Any:
        return torch.randn(*s, generator=gen, device=device).to(dt)

    def cums(lens: list[int]) -> Any:
        out = [0]
        for n in lens:
            out.append(out[-1] + n)
        return torch.tensor(out, dtype=torch.int32, device=device)

    qo_indptr = cums(e_lens)
    return {
        "q_extend": rnd(total_e, hq, d),
        "k_extend": rnd(total_e, hk, d),
        "v_extend": rnd(total_e, hk, d),
        "o_extend": torch.empty(total_e, hq, d, device=device, dtype=dt),
        "k_buffer": rnd(slots, hk, d),
        "v_buffer": rnd(slots, hk, d),
        "qo_indptr": qo_indptr,
        "kv_indptr": cums(p_lens),
        "kv_indices": perm.to(device=device, dtype=torch.int64),
        "custom_mask": None,
        "is_causal": True,
        "mask_indptr": torch.zeros(b + 1, dtype=torch.int64, device=device),
        "max_len_extend": max(e_lens),
        "k_scale": 1.0,
        "v_scale": 1.0,
        "sm_scale": d**-0.5,
        "logit_cap": 0.0,
        "sliding_window_size": shape.get("window", -1),
        # the token-table convention of the oldest launcher
        "req_to_tokens": req_to_tokens.to(device),
        "b_req_idx": torch.arange(b, dtype=torch.int32, device=device),
        "b_seq_len": torch.tensor(
            [p + e for p, e in zip(p_lens, e_lens, strict=True)], dtype=torch.int32, device=device
        ),
        "b_seq_len_extend": torch.tensor(e_lens, dtype=torch.int32, device=device),
        "b_start_loc_extend": qo_indptr[:-1].clone(),
    }


def _extend_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    for name, real in (("_extract_kv_strides", _kv_strides), ("unpack_aux_tensors", _no_aux)):
        if _is_stub(getattr(mod, name, None)):
            setattr(mod, name, real)
    call_by_name(mod.extend_attention_fwd, x)
    return {"o_extend": x["o_extend"]}


def _extend_reference(x: Inputs) -> Outputs:
    torch = _torch()
    hq, hk = x["q_extend"].shape[1], x["k_extend"].shape[1]
    window = x["sliding_window_size"]
    qo, kvp = x["qo_indptr"].tolist(), x["kv_indptr"].tolist()
    outs = []
    for i in range(len(qo) - 1):
        idx = x["kv_indices"][kvp[i] : kvp[i + 1]]
        k = torch.cat([x["k_buffer"][idx], x["k_extend"][qo[i] : qo[i + 1]]]).float()
        v = torch.cat([x["v_buffer"][idx], x["v_extend"][qo[i] : qo[i + 1]]]).float()
        q = x["q_extend"][qo[i] : qo[i + 1]].float()
        n_pre, n_q = kvp[i + 1] - kvp[i], qo[i + 1] - qo[i]
        q_pos = torch.arange(n_q, device=q.device)[:, None] + n_pre
        k_pos = torch.arange(k.shape[0], device=q.device)[None, :]
        allowed = k_pos <= q_pos
        if window > 0:
            allowed &= (q_pos - k_pos) <= window
        k = k.repeat_interleave(hq // hk, 1).transpose(0, 1)
        v = v.repeat_interleave(hq // hk, 1).transpose(0, 1)
        s = (q.transpose(0, 1) @ k.transpose(1, 2)) * x["sm_scale"]
        s = s.masked_fill(~allowed[None], float("-inf"))
        outs.append((torch.softmax(s, -1) @ v).transpose(0, 1))
    return {"o_extend": torch.cat(outs).to(x["o_extend"].dtype)}


_EXT_OLD = "python/sglang/srt/layers/attention/triton_ops/extend_attention.py"
_EXT_NEW = "python/sglang/kernels/ops/attention/extend_attention.py"

EXTEND_ATTENTION = Spec(
    name="sglang_extend_attention_fwd",
    launcher="extend_attention_fwd",
    rows=(
        ("sglang", "67c424cc", _EXT_OLD),
        ("sglang", "634a3561", _EXT_OLD),
        ("sglang", "ddcf9fe3", _EXT_OLD),
        ("sglang", "1b63155e", _EXT_NEW),
        ("sglang", "18e6c61c", _EXT_NEW),
    ),
    shapes=(
        # test_extend_attention at the sha: B=19, N_CTX=1024, heads 32/8 (here 8 requests)
        {
            "name": "test-b8-1k",
            "batch": 8,
            "extend": 512,
            "prefix": 512,
            "hq": 32,
            "hk": 8,
            "head": 128,
        },
        {
            "name": "llama3-8b-chunked-prefill",
            "batch": 2,
            "extend": 2048,
            "prefix": 4096,
            "hq": 32,
            "hk": 8,
            "head": 128,
        },
        {
            "name": "qwen2.5-7b-mixed-fp16",
            "batch": 16,
            "extend": 256,
            "prefix": 1024,
            "hq": 28,
            "hk": 4,
            "head": 128,
            "dtype": "float16",
        },
        {
            "name": "llama3-8b-no-prefix",
            "batch": 4,
            "extend": 1024,
            "prefix": 0,
            "hq": 32,
            "hk": 8,
            "head": 128,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2, 3]),
        "extend": r.choice([17, 40, 70]),
        "prefix": r.choice([0, 33, 90]),
        "hq": r.choice([4, 8]),
        "hk": r.choice([2, 4]),
        "head": r.choice([64, 128]),
        # fp16: the CPU interpreter stores an fp32 tile into a bf16 pointer as raw bits
        "dtype": "float16",
    },
    make_inputs=_extend_inputs,
    call=_extend_call,
    reference=_extend_reference,
    mutated=("o_extend",),
    tolerance={"o_extend": (2e-2, 2e-2)},
    tolerance_why="online softmax over <= 6k keys in fp32 with a bf16 P@V (block sizes and "
    "tile skipping differ by version, so not bitwise): bf16 default plus an absolute floor",
)

EXTEND_ATTENTION_SWA = Spec(
    name="sglang_extend_attention_swa",
    launcher="extend_attention_fwd",
    rows=(("sglang", "0475448e", _EXT_OLD),),
    shapes=(
        # the commit skips tiles wholly outside the sliding window: windowed shapes
        {
            "name": "gpt-oss-w128-prefill",
            "batch": 4,
            "extend": 1024,
            "prefix": 1024,
            "hq": 64,
            "hk": 8,
            "head": 64,
            "window": 128,
        },
        {
            "name": "gemma3-w512-prefill",
            "batch": 2,
            "extend": 2048,
            "prefix": 2048,
            "hq": 16,
            "hk": 8,
            "head": 128,
            "window": 512,
        },
        {
            "name": "gpt-oss-w128-chunk",
            "batch": 8,
            "extend": 256,
            "prefix": 3072,
            "hq": 64,
            "hk": 8,
            "head": 64,
            "window": 128,
        },
        {
            "name": "test-w64",
            "batch": 3,
            "extend": 300,
            "prefix": 200,
            "hq": 8,
            "hk": 2,
            "head": 128,
            "window": 64,
        },
    ),
    control={
        "name": "llama3-8b-full-attention",
        "batch": 4,
        "extend": 1024,
        "prefix": 1024,
        "hq": 32,
        "hk": 8,
        "head": 128,
    },
    control_reason="no sliding window and no custom mask: the tile-skip test is compiled out",
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2]),
        "extend": r.choice([40, 90]),
        "prefix": r.choice([0, 50, 130]),
        "hq": 4,
        "hk": r.choice([1, 2]),
        "head": 64,
        "window": r.choice([16, 32, 48]),
        "dtype": "float16",
    },
    make_inputs=_extend_inputs,
    call=_extend_call,
    reference=_extend_reference,
    mutated=("o_extend",),
    tolerance={"o_extend": (2e-2, 2e-2)},
    tolerance_why="online softmax in fp32 over the window's keys with a bf16 P@V: bf16 "
    "default plus an absolute floor",
)


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
        "tokens": r.choice([5, 64, 300]),
        "heads": r.choice([3, 12, 24]),
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


# --- draft_topk1_postprocess (EAGLE top-1 drafting): split argmax over the vocabulary ---


def _topk1_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    bs, vocab = shape["batch"], shape["vocab"]
    return {
        "next_token_logits": torch.randn(bs, vocab, generator=gen, device=device) * 4,
        "positions": torch.randint(
            0, 30000, (bs,), generator=gen, device=device, dtype=torch.int64
        ),
    }


def _topk1_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    p, idx = mod.draft_topk1_postprocess(x["next_token_logits"], x["positions"])
    return {"topk_p": p, "topk_index": idx, "positions": x["positions"]}


def _topk1_reference(x: Inputs) -> Outputs:
    torch = _torch()
    logits = x["next_token_logits"]
    return {
        "topk_p": torch.ones(logits.shape[0], 1, device=logits.device),
        "topk_index": logits.argmax(-1, keepdim=True),
        "positions": x["positions"] + 1,
    }


DRAFT_TOPK1 = Spec(
    name="sglang_draft_topk1_postprocess",
    launcher="draft_topk1_postprocess",
    rows=(("sglang", "bd47ec97", "python/sglang/kernels/ops/speculative/topk1.py"),),
    shapes=(
        # the docstring names GLM / DeepSeek-V4 vocab widths; EAGLE drafts run at decode batch
        {"name": "dsv3-vocab-b32", "batch": 32, "vocab": 129280},
        {"name": "glm-vocab-b8", "batch": 8, "vocab": 151552},
        {"name": "llama3-vocab-b64", "batch": 64, "vocab": 128256},
        {"name": "dsv3-vocab-b1", "batch": 1, "vocab": 129280},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 8]),
        "vocab": r.choice([1000, 8191, 20000, 32000]),
    },
    make_inputs=_topk1_inputs,
    call=_topk1_call,
    reference=_topk1_reference,
    mutated=("positions",),
    tolerance_why="an argmax of fp32 logits (no rounding; finite logits, so the NaN guard the "
    "commit adds never fires): exact",
)


def _pdl_supported() -> bool:
    """Programmatic dependent launch needs SM90+; on the CPU interpreter it stays off (the
    interpreter has no ``gdc_wait``)."""
    torch = _torch()
    return bool(torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9)


# --- set_mla_kv_buffer_triton: scatter MLA (nope | rope) rows into the paged KV buffer ---


def _mla_set_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    n, nope, rope = shape["tokens"], shape.get("nope", 512), shape.get("rope", 64)
    slots = shape.get("slots", 8192)
    loc = torch.randperm(slots, generator=_cpu_gen(gen, device))[:n].to(device)
    # k_nope and k_rope are column slices of one projection output (strided rows)
    kv_a = torch.randn(n, 1, nope + rope, generator=gen, device=device).to(torch.bfloat16)
    return {
        "kv_buffer": torch.randn(slots, 1, nope + rope, generator=gen, device=device).to(
            torch.bfloat16
        ),
        "loc": loc,
        "cache_k_nope": kv_a[..., :nope],
        "cache_k_rope": kv_a[..., nope:],
    }


def _mla_set_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    # the engine's SM90+ test, stubbed by the loader: answered for the real device
    mod.is_arch_support_pdl = _pdl_supported
    mod.set_mla_kv_buffer_triton(x["kv_buffer"], x["loc"], x["cache_k_nope"], x["cache_k_rope"])
    return {"kv_buffer": x["kv_buffer"]}


def _mla_set_reference(x: Inputs) -> Outputs:
    torch = _torch()
    out = x["kv_buffer"].clone()
    out[x["loc"]] = torch.cat([x["cache_k_nope"], x["cache_k_rope"]], -1)
    return {"kv_buffer": out}


MLA_SET_KV = Spec(
    name="sglang_set_mla_kv_buffer",
    launcher="set_mla_kv_buffer_triton",
    rows=tuple(
        ("sglang", s, "python/sglang/srt/mem_cache/utils.py")
        for s in ("9d878c1f", "05d1ab51", "dca9ba63")
    ),
    shapes=(
        # DeepSeek-V3 MLA: kv_lora_rank 512 + rope 64, one latent head; decode batches
        # (below 768 locations: dca9ba63 keeps the Triton path, above it calls a JIT op)
        {"name": "dsv3-decode-b32", "tokens": 32},
        {"name": "dsv3-decode-b128", "tokens": 128, "slots": 65536},
        {"name": "dsv3-decode-b512", "tokens": 512, "slots": 65536},
        {"name": "dsv3-decode-b1", "tokens": 1},
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 5, 64, 300, 700]),
        "slots": r.choice([1024, 4096]),
    },
    make_inputs=_mla_set_inputs,
    call=_mla_set_call,
    reference=_mla_set_reference,
    mutated=("kv_buffer",),
    tolerance={"kv_buffer": (0.0, 0.0)},
    tolerance_why="a copy: exact",
)


# --- NSA indexer K cache (DeepSeek-V3.2): pages of 64 tokens x (128 fp8 bytes + 4 scale) ---

_NSA_PAGE, _NSA_DIM = 64, 128


def _nsa_buf(pages: int, gen: Any, device: Any) -> Any:
    torch = _torch()
    return torch.randint(
        0, 256, (pages, _NSA_PAGE * (_NSA_DIM + 4)), generator=gen, device=device
    ).to(torch.uint8)


def _nsa_get_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, n = shape["batch"], shape["seq"]
    lens = [max(1, n - (i * 997) % max(1, n // 2)) for i in range(b)]
    width = -(-max(lens) // _NSA_PAGE)
    pages = b * width + 16
    perm = torch.randperm(pages, generator=_cpu_gen(gen, device))[: b * width]
    return {
        "buf": _nsa_buf(pages, gen, device),
        "page_indices": perm.view(b, width).to(device=device, dtype=torch.int32),
        "seq_lens": torch.tensor(lens, dtype=torch.int64, device=device),
        "seq_lens_list": lens,
        "seq_len_sum": sum(lens),
        "max_seq_len": max(lens),
        "page_size": _NSA_PAGE,
        "index_head_dim": _NSA_DIM,
    }


def _nsa_get_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    """After the batched launcher (760ae933) one call gathers every request; before it the
    indexer called the per-request launcher in a loop and concatenated, as here."""
    fn = mod._get_k_and_s_triton
    if "seq_lens" in fn.__code__.co_varnames[: fn.__code__.co_argcount]:
        k, s = call_by_name(fn, x)
        return {"k": k, "s": s}
    torch = _torch()
    parts = [
        fn(
            buf=x["buf"],
            page_indices=x["page_indices"][i],
            seq_len=n,
            page_size=x["page_size"],
            index_head_dim=x["index_head_dim"],
        )
        for i, n in enumerate(x["seq_lens_list"])
    ]
    return {"k": torch.cat([p[0] for p in parts]), "s": torch.cat([p[1] for p in parts])}


def _nsa_get_reference(x: Inputs) -> Outputs:
    torch = _torch()
    ks, ss = [], []
    for i, n in enumerate(x["seq_lens_list"]):
        tok = torch.arange(n, device=x["buf"].device)
        page = x["page_indices"][i][tok // _NSA_PAGE].long()
        off = tok % _NSA_PAGE
        rows = x["buf"][page]
        k_cols = (off * _NSA_DIM)[:, None] + torch.arange(_NSA_DIM, device=tok.device)
        s_cols = (_NSA_PAGE * _NSA_DIM + off * 4)[:, None] + torch.arange(4, device=tok.device)
        ks.append(rows.gather(1, k_cols))
        ss.append(rows.gather(1, s_cols))
    return {"k": torch.cat(ks), "s": torch.cat(ss)}


NSA_GET_K_AND_S = Spec(
    name="sglang_nsa_get_k_and_s",
    launcher="_get_k_and_s_triton",
    rows=(
        ("sglang", "760ae933", "python/sglang/srt/layers/attention/nsa/index_buf_accessor.py"),
        ("sglang", "1b63155e", "python/sglang/kernels/ops/attention/dsa/index_buf_accessor.py"),
    ),
    shapes=(
        # DeepSeek-V3.2 indexer: page 64, 128-byte fp8 key + fp32 scale; ragged prefill
        {"name": "dsv32-prefill-b4-8k", "batch": 4, "seq": 8192},
        {"name": "dsv32-prefill-b1-32k", "batch": 1, "seq": 32768},
        {"name": "dsv32-prefill-b16-2k", "batch": 16, "seq": 2048},
        {"name": "dsv32-prefill-b8-600", "batch": 8, "seq": 600},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2, 3]),
        "seq": r.choice([5, 64, 100, 700]),
    },
    make_inputs=_nsa_get_inputs,
    call=_nsa_get_call,
    reference=_nsa_get_reference,
    tolerance={"k": (0.0, 0.0), "s": (0.0, 0.0)},
    tolerance_why="a byte gather: exact",
)


def _nsa_set_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    n, pages = shape["tokens"], shape["pages"]
    loc = torch.randperm(pages * _NSA_PAGE, generator=_cpu_gen(gen, device))[:n]
    k = torch.randn(n, _NSA_DIM, generator=gen, device=device) * 100
    return {
        "buf": _nsa_buf(pages, gen, device),
        "loc": loc.to(device),
        "index_k": k.to(torch.float8_e4m3fn),
        "index_k_scale": torch.rand(n, 1, generator=gen, device=device) + 0.01,
        "page_size": _NSA_PAGE,
    }


def _nsa_set_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod._set_k_and_s_triton, x)
    return {"buf": x["buf"]}


def _nsa_set_reference(x: Inputs) -> Outputs:
    torch = _torch()
    buf = x["buf"].clone()
    page, off = x["loc"] // _NSA_PAGE, x["loc"] % _NSA_PAGE
    dev = buf.device
    k_cols = (off * _NSA_DIM)[:, None] + torch.arange(_NSA_DIM, device=dev)
    s_cols = (_NSA_PAGE * _NSA_DIM + off * 4)[:, None] + torch.arange(4, device=dev)
    buf[page[:, None], k_cols] = x["index_k"].view(torch.uint8)
    buf[page[:, None], s_cols] = x["index_k_scale"].contiguous().view(torch.uint8)
    return {"buf": buf}


NSA_SET_K_AND_S = Spec(
    name="sglang_nsa_set_k_and_s",
    launcher="_set_k_and_s_triton",
    rows=(("sglang", "afe285f7", "python/sglang/srt/layers/attention/nsa/index_buf_accessor.py"),),
    shapes=(
        # DeepSeek-V3.2 indexer K writes: one row per new token (decode and prefill)
        {"name": "dsv32-decode-b64", "tokens": 64, "pages": 4096},
        {"name": "dsv32-decode-b256", "tokens": 256, "pages": 4096},
        {"name": "dsv32-prefill-8k", "tokens": 8192, "pages": 4096},
        {"name": "dsv32-prefill-32k", "tokens": 32768, "pages": 8192},
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 7, 100, 500]),
        "pages": r.choice([16, 64]),
    },
    make_inputs=_nsa_set_inputs,
    call=_nsa_set_call,
    reference=_nsa_set_reference,
    mutated=("buf",),
    tolerance={"buf": (0.0, 0.0)},
    tolerance_why="a byte scatter: exact (the commit only changes HIP asserts; CUDA runs the "
    "same kernel on both sides)",
)


# --- apply_rotary_emb_triton (DeepSeek-V4): in-place GPT-J RoPE on the rope slice ---


def _v4_rope_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, h, d, rope = shape["tokens"], shape["heads"], shape["head"], shape["rope"]
    max_pos = shape.get("max_pos", 8192)
    inv = 1.0 / (10000.0 ** (torch.arange(0, rope, 2, device=device).float() / rope))
    ang = torch.arange(max_pos, device=device).float()[:, None] * inv[None, :]
    dims = (t, h, d) if h else (t, d)
    return {
        "o": torch.randn(*dims, generator=gen, device=device).to(torch.bfloat16),
        "freqs_cis": torch.polar(torch.ones_like(ang), ang),
        "positions": torch.randint(0, max_pos, (t,), generator=gen, device=device),
        "rope": rope,
        "inverse": shape.get("inverse", True),
    }


def _v4_rope_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    # DeepseekV4 turns the batched kernels on at model build (a no-op before they existed)
    if hasattr(mod, "set_batched_rope"):
        mod.set_batched_rope(True)
    view = x["o"][..., -x["rope"] :]  # the rope part of each head, rows strided
    mod.apply_rotary_emb_triton(view, x["freqs_cis"], x["positions"], x["inverse"])
    return {"o": x["o"]}


def _v4_rope_reference(x: Inputs) -> Outputs:
    torch = _torch()
    o = x["o"].clone()
    rope = x["rope"]
    f = x["freqs_cis"][x["positions"]]
    f = f.conj() if x["inverse"] else f
    part = o[..., -rope:].float()
    pairs = torch.view_as_complex(part.reshape(*part.shape[:-1], rope // 2, 2).contiguous())
    f = f[:, None, :] if o.dim() == 3 else f
    rot = torch.view_as_real(pairs * f).flatten(-2)
    o[..., -rope:] = rot.to(o.dtype)
    return {"o": o}


V4_ROPE = Spec(
    name="sglang_dsv4_rope",
    launcher="apply_rotary_emb_triton",
    rows=(
        ("sglang", "47cad39f", "python/sglang/srt/layers/deepseek_v4_rope.py"),
        ("sglang", "af9027f6", "python/sglang/srt/layers/deepseek_v4_rope.py"),
    ),
    shapes=(
        # the commits' microbenchmark: attention output of 128 heads, rope 64 of 512 (inverse)
        {"name": "dsv4-attn-out-8k", "tokens": 8192, "heads": 128, "head": 512, "rope": 64},
        {"name": "dsv4-attn-out-decode-b64", "tokens": 64, "heads": 128, "head": 512, "rope": 64},
        {
            "name": "dsv4-q-rope-2k",
            "tokens": 2048,
            "heads": 128,
            "head": 512,
            "rope": 64,
            "inverse": False,
        },
        # a single-head (2-D) latent key rope
        {
            "name": "dsv4-kv-rope-4k",
            "tokens": 4096,
            "heads": 0,
            "head": 512,
            "rope": 64,
            "inverse": False,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 33, 200]),
        "heads": r.choice([0, 4, 16]),
        "head": r.choice([128, 192]),
        "rope": 64,
        "max_pos": 1024,
        "inverse": r.choice([True, False]),
    },
    make_inputs=_v4_rope_inputs,
    call=_v4_rope_call,
    reference=_v4_rope_reference,
    mutated=("o",),
    tolerance_why="one complex multiply per pair in fp32, rounded to bf16: bf16 default",
)


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


# --- DSA (DeepSeek-V3.2 sparse attention) CUDA-graph metadata: seqlens and page tables ---


def _dsa_common(shape: Shape, gen: Any, device: Any, rows: int) -> Inputs:
    torch = _torch()
    bs, width, ps = shape["batch"], shape["max_len"], shape["page"]
    lo = max(shape.get("extend", 1), width // 8)
    lens = torch.randint(lo, width + 1, (bs,), generator=gen, device=device)
    pool = bs * 2 + 3
    i32 = torch.int32

    def empty(*s: int) -> Any:
        # stale graph buffers: a fill value no live entry can take
        return torch.full(s, -7, dtype=i32, device=device)

    return {
        "seq_lens": lens,
        "req_pool_indices": torch.randperm(pool, generator=_cpu_gen(gen, device))[:bs].to(device),
        "req_to_token": torch.randint(
            0, 2**20, (pool, width), generator=gen, device=device, dtype=i32
        ),
        "cache_seqlens": empty(bs),
        "cu_seqlens_k": empty(bs + 1),
        "page_table_1": empty(rows, width),
        "seqlens_expanded": empty(rows),
        "dsa_cache_seqlens": empty(rows),
        "dsa_cu_seqlens_k": empty(rows + 1),
        "real_page_table": empty(rows, -(-width // ps)) if ps > 1 else None,
        "bs": bs,
        "max_len": width,
        "max_seqlen_k": width,
        "dsa_index_topk": shape.get("topk", 2048),
        "real_page_size": ps,
    }


def _dsa_decode_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    return _dsa_common(shape, gen, device, shape["batch"])


def _dsa_extend_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    bs, ext = shape["batch"], shape["extend"]
    x = _dsa_common(shape, gen, device, bs * ext)
    x.update(
        extend_seq_lens=torch.full((bs,), ext, dtype=torch.int32, device=device),
        total_len=bs * ext,
        max_extend_len=ext,
        max_total_len=bs * ext,
        static_extend_len=True,
    )
    return x


def _live(x: Inputs, row_lens: Any, table: Any, step: int) -> Any:
    """``table`` with columns at or past each row's kv length zeroed: nothing reads them
    (the repo's test compares the live prefix only; the commits skip the dead blocks)."""
    torch = _torch()
    cols = torch.arange(table.shape[1], device=table.device)[None, :] * step
    return torch.where(cols < row_lens[:, None], table, torch.zeros_like(table))


def _dsa_outputs(x: Inputs, row_lens: Any, rows: int) -> Outputs:
    ps = x["real_page_size"]
    real = x["real_page_table"] if ps > 1 else x["page_table_1"]
    out = {
        "cache_seqlens": x["cache_seqlens"],
        "cu_seqlens_k": x["cu_seqlens_k"],
        "dsa_cache_seqlens": x["dsa_cache_seqlens"][:rows],
        "dsa_cu_seqlens_k": x["dsa_cu_seqlens_k"][: rows + 1],
        "real_page_table": _live(x, row_lens, real[:rows], ps),
    }
    return out


def _dsa_args(fn: Any, x: Inputs) -> Inputs:
    """The fused decode graph drops the wide page-size-1 table when the real table has
    larger pages, wherever the launcher accepts ``None`` for it (be70bfbd added that)."""
    import inspect

    ann = str(inspect.signature(fn).parameters["page_table_1"].annotation)
    if x["real_page_size"] > 1 and "Optional" in ann:
        return {**x, "page_table_1": None}
    return x


def _dsa_decode_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    fn = mod.fused_dsa_decode_metadata
    call_by_name(fn, _dsa_args(fn, x))
    return _dsa_outputs(x, x["seq_lens"], x["bs"])


def _dsa_extend_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    fn = mod.fused_dsa_draft_extend_metadata
    call_by_name(fn, _dsa_args(fn, x))
    rows = x["total_len"]
    row_lens = x["seq_lens"].repeat_interleave(x["extend_seq_lens"].long())
    out = _dsa_outputs(x, row_lens, rows)
    out["seqlens_expanded"] = x["seqlens_expanded"][:rows]
    return out


def _dsa_expected(x: Inputs, row_lens: Any, expanded: Any, table: Any) -> Outputs:
    torch = _torch()
    i32, ps = torch.int32, x["real_page_size"]

    def cu(v: Any) -> Any:
        return torch.cat([v.new_zeros(1), v.cumsum(0, dtype=i32)])

    cache = x["seq_lens"].to(i32)
    dsa = expanded.clamp(max=x["dsa_index_topk"]).to(i32)
    real = table[:, ::ps] // ps if ps > 1 else table
    return {
        "cache_seqlens": cache,
        "cu_seqlens_k": cu(cache),
        "dsa_cache_seqlens": dsa,
        "dsa_cu_seqlens_k": cu(dsa),
        "real_page_table": _live(x, row_lens, real, ps),
    }


def _dsa_decode_reference(x: Inputs) -> Outputs:
    table = x["req_to_token"][x["req_pool_indices"], : x["max_len"]]
    return _dsa_expected(x, x["seq_lens"], x["seq_lens"], table)


def _dsa_extend_reference(x: Inputs) -> Outputs:
    torch = _torch()
    reps = x["extend_seq_lens"].long()
    table = x["req_to_token"][x["req_pool_indices"], : x["max_seqlen_k"]]
    row_lens = x["seq_lens"].repeat_interleave(reps)
    expanded = torch.cat(
        [
            torch.arange(int(n) - int(q) + 1, int(n) + 1, device=row_lens.device)
            for n, q in zip(x["seq_lens"].tolist(), reps.tolist(), strict=True)
        ]
    ).to(torch.int32)
    out = _dsa_expected(x, row_lens, expanded, table.repeat_interleave(reps, 0))
    out["seqlens_expanded"] = expanded
    return out


_DSA_OLD = "python/sglang/srt/layers/attention/triton_ops/dsa_metadata.py"
_DSA_NEW = "python/sglang/kernels/ops/attention/dsa_metadata.py"
_DSA_WHY = "integer lengths, prefix sums and page-table copies: exact"

DSA_DECODE_METADATA = Spec(
    name="sglang_dsa_decode_metadata",
    launcher="fused_dsa_decode_metadata",
    rows=(("sglang", "be70bfbd", _DSA_OLD), ("sglang", "1b63155e", _DSA_NEW)),
    shapes=(
        # DeepSeek-V3.2 decode CUDA graphs: index top-k 2048, real page 64 (and page 1)
        {"name": "dsv32-decode-b64-32k", "batch": 64, "max_len": 32768, "page": 64},
        {"name": "dsv32-decode-b256-8k", "batch": 256, "max_len": 8192, "page": 64},
        {"name": "dsv32-decode-b16-128k", "batch": 16, "max_len": 131072, "page": 64},
        {"name": "dsv32-decode-b32-page1", "batch": 32, "max_len": 16384, "page": 1},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 8]),
        "max_len": r.choice([200, 769, 1500]),
        "page": r.choice([1, 64]),
        "topk": 64,
    },
    make_inputs=_dsa_decode_inputs,
    call=_dsa_decode_call,
    reference=_dsa_decode_reference,
    tolerance_why=_DSA_WHY,
)

DSA_DRAFT_EXTEND_METADATA = Spec(
    name="sglang_dsa_draft_extend_metadata",
    launcher="fused_dsa_draft_extend_metadata",
    rows=(("sglang", "bbc53703", _DSA_OLD), ("sglang", "08cb081e", _DSA_NEW)),
    shapes=(
        # MTP draft extend of DeepSeek-V3.2 (static width: num draft tokens per request)
        {"name": "dsv32-mtp3-b64-32k", "batch": 64, "extend": 3, "max_len": 32768, "page": 64},
        {"name": "dsv32-mtp4-b128-8k", "batch": 128, "extend": 4, "max_len": 8192, "page": 64},
        {"name": "dsv32-mtp3-b8-128k", "batch": 8, "extend": 3, "max_len": 131072, "page": 64},
        {"name": "dsv32-mtp2-b32-page1", "batch": 32, "extend": 2, "max_len": 16384, "page": 1},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 6]),
        "extend": r.choice([2, 3, 4]),
        "max_len": r.choice([193, 500, 1300]),
        "page": r.choice([1, 64]),
        "topk": 64,
    },
    make_inputs=_dsa_extend_inputs,
    call=_dsa_extend_call,
    reference=_dsa_extend_reference,
    tolerance_why=_DSA_WHY,
)


SPECS: tuple[Spec, ...] = (
    EXTEND_ATTENTION,
    EXTEND_ATTENTION_SWA,
    SCALE_SHIFT,
    LTX2_ROTARY,
    SIGMOID_GATE_MUL,
    GROUP_NORM_SILU,
    DIFFUSION_ROPE,
    GEMMA_QKV_RMSNORM,
    DRAFT_TOPK1,
    MLA_SET_KV,
    NSA_GET_K_AND_S,
    NSA_SET_K_AND_S,
    V4_ROPE,
    MOE_FUSED_GATE,
    DSA_DECODE_METADATA,
    DSA_DRAFT_EXTEND_METADATA,
)

_ = random
