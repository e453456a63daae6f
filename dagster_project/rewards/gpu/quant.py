"""fp8 (e4m3) quantisation arithmetic, written once for numpy arrays and torch tensors.

The GPU harness quantises inputs with torch on the device; the CPU tests check the very
same functions on numpy arrays. Only operations both libraries spell alike are used
(``abs``, ``/``, ``*``, ``.reshape``, ``.clip``); the few that differ (max over axes,
repeat, pad) go through the small dispatchers below.

Scales follow the runtimes' dynamic quantisation: ``scale = amax(|x|) / 448`` over the
group (whole tensor, one row, a ``1 x group_k`` slice of a row, or a
``block_n x block_k`` weight tile), so the group's largest value maps to the top of the
e4m3 range; ``x_q = clip(x / scale, ±448)`` and ``x ≈ x_q * scale``. Scales are floored
at ``MIN_SCALE`` so an all-zero group does not divide by zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

FP8_E4M3_MAX = 448.0
MIN_SCALE = 1e-12


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _amax(x: Any, axes: Sequence[int]) -> Any:
    """max(|x|) over ``axes``, keeping them (size 1)."""
    a = abs(x)
    if _is_torch(x):
        return a.amax(dim=tuple(axes), keepdim=True)
    return a.max(axis=tuple(axes), keepdims=True)


def _repeat(x: Any, times: int, axis: int) -> Any:
    if _is_torch(x):
        return x.repeat_interleave(times, dim=axis)
    import numpy as np

    return np.repeat(x, times, axis=axis)


def _pad_last2(x: Any, rows: int, cols: int) -> Any:
    """Zero-pad the last two axes by ``rows`` / ``cols`` at the end."""
    if not rows and not cols:
        return x
    if _is_torch(x):
        import torch.nn.functional as F

        return F.pad(x, (0, cols, 0, rows))
    import numpy as np

    width = [(0, 0)] * (x.ndim - 2) + [(0, rows), (0, cols)]
    return np.pad(x, width)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def scale_per_tensor(x: Any) -> Any:
    """One scale for the whole tensor, shaped ``(1,)``."""
    return (_amax(x, range(x.ndim)).reshape(1) / FP8_E4M3_MAX).clip(min=MIN_SCALE)


def scale_per_row(x: Any) -> Any:
    """One scale per row of the last axis (per token, or per output channel of a weight
    stored ``[..., n, k]``), shaped ``[..., rows, 1]``."""
    return (_amax(x, [-1]) / FP8_E4M3_MAX).clip(min=MIN_SCALE)


def scale_groups(x: Any, group: int) -> Any:
    """One scale per ``group`` consecutive elements of the last axis: ``[..., ceil(k/g)]``
    (activations under block quantisation: per token and per ``group_k`` slice)."""
    *lead, k = x.shape
    kb = _cdiv(k, group)
    xp = _pad_last2(x.reshape(*lead, 1, k), 0, kb * group - k)
    s = _amax(xp.reshape(*lead, kb, group), [-1]).reshape(*lead, kb)
    return (s / FP8_E4M3_MAX).clip(min=MIN_SCALE)


def scale_blocks(x: Any, block: tuple[int, int]) -> Any:
    """One scale per ``block_n x block_k`` tile of the last two axes: ``[..., nb, kb]``."""
    bn, bk = block
    *lead, n, k = x.shape
    nb, kb = _cdiv(n, bn), _cdiv(k, bk)
    xp = _pad_last2(x, nb * bn - n, kb * bk - k)
    tiles = xp.reshape(*lead, nb, bn, kb, bk)
    s = _amax(tiles, [-3, -1]).reshape(*lead, nb, kb)
    return (s / FP8_E4M3_MAX).clip(min=MIN_SCALE)


def expand_groups(s: Any, group: int, k: int) -> Any:
    """Group scales ``[..., kb]`` back to one per element ``[..., k]``."""
    return _repeat(s, group, -1)[..., :k]


def expand_blocks(s: Any, block: tuple[int, int], n: int, k: int) -> Any:
    """Tile scales ``[..., nb, kb]`` back to one per element ``[..., n, k]``."""
    bn, bk = block
    return _repeat(_repeat(s, bn, -2), bk, -1)[..., :n, :k]


def quantise(x: Any, scale_full: Any) -> Any:
    """``clip(x / scale, ±448)`` with ``scale_full`` broadcastable to ``x`` (not yet cast:
    the caller casts to ``torch.float8_e4m3fn``; numpy keeps the float values)."""
    return (x / scale_full).clip(-FP8_E4M3_MAX, FP8_E4M3_MAX)


def dequantise(q: Any, scale_full: Any) -> Any:
    return q * scale_full
