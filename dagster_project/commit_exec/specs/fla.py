"""Specs for the linear-attention rows (issue 35): the gated delta rule (GDN) of Qwen3-Next
in vLLM's and SGLang's FLA copies (decode recurrences, the chunked prefill state pass) and
the causal depthwise conv1d in front of it.

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
    state = rnd(slots, hv, d, d) * 0.05
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


_GDN_TOL = {"o": (2e-2, 2e-2), "state": (2e-4, 2e-3)}
_GDN_WHY = (
    "fp32 recurrence (one decay, two 128-long dot products per token and head) against an "
    "fp64 reference: states within a few fp32 ulps of values ~1 (exp and l2-norm rounding); "
    "the bf16 output one bf16 ulp (2^-8 relative) plus an absolute floor for values near 0"
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
