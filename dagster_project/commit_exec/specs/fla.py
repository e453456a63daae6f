"""Specs for the linear-attention rows (issue 35): the gated delta rule (GDN) of Qwen3-Next
in vLLM's and SGLang's FLA copies (the decode recurrences; the chunked prefill kernels are
in ``fla_chunk``, KDA in ``kda``, Mamba2 in ``mamba_ssd``) and the causal depthwise conv1d
in front of it; shared helpers (dtype, generator, layout test) live here.

Shapes name their source. Qwen3-Next-80B-A3B: 16 key heads and 32 value heads of 128
(``linear_num_key_heads``, ``linear_num_value_heads``, ``linear_key_head_dim``), conv
kernel 4 over the q/k/v projections (2 * 16 * 128 + 32 * 128 = 8192 channels); at tensor
parallel 4 each rank holds a quarter of the heads. SSM states are fp32, as both engines
keep them. The torch references are our own writing of the recurrences the repos' tests
compare against.

vLLM commit 82405807 moved the recurrent state from ``[.., K, V]`` to ``[.., V, K]``:
``make_inputs`` builds the state in both layouts (the same values) and each side is handed
the one its source uses; outputs are compared in the ``[.., K, V]`` layout (a transposed
view, so no copy is timed).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name


def _torch() -> Any:
    import torch

    return torch


def _cpu_gen(gen: Any, device: Any) -> Any:
    """A CPU generator seeded from ``gen`` (permutations are drawn on the CPU)."""
    torch = _torch()
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=device).item())
    return torch.Generator().manual_seed(seed)


def _vk_layout(mod: Any) -> bool:
    """True when this side keeps the recurrent state as ``[.., V, K]`` (vLLM 82405807)."""
    text = Path(mod.__file__).read_text()
    return "[N, HV, V, K]" in text or "b_h = tl.zeros([BV, BK]" in text


# --- GDN decode: one recurrent step per token against a pool of fp32 states ---


def _decode_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """A decode batch: ``seqs`` requests of ``tokens`` (1, or MTP draft length) each, their
    states scattered in a pool twice the batch (slots chosen at random, as the allocator
    hands them out)."""
    torch = _torch()
    n, t, h, hv, d = shape["seqs"], shape.get("tokens", 1), shape["h"], shape["hv"], 128
    total = n * t
    bf = torch.bfloat16

    def rnd(*s: int) -> Any:
        return torch.randn(*s, generator=gen, device=device)

    slots = 2 * n + 1
    idx = torch.randperm(slots, generator=_cpu_gen(gen, device))[:n].to(device)
    a_log = torch.log(torch.rand(hv, generator=gen, device=device) * 15 + 1)  # A in [1, 16]
    dt_bias = (rnd(hv) * 0.5).to(bf)
    a, b = rnd(total, hv).to(bf), rnd(total, hv).to(bf)
    x = a.float() + dt_bias.float()
    g = -torch.exp(a_log) * torch.nn.functional.softplus(x)  # log decay, as the gating op
    state = rnd(slots, hv, d, d) * 0.5  # a state many tokens deep: entries ~0.5
    return {
        "q": rnd(1, total, h, d).to(bf),
        "k": rnd(1, total, h, d).to(bf),
        "v": rnd(1, total, hv, d).to(bf),
        "A_log": a_log,
        "dt_bias": dt_bias,
        "a": a,
        "b": b,
        "softplus_beta": 1.0,
        "softplus_threshold": 20.0,
        "g": g[None],
        "beta": torch.sigmoid(b.float()).to(bf)[None],
        "scale": d**-0.5,
        "state_kv": state,
        "state_vk": state.transpose(-1, -2).contiguous(),
        "state_idx": idx.to(torch.int32),
        "cu_seqlens": torch.arange(0, total + 1, t, dtype=torch.int32, device=device),
        "use_qk_l2norm_in_kernel": True,
        "tokens": t,
    }


def _gdn_steps(x: Inputs, h0: Any) -> tuple[Any, Any]:
    """(o [1, total, HV, V], final states [N, HV, K, V]) of the gated delta rule, in fp64:
    per token, q and k l2-normalised, state decayed by exp(g), the value's prediction
    error times beta written back along k, output read along q."""
    torch = _torch()
    t = x["tokens"]
    hv = x["v"].shape[2]
    n = x["v"].shape[1] // t

    def per_seq(name: str) -> Any:
        z = x[name][0].double()
        z = z.repeat_interleave(hv // z.shape[1], 1) if z.dim() == 3 and name != "v" else z
        return z.reshape(n, t, *z.shape[1:])

    q, k, v = per_seq("q"), per_seq("k"), per_seq("v")
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6) * x["scale"]
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    g = x["g"][0].double().reshape(n, t, hv)
    beta = x["beta"][0].double().reshape(n, t, hv)
    h = h0.double().clone()
    outs = []
    for i in range(t):
        h = h * torch.exp(g[:, i])[..., None, None]
        err = v[:, i] - torch.einsum("nhkv,nhk->nhv", h, k[:, i])
        h = h + k[:, i][..., None] * (err * beta[:, i][..., None])[..., None, :]
        outs.append(torch.einsum("nhkv,nhk->nhv", h, q[:, i]))
    o = torch.stack(outs, 1).reshape(1, n * t, hv, -1)
    return o.to(x["v"].dtype), h.float()


def _pool_reference(x: Inputs) -> Outputs:
    idx = x["state_idx"].long()
    o, h = _gdn_steps(x, x["state_kv"][idx])
    state = x["state_kv"].clone()
    state[idx] = h
    return {"o": o, "state": state}


def _sigmoid_reference(x: Inputs) -> Outputs:
    """The fused-gating launcher computes g and beta from ``a``, ``b`` in fp32 itself
    (beta never rounded to bf16): the reference does the same in fp64."""
    torch = _torch()
    xd = x["a"].double() + x["dt_bias"].double()
    g = -torch.exp(x["A_log"].double()) * torch.nn.functional.softplus(xd)
    return _pool_reference(dict(x, g=g[None], beta=torch.sigmoid(x["b"].double())[None]))


def _sigmoid_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    values = dict(x, initial_state_source=x["state_kv"], initial_state_indices=x["state_idx"])
    values.pop("scale")  # the launcher's default, k.shape[-1] ** -0.5, as the engine passes
    o = call_by_name(mod.fused_sigmoid_gating_delta_rule_update, values)
    return {"o": o.reshape(x["v"].shape), "state": x["state_kv"]}


def _update_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    values = dict(x, initial_state_source=x["state_kv"], initial_state_indices=x["state_idx"])
    o = call_by_name(mod.fused_recurrent_gated_delta_rule_update_fwd, values)
    return {"o": o.reshape(x["v"].shape), "state": x["state_kv"]}


def _vllm_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    vk = _vk_layout(mod)
    state = x["state_vk"] if vk else x["state_kv"]
    values = dict(x, initial_state=state, ssm_state_indices=x["state_idx"])
    values["inplace_final_state"] = True
    o, _ = call_by_name(mod.fused_recurrent_gated_delta_rule_fwd, values)
    return {"o": o.reshape(x["v"].shape), "state": state.transpose(-1, -2) if vk else state}


def _seq_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """SGLang's plain ``fused_recurrent_gated_delta_rule_fwd``: one state per sequence,
    gathered from the pool, the final states returned (``output_final_state``)."""
    x = _decode_inputs(shape, gen, device)
    x["initial_state"] = x["state_kv"][x["state_idx"].long()].contiguous()
    x["output_final_state"] = True
    return x


def _seq_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    o, final = call_by_name(mod.fused_recurrent_gated_delta_rule_fwd, x)
    return {"o": o.reshape(x["v"].shape), "state": final}


def _seq_reference(x: Inputs) -> Outputs:
    o, h = _gdn_steps(x, x["initial_state"])
    return {"o": o, "state": h}


_DECODE_SHAPES: tuple[Shape, ...] = (
    {"name": "qwen3-next-decode-b32", "seqs": 32, "h": 16, "hv": 32},
    {"name": "qwen3-next-decode-b128", "seqs": 128, "h": 16, "hv": 32},
    {"name": "qwen3-next-tp4-decode-b256", "seqs": 256, "h": 4, "hv": 8},
    {"name": "qwen3-next-decode-b1", "seqs": 1, "h": 16, "hv": 32},
    {"name": "qwen3-next-tp2-mtp3", "seqs": 16, "tokens": 4, "h": 8, "hv": 16},
)


def _decode_random(r: random.Random) -> Shape:
    h = r.choice([2, 4])
    return {
        "name": "random",
        "seqs": r.choice([1, 3, 6]),
        "tokens": r.choice([1, 1, 2]),
        "h": h,
        "hv": h * r.choice([1, 2]),
    }


_GDN_TOL = {"o": (1e-3, 1.6e-2), "state": (2e-4, 2e-3)}
_GDN_WHY = (
    "fp32 recurrence (one decay, two 128-long dot products per token and head) against an "
    "fp64 reference: states within a few fp32 ulps of values ~1 (exp and l2-norm rounding); "
    "the bf16 output (~0.05: q is l2-normalised and scaled by 128^-0.5) two bf16 ulps "
    "relative plus a 1e-3 floor for values near 0"
)

_SG_FLA = "python/sglang/srt/layers/attention/fla/"
_VL_FLA = "vllm/model_executor/layers/fla/ops/"

GDN_SIGMOID_DECODE = Spec(
    name="sglang_gdn_fused_sigmoid_gating_decode",
    launcher="fused_sigmoid_gating_delta_rule_update",
    rows=tuple(
        ("sglang", s, _SG_FLA + "fused_sigmoid_gating_recurrent.py")
        for s in ("4637970d", "738ebfd3", "f7de9375")
    ),
    shapes=_DECODE_SHAPES,
    random_shape=_decode_random,
    make_inputs=_decode_inputs,
    call=_sigmoid_call,
    reference=_sigmoid_reference,
    mutated=("state_kv",),
    tolerance=_GDN_TOL,
    tolerance_why=_GDN_WHY,
)

GDN_UPDATE_DECODE = Spec(
    name="sglang_gdn_recurrent_update_decode",
    launcher="fused_recurrent_gated_delta_rule_update_fwd",
    rows=(("sglang", "3451fc32", _SG_FLA + "fused_recurrent.py"),),
    shapes=_DECODE_SHAPES,
    random_shape=_decode_random,
    make_inputs=_decode_inputs,
    call=_update_call,
    reference=_pool_reference,
    mutated=("state_kv",),
    tolerance=_GDN_TOL,
    tolerance_why=_GDN_WHY,
)

GDN_RECURRENT_VLLM = Spec(
    name="vllm_gdn_fused_recurrent_decode",
    launcher="fused_recurrent_gated_delta_rule_fwd",
    rows=tuple(("vllm", s, _VL_FLA + "fused_recurrent.py") for s in ("22dffca9", "82405807")),
    shapes=tuple(s for s in _DECODE_SHAPES if "tokens" not in s),
    random_shape=lambda r: {**_decode_random(r), "tokens": 1},
    make_inputs=_decode_inputs,
    call=_vllm_call,
    reference=_pool_reference,
    mutated=("state_kv", "state_vk"),
    tolerance=_GDN_TOL,
    tolerance_why=_GDN_WHY,
)

GDN_RECURRENT_SGLANG = Spec(
    name="sglang_gdn_fused_recurrent_fwd",
    launcher="fused_recurrent_gated_delta_rule_fwd",
    rows=(("sglang", "81449b4b", _SG_FLA + "fused_recurrent.py"),),
    shapes=_DECODE_SHAPES,
    random_shape=_decode_random,
    make_inputs=_seq_inputs,
    call=_seq_call,
    reference=_seq_reference,
    tolerance=_GDN_TOL,
    tolerance_why=_GDN_WHY,
)

SPECS: tuple[Spec, ...] = (
    GDN_SIGMOID_DECODE,
    GDN_UPDATE_DECODE,
    GDN_RECURRENT_VLLM,
    GDN_RECURRENT_SGLANG,
)


# --- causal depthwise conv1d (width 4) before the GDN layer: prefill (varlen) and decode ---


def _act_dtype(device: Any) -> Any:
    """bf16 as served; fp16 on the CPU interpreter, whose bf16 arithmetic is wrong (a
    ``tl.store`` of fp32 into a bf16 pointer and bf16 ``tl.dot`` give garbage there), unless
    ``COMMIT_EXEC_CPU_BF16=1`` asks for bf16 there too: the runner's ``COMMIT_EXEC_CPU_PATCH``
    corrects those two, and 13 of 14 FLA/Mamba rows then pass at bf16 on the CPU; bf16
    registers elsewhere stay wrong in the interpreter (SGLang's causal conv1d, whose spec passes
    at bf16 on the H100, gives inf there), so a bf16 miss on the CPU is only a hint."""
    torch = _torch()
    if getattr(device, "type", str(device)) == "cuda" or os.environ.get("COMMIT_EXEC_CPU_BF16"):
        return torch.bfloat16
    return torch.float16


def _conv_pool(shape: Shape, gen: Any, device: Any, batch: int) -> dict[str, Any]:
    torch = _torch()
    dim, slots, dt = shape["dim"], 2 * batch + 1, _act_dtype(device)
    idx = torch.randperm(slots, generator=_cpu_gen(gen, device))[:batch].to(device)
    return {
        "weight": (torch.randn(dim, 4, generator=gen, device=device) * 0.5).to(dt),
        "bias": None,  # Qwen3-Next's conv has no bias
        "conv_states": torch.randn(slots, dim, 3, generator=gen, device=device).to(dt),
        "cache_indices": idx.to(torch.int32),
        "activation": "silu",
    }


def _conv_fn_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """A prefill batch: ``lens`` new tokens per request, the projections channel-last
    (``(dim, tokens)`` with stride 1 along dim, as the backend's transpose hands them);
    every other request continues a chunked prefill (``has_initial_state``)."""
    torch = _torch()
    lens = list(shape["lens"])
    total = sum(lens)
    x = _conv_pool(shape, gen, device, len(lens))
    starts = [0]
    for n in lens:
        starts.append(starts[-1] + n)
    x.update(
        x=torch.randn(total, shape["dim"], generator=gen, device=device).to(x["weight"].dtype).T,
        query_start_loc=torch.tensor(starts, dtype=torch.int32, device=device),
        seq_lens_cpu=lens,
        has_initial_state=torch.tensor(
            [i % 2 == 1 for i in range(len(lens))], dtype=torch.bool, device=device
        ),
    )
    return x


def _conv_fn_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    out = call_by_name(mod.causal_conv1d_fn, x)
    return {"out": out, "conv_states": x["conv_states"]}


def _conv_window(w: Any, xs: Any) -> Any:
    """SiLU of the width-4 causal conv over ``xs`` (dim, 3 + L) -> (dim, L), fp64."""
    torch = _torch()
    length = xs.shape[1] - 3
    acc = sum(w[:, j : j + 1] * xs[:, j : j + length] for j in range(4))
    return torch.nn.functional.silu(acc)


def _conv_fn_reference(x: Inputs) -> Outputs:
    torch = _torch()
    w, xt = x["weight"].double(), x["x"].double()
    out = torch.empty_like(xt)
    states = x["conv_states"].clone()
    starts = x["query_start_loc"].tolist()
    for i, slot in enumerate(x["cache_indices"].long().tolist()):
        prev = (
            states[slot].double()
            if bool(x["has_initial_state"][i])
            else xt.new_zeros(xt.shape[0], 3)
        )
        xs = torch.cat([prev, xt[:, starts[i] : starts[i + 1]]], 1)
        out[:, starts[i] : starts[i + 1]] = _conv_window(w, xs)
        states[slot] = xs[:, -3:].to(states.dtype)
    return {"out": out.to(x["x"].dtype), "conv_states": states}


def _conv_update_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """A decode batch: one token per request (``(batch, dim)``), or ``tokens`` speculative
    ones (``(batch, dim, tokens)``), each request's window in the pool."""
    torch = _torch()
    b, t = shape["batch"], shape.get("tokens", 1)
    x = _conv_pool(shape, gen, device, b)
    dims = (b, shape["dim"]) if t == 1 else (b, shape["dim"], t)
    x["x"] = torch.randn(*dims, generator=gen, device=device).to(x["weight"].dtype)
    x["conv_state"] = x.pop("conv_states")
    x["conv_state_indices"] = x.pop("cache_indices")
    return x


def _conv_update_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    out = call_by_name(mod.causal_conv1d_update, x)
    return {"out": out, "conv_state": x["conv_state"]}


def _conv_update_reference(x: Inputs) -> Outputs:
    torch = _torch()
    xt = x["x"].double()
    xt = xt[..., None] if xt.dim() == 2 else xt
    idx = x["conv_state_indices"].long()
    xs = torch.cat([x["conv_state"][idx].double(), xt], 2)
    out = torch.stack([_conv_window(x["weight"].double(), s) for s in xs])
    states = x["conv_state"].clone()
    states[idx] = xs[..., -3:].to(states.dtype)
    return {"out": out.reshape(x["x"].shape).to(x["x"].dtype), "conv_state": states}


_CONV_TOL = {"out": (2e-2, 2e-2), "conv_state": (0.0, 0.0), "conv_states": (0.0, 0.0)}
_CONV_WHY = (
    "four bf16 products summed in fp32 then SiLU, a bf16 output: one bf16 ulp plus an "
    "absolute floor; the windows written back are copies of bf16 inputs, so exact"
)
_SG_CONV = "python/sglang/srt/layers/attention/mamba/causal_conv1d_triton.py"

CAUSAL_CONV1D_FN = Spec(
    name="sglang_causal_conv1d_fn",
    launcher="causal_conv1d_fn",
    rows=(("sglang", "bd7eb020", _SG_CONV), ("sglang", "3451fc32", _SG_CONV)),
    shapes=(
        {"name": "qwen3-next-prefill-1x4k", "dim": 8192, "lens": (4096,)},
        {"name": "qwen3-next-prefill-mixed", "dim": 8192, "lens": (1000, 17, 3000, 200)},
        {"name": "qwen3-next-tp4-prefill-8x512", "dim": 2048, "lens": (512,) * 8},
        {"name": "nemotron-h-8b-prefill-2k", "dim": 10240, "lens": (2048, 5)},
    ),
    random_shape=lambda r: {
        "name": "random",
        "dim": r.choice([256, 768]),
        "lens": tuple(r.choice([1, 2, 9, 40]) for _ in range(r.choice([1, 3]))),
    },
    make_inputs=_conv_fn_inputs,
    call=_conv_fn_call,
    reference=_conv_fn_reference,
    mutated=("conv_states",),
    tolerance=_CONV_TOL,
    tolerance_why=_CONV_WHY,
)

CAUSAL_CONV1D_UPDATE = Spec(
    name="sglang_causal_conv1d_update",
    launcher="causal_conv1d_update",
    rows=(("sglang", "38ae22e0", _SG_CONV),),
    shapes=(
        {"name": "qwen3-next-decode-b32", "dim": 8192, "batch": 32},
        {"name": "qwen3-next-decode-b256", "dim": 8192, "batch": 256},
        {"name": "qwen3-next-tp4-decode-b64", "dim": 2048, "batch": 64},
        {"name": "nemotron-h-8b-decode-b128", "dim": 10240, "batch": 128},
        {"name": "qwen3-next-mtp-b16x4", "dim": 8192, "batch": 16, "tokens": 4},
    ),
    random_shape=lambda r: {
        "name": "random",
        "dim": r.choice([256, 768, 2048]),
        "batch": r.choice([1, 5, 12]),
        "tokens": r.choice([1, 1, 2]),
    },
    make_inputs=_conv_update_inputs,
    call=_conv_update_call,
    reference=_conv_update_reference,
    mutated=("conv_state",),
    tolerance=_CONV_TOL,
    tolerance_why=_CONV_WHY,
)

SPECS = (*SPECS, CAUSAL_CONV1D_FN, CAUSAL_CONV1D_UPDATE)
