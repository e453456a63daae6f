"""Specs for the KDA (Kimi Delta Attention, Kimi-Linear) rows of the linear-attention census
(issue 35): SGLang's ``recompute_w_u_fwd`` of ``fla/kda.py``, the WY step with per-channel
gates.

Shapes name their source. Kimi-Linear-48B-A3B: 32 KDA heads of 128 (keys and values), at
tensor parallel 1, 2 and 4; chunk 64. Per-channel log decays are cumulative within each
64-token chunk, as ``chunk_local_cumsum`` hands them on.
"""

from __future__ import annotations

import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .fla import _act_dtype, _chunk_tables, _torch


def _kda_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """A varlen prefill batch: k l2-normalised, v, beta (sigmoid), gk (per-channel
    chunk-local cumulative log decay, fp32) and A (per chunk unit lower-triangular with
    small entries, as the inverse of ``I + strict_tril(beta k k^T decay)``; bf16 as the
    intra-chunk kernel stores it)."""
    torch = _torch()
    lens, h, d = list(shape["lens"]), shape["h"], shape.get("head", 128)
    t, dt = sum(lens), _act_dtype(device)
    x: Inputs = _chunk_tables(lens, device)

    def rnd(*s: int) -> Any:
        return torch.randn(*s, generator=gen, device=device)

    step = -torch.nn.functional.softplus(rnd(1, t, h, d) - 2.0) * 0.3
    gk = torch.empty_like(step)
    pos = torch.zeros(t, dtype=torch.int64)
    cu = x["cu_seqlens"].tolist()
    for s in range(len(cu) - 1):
        pos[cu[s] : cu[s + 1]] = torch.arange(cu[s + 1] - cu[s]) % 64
        for c in range(cu[s], cu[s + 1], 64):
            e = min(c + 64, cu[s + 1])
            gk[:, c:e] = step[:, c:e].cumsum(1)
    col = torch.arange(64)
    keep = (col[None, :] < pos[:, None]).to(device)[None, :, None, :]
    diag = (col[None, :] == pos[:, None]).to(device)[None, :, None, :]
    x.update(
        k=torch.nn.functional.normalize(rnd(1, t, h, d), dim=-1).to(dt),
        v=rnd(1, t, h, d).to(dt),
        beta=torch.sigmoid(rnd(1, t, h)).to(dt),
        gk=gk,
        A=(rnd(1, t, h, 64) * 0.05 * keep + diag.float()).to(dt),
        q=None,
    )
    return x


def _kda_wu_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    w, u, _, kg = call_by_name(mod.recompute_w_u_fwd, x)
    return {"w": w, "u": u, "kg": kg}


def _kda_wu_reference(x: Inputs) -> Outputs:
    """Per chunk: u = A (beta v), w = A (beta k exp(gk)), the scaled operands rounded to the
    input dtype before the product; kg = k exp(gk_last - gk) (the key decayed to the
    chunk's end)."""
    torch = _torch()
    dt = x["k"].dtype
    k, v, beta = x["k"][0].float(), x["v"][0].float(), x["beta"][0].float()
    gk, a_mat = x["gk"][0].float(), x["A"][0].float()
    w, u, kg = torch.empty_like(k), torch.empty_like(v), torch.empty_like(k)
    cu = x["cu_seqlens"].tolist()
    for s in range(len(cu) - 1):
        for a in range(cu[s], cu[s + 1], 64):
            b = min(a + 64, cu[s + 1])
            m = a_mat[a:b, :, : b - a].transpose(0, 1)  # [H, c, c]
            vb = (v[a:b] * beta[a:b, :, None]).to(dt).float().transpose(0, 1)
            kb = (k[a:b] * beta[a:b, :, None] * torch.exp(gk[a:b])).to(dt).float()
            u[a:b] = (m @ vb).transpose(0, 1)
            w[a:b] = (m @ kb.transpose(0, 1)).transpose(0, 1)
            kg[a:b] = k[a:b] * torch.exp(gk[b - 1 : b] - gk[a:b])
    return {"w": w[None].to(dt), "u": u[None].to(dt), "kg": kg[None].to(dt)}


_SG_KDA = "python/sglang/srt/layers/attention/fla/kda.py"

KDA_RECOMPUTE_W_U = Spec(
    name="sglang_kda_recompute_w_u_fwd",
    launcher="recompute_w_u_fwd",
    rows=(("sglang", "48daa831", _SG_KDA), ("sglang", "a61a14f4", _SG_KDA)),
    shapes=(
        {"name": "kimi-linear-prefill-4k", "lens": (4096,), "h": 32},
        {"name": "kimi-linear-prefill-mixed", "lens": (1500, 37, 2048, 300), "h": 32},
        {"name": "kimi-linear-tp4-prefill-8x1k", "lens": (1024,) * 8, "h": 8},
        {"name": "kimi-linear-tp2-prefill-16k", "lens": (16384,), "h": 16},
    ),
    random_shape=lambda r: {
        "name": "random",
        "lens": tuple(r.choice([1, 50, 64, 130]) for _ in range(r.choice([1, 2]))),
        "h": r.choice([1, 2]),
        "head": r.choice([64, 128]),
    },
    make_inputs=_kda_inputs,
    call=_kda_wu_call,
    reference=_kda_wu_reference,
    tolerance={"w": (2e-3, 2e-2), "u": (1e-2, 2e-2), "kg": (2e-3, 2e-2)},
    tolerance_why="64-long bf16 tensor-core dots in fp32 (the scaled operands rounded to "
    "bf16 as in the kernel; a61a14f4 moves the dot to tf32, whose 10-bit mantissa stays "
    "below bf16's output rounding), bf16 outputs: two bf16 ulps with floors scaled to each "
    "output (w, kg ~ 0.1, u ~ 1)",
)

SPECS: tuple[Spec, ...] = (KDA_RECOMPUTE_W_U,)

_ = random
