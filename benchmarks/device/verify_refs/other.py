"""References of the grouped MoE GEMM, the Mamba-1 selective scan and the NHWC 3x3 conv.

Each setup fills ``e.d`` by the names the CUDA launch wrapper and the Triton entry point use
and returns ``ref(pristine) -> {output name: fp32 tensor}``. Output buffers a CUDA wrapper
writes start as NaN, so a row or pixel a kernel never writes fails the finiteness check
instead of passing on stale memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _nan_out(e: Any, *shape: int) -> Any:
    """An output buffer in the activation dtype, every element NaN until written."""
    return e.torch.full(shape, float("nan"), device=e.dev, dtype=e.act)


def _expert_offsets(e: Any, rows: int, experts: int) -> Any:
    """Monotone ``[E+1]`` int32 row offsets from 0 to ``rows``: rows spread unevenly over the
    experts, about a quarter of them (and, when rows are few, most) left empty."""
    torch, dev = e.torch, e.dev
    weight = torch.rand(experts, device=dev) + 0.1
    weight[torch.rand(experts, device=dev) < 0.25] = 0.0
    if not bool((weight > 0).any()):
        weight[0] = 1.0
    pick = torch.multinomial(weight, rows, replacement=True)
    counts = torch.bincount(pick, minlength=experts)
    offsets = torch.zeros(experts + 1, device=dev, dtype=torch.int64)
    offsets[1:] = counts.cumsum(0)
    return offsets.to(torch.int32)


def _moe_grouped_gemm_setup(c: dict[str, Any], e: Any) -> Callable[[dict[str, Any]], Any]:
    """Grouped GEMM of the fused MoE: the rows of ``x_perm[T*k, K]`` are grouped by expert
    (expert ``i`` owns rows ``expert_offsets[i]:expert_offsets[i+1]``) and each row is
    multiplied by its expert's weight, ``y_perm[r] = x_perm[r] @ w[e(r)].T``, ``w[E, N, K]``."""
    s = c["shape"]
    torch, d, rn = e.torch, e.d, e.rn
    T, k, E, N, K = s["T"], s["k"], s["E"], s["N"], s["K"]
    M = T * k
    d["x_perm"] = rn(M, K)
    d["w"] = rn(E, N, K, scale=K**-0.5)
    d["expert_offsets"] = _expert_offsets(e, M, E)
    d["y_perm"] = _nan_out(e, M, N)
    e.outs = ["y_perm"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        a, w = x["x_perm"].float(), x["w"].float()
        bounds = x["expert_offsets"].tolist()
        y = torch.zeros(M, N, device=a.device)
        for i in range(E):
            lo, hi = bounds[i], bounds[i + 1]
            if hi > lo:
                y[lo:hi] = a[lo:hi] @ w[i].T
        return {"y_perm": y}

    return ref


def _mamba_scan_setup(c: dict[str, Any], e: Any) -> Callable[[dict[str, Any]], Any]:
    """Mamba-1 selective scan over the whole sequence from a zero state, fused with the skip
    and the gate: ``h_t = exp(delta_t * A) * h_{t-1} + delta_t * B_t * u_t`` (per channel
    ``d`` and state ``n``, ``h_{-1} = 0``), ``y_t = (C_t . h_t + D * u_t) * silu(z_t)``."""
    s = c["shape"]
    torch, dev, act, F, d, rn = e.torch, e.dev, e.act, e.F, e.d, e.rn
    B, L, Din, N = s["B"], s["L"], s["Din"], s["N"]
    d["u"] = rn(B, L, Din)
    d["delta"] = (0.05 + 0.1 * torch.rand(B, L, Din, device=dev)).to(act)
    d["A"] = -torch.rand(Din, N, device=dev) - 0.1
    d["Bm"], d["Cm"] = rn(B, L, N), rn(B, L, N)
    d["D"] = torch.randn(Din, device=dev)
    d["z"] = rn(B, L, Din)
    d["y"] = _nan_out(e, B, L, Din)
    e.outs = ["y"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        u, dl, a = x["u"].float(), x["delta"].float(), x["A"]
        bm, cm = x["Bm"].float(), x["Cm"].float()
        dlu = dl * u
        h = torch.zeros(B, Din, N, device=u.device)
        y = torch.empty(B, L, Din, device=u.device)
        for t in range(L):
            h = torch.exp(dl[:, t, :, None] * a) * h + dlu[:, t, :, None] * bm[:, t, None, :]
            y[:, t] = (h * cm[:, t, None, :]).sum(-1)
        y = y + x["D"] * u
        return {"y": y * F.silu(x["z"].float())}

    return ref


def _conv2d_nhwc_setup(c: dict[str, Any], e: Any) -> Callable[[dict[str, Any]], Any]:
    """2-D convolution (cross-correlation) in NHWC, stride 1, zero "same" padding (R//2,
    S//2), plus bias: ``y[n,p,q,o] = bias[o] + sum_{r,s,c} x[n,p+r-1,q+s-1,c] * w[o,r,s,c]``
    for the 3x3 window, so ``y[N, H, W, Cout]`` keeps the input's height and width."""
    s = c["shape"]
    F, d, rn = e.F, e.d, e.rn
    N, H, W, Cin, Cout, R, S = (s[k] for k in ("N", "H", "W", "Cin", "Cout", "R", "S"))
    d["x"] = rn(N, H, W, Cin)
    d["w"] = rn(Cout, R, S, Cin, scale=(R * S * Cin) ** -0.5)
    d["bias"] = rn(Cout, scale=0.5)
    d["y"] = _nan_out(e, N, H, W, Cout)
    e.outs = ["y"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        xi = x["x"].float().permute(0, 3, 1, 2)  # N, Cin, H, W
        wi = x["w"].float().permute(0, 3, 1, 2)  # Cout, Cin, R, S
        y = F.conv2d(xi, wi, x["bias"].float(), padding=(R // 2, S // 2))
        return {"y": y.permute(0, 2, 3, 1)}

    return ref


SETUPS: dict[str, Callable[[dict[str, Any], Any], Any]] = {
    "moe_grouped_gemm": _moe_grouped_gemm_setup,
    "mamba_scan": _mamba_scan_setup,
    "conv2d_nhwc": _conv2d_nhwc_setup,
}
