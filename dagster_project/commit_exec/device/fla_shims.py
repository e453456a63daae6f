"""Stand-ins for the helpers that the FLA (flash-linear-attention) files of vLLM and SGLang
import from their sibling modules ``fla/op.py``, ``fla/index.py`` and ``fla/utils.py``.

Those siblings are stubbed by the loader (only the changed file is imported), but the
kernels call a few of their names inside ``@triton.jit`` code or on the launch path, where
an inert stub fails. The loader's ``SHIMS`` points those names here. Each is our own
writing of the helper's documented behaviour:

* ``exp``, ``exp2``, ``log``, ``gather``: Triton's own, and ``safe_exp(x)``: ``exp`` of
  ``x`` where ``x <= 0`` and 0 elsewhere (jit helpers, so they live in a real file: Triton
  reads their source);
* ``prepare_chunk_indices(cu_seqlens, chunk_size)``: one ``(sequence, chunk)`` pair per
  chunk of a varlen batch; ``prepare_chunk_offsets``: each sequence's first chunk number.

The engines compute chunk indices once per batch (their helpers cache on the tensor), not
once per layer, so these cache on the ``cu_seqlens`` tensor too: a launcher that builds
them itself is then timed without that per-batch host work, as in serving.

Imported by the loader only when a file asks for one of these names (torch and Triton are
present then).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

#: Cache of chunk tables by (helper, tensor identity, chunk size); values keep the tensor
#: alive so an identity is never reused while its entry lives.
_CACHE: dict[tuple[str, int, int], tuple[Any, Any]] = {}
_CACHE_MAX = 512


@triton.jit
def exp(x):
    """Triton's ``exp`` (the helpers' default without ``FLA_USE_FAST_OPS``); a jit wrapper
    rather than ``tl.exp`` itself, which the CPU interpreter only patches under ``tl``."""
    return tl.exp(x)


@triton.jit
def exp2(x):
    """Triton's ``exp2``, wrapped as ``exp``."""
    return tl.exp2(x)


@triton.jit
def log(x):
    """Triton's natural ``log``, wrapped as ``exp``."""
    return tl.log(x)


@triton.jit
def gather(src, index, axis: tl.constexpr):
    """Triton's ``gather`` along ``axis``, wrapped as ``exp``."""
    return tl.gather(src, index, axis)


@triton.jit
def safe_exp(x):
    """``exp(x)`` for ``x <= 0``, else 0 (masked-out decays contribute nothing)."""
    return tl.exp(tl.where(x <= 0, x, float("-inf")))


def _cached(kind: str, cu_seqlens: Any, chunk_size: int, build: Any) -> Any:
    key = (kind, id(cu_seqlens), int(chunk_size))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is cu_seqlens:
        return hit[1]
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.clear()
    value = build()
    _CACHE[key] = (cu_seqlens, value)
    return value


def prepare_lens(cu_seqlens: Any) -> Any:
    """Each sequence's length from the cumulative offsets."""
    return cu_seqlens[1:] - cu_seqlens[:-1]


def prepare_chunk_indices(cu_seqlens: Any, chunk_size: int) -> Any:
    """``[n_chunks, 2]``: for every chunk of every sequence, (sequence index, chunk index
    within the sequence), on the device and dtype of ``cu_seqlens``."""

    def build() -> Any:
        counts = (-(-prepare_lens(cu_seqlens).cpu() // chunk_size)).tolist()
        pairs = [(s, c) for s, n in enumerate(counts) for c in range(int(n))]
        return torch.tensor(pairs, dtype=torch.int64).reshape(-1, 2).to(cu_seqlens)

    return _cached("indices", cu_seqlens, chunk_size, build)


def prepare_chunk_offsets(cu_seqlens: Any, chunk_size: int) -> Any:
    """``[n_seqs + 1]``: the running count of chunks before each sequence (0 first)."""

    def build() -> Any:
        counts = -(-prepare_lens(cu_seqlens) // chunk_size)
        return torch.cat([counts.new_zeros(1), counts]).cumsum(-1).to(cu_seqlens)

    return _cached("offsets", cu_seqlens, chunk_size, build)
