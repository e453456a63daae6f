"""References of the attention ops ``mla_decode``, ``tree_attn`` and ``fused_qkv_rope``.

Each setup fills ``e.d`` by the names the CUDA launch wrapper and the Triton entry point use
and returns ``ref(pristine) -> {output name: fp32 tensor}``. Output buffers a CUDA wrapper
writes start as NaN, so an element a kernel never writes fails the finiteness check instead
of passing on stale memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: MLA latent width (512 compressed KV columns, then 64 rotary columns) and value width.
_MLA_DK = 576
_MLA_DV = 512
#: MLA softmax scale: 1/sqrt(qk_nope + qk_rope) = 1/sqrt(128 + 64), as DeepSeek-V2/V3.
_MLA_SCALE = 192**-0.5


def _nan(e: Any, *shape: int, dtype: Any = None) -> Any:
    """An output buffer (activation dtype by default), every element NaN until written."""
    dtype = e.act if dtype is None else dtype
    return e.torch.full(shape, float("nan"), device=e.dev, dtype=dtype)


def heads_first_gqa(x: dict[str, Any], hq: int, hkv: int) -> tuple[Any, Any, Any]:
    """``q, k, v`` of ``x`` (``[B, S, H, D]``) as fp32 ``[B, H, S, D]``, each KV head repeated
    for the ``hq // hkv`` query heads that share it (grouped-query attention), so one
    ``scaled_dot_product_attention`` call is the reference of every attention op here and in
    ``sim_verify_rungs.py``."""
    g = hq // hkv
    q = x["q"].float().transpose(1, 2)
    k = x["k"].float().transpose(1, 2).repeat_interleave(g, 1)
    v = x["v"].float().transpose(1, 2).repeat_interleave(g, 1)
    return q, k, v


def _seq_lens(e: Any, batch: int, cap: int) -> Any:
    """``[B]`` int32 sequence lengths in ``[max(1, cap // 2), cap]``, the last one ``cap`` so
    the whole capacity of the block table is used at least once."""
    torch = e.torch
    lens = torch.randint(max(1, cap // 2), cap + 1, (batch,), device=e.dev)
    lens[-1] = cap
    return lens.to(torch.int32)


def _mla_decode_setup(c: dict[str, Any], e: Any) -> Callable[[dict[str, Any]], Any]:
    """DeepSeek absorbed-MLA decode over a paged latent cache ``kv_cache[blocks, page, 576]``
    (one latent shared by every head): for query ``q[b, s, h]`` (``Sq`` query tokens, all
    seeing the whole sequence, flattened with the heads to ``Sq*Hq`` rows as the kernels
    index them), ``out[b, s*Hq+h] = softmax_j(q·C[b, j] / sqrt(192)) · C[b, j, :512]`` over
    the ``seq_lens[b]`` cached tokens ``C[b]`` that ``block_table[b]`` maps.

    ``q`` and ``out`` are bf16; the cache is bf16, or e4m3 for the fp8 dtype."""
    s = c["shape"]
    torch, dev, d, rn = e.torch, e.dev, e.d, e.rn
    B, Hq, Sq, Skv, page = s["B"], s["Hq"], s["Sq"], s["Skv"], s["page"]
    H = Sq * Hq
    nb = -(-Skv // page)
    kv_dt = e.f8 if c["dtype"] == "fp8" else torch.bfloat16
    d["q"] = rn(B, Sq, Hq, _MLA_DK, dtype=torch.bfloat16)
    d["kv_cache"] = rn(B * nb, page, _MLA_DK, dtype=kv_dt)
    d["block_table"] = (
        torch.randperm(B * nb, device=dev, dtype=torch.int32).view(B, nb).contiguous()
    )
    d["seq_lens"] = _seq_lens(e, B, Skv)
    d["out"] = _nan(e, B, H, _MLA_DV, dtype=torch.bfloat16)
    e.outs = ["out"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        lat = x["kv_cache"].float()[x["block_table"].long()].reshape(B, nb * page, _MLA_DK)
        q = x["q"].float().reshape(B, H, _MLA_DK)
        sc = torch.einsum("bhc,bjc->bhj", q, lat) * _MLA_SCALE
        pos = torch.arange(nb * page, device=dev)[None, None, :]
        sc = sc.masked_fill(pos >= x["seq_lens"].long()[:, None, None], float("-inf"))
        return {"out": torch.einsum("bhj,bjc->bhc", sc.softmax(-1), lat[..., :_MLA_DV])}

    return ref


def _tree_mask(e: Any, batch: int, tree: int) -> Any:
    """``[B, Tt, Tt]`` bool ancestor masks of random draft trees: node 0 is the root, node
    ``i > 0`` hangs under a random earlier node, and ``mask[b, i, j]`` is set when ``j`` is
    ``i`` or one of its ancestors (the diagonal is always set, the upper triangle never)."""
    torch, dev = e.torch, e.dev
    masks = []
    for _ in range(batch):
        m = torch.eye(tree, device=dev, dtype=torch.bool)
        for i in range(1, tree):
            parent = int(torch.randint(0, i, (1,)).item())
            m[i] |= m[parent]
        masks.append(m)
    return torch.stack(masks).contiguous()


def _tree_attn_setup(c: dict[str, Any], e: Any) -> Callable[[dict[str, Any]], Any]:
    """Speculative-decoding tree verification: ``Tt`` draft tokens ``q[B, Tt, Hq, D]`` attend
    (GQA, scale 1/sqrt(D)) to all ``Skv`` prefix keys and, among the ``Tt`` tree keys that
    follow them in ``k/v[B, Skv+Tt, Hkv, D]``, to those ``tree_mask[b, t]`` marks (the token's
    ancestors and itself): ``out[b, t, h] = softmax(q·kᵀ/sqrt(D) + mask) · v``."""
    s = c["shape"]
    torch, dev, F, d, rn = e.torch, e.dev, e.F, e.d, e.rn
    B, Tt, Skv, Hq, Hkv, D = s["B"], s["Tt"], s["Skv"], s["Hq"], s["Hkv"], s["D"]
    S = Skv + Tt
    d["q"], d["k"], d["v"] = rn(B, Tt, Hq, D), rn(B, S, Hkv, D), rn(B, S, Hkv, D)
    d["tree_mask"] = _tree_mask(e, B, Tt)
    d["out"] = _nan(e, B, Tt, Hq, D)
    e.outs = ["out"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        q, k, v = heads_first_gqa(x, Hq, Hkv)  # B, Hq, Tt|S, D
        prefix = torch.ones(B, Tt, Skv, device=dev, dtype=torch.bool)
        mask = torch.cat([prefix, x["tree_mask"].bool()], -1)[:, None]  # B, 1, Tt, S
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return {"out": o.transpose(1, 2)}

    return ref


def _fused_qkv_rope_setup(c: dict[str, Any], e: Any) -> Callable[[dict[str, Any]], Any]:
    """QKV projection with rotary embedding in the epilogue: ``qkv = x · w_qkvᵀ``
    (``[T, (Hq+2*Hkv)*D]``: q heads, then k heads, then v heads), then inside every q and k
    head each adjacent column pair ``(2i, 2i+1)`` is rotated by token ``t``'s angle ``i``,
    ``cos_sin[t] = [cos(θ_0..θ_{D/2-1}), sin(θ_0..θ_{D/2-1})]``; v is left as projected."""
    s = c["shape"]
    torch, dev, d, rn = e.torch, e.dev, e.d, e.rn
    T, H, Hq, Hkv, D = s["T"], s["H"], s["Hq"], s["Hkv"], s["D"]
    N = (Hq + 2 * Hkv) * D
    rot = (Hq + Hkv) * D
    d["x"] = rn(T, H)
    d["w_qkv"] = rn(N, H, scale=H**-0.5)
    ang = torch.rand(T, D // 2, device=dev) * 6.283185307179586
    d["cos_sin"] = torch.cat([ang.cos(), ang.sin()], -1).to(e.act)
    d["qkv"] = _nan(e, T, N)
    e.outs = ["qkv"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        y = x["x"].double() @ x["w_qkv"].double().T
        cs = x["cos_sin"].double()
        cos, sin = cs[:, None, : D // 2], cs[:, None, D // 2 :]
        pairs = y[:, :rot].reshape(T, rot // D, D // 2, 2)
        x0, x1 = pairs[..., 0], pairs[..., 1]
        turned = torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], -1)
        return {"qkv": torch.cat([turned.reshape(T, rot), y[:, rot:]], -1).float()}

    return ref


SETUPS: dict[str, Callable[[dict[str, Any], Any], Any]] = {
    "mla_decode": _mla_decode_setup,
    "tree_attn": _tree_attn_setup,
    "fused_qkv_rope": _fused_qkv_rope_setup,
}
