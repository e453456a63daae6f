"""Specs for the KDA (Kimi Delta Attention, Kimi-Linear) rows of the linear-attention census
(issue 35): SGLang's ``recompute_w_u_fwd`` of ``fla/kda.py``, the WY step with per-channel
gates.

Shapes name their source. Kimi-Linear-48B-A3B: 32 KDA heads of 128 (keys and values), at
tensor parallel 1, 2 and 4; chunk 64. Per-channel log decays are cumulative within each
64-token chunk, as ``chunk_local_cumsum`` hands them on.
"""

from __future__ import annotations

import inspect
import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .fla import _act_dtype, _torch
from .fla_chunk import _chunk_tables


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


# --- SGLang chunk_intra.chunk_kda_fwd_intra: the intra-chunk step of KDA's chunked prefill
# (Aqk, the WY inverse Akk, then kda.recompute_w_u_fwd), with its siblings at each side's
# commit: chunk_intra_token_parallel.py (the diagonal blocks), kda.py (imported inside the
# function, at call time) and index.py (prepare_chunk_indices).

_SG_FLA = "python/sglang/srt/layers/attention/fla"
_SG_INTRA = f"{_SG_FLA}/chunk_intra.py"


def _kda_intra_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """``_kda_inputs`` plus q (l2-normalised, as Kimi-Linear's q after its short conv and
    norm) and the scale 1/sqrt(head); A is what this step computes, so it is dropped."""
    torch = _torch()
    x = _kda_inputs(shape, gen, device)
    del x["A"]
    q = torch.randn(*x["k"].shape, generator=gen, device=device)
    x.update(q=torch.nn.functional.normalize(q, dim=-1).to(x["k"].dtype))
    x.update(scale=shape.get("head", 128) ** -0.5, chunk_size=64)
    # a61a14f4's call site (kda.chunk_kda_fwd): both fusions on when the inter-solve grid,
    # chunks x heads, is at most 256 CTAs
    x.update(fuse_diagonal=len(x["chunk_indices"]) * shape["h"] <= 256)
    x["fuse_recompute"] = x["fuse_diagonal"]
    return x


def _kda_intra_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    """Each side called as its own commit's ``chunk_kda_fwd`` calls it: 48daa831 made the
    call site hand over the chunk indices it already has (and ``recompute_w_u_fwd`` take
    them), so they are passed exactly where this side's ``kda.recompute_w_u_fwd`` accepts
    them; before that the function built them itself. Compared: what the call site keeps
    (w, u, kg, Aqk)."""
    kda = mod._ce_sibling("sglang.srt.layers.attention.fla.kda")
    values = dict(x)
    if "chunk_indices" not in inspect.signature(kda.recompute_w_u_fwd).parameters:
        del values["chunk_indices"]
    w, u, _, kg, aqk, _ = call_by_name(mod.chunk_kda_fwd_intra, values)
    return {"w": w, "u": u, "kg": kg, "Aqk": aqk}


KDA_FWD_INTRA = Spec(
    name="sglang_kda_chunk_fwd_intra",
    launcher="chunk_kda_fwd_intra",
    rows=(("sglang", "48daa831", _SG_INTRA), ("sglang", "a61a14f4", _SG_INTRA)),
    siblings={
        "": (
            f"{_SG_FLA}/kda.py",
            f"{_SG_FLA}/chunk_intra_token_parallel.py",
            f"{_SG_FLA}/index.py",
        )
    },
    shapes=(
        {"name": "kimi-linear-prefill-4k", "lens": (4096,), "h": 32},
        {"name": "kimi-linear-prefill-mixed", "lens": (1500, 37, 2048, 300), "h": 32},
        {"name": "kimi-linear-tp4-prefill-8x1k", "lens": (1024,) * 8, "h": 8},
        {"name": "kimi-linear-tp4-short", "lens": (64, 100, 7), "h": 8},
    ),
    random_shape=lambda r: {
        "name": "random",
        "lens": tuple(r.choice([1, 50, 64, 130]) for _ in range(r.choice([1, 2]))),
        "h": r.choice([1, 2]),
        "head": 128,
    },
    make_inputs=_kda_intra_inputs,
    call=_kda_intra_call,
    tolerance={"w": (2e-3, 2e-2), "u": (1e-2, 2e-2), "kg": (2e-3, 2e-2), "Aqk": (1e-2, 2e-2)},
    tolerance_why="as sglang_kda_recompute_w_u_fwd for w, u, kg (64-long dots in fp32, bf16 "
    "outputs: two ulps with floors scaled to each output); Aqk (q k^T decayed and scaled, "
    "|x| < 1) gets u's bound: a61a14f4 folds the diagonal blocks into the fused kernel, "
    "another summation order of the same fp32 dots",
)


