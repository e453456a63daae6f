"""Spec for SGLang's whole KDA chunked prefill, ``fla/kda.py``'s ``chunk_kda`` (issue 35),
for the commits that change it through its helpers rather than through a kernel of its
own file (the census calls them host-side only in ``kda.py``):

* eb3da9c1 moves the store of the final recurrent state into ``chunk_delta_h``'s kernel:
  before it, ``chunk_kda`` returned the final states and the call site (the Kimi-Linear
  attention backend) gathered the pool's states first and scattered the new ones after;
  after it, the launcher reads and writes the pool by index;
* 03a87068 replaces the three intra-chunk launches (``chunk_kda_scaled_dot_kkt_fwd``,
  ``solve_tril``, ``recompute_w_u_fwd``) with one fused ``chunk_intra.chunk_kda_fwd_intra``.

Both sides run upstream's own helpers at their commit (``siblings``); ``op.py`` and
``utils.py`` stay the loader's shims (``exp``, ``exp2``, ``gather``, the device flags).
Each side is called as its commit's call site calls it (``KimiLinearAttnBackend``:
``use_qk_l2norm_in_kernel=True``, ``cu_seqlens`` the batch's query start offsets, the
state pool and the requests' slots). Oracle: the before side (no torch reference of the
whole chunked pass in the repo's tests at these commits; a recurrent one was checked by
hand on the CPU, see RESULTS, issue 35 (35f)).

Shapes: Kimi-Linear-48B-A3B, 32 KDA heads of 128 (keys and values) at tensor parallel 1,
2 and 4, chunked prefill batches of the sizes its server schedules.
"""

from __future__ import annotations

import inspect
import random
from pathlib import Path
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .fla import _GDN_TOL, _GDN_WHY, _act_dtype, _cpu_gen, _decode_inputs, _torch, _vk_layout
from .fla_chunk import _chunk_tables

_SG_FLA = "python/sglang/srt/layers/attention/fla"
_SG_KDA = f"{_SG_FLA}/kda.py"
_DELTA_H = "sglang.srt.layers.attention.fla.chunk_delta_h"
_KIMI = "Kimi-Linear-48B-A3B (32 KDA heads of 128)"


def _kda_chunk_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """A varlen prefill batch as the backend hands it to ``chunk_kda``: q, k, v raw (the
    kernel l2-normalises q and k), the per-channel log decay g before its chunk cumsum
    (fp32, negative: ``-softplus``, Kimi's gate), beta a sigmoid, and a state pool of
    ``2n + 1`` slots (fp32, as the Mamba pool stores them) of which the ``n`` requests use
    random distinct ones; the pool is given in both layouts (``[slots, H, K, V]`` and
    ``[slots, H, V, K]``): each side uses the one its ``chunk_delta_h`` stores."""
    torch = _torch()
    lens, h, d = list(shape["lens"]), shape["h"], shape.get("head", 128)
    t, n, dt = sum(lens), len(lens), _act_dtype(device)

    def rnd(*s: int) -> Any:
        return torch.randn(*s, generator=gen, device=device)

    tables = _chunk_tables(lens, device)
    slots = 2 * n + 1
    state = rnd(slots, h, d, d) * 0.05
    return {
        "q": rnd(1, t, h, d).to(dt),
        "k": rnd(1, t, h, d).to(dt),
        "v": rnd(1, t, h, d).to(dt),
        "g": -torch.nn.functional.softplus(rnd(1, t, h, d) - 2.0) * 0.3,
        "beta": torch.sigmoid(rnd(1, t, h)).to(dt),
        "scale": d**-0.5,
        "cu_seqlens": tables["cu_seqlens"].to(torch.int32),
        "state_kv": state,
        "state_vk": state.transpose(-1, -2).contiguous(),
        "state_idx": torch.randperm(slots, generator=_cpu_gen(gen, device))[:n]
        .to(device)
        .to(torch.int32),
        "use_qk_l2norm_in_kernel": True,
    }


