"""References of the weight-quantised GEMMs and GEMVs: INT4 (W4A16 and W4A8), FP8 with
DeepGEMM-style block scales, and NVFP4.

Storage conventions (the op specs in ``dagster_project/sim/ops.py`` and every template's
dequantisation agree on them):

* int4: eight 4-bit codes per int32 word along K, code ``j`` of word ``k // 8`` in bits
  ``4j .. 4j+3`` (low nibble first); offset-8, the weight is ``code - 8`` in ``[-8, 7]``.
* fp4 (NVFP4): two e2m1 codes per byte along K, the even ``k`` in the low nibble; an e2m1
  code is a sign (bit 3) over the magnitudes ``{0, .5, 1, 1.5, 2, 3, 4, 6}``; one e4m3 scale
  factor per 16 consecutive ``k`` of a row (``sf[row, k // 16]``).
* fp8 blockwise: one fp32 scale per 1x128 block of the activation (``a_scale[m, k // 128]``)
  and per 128x128 block of the weight (``w_scale[n // 128, k // 128]``).

Each setup fills ``e.d`` by the names the CUDA launch wrapper and the Triton entry point use
and returns ``ref(pristine) -> {output name: fp32 tensor}``, decoded from the pristine
packed inputs. Output buffers start as NaN, so an element no kernel writes fails the
finiteness check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: e2m1 code -> value, codes 0..15 (bit 3 is the sign).
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
#: Root mean square of an e2m1 value over uniformly random codes.
_E2M1_RMS = (sum(v * v for v in _E2M1) / 16) ** 0.5
#: Root mean square of an offset-8 int4 weight over uniformly random codes.
_INT4_RMS = (sum((q - 8) ** 2 for q in range(16)) / 16) ** 0.5
#: Root mean square of a scale drawn uniformly from [0.5, 2] (NVFP4 scale factors).
_SF_RMS = ((2.0**3 - 0.5**3) / (3 * 1.5)) ** 0.5
#: Root mean square of ``a · a_scale`` for int8 ``a`` uniform in [-127, 127] and
#: ``a_scale`` uniform in [0.5, 1.5] / 127.
_A8_RMS = (1 / 3) ** 0.5 * (13 / 12) ** 0.5


def _nan_out(e: Any, *shape: int, dtype: Any = None) -> Any:
    """An output buffer (the activation dtype unless given), every element NaN until written."""
    dtype = e.act if dtype is None else dtype
    return e.torch.full(shape, float("nan"), device=e.dev, dtype=dtype)


def _cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for positive ints."""
    return -(-a // b)


def _per_k(scale: Any, block: int, k: int) -> Any:
    """Scales stored one per ``block`` consecutive k, spread to every k: ``[..., k]`` fp64."""
    return scale.double().repeat_interleave(block, dim=-1)[..., :k]


# ---------------------------------------------------------------------------- int4


def _int4_pack(e: Any, n: int, k: int) -> Any:
    """Random int4 codes (0..15) packed eight to an int32 word along K: ``[n, k // 8]``."""
    torch = e.torch
    codes = torch.randint(0, 16, (n, k // 8, 8), device=e.dev, dtype=torch.int64)
    shifts = 4 * torch.arange(8, device=e.dev, dtype=torch.int64)
    words = (codes << shifts).sum(-1)
    words = torch.where(words >= 2**31, words - 2**32, words)  # the bit pattern as int32
    return words.to(torch.int32)


def _int4_values(e: Any, w_q: Any) -> Any:
    """Offset-8 weights ``code - 8`` of packed int4 words ``[n, k // 8]``: ``[n, k]`` fp64."""
    shifts = 4 * e.torch.arange(8, device=w_q.device, dtype=e.torch.int64)
    codes = (w_q.long()[..., None] >> shifts) & 0xF
    return (codes - 8).reshape(w_q.shape[0], -1).double()


def _w4a16(e: Any, x_name: str, out_name: str, rows: int, n: int, k: int) -> Callable[..., Any]:
    """Shared body of ``int4_gemm`` / ``int4_gemv``: fp16 activations ``[rows, K]``, int4
    weights ``w_q[N, K/8]`` with fp16 scales ``w_scale[N, K/128]`` (one per 128-wide group),
    ``out = x · ((q - 8) · scale)ᵀ`` in fp16."""
    torch, d = e.torch, e.d
    d[x_name] = e.rn(rows, k, dtype=torch.float16)
    d["w_q"] = _int4_pack(e, n, k)
    group_scale = (0.5 + torch.rand(n, k // 128, device=e.dev)) / (_INT4_RMS * k**0.5)
    d["w_scale"] = group_scale.to(torch.float16)
    d[out_name] = _nan_out(e, rows, n, dtype=torch.float16)
    e.outs = [out_name]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        w = _int4_values(e, x["w_q"]) * _per_k(x["w_scale"], 128, k)
        return {out_name: (x[x_name].double() @ w.T).float()}

    return ref


def _int4_gemm_setup(c: dict[str, Any], e: Any) -> Callable[[dict[str, Any]], Any]:
    """``int4_gemm`` (W4A16, GPTQ/AWQ-style): ``c[m, n] = Σ_k a[m, k] · (q[n, k] - 8) ·
    w_scale[n, k // 128]``, ``a[M, K]`` fp16, ``c[M, N]`` fp16."""
    s = c["shape"]
    return _w4a16(e, "a", "c", s["M"], s["N"], s["K"])


def _int4_gemv_setup(c: dict[str, Any], e: Any) -> Callable[[dict[str, Any]], Any]:
    """``int4_gemv`` (W4A16 decode): ``y[b, n] = Σ_k x[b, k] · (q[n, k] - 8) ·
    w_scale[n, k // 128]``; the Triton entry point calls the packed weight ``w``, the CUDA
    wrapper ``w_q``."""
    s = c["shape"]
    e.aliases["w"] = "w_q"
    return _w4a16(e, "x", "y", s["B"], s["N"], s["K"])


def _w4a8_gemm_setup(c: dict[str, Any], e: Any) -> Callable[[dict[str, Any]], Any]:
    """``w4a8_gemm`` (QServe-style W4A8): ``c[m, n] = a_scale[m] · w_scale[n] · Σ_k a[m, k] ·
    (q[n, k] - 8)`` with int8 activations, int4 weights widened to int8 and an exact integer
    sum; ``c[M, N]`` fp16."""
    s = c["shape"]
    torch, dev, d = e.torch, e.dev, e.d
    M, N, K = s["M"], s["N"], s["K"]
    d["a"] = torch.randint(-127, 128, (M, K), device=dev, dtype=torch.int8)
    d["a_scale"] = (0.5 + torch.rand(M, device=dev)) / 127
    d["w_q"] = _int4_pack(e, N, K)
    d["w_scale"] = (0.5 + torch.rand(N, device=dev)) / (_INT4_RMS * _A8_RMS * K**0.5)
    d["c"] = _nan_out(e, M, N, dtype=torch.float16)
    e.outs = ["c"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        acc = x["a"].double() @ _int4_values(e, x["w_q"]).T
        return {"c": (acc * x["a_scale"].double()[:, None] * x["w_scale"].double()).float()}

    return ref


# ---------------------------------------------------------------------------- fp8


def _fp8_blockwise_gemm_setup(c: dict[str, Any], e: Any) -> Callable[[dict[str, Any]], Any]:
    """``fp8_blockwise_gemm`` (DeepGEMM-style): ``c[m, n] = Σ_kb a_scale[m, kb] ·
    w_scale[n // 128, kb] · Σ_{k in kb} a[m, k] · w[n, k]`` over the 128-wide K blocks ``kb``,
    e4m3 operands, ``a_scale[M, ceil(K/128)]``, ``w_scale[ceil(N/128), ceil(K/128)]`` fp32,
    ``c[M, N]`` bf16. The scales differ from block to block, so a kernel that applies one
    block's scale to another's partial sum is caught."""
    s = c["shape"]
    torch, dev, d = e.torch, e.dev, e.d
    M, N, K = s["M"], s["N"], s["K"]
    kb, nb = _cdiv(K, 128), _cdiv(N, 128)
    d["a"], d["w"] = e.rn(M, K, dtype=e.f8), e.rn(N, K, dtype=e.f8)
    d["a_scale"] = 0.25 + 1.5 * torch.rand(M, kb, device=dev)
    d["w_scale"] = (0.25 + 1.5 * torch.rand(nb, kb, device=dev)) / K**0.5
    d["c"] = _nan_out(e, M, N, dtype=torch.bfloat16)
    e.outs = ["c"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        a = x["a"].double() * _per_k(x["a_scale"], 128, K)
        w_scale = x["w_scale"].double().repeat_interleave(128, dim=0)[:N]
        w = x["w"].double() * _per_k(w_scale, 128, K)
        return {"c": (a @ w.T).float()}

    return ref


# ---------------------------------------------------------------------------- fp4


def _fp4_pack(e: Any, rows: int, k: int) -> Any:
    """Random e2m1 codes packed two to a byte along K (even k low): ``[rows, k // 2]`` uint8."""
    torch = e.torch
    codes = torch.randint(0, 16, (rows, k // 2, 2), device=e.dev, dtype=torch.uint8)
    return codes[..., 0] | (codes[..., 1] << 4)


def _fp4_scales(e: Any, rows: int, k: int) -> Any:
    """NVFP4 scale factors, one e4m3 per 16 k: ``[rows, k // 16]`` in [0.5, 2]."""
    return (0.5 + 1.5 * e.torch.rand(rows, k // 16, device=e.dev)).to(e.f8)


def _fp4_values(e: Any, packed: Any, sf: Any) -> Any:
    """Dequantised NVFP4 ``e2m1(code) · sf[row, k // 16]`` of ``packed[rows, k // 2]``:
    ``[rows, k]`` fp64."""
    torch = e.torch
    codes = torch.stack((packed & 0xF, packed >> 4), dim=-1).reshape(packed.shape[0], -1)
    table = torch.tensor(_E2M1, device=packed.device, dtype=torch.float64)
    k = codes.shape[1]
    return table[codes.long()] * _per_k(sf.float(), 16, k)


def _fp4_gemm_setup(c: dict[str, Any], e: Any) -> Callable[[dict[str, Any]], Any]:
    """``fp4_gemm`` (NVFP4 W4A4): ``c = alpha · Σ_k (a · sa)[m, k] · (w · sw)[n, k]`` with
    e2m1 operands ``a[M, K/2]``, ``w[N, K/2]`` (two codes a byte) and one e4m3 scale factor
    per 16 k (``a_sf[M, K/16]``, ``w_sf[N, K/16]``), ``alpha[1]`` fp32, ``c[M, N]`` bf16."""
    s = c["shape"]
    torch, dev, d = e.torch, e.dev, e.d
    M, N, K = s["M"], s["N"], s["K"]
    d["a"], d["a_sf"] = _fp4_pack(e, M, K), _fp4_scales(e, M, K)
    d["w"], d["w_sf"] = _fp4_pack(e, N, K), _fp4_scales(e, N, K)
    d["alpha"] = torch.tensor([1.0 / ((_SF_RMS * _E2M1_RMS) ** 2 * K**0.5)], device=dev)
    d["c"] = _nan_out(e, M, N, dtype=torch.bfloat16)
    e.outs = ["c"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        a, w = _fp4_values(e, x["a"], x["a_sf"]), _fp4_values(e, x["w"], x["w_sf"])
        return {"c": ((a @ w.T) * float(x["alpha"])).float()}

    return ref


def _fp4_gemv_setup(c: dict[str, Any], e: Any) -> Callable[[dict[str, Any]], Any]:
    """``fp4_gemv`` (NVFP4 weight-only decode): ``y[b, n] = Σ_k x[b, k] · e2m1(w[n, k]) ·
    w_sf[n, k // 16]``, ``x[B, K]`` fp16, ``w[N, K/2]`` two codes a byte, ``w_sf[N, K/16]``
    e4m3, ``y[B, N]`` fp16."""
    s = c["shape"]
    torch, d = e.torch, e.d
    B, N, K = s["B"], s["N"], s["K"]
    d["x"] = e.rn(B, K, dtype=torch.float16, scale=1.0 / (_SF_RMS * _E2M1_RMS * K**0.5))
    d["w"], d["w_sf"] = _fp4_pack(e, N, K), _fp4_scales(e, N, K)
    d["y"] = _nan_out(e, B, N, dtype=torch.float16)
    e.outs = ["y"]

    def ref(x: dict[str, Any]) -> dict[str, Any]:
        return {"y": (x["x"].double() @ _fp4_values(e, x["w"], x["w_sf"]).T).float()}

    return ref


SETUPS: dict[str, Callable[[dict[str, Any], Any], Any]] = {
    "int4_gemm": _int4_gemm_setup,
    "int4_gemv": _int4_gemv_setup,
    "w4a8_gemm": _w4a8_gemm_setup,
    "fp8_blockwise_gemm": _fp8_blockwise_gemm_setup,
    "fp4_gemm": _fp4_gemm_setup,
    "fp4_gemv": _fp4_gemv_setup,
}