def _kda_kkt_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    x = _kda_inputs(shape, gen, device)
    q = torch.randn(x["k"].shape, generator=gen, device=device)
    x.update(
        q=torch.nn.functional.normalize(q, dim=-1).to(x["k"].dtype),
        scale=x["k"].shape[-1] ** -0.5,
        output_dtype=torch.float32,
        chunk_size=64,
    )
    return x


def _kda_kkt_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    a, aqk = call_by_name(mod.chunk_kda_scaled_dot_kkt_fwd, x)
    return {"A": a, "Aqk": aqk}


def _kda_kkt_reference(x: Inputs) -> Outputs:
    """Per chunk, with per-channel decays: A[t, s] = beta_t sum_k k_tk k_sk exp(g_tk - g_sk)
    for s < t, Aqk[t, s] = scale sum_k q_tk k_sk exp(g_tk - g_sk) for s <= t (fp32)."""
    torch = _torch()
    q, k, g = x["q"][0].float(), x["k"][0].float(), x["gk"][0].float()
    beta = x["beta"][0].float()
    a_out = torch.zeros(k.shape[0], k.shape[1], 64, device=k.device)
    q_out = torch.zeros_like(a_out)
    cu = x["cu_seqlens"].tolist()
    for s in range(len(cu) - 1):
        for a in range(cu[s], cu[s + 1], 64):
            b = min(a + 64, cu[s + 1])
            gg = g[a:b].transpose(0, 1)  # [H, c, K]
            decay = torch.exp(gg[:, :, None, :] - gg[:, None, :, :])  # [H, t, s, K]
            kk, qq = k[a:b].transpose(0, 1), q[a:b].transpose(0, 1)
            kkt = (kk[:, :, None, :] * kk[:, None, :, :] * decay).sum(-1)
            qkt = (qq[:, :, None, :] * kk[:, None, :, :] * decay).sum(-1)
            kkt = torch.tril(kkt, -1) * beta[a:b].transpose(0, 1)[..., None]
            a_out[a:b, :, : b - a] = kkt.transpose(0, 1)
            q_out[a:b, :, : b - a] = (torch.tril(qkt) * x["scale"]).transpose(0, 1)
    return {"A": a_out[None], "Aqk": q_out[None]}


KDA_SCALED_DOT_KKT = Spec(
    name="vllm_kda_scaled_dot_kkt",
    launcher="chunk_kda_scaled_dot_kkt_fwd",
    rows=(("vllm", "cb10b7e8", "vllm/model_executor/layers/fla/ops/kda.py"),),
    shapes=KDA_RECOMPUTE_W_U.shapes,
    random_shape=KDA_RECOMPUTE_W_U.random_shape,
    make_inputs=_kda_kkt_inputs,
    call=_kda_kkt_call,
    reference=_kda_kkt_reference,
    tolerance={"A": (1e-3, 2e-2), "Aqk": (1e-3, 2e-2)},
    tolerance_why="fp32 outputs of 128-long products of l2-normalised bf16 keys (terms "
    "~1/128) with fp32 decays; the off-diagonal 16-blocks go through tensor-core dots whose "
    "bf16 rounding of the decayed operands gives ~2^-8 * sqrt(128) / 128 ~ 2e-4 absolute: "
    "a 1e-3 floor (entries reach ~0.3) and 2% relative",
)

SPECS: tuple[Spec, ...] = (KDA_RECOMPUTE_W_U, KDA_SCALED_DOT_KKT, KDA_FWD_INTRA)

_ = random