def _kda_chunk_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    """Pool side (eb3da9c1 and later): ``chunk_kda`` reads and writes the pool by index.
    Gather side (before eb3da9c1): the backend's gather of the requests' states and its
    scatter of the returned final states are part of the call, as the engine did. The
    pool's layout is the one this side's ``chunk_delta_h`` documents; compared: the output
    and the whole pool (in ``[slots, H, K, V]``)."""
    fn = mod.chunk_kda
    vk = "H, V, K)" in Path(mod._ce_sibling(_DELTA_H).__file__).read_text()
    pool, idx = (x["state_vk"] if vk else x["state_kv"]), x["state_idx"]
    if "initial_state_indices" in inspect.signature(fn).parameters:
        o = call_by_name(fn, dict(x, initial_state=pool, initial_state_indices=idx))
    else:
        values = dict(x, initial_state=pool[idx.long()].contiguous(), output_final_state=True)
        o, final = call_by_name(fn, values)
        pool[idx.long()] = final
    return {"o": o, "state": pool.transpose(-1, -2) if vk else pool}


KDA_CHUNK = Spec(
    name="sglang_kda_chunk",
    launcher="chunk_kda",
    rows=(("sglang", "eb3da9c1", _SG_KDA), ("sglang", "03a87068", _SG_KDA)),
    siblings={
        "": tuple(
            f"{_SG_FLA}/{name}.py"
            for name in (
                "chunk_delta_h",
                "chunk_intra",
                "chunk_intra_token_parallel",
                "cumsum",
                "solve_tril",
                "l2norm",
                "index",
            )
        )
    },
    shapes=(
        {
            "name": "kimi-linear-prefill-4k",
            "source": _KIMI + ", one 4k prompt",
            "lens": (4096,),
            "h": 32,
        },
        {
            "name": "kimi-linear-prefill-mixed",
            "source": _KIMI + ", a chunked-prefill batch of four prompts",
            "lens": (1500, 37, 2048, 300),
            "h": 32,
        },
        {
            "name": "kimi-linear-tp4-prefill-8x1k",
            "source": _KIMI + " at TP 4 (8 heads), eight 1k prompts",
            "lens": (1024,) * 8,
            "h": 8,
        },
        {
            "name": "kimi-linear-tp2-short",
            "source": _KIMI + " at TP 2 (16 heads), three short prompts",
            "lens": (64, 100, 7),
            "h": 16,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "lens": tuple(r.choice([1, 50, 64, 130]) for _ in range(r.choice([1, 2]))),
        "h": r.choice([1, 2]),
        "head": 128,
    },
    make_inputs=_kda_chunk_inputs,
    call=_kda_chunk_call,
    # chunk_gla_fwd_o_gk writes o into v's memory (``o=v``): v is cloned before every call
    mutated=("state_kv", "state_vk", "v"),
    not_runnable={
        "eb3da9c1": (
            "broken_at_sha",
            "the after side cannot run as committed: chunk_kda_fwd passes output_final_state "
            "to chunk_gated_delta_rule_fwd_h, whose signature at this commit no longer has "
            "it (TypeError), and chunk_kda omits it; fixed upstream a day later (2f66b067)",
        )
    },
    tolerance={"o": (2e-3, 2e-2), "state": (4e-2, 2e-2)},
    tolerance_why="the chain of bf16 tensor-core dots of the chunked pass (intra-chunk A, "
    "its inverse, w/u, the state pass, the output) in fp32, bf16 output: 03a87068 sums the "
    "intra-chunk products in another order, which bf16 rounding of w and u carries to a "
    "few ulps of o: two bf16 ulps relative and a floor of 2e-3 (|o| of l2-normalised q "
    "against these states stays below ~0.1, so the floor is ~2% of the largest output, "
    "not a blanket pass); the fp32 final state takes fla_chunk's KDA bound on h (4e-2 "
    "absolute: bf16-rounded undecayed new values enter it through k, independent of its "
    "size)",
)


# --- vLLM fla/ops/kda.py fused_recurrent_kda (82405807): KDA decode, the state as [V, K] ---

_VL_FLA = "vllm/model_executor/layers/fla/ops"


def _kda_decode_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """A decode batch as ``fla._decode_inputs`` builds it (fp32 states in a pool twice the
    batch, random slots, bf16 q/k/v, beta a sigmoid), with KDA's per-channel log decay:
    ``g = -exp(A_log) * softplus(a + dt_bias)`` for each of the K channels of a head
    (Kimi-Linear's ``fused_kda_gate``), and as many key as value heads."""
    torch = _torch()
    x = _decode_inputs({**shape, "hv": shape["h"]}, gen, device)
    total, h, d = x["v"].shape[1], shape["h"], x["v"].shape[-1]
    a = torch.randn(total, h, d, generator=gen, device=device)
    dt_bias = torch.randn(h, d, generator=gen, device=device) * 0.5
    g = -torch.exp(x["A_log"])[:, None] * torch.nn.functional.softplus(a + dt_bias)
    x.update(g=g[None].contiguous())
    return x


def _kda_decode_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    """Each side called as vLLM's ``KimiDeltaAttention`` decode calls it: the whole pool
    with the requests' slots, the final state written in place; each side gets the pool in
    the layout its ``fused_recurrent`` kernel (a sibling) stores; compared as [K, V]."""
    vk = _vk_layout(mod._ce_sibling(_VL_FUSED_RECURRENT))
    state = x["state_vk"] if vk else x["state_kv"]
    values = dict(x, initial_state=state, ssm_state_indices=x["state_idx"])
    o, _ = call_by_name(mod.fused_recurrent_kda, values)
    return {"o": o.reshape(x["v"].shape), "state": state.transpose(-1, -2) if vk else state}


def _kda_decode_reference(x: Inputs) -> Outputs:
    """The KDA recurrence per token in fp64: q and k l2-normalised, the state decayed per
    key channel by exp(g), the value's prediction error times beta written back along k,
    the output read along q (scaled)."""
    torch = _torch()
    t = x["tokens"]
    n = x["v"].shape[1] // t

    def per_seq(name: str) -> Any:
        z = x[name][0].double()
        return z.reshape(n, t, *z.shape[1:])

    q, k, v, g, beta = (per_seq(name) for name in ("q", "k", "v", "g", "beta"))
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6) * x["scale"]
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    idx = x["state_idx"].long()
    h = x["state_kv"][idx].double()
    outs = []
    for i in range(t):
        h = h * torch.exp(g[:, i])[..., None]
        err = v[:, i] - torch.einsum("nhkv,nhk->nhv", h, k[:, i])
        h = h + k[:, i][..., None] * (err * beta[:, i][..., None])[..., None, :]
        outs.append(torch.einsum("nhkv,nhk->nhv", h, q[:, i]))
    state = x["state_kv"].clone()
    state[idx] = h.float()
    o = torch.stack(outs, 1).reshape(1, n * t, *x["v"].shape[2:])
    return {"o": o.to(x["v"].dtype), "state": state}


_VL_FUSED_RECURRENT = "vllm.model_executor.layers.fla.ops.fused_recurrent"

KDA_DECODE_VLLM = Spec(
    name="vllm_kda_fused_recurrent_decode",
    launcher="fused_recurrent_kda",
    rows=(("vllm", "82405807", f"{_VL_FLA}/kda.py"),),
    siblings={"": (f"{_VL_FLA}/fused_recurrent.py",)},
    shapes=(
        {"name": "kimi-linear-decode-b32", "source": _KIMI + ", decode", "seqs": 32, "h": 32},
        {"name": "kimi-linear-decode-b128", "source": _KIMI + ", decode", "seqs": 128, "h": 32},
        {
            "name": "kimi-linear-tp4-decode-b256",
            "source": _KIMI + " at TP 4 (8 heads), decode",
            "seqs": 256,
            "h": 8,
        },
        {"name": "kimi-linear-decode-b1", "source": _KIMI + ", decode", "seqs": 1, "h": 32},
    ),
    random_shape=lambda r: {"name": "random", "seqs": r.choice([1, 3, 6]), "h": r.choice([1, 2])},
    make_inputs=_kda_decode_inputs,
    call=_kda_decode_call,
    reference=_kda_decode_reference,
    mutated=("state_kv", "state_vk"),
    tolerance=_GDN_TOL,
    tolerance_why="as the GDN decode specs (fla._GDN_WHY), the decay now per key channel: "
    + _GDN_WHY,
)

SPECS: tuple[Spec, ...] = (KDA_CHUNK, KDA_DECODE_VLLM)

_ = random
