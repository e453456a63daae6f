"""Kernel variant ladders per op family and implementation, with their launch parameters.

A ladder climbs the way an engineer would: level 0 is the naive baseline, then tiled,
vectorised / tensor-core, pipelined, and finally a hardware-specific level with several
alternatives keyed by architecture class (``hopper`` wgmma+TMA, ``blackwell`` TMA unicast,
``ampere`` cp.async / persistent). Each variant names the PTX features it emits; the
feature set may grow with params (``mma="e4m3"`` needs fp8 MMA, ``cluster_m=2`` needs TMA
multicast). Whether a feature is available is the GPU's business (``hardware``).

Parameter spaces are small ordered grids so an agent can hill-climb one dimension at a
time; ``valid`` rejects structurally impossible combinations (an engineer would never
write them), while over-capacity shared memory is *allowed* here and caught as a compile
error, because that is a mistake engineers really make while tuning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from .hardware import GPU
from .ops import OpSpec

Params = dict[str, Any]


def knob(params: Params, *names: str, default: int) -> int:
    """The value of the first of ``names`` that ``params`` sets, else ``default``.

    CUDA and Triton rungs spell one launch knob differently (``BM``/``BLOCK_M``,
    ``stages``/``num_stages``). This is ``params.get(a, params.get(b, default))`` with an
    integer result: a ``get`` whose default is another ``get`` of untyped values reads as
    possibly ``None`` to mypy, which then rejects every arithmetic use of the knob.
    """
    for name in names:
        if name in params:
            value: int = params[name]
            return value
    return default


@dataclass(frozen=True)
class Dim:
    """One tunable launch parameter and its ordered candidate values."""

    name: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Variant:
    """One rung of a ladder.

    ``hw`` says which architecture class the rung is written for ("any" for portable
    rungs); ``features`` are the PTX features the emitted code always uses.
    """

    tag: str
    family: str
    impl: str
    level: int
    title: str
    dims: tuple[Dim, ...]
    features: frozenset[str] = frozenset()
    tensor_cores: bool = False
    hw: str = "any"

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.family, self.impl, self.tag)


def _d(name: str, *values: Any) -> Dim:
    return Dim(name, tuple(values))


_F = frozenset
_MMA = _F({"mma_sync"})
_CPA = _F({"cp_async"})
_CPA_MMA = _F({"cp_async", "mma_sync"})
_TMA = _F({"tma"})
_TMA_MMA = _F({"tma", "mma_sync"})
_HOPPER = _F({"tma", "wgmma", "setmaxnreg"})

# BK placeholders: gemm "BK" values are chosen per storage width by ``param_space``.
_BK = _d("BK", "k1", "k2", "k4")

_CUDA: list[Variant] = [
    # ------------------------------------------------------------------------ gemm
    Variant(
        "v0_naive",
        "gemm",
        "cuda",
        0,
        "one thread per output, fp32 FMA over K straight from global memory",
        (_d("TB", 8, 16, 32),),
    ),
    Variant(
        "v1_smem_tiled",
        "gemm",
        "cuda",
        1,
        "shared-memory tiles with a TM×TM register micro-tile per thread",
        (_d("BM", 32, 64, 128), _d("BN", 32, 64, 128), _d("BK", 8, 16, 32), _d("TM", 4, 8)),
    ),
    Variant(
        "v2_mma_sync",
        "gemm",
        "cuda",
        2,
        "tensor-core mma.sync with ldmatrix fragments, register double buffer",
        (_d("BM", 64, 128, 256), _d("BN", 64, 128, 256), _BK, _d("warps", 4, 8)),
        _MMA,
        True,
    ),
    Variant(
        "v3_cp_async",
        "gemm",
        "cuda",
        3,
        "multi-stage cp.async pipeline, XOR-swizzled smem, optional split-K",
        (
            _d("BM", 64, 128, 256),
            _d("BN", 64, 128, 256),
            _BK,
            _d("warps", 4, 8),
            _d("stages", 2, 3, 4, 5),
            _d("split_k", 1, 2, 4, 8, 16),
        ),
        _CPA_MMA,
        True,
    ),
    Variant(
        "v4_wgmma_tma",
        "gemm",
        "cuda",
        4,
        "TMA + mbarrier producer warp, wgmma consumer warpgroups, setmaxnreg",
        (
            _d("BM", 64, 128, 256),
            _d("BN", 64, 128, 192, 256),
            _d("stages", 2, 3, 4, 5, 6, 7),
            _d("cluster_m", 1, 2),
        ),
        _HOPPER,
        True,
        "hopper",
    ),
    Variant(
        "v4_tma_mma",
        "gemm",
        "cuda",
        4,
        "TMA unicast tile loads into an mbarrier ring feeding mma.sync warps",
        (
            _d("BM", 64, 128),
            _d("BN", 64, 128, 256),
            _BK,
            _d("warps", 4, 8),
            _d("stages", 2, 3, 4, 5),
        ),
        _TMA_MMA,
        True,
        "blackwell",
    ),
    Variant(
        "v4_streamk",
        "gemm",
        "cuda",
        4,
        "persistent stream-K CTAs over a cp.async multistage mma.sync mainloop",
        (
            _d("BM", 64, 128, 256),
            _d("BN", 64, 128, 256),
            _BK,
            _d("warps", 4, 8),
            _d("stages", 2, 3, 4, 5),
        ),
        _CPA_MMA,
        True,
        "ampere",
    ),
    # ------------------------------------------------------------------------ gemv
    Variant(
        "v0_scalar",
        "gemv",
        "cuda",
        0,
        "one thread per output row, scalar strided loads along K",
        (_d("threads", 64, 128, 256),),
    ),
    Variant(
        "v1_warp_row",
        "gemv",
        "cuda",
        1,
        "one warp per output row, coalesced lanes along K, shuffle reduction",
        (_d("warps", 2, 4, 8), _d("unroll", 1, 2, 4)),
    ),
    Variant(
        "v2_vec128",
        "gemv",
        "cuda",
        2,
        "128-bit weight loads with in-register dequant, several rows per warp",
        (_d("warps", 2, 4, 8), _d("vec", 4, 8, 16), _d("rows", 1, 2, 4)),
    ),
    Variant(
        "v3_splitk",
        "gemv",
        "cuda",
        3,
        "split-K across CTAs with fp32 partials and an atomic / second-pass reduce",
        (
            _d("split_k", 2, 4, 8, 16, 32),
            _d("warps", 2, 4, 8),
            _d("vec", 8, 16),
            _d("rows", 1, 2, 4),
        ),
    ),
    Variant(
        "v4_tma_bulk",
        "gemv",
        "cuda",
        4,
        "cp.async.bulk weight slabs into an mbarrier ring, persistent split-K",
        (
            _d("stages", 2, 3, 4, 6),
            _d("chunk", 2048, 4096, 8192),
            _d("warps", 4, 8),
            _d("split_k", 1, 2, 4, 8),
        ),
        _TMA,
        False,
        "blackwell",
    ),
    Variant(
        "v4_cp_async_pipe",
        "gemv",
        "cuda",
        4,
        "cp.async multi-stage weight streaming through shared memory",
        (
            _d("stages", 2, 3, 4),
            _d("chunk", 1024, 2048, 4096),
            _d("warps", 4, 8),
            _d("split_k", 1, 2, 4, 8),
        ),
        _CPA,
        False,
        "ampere",
    ),
    # ------------------------------------------------------------------------ attn_decode
    Variant(
        "v0_naive",
        "attn_decode",
        "cuda",
        0,
        "per-(batch, q-head) block, scores materialised in global, 3 kernels",
        (_d("threads", 128, 256),),
    ),
    Variant(
        "v1_online_softmax",
        "attn_decode",
        "cuda",
        1,
        "single pass with online softmax, one block per (batch, q-head)",
        (_d("threads", 64, 128, 256), _d("BLOCK_N", 16, 32, 64)),
    ),
    Variant(
        "v2_gqa_vec",
        "attn_decode",
        "cuda",
        2,
        "one block per KV head serving its whole query group, 128-bit KV loads",
        (_d("BLOCK_N", 16, 32, 64, 128), _d("warps", 2, 4, 8), _d("vec", 8, 16)),
    ),
    Variant(
        "v3_split_kv",
        "attn_decode",
        "cuda",
        3,
        "flash-decoding: KV split across CTAs, fp32 partial (m, l, acc) + reduce",
        (_d("splits", 1, 2, 4, 8, 16, 32), _d("BLOCK_N", 32, 64, 128), _d("warps", 2, 4, 8)),
    ),
    Variant(
        "v4_wgmma_tma",
        "attn_decode",
        "cuda",
        4,
        "TMA page loads + wgmma over packed query heads, warp-specialised",
        (_d("splits", 1, 2, 4, 8, 16, 32), _d("BLOCK_N", 64, 128), _d("stages", 2, 3, 4)),
        _HOPPER,
        True,
        "hopper",
    ),
    Variant(
        "v4_tma_mma",
        "attn_decode",
        "cuda",
        4,
        "TMA bulk page copies into an mbarrier ring, mma.sync over the GQA group",
        (
            _d("splits", 1, 2, 4, 8, 16, 32),
            _d("BLOCK_N", 32, 64, 128),
            _d("stages", 2, 3, 4),
            _d("warps", 4, 8),
        ),
        _TMA_MMA,
        True,
        "blackwell",
    ),
    Variant(
        "v4_cp_async_mma",
        "attn_decode",
        "cuda",
        4,
        "cp.async multistage KV pipeline with mma.sync over the GQA group",
        (
            _d("splits", 1, 2, 4, 8, 16, 32),
            _d("BLOCK_N", 32, 64, 128),
            _d("stages", 2, 3, 4),
            _d("warps", 4, 8),
        ),
        _CPA_MMA,
        True,
        "ampere",
    ),
    # ------------------------------------------------------------------------ attn_prefill
    Variant(
        "v0_naive",
        "attn_prefill",
        "cuda",
        0,
        "materialised S = QKᵀ in global memory, separate softmax and PV kernels",
        (_d("threads", 128, 256),),
    ),
    Variant(
        "v1_tiled_online",
        "attn_prefill",
        "cuda",
        1,
        "FlashAttention-1 style tiles with online softmax on CUDA cores",
        (_d("BLOCK_M", 16, 32, 64), _d("BLOCK_N", 16, 32, 64)),
    ),
    Variant(
        "v2_mma_sync",
        "attn_prefill",
        "cuda",
        2,
        "FlashAttention-2 style: warps split query rows, mma.sync for QKᵀ and PV",
        (_d("BLOCK_M", 64, 128), _d("BLOCK_N", 32, 64, 128), _d("warps", 4, 8)),
        _MMA,
        True,
    ),
    Variant(
        "v3_cp_async",
        "attn_prefill",
        "cuda",
        3,
        "cp.async multi-buffered K/V tiles, swizzled smem, causal block skipping",
        (_d("BLOCK_M", 64, 128), _d("BLOCK_N", 32, 64, 128), _d("warps", 4, 8), _d("stages", 2, 3)),
        _CPA_MMA,
        True,
    ),
    Variant(
        "v4_wgmma_tma",
        "attn_prefill",
        "cuda",
        4,
        "FlashAttention-3 style: TMA producer, wgmma consumers, ping-pong softmax",
        (_d("BLOCK_M", 64, 128, 192), _d("BLOCK_N", 64, 128, 176), _d("stages", 2, 3)),
        _HOPPER,
        True,
        "hopper",
    ),
    Variant(
        "v4_tma_mma",
        "attn_prefill",
        "cuda",
        4,
        "TMA unicast K/V ring with mbarriers feeding mma.sync warps",
        (
            _d("BLOCK_M", 64, 128),
            _d("BLOCK_N", 32, 64, 128),
            _d("warps", 4, 8),
            _d("stages", 2, 3, 4),
        ),
        _TMA_MMA,
        True,
        "blackwell",
    ),
    Variant(
        "v4_persistent_lpt",
        "attn_prefill",
        "cuda",
        4,
        "persistent CTAs with longest-processing-time-first tile order",
        (_d("BLOCK_M", 64, 128), _d("BLOCK_N", 32, 64, 128), _d("warps", 4, 8), _d("stages", 2, 3)),
        _CPA_MMA,
        True,
        "ampere",
    ),
    # ------------------------------------------------------------------------ rowwise
    Variant(
        "v0_scalar",
        "rowwise",
        "cuda",
        0,
        "one warp per row, scalar 2-byte loads, two passes, smem atomics",
        (_d("threads", 64, 128, 256),),
    ),
    Variant(
        "v1_block_reduce",
        "rowwise",
        "cuda",
        1,
        "one block per row, shared-memory tree reduction, two global passes",
        (_d("threads", 64, 128, 256, 512, 1024), _d("unroll", 1, 2, 4)),
    ),
    Variant(
        "v2_warp_shuffle",
        "rowwise",
        "cuda",
        2,
        "one block per row, warp-shuffle reductions, one smem hop",
        (_d("threads", 64, 128, 256, 512, 1024), _d("unroll", 1, 2, 4), _d("minb", 1, 2, 4)),
    ),
    Variant(
        "v3_vec_onepass",
        "rowwise",
        "cuda",
        3,
        "128-bit loads, row held in registers, single global read",
        (
            _d("threads", 64, 128, 256, 512),
            _d("vec", 4, 8, 16),
            _d("rows", 1, 2, 4),
            _d("minb", 1, 2, 4),
        ),
    ),
    Variant(
        "v4_tma_bulk",
        "rowwise",
        "cuda",
        4,
        "persistent CTAs, cp.async.bulk row prefetch into an mbarrier ring",
        (_d("rows", 1, 2, 4, 8), _d("stages", 2, 3, 4), _d("threads", 128, 256, 512)),
        _TMA,
        False,
        "blackwell",
    ),
    Variant(
        "v4_cp_async_persistent",
        "rowwise",
        "cuda",
        4,
        "persistent CTAs prefetching the next rows with cp.async",
        (_d("rows", 1, 2, 4, 8), _d("stages", 2, 3, 4), _d("threads", 128, 256, 512)),
        _CPA,
        False,
        "ampere",
    ),
    # ------------------------------------------------------------------------ elementwise
    Variant(
        "v0_scalar",
        "elementwise",
        "cuda",
        0,
        "one thread per element, scalar 2-byte loads, div/mod indexing",
        (_d("threads", 64, 128, 256, 512, 1024),),
    ),
    Variant(
        "v1_coalesced",
        "elementwise",
        "cuda",
        1,
        "grid-stride loop with coalesced row-major mapping",
        (_d("threads", 128, 256, 512, 1024), _d("waves", 1, 2, 4, 8, 16)),
    ),
    Variant(
        "v2_vec",
        "elementwise",
        "cuda",
        2,
        "vectorised 32/64/128-bit loads and stores",
        (_d("vec", 4, 8, 16), _d("threads", 64, 128, 256, 512, 1024), _d("minb", 1, 2, 4)),
    ),
    Variant(
        "v3_fused_ilp",
        "elementwise",
        "cuda",
        3,
        "128-bit accesses, several vectors in flight per thread, read-only cache hints",
        (
            _d("vec", 8, 16),
            _d("unroll", 1, 2, 4, 8),
            _d("threads", 64, 128, 256, 512),
            _d("minb", 1, 2, 4),
        ),
    ),
    Variant(
        "v4_tma_bulk",
        "elementwise",
        "cuda",
        4,
        "cp.async.bulk staging through an mbarrier ring in shared memory",
        (_d("chunk", 2048, 4096, 8192, 16384), _d("stages", 2, 3, 4), _d("threads", 128, 256, 512)),
        _TMA,
        False,
        "blackwell",
    ),
    Variant(
        "v4_cp_async_persistent",
        "elementwise",
        "cuda",
        4,
        "persistent CTAs double-buffering chunks with cp.async",
        (_d("chunk", 2048, 4096, 8192, 16384), _d("stages", 2, 3, 4), _d("threads", 128, 256, 512)),
        _CPA,
        False,
        "ampere",
    ),
    # ------------------------------------------------------------------------ sampling
    Variant(
        "v0_sort",
        "sampling",
        "cuda",
        0,
        "softmax, full radix sort of (prob, id) pairs in global memory, serial scan",
        (_d("threads", 256, 512, 1024),),
    ),
    Variant(
        "v1_block_radix",
        "sampling",
        "cuda",
        1,
        "per-row block radix select in shared memory, two passes",
        (_d("threads", 256, 512, 1024), _d("radix_bits", 4, 8)),
    ),
    Variant(
        "v2_warp_topk",
        "sampling",
        "cuda",
        2,
        "warp-level register candidate lists merged per block, fused softmax",
        (_d("threads", 256, 512, 1024), _d("vec", 8, 16), _d("items", 4, 8, 16)),
    ),
    Variant(
        "v3_fused_online",
        "sampling",
        "cuda",
        3,
        "single fused kernel: online max/sum, threshold and draw in one pass",
        (_d("threads", 256, 512, 1024), _d("vec", 8, 16), _d("split", 1, 2, 4, 8)),
    ),
    Variant(
        "v4_sortfree",
        "sampling",
        "cuda",
        4,
        "sort-free rejection sampling with pivot bisection (FlashInfer-style)",
        (
            _d("threads", 256, 512, 1024),
            _d("vec", 8, 16),
            _d("rounds", 4, 8, 16, 32),
            _d("split", 1, 2, 4, 8),
        ),
    ),
    # ------------------------------------------------------------------------ scan
    Variant(
        "v0_sequential",
        "scan",
        "cuda",
        0,
        "unfused: discretise, scan with h materialised in global, then output",
        (_d("threads", 64, 128, 256),),
    ),
    Variant(
        "v1_fused_regs",
        "scan",
        "cuda",
        1,
        "fused kernel, one thread per channel with its N states in registers",
        (_d("threads", 32, 64, 128, 256, 512), _d("minb", 1, 2, 4)),
    ),
    Variant(
        "v2_chunked",
        "scan",
        "cuda",
        2,
        "time chunks staged in shared memory, vector loads, warp-parallel over channels",
        (_d("tile", 32, 64, 128, 256), _d("threads", 64, 128, 256, 512), _d("vec", 4, 8, 16)),
    ),
    Variant(
        "v3_pipelined",
        "scan",
        "cuda",
        3,
        "cp.async prefetch of the next chunk while scanning the current one",
        (
            _d("tile", 32, 64, 128, 256),
            _d("threads", 64, 128, 256, 512),
            _d("stages", 2, 3, 4),
            _d("minb", 1, 2),
        ),
        _CPA,
    ),
    Variant(
        "v4_tma_bulk",
        "scan",
        "cuda",
        4,
        "cp.async.bulk chunk ring with mbarriers, persistent over (batch, channel) tiles",
        (
            _d("tile", 32, 64, 128, 256),
            _d("threads", 64, 128, 256, 512),
            _d("stages", 2, 3, 4),
            _d("minb", 1, 2),
        ),
        _TMA,
        False,
        "blackwell",
    ),
    Variant(
        "v4_persistent",
        "scan",
        "cuda",
        4,
        "persistent CTAs over (batch, channel) tiles with a cp.async chunk ring",
        (
            _d("tile", 32, 64, 128, 256),
            _d("threads", 64, 128, 256, 512),
            _d("stages", 2, 3, 4),
            _d("minb", 1, 2),
        ),
        _CPA,
        False,
        "ampere",
    ),
]

_TRITON: list[Variant] = [
    # ------------------------------------------------------------------------ gemm
    Variant(
        "v0_rowloop",
        "gemm",
        "triton",
        0,
        "one program per (row, column block), tl.sum over K chunks, no tl.dot",
        (_d("BLOCK_N", 32, 64, 128), _d("BLOCK_K", 32, 64, 128), _d("num_warps", 2, 4)),
    ),
    Variant(
        "v1_tl_dot",
        "gemm",
        "triton",
        1,
        "blocked tl.dot, single stage",
        (
            _d("BLOCK_M", 32, 64, 128),
            _d("BLOCK_N", 32, 64, 128),
            _d("BLOCK_K", 32, 64),
            _d("num_warps", 4, 8),
        ),
        _F(),
        True,
    ),
    Variant(
        "v2_pipelined",
        "gemm",
        "triton",
        2,
        "software-pipelined tl.dot with grouped (L2-friendly) tile order",
        (
            _d("BLOCK_M", 64, 128, 256),
            _d("BLOCK_N", 64, 128, 256),
            _d("BLOCK_K", 32, 64, 128),
            _d("num_warps", 4, 8),
            _d("num_stages", 2, 3, 4, 5),
            _d("GROUP_M", 1, 8),
        ),
        _F(),
        True,
    ),
    Variant(
        "v3_persistent",
        "gemm",
        "triton",
        3,
        "persistent programs looping over tiles, optional split-K",
        (
            _d("BLOCK_M", 64, 128, 256),
            _d("BLOCK_N", 64, 128, 256),
            _d("BLOCK_K", 32, 64, 128),
            _d("num_warps", 4, 8),
            _d("num_stages", 2, 3, 4, 5),
            _d("SPLIT_K", 1, 2, 4, 8),
        ),
        _F(),
        True,
    ),
    Variant(
        "v4_tma_desc",
        "gemm",
        "triton",
        4,
        "device-side tensor descriptors (TMA) in a persistent tl.dot loop",
        (
            _d("BLOCK_M", 64, 128),
            _d("BLOCK_N", 64, 128, 256),
            _d("BLOCK_K", 64, 128),
            _d("num_warps", 4, 8),
            _d("num_stages", 2, 3, 4, 5),
        ),
        _TMA,
        True,
        "blackwell",
    ),
    # ------------------------------------------------------------------------ gemv
    Variant(
        "v0_rowloop",
        "gemv",
        "triton",
        0,
        "one program per output row, small K chunks",
        (_d("BLOCK_K", 64, 128, 256), _d("num_warps", 1, 2, 4)),
    ),
    Variant(
        "v1_blocked",
        "gemv",
        "triton",
        1,
        "one program per block of rows, 2-D tile reduced with tl.sum",
        (_d("BLOCK_N", 4, 8, 16, 32), _d("BLOCK_K", 64, 128, 256), _d("num_warps", 2, 4, 8)),
    ),
    Variant(
        "v2_vec_evict",
        "gemv",
        "triton",
        2,
        "wide contiguous K tiles, evict-first streaming weights, in-register dequant",
        (_d("BLOCK_N", 4, 8, 16, 32), _d("BLOCK_K", 256, 512, 1024), _d("num_warps", 2, 4, 8)),
    ),
    Variant(
        "v3_splitk",
        "gemv",
        "triton",
        3,
        "split-K programs accumulating fp32 partials with tl.atomic_add",
        (
            _d("SPLIT_K", 2, 4, 8, 16),
            _d("BLOCK_N", 8, 16, 32),
            _d("BLOCK_K", 128, 256, 512),
            _d("num_warps", 2, 4, 8),
        ),
    ),
    Variant(
        "v4_tma_desc",
        "gemv",
        "triton",
        4,
        "tensor-descriptor weight tiles in a pipelined split-K loop",
        (
            _d("SPLIT_K", 1, 2, 4, 8),
            _d("BLOCK_N", 16, 32, 64),
            _d("BLOCK_K", 128, 256, 512),
            _d("num_stages", 2, 3, 4),
            _d("num_warps", 4, 8),
        ),
        _TMA,
        False,
        "blackwell",
    ),
    # ------------------------------------------------------------------------ attn_decode
    Variant(
        "v0_naive",
        "attn_decode",
        "triton",
        0,
        "one program per (batch, q-head), two passes over the keys",
        (_d("BLOCK_N", 32, 64, 128), _d("num_warps", 1, 2, 4)),
    ),
    Variant(
        "v1_online",
        "attn_decode",
        "triton",
        1,
        "one pass with online softmax per (batch, q-head)",
        (_d("BLOCK_N", 32, 64, 128), _d("num_warps", 1, 2, 4)),
    ),
    Variant(
        "v2_gqa_dot",
        "attn_decode",
        "triton",
        2,
        "one program per KV head, the query group as a tl.dot tile",
        (_d("BLOCK_N", 16, 32, 64, 128), _d("num_warps", 2, 4, 8)),
    ),
    Variant(
        "v3_split_kv",
        "attn_decode",
        "triton",
        3,
        "split-KV stage-1 kernel plus a log-sum-exp reduce kernel",
        (
            _d("NUM_SPLITS", 1, 2, 4, 8, 16, 32),
            _d("BLOCK_N", 32, 64, 128),
            _d("num_warps", 2, 4, 8),
            _d("num_stages", 1, 2, 3),
        ),
    ),
    Variant(
        "v4_tma_desc",
        "attn_decode",
        "triton",
        4,
        "split-KV with tensor-descriptor page loads",
        (
            _d("NUM_SPLITS", 1, 2, 4, 8, 16, 32),
            _d("BLOCK_N", 32, 64, 128),
            _d("num_warps", 4, 8),
            _d("num_stages", 2, 3, 4),
        ),
        _TMA,
        True,
        "blackwell",
    ),
    # ------------------------------------------------------------------------ attn_prefill
    Variant(
        "v0_naive",
        "attn_prefill",
        "triton",
        0,
        "scores materialised in global memory, separate softmax and PV programs",
        (_d("BLOCK", 32, 64, 128),),
    ),
    Variant(
        "v1_online",
        "attn_prefill",
        "triton",
        1,
        "fused tl.dot attention with online softmax, single stage",
        (_d("BLOCK_M", 32, 64, 128), _d("BLOCK_N", 32, 64), _d("num_warps", 4, 8)),
        _F(),
        True,
    ),
    Variant(
        "v2_pipelined",
        "attn_prefill",
        "triton",
        2,
        "software-pipelined K/V loads, tuned warps",
        (
            _d("BLOCK_M", 64, 128),
            _d("BLOCK_N", 32, 64, 128),
            _d("num_warps", 4, 8),
            _d("num_stages", 1, 2, 3, 4),
        ),
        _F(),
        True,
    ),
    Variant(
        "v3_causal_split",
        "attn_prefill",
        "triton",
        3,
        "unmasked off-diagonal loop plus a masked diagonal loop",
        (
            _d("BLOCK_M", 64, 128),
            _d("BLOCK_N", 32, 64, 128),
            _d("num_warps", 4, 8),
            _d("num_stages", 1, 2, 3, 4),
        ),
        _F(),
        True,
    ),
    Variant(
        "v4_tma_ws",
        "attn_prefill",
        "triton",
        4,
        "tensor descriptors with warp-specialised tl.range (Hopper)",
        (
            _d(
                "BLOCK_M",
                128,
            ),
            _d("BLOCK_N", 64, 128),
            _d("num_warps", 4, 8),
            _d("num_stages", 2, 3, 4),
        ),
        _F({"tma", "wgmma"}),
        True,
        "hopper",
    ),
    # ------------------------------------------------------------------------ rowwise
    Variant(
        "v0_scalar",
        "rowwise",
        "triton",
        0,
        "one program per row looping over small blocks, two passes",
        (_d("BLOCK", 128, 256, 512), _d("num_warps", 1, 2, 4)),
    ),
    Variant(
        "v1_block",
        "rowwise",
        "triton",
        1,
        "whole row as one power-of-two block, single pass",
        (_d("num_warps", 1, 2, 4, 8, 16, 32),),
    ),
    Variant(
        "v2_multirow",
        "rowwise",
        "triton",
        2,
        "several rows per program as a 2-D block",
        (_d("ROWS", 1, 2, 4, 8, 16), _d("num_warps", 1, 2, 4, 8, 16)),
    ),
    Variant(
        "v3_persistent",
        "rowwise",
        "triton",
        3,
        "persistent programs striding over rows",
        (_d("ROWS", 1, 2, 4, 8), _d("num_warps", 2, 4, 8), _d("waves", 1, 2, 4)),
    ),
    Variant(
        "v4_pipelined",
        "rowwise",
        "triton",
        4,
        "persistent tl.range loop with multi-stage row prefetch",
        (_d("ROWS", 1, 2, 4, 8), _d("num_warps", 2, 4, 8), _d("num_stages", 2, 3, 4)),
    ),
    # ------------------------------------------------------------------------ elementwise
    Variant(
        "v0_scalar",
        "elementwise",
        "triton",
        0,
        "one program per small block, flat index math",
        (_d("BLOCK", 64, 128, 256),),
    ),
    Variant(
        "v1_blocked",
        "elementwise",
        "triton",
        1,
        "larger blocks with row-aware 2-D indexing",
        (_d("BLOCK", 256, 512, 1024, 2048, 4096), _d("num_warps", 1, 2, 4, 8, 16)),
    ),
    Variant(
        "v2_vec_hints",
        "elementwise",
        "triton",
        2,
        "contiguity/alignment hints so loads become 128-bit",
        (_d("BLOCK", 256, 512, 1024, 2048, 4096), _d("num_warps", 1, 2, 4, 8, 16)),
    ),
    Variant(
        "v3_persistent",
        "elementwise",
        "triton",
        3,
        "persistent programs striding over blocks",
        (_d("BLOCK", 512, 1024, 2048, 4096), _d("num_warps", 2, 4, 8, 16), _d("waves", 1, 2, 4, 8)),
    ),
    Variant(
        "v4_persistent_evict",
        "elementwise",
        "triton",
        4,
        "persistent loop with streaming cache modifiers",
        (
            _d("BLOCK", 1024, 2048, 4096, 8192),
            _d("num_warps", 2, 4, 8, 16),
            _d("waves", 1, 2, 4, 8),
        ),
    ),
    # ------------------------------------------------------------------------ sampling
    Variant(
        "v0_sort",
        "sampling",
        "triton",
        0,
        "torch.sort of probabilities, then a Triton cumsum/draw program",
        (_d("BLOCK", 1024, 2048),),
    ),
    Variant(
        "v1_two_pass",
        "sampling",
        "triton",
        1,
        "max/sum pass then a threshold-and-draw pass",
        (_d("BLOCK", 1024, 2048, 4096), _d("num_warps", 4, 8)),
    ),
    Variant(
        "v2_online_fused",
        "sampling",
        "triton",
        2,
        "single program per row with online softmax statistics",
        (_d("BLOCK", 1024, 2048, 4096), _d("num_warps", 4, 8, 16)),
    ),
    Variant(
        "v3_pivot_search",
        "sampling",
        "triton",
        3,
        "bisection on the probability threshold instead of sorting",
        (_d("BLOCK", 1024, 2048, 4096), _d("num_warps", 4, 8, 16), _d("ROUNDS", 8, 16, 32)),
    ),
    Variant(
        "v4_sortfree_rejection",
        "sampling",
        "triton",
        4,
        "sort-free rejection sampling split across programs",
        (
            _d("BLOCK", 1024, 2048, 4096),
            _d("num_warps", 4, 8, 16),
            _d("ROUNDS", 4, 8, 16),
            _d("SPLITS", 1, 2, 4, 8),
        ),
    ),
    # ------------------------------------------------------------------------ scan
    Variant(
        "v0_sequential",
        "scan",
        "triton",
        0,
        "one program per channel block, h written to global every step",
        (_d("BLOCK_D", 16, 32, 64),),
    ),
    Variant(
        "v1_fused",
        "scan",
        "triton",
        1,
        "fused recurrence with h in registers",
        (_d("BLOCK_D", 16, 32, 64), _d("num_warps", 1, 2, 4)),
    ),
    Variant(
        "v2_chunked_assoc",
        "scan",
        "triton",
        2,
        "chunked tl.associative_scan over time",
        (_d("BLOCK_D", 16, 32, 64), _d("CHUNK", 32, 64, 128, 256), _d("num_warps", 2, 4, 8)),
    ),
    Variant(
        "v3_pipelined",
        "scan",
        "triton",
        3,
        "chunked scan with multi-stage prefetch",
        (
            _d("BLOCK_D", 16, 32, 64),
            _d("CHUNK", 32, 64, 128, 256),
            _d("num_warps", 2, 4, 8),
            _d("num_stages", 2, 3, 4),
        ),
    ),
    Variant(
        "v4_persistent",
        "scan",
        "triton",
        4,
        "persistent programs over (batch, channel) tiles",
        (
            _d("BLOCK_D", 16, 32, 64),
            _d("CHUNK", 64, 128, 256),
            _d("num_warps", 2, 4, 8),
            _d("num_stages", 2, 3, 4),
        ),
    ),
]

VARIANTS: Mapping[tuple[str, str, str], Variant] = MappingProxyType(
    {v.key: v for v in _CUDA + _TRITON}
)


def ladder(family: str, impl: str) -> list[Variant]:
    """All variants of a family/impl, ordered by level (level-4 alternatives together)."""
    return sorted(
        (v for v in VARIANTS.values() if v.family == family and v.impl == impl),
        key=lambda v: v.level,
    )


def get_variant(family: str, impl: str, tag: str) -> Variant:
    try:
        return VARIANTS[(family, impl, tag)]
    except KeyError:
        raise KeyError(f"unknown variant {tag!r} for {family}/{impl}") from None


# --------------------------------------------------------------------------------------
# MMA operand width, parameter spaces, features
# --------------------------------------------------------------------------------------


def quant_mma_choices(op: OpSpec, dtype: str, variant: Variant) -> tuple[str, ...]:
    """MMA operand formats a tensor-core rung may use for this op.

    Native fp8 needs ``fp8_mma`` (sm_89+), native block-scaled fp4 needs ``fp4_mma``;
    ``f16`` means dequantise to fp16 in registers first (the Ampere / Marlin route).
    wgmma has no fp4 kind, and int8 / int4→int8 paths always use IMMA.
    """
    if not variant.tensor_cores:
        return ()
    # (an fp8 MoE here is weight-only: fp16 activations, so it always dequantises)
    if op.mma_path == "fp8":
        return ("e4m3",) if variant.tag == "v4_wgmma_tma" else ("f16", "e4m3")
    if op.mma_path == "fp4":
        return ("f16",) if variant.tag == "v4_wgmma_tma" else ("f16", "e2m1")
    return ()


def mma_operand_bytes(op: OpSpec, dtype: str, params: Params) -> float:
    """Bytes per element of the MMA operands (drives the K step and smem tile width)."""
    mma = params.get("mma")
    if mma == "e4m3" or op.mma_path == "int8":
        return 1.0
    if mma == "e2m1":
        return 0.5
    if dtype == "fp32":
        return 4.0
    return 2.0


def k_elem_bytes(op: OpSpec, dtype: str) -> float:
    """Narrowest storage width along K (sets BK choices so a K tile is 32/64/128 bytes)."""
    if dtype in ("int4", "fp4"):
        return 0.5
    if dtype in ("int8", "fp8"):
        return 1.0
    return 2.0


def param_space(variant: Variant, op: OpSpec, dtype: str) -> tuple[Dim, ...]:
    """Concrete dims for an op: resolves the symbolic BK choices and adds ``mma``."""
    dims: list[Dim] = []
    for dim in variant.dims:
        if dim.name == "BK" and dim.values and isinstance(dim.values[0], str):
            base = int(32 / k_elem_bytes(op, dtype))
            dims.append(Dim("BK", (base, base * 2, base * 4)))
        else:
            dims.append(dim)
    mma = quant_mma_choices(op, dtype, variant)
    if mma:
        dims.append(Dim("mma", mma))
    return tuple(dims)


def features_used(variant: Variant, op: OpSpec, dtype: str, params: Params) -> frozenset[str]:
    """Every PTX feature the rendered candidate emits."""
    feats = set(variant.features)
    mma = params.get("mma")
    if mma == "e4m3" and variant.impl == "cuda" and "wgmma" not in feats:
        feats.add("fp8_mma")  # wgmma's e4m3 kind is part of the wgmma feature itself
    if mma == "e4m3" and variant.impl == "triton":
        feats.add("fp8_mma")
    if mma == "e2m1":
        feats.add("fp4_mma")
    if params.get("cluster_m", 1) > 1:
        feats.add("tma_multicast")
    return frozenset(feats)


def missing_features(
    variant: Variant, op: OpSpec, dtype: str, params: Params, gpu: GPU
) -> list[str]:
    """Features the candidate uses that the target GPU lacks (sorted for stable messages)."""
    return sorted(f for f in features_used(variant, op, dtype, params) if f not in gpu.features)


def _valid_cuda_gemm(tag: str, p: Params) -> bool:
    """CUDA gemm rungs: thread count of the micro-tiled kernel, warp tiling of the MMA ones."""
    if tag == "v1_smem_tiled":
        threads = (p["BM"] // p["TM"]) * (p["BN"] // p["TM"])
        return 64 <= threads <= 1024 and p["BK"] * 4 <= p["BM"] * p["BN"]
    if tag in ("v2_mma_sync", "v3_cp_async", "v4_tma_mma", "v4_streamk"):
        warps = p["warps"]
        wm = 2 if warps == 4 else (2 if p["BM"] < 128 else 4)
        wn = warps // wm
        if p["BM"] % (wm * 16) or p["BN"] % (wn * 8):
            return False
        acc = p["BM"] * p["BN"] // (warps * 32)
        return acc <= 256 and not (p["BM"] == 256 and p["BN"] == 256)
    if tag == "v4_wgmma_tma":
        return not (p["BM"] == 256 and p["BN"] > 192)
    return True


def _valid_cuda_decode(tag: str, p: Params) -> bool:
    """CUDA decode MMA rungs: every warp needs its 16 KV rows of the block."""
    if tag in ("v4_tma_mma", "v4_cp_async_mma"):
        return p["BLOCK_N"] >= 16 * p["warps"]
    return True


def _valid_cuda_prefill(tag: str, p: Params) -> bool:
    """CUDA prefill MMA rungs: the query block splits into 16-row warp slices."""
    if tag in (
        "v2_mma_sync",
        "v3_cp_async",
        "v4_tma_mma",
        "v4_persistent_lpt",
    ):
        return p["BLOCK_M"] % (16 * p["warps"]) == 0
    if tag == "v4_wgmma_tma":
        return not (p["BLOCK_M"] == 192 and p["BLOCK_N"] == 176)
    return True


#: Structural checks of CUDA rungs per family; families not listed have none.
_CUDA_VALID: dict[str, Callable[[str, Params], bool]] = {
    "gemm": _valid_cuda_gemm,
    "attn_decode": _valid_cuda_decode,
    "attn_prefill": _valid_cuda_prefill,
}


def valid(variant: Variant, op: OpSpec, dtype: str, params: Params) -> bool:
    """Structural validity: thread counts, warp tiling, power-of-two constraints.

    Shared-memory capacity is deliberately *not* checked here (see module docstring).
    """
    p = params
    fam = variant.family
    if variant.impl == "cuda":
        check = _CUDA_VALID.get(fam)
        return check(variant.tag, p) if check is not None else True
    # triton
    if fam == "gemm" and "BLOCK_M" in p and "BLOCK_N" in p:
        acc = p["BLOCK_M"] * p["BLOCK_N"] // (p["num_warps"] * 32)
        return acc <= 512
    return True


def iter_params(variant: Variant, op: OpSpec, dtype: str) -> list[Params]:
    """Every valid parameter combination of a variant (small: at most a few thousand).

    Cached per (variant, op, dtype); callers receive fresh dicts they may modify.
    """
    return [dict(c) for c in _params_cached(variant.key, op.name, dtype)]


def param_pool(variant: Variant, op: OpSpec, dtype: str) -> tuple[tuple[tuple[str, Any], ...], ...]:
    """Every valid combination as shared, immutable item tuples (``dict(c)`` for a Params).

    For callers that sample a few combinations out of thousands: ``iter_params`` copies
    every one into a fresh dict, which cost the agent's long jumps more than the sampling."""
    return _params_cached(variant.key, op.name, dtype)


def param_pool_keys(
    variant: Variant, op: OpSpec, dtype: str
) -> tuple[tuple[tuple[str, Any], ...], ...]:
    """``param_pool`` with each combination's items sorted by name: its order-free key
    (the agent's "already tried" bookkeeping), computed once per process."""
    return _pool_keys_cached(variant.key, op.name, dtype)


@lru_cache(maxsize=1024)
def _pool_keys_cached(
    vkey: tuple[str, str, str], op_name: str, dtype: str
) -> tuple[tuple[tuple[str, Any], ...], ...]:
    return tuple(tuple(sorted(c)) for c in _params_cached(vkey, op_name, dtype))


@lru_cache(maxsize=4096)
def _params_cached(
    vkey: tuple[str, str, str], op_name: str, dtype: str
) -> tuple[tuple[tuple[str, Any], ...], ...]:
    from .ops import get_op

    variant, op = VARIANTS[vkey], get_op(op_name)
    dims = param_space(variant, op, dtype)
    combos: list[Params] = [{}]
    for dim in dims:
        combos = [{**c, dim.name: v} for c in combos for v in dim.values]
    return tuple(tuple(c.items()) for c in combos if valid(variant, op, dtype, c))


def _set_native_mma(p: Params, dims: tuple[Dim, ...], gpu: GPU) -> None:
    """Native low-precision MMA (e4m3/e2m1) where the GPU has it, else the first choice."""
    for dim in dims:
        if dim.name == "mma":
            native = "e4m3" if "e4m3" in dim.values else "e2m1"
            need = "fp8_mma" if native == "e4m3" else "fp4_mma"
            p["mma"] = native if need in gpu.features and native in dim.values else dim.values[0]


def _cuda_gemm_defaults(
    tag: str, p: Params, dims: tuple[Dim, ...], dtype: str, m: int, small_smem: bool
) -> Params:
    """CUDA gemm first guesses: fixed tiles for the simple rungs; MMA rungs size BM by M,
    take the narrow BK for 4-bit operands, fewer stages on 99 KB parts, split-K at small M."""
    if tag == "v0_naive":
        return {"TB": 16}
    if tag == "v1_smem_tiled":
        return {"BM": 64, "BN": 64, "BK": 16, "TM": 4}
    if tag == "v4_wgmma_tma":
        return {"BM": 128, "BN": 128 if m >= 64 else 64, "stages": 4, "cluster_m": 1}
    bk = next(d for d in dims if d.name == "BK").values
    narrow = dtype in ("int4", "fp4")
    p.update(
        {
            "BM": 128 if m >= 128 else 64,
            "BN": 128,
            "BK": bk[0] if narrow else bk[1],
            "warps": 4,
        }
    )
    if "stages" in p:
        p["stages"] = 3 if not small_smem else 2
    if "split_k" in p:
        p["split_k"] = 4 if m <= 64 else 1
    return p


def _cuda_decode_defaults(p: Params, shape: dict[str, int]) -> None:
    """CUDA decode first guesses: more KV splits for long contexts, a two-stage pipeline."""
    if "splits" in p:
        p["splits"] = 4 if shape.get("Skv", 0) >= 8192 else 2
    if "stages" in p:
        p["stages"] = 2


def _cuda_prefill_defaults(tag: str, p: Params) -> None:
    """CUDA prefill first guesses: a two-stage pipeline and the usual FlashAttention tiles."""
    if "stages" in p:
        p["stages"] = 2
    if "BLOCK_M" in p and tag != "v1_tiled_online":
        p["BLOCK_M"] = 128 if tag == "v4_wgmma_tma" else 64
        p["BLOCK_N"] = 64


def _cuda_defaults(
    variant: Variant,
    p: Params,
    dims: tuple[Dim, ...],
    dtype: str,
    shape: dict[str, int],
    gpu: GPU,
    m: int,
    small_smem: bool,
) -> Params:
    """``default_params`` of a CUDA rung, before unknown keys are dropped."""
    fam, tag = variant.family, variant.tag
    if fam == "gemm":
        p = _cuda_gemm_defaults(tag, p, dims, dtype, m, small_smem)
    elif fam == "gemv":
        if "split_k" in p and tag != "v3_splitk":
            p["split_k"] = 1
    elif fam == "attn_decode":
        _cuda_decode_defaults(p, shape)
    elif fam == "attn_prefill":
        _cuda_prefill_defaults(tag, p)
    elif fam in ("rowwise", "elementwise", "scan") and "stages" in p:
        p["stages"] = 2
    _set_native_mma(p, dims, gpu)
    return p


def _triton_defaults(
    variant: Variant, p: Params, dims: tuple[Dim, ...], gpu: GPU, m: int, small_smem: bool
) -> None:
    """``default_params`` of a Triton rung (in place), before unknown keys are dropped."""
    if "num_stages" in p:
        p["num_stages"] = 2 if small_smem else 3
    if "SPLIT_K" in p:
        p["SPLIT_K"] = 4 if m <= 64 else 1
    if variant.family == "gemm" and "BLOCK_M" in p:
        p["BLOCK_M"] = 64 if m < 128 else 128
        p["BLOCK_N"] = 64 if variant.level <= 1 else 128
        p["BLOCK_K"] = 32 if variant.level <= 1 else 64
    _set_native_mma(p, dims, gpu)


def default_params(
    variant: Variant, op: OpSpec, dtype: str, shape: dict[str, int], gpu: GPU
) -> Params:
    """The first guess a competent engineer writes for a rung on this GPU and shape.

    Sensible middle-of-the-grid picks, adjusted for the obvious facts (small M wants
    split-K, 99 KB parts want fewer stages, native low precision when the arch has it).
    """
    dims = param_space(variant, op, dtype)
    p: Params = {d.name: d.values[len(d.values) // 2] for d in dims}
    small_smem = gpu.smem_per_block_optin < 150_000
    m = shape.get("M", shape.get("T", shape.get("B", 1)))
    if variant.impl == "cuda":
        p = _cuda_defaults(variant, p, dims, dtype, shape, gpu, m, small_smem)
    else:
        _triton_defaults(variant, p, dims, gpu, m, small_smem)
    # Only keep keys that exist in the space; fall back to the first valid combo if needed.
    names = {d.name for d in dims}
    p = {k: v for k, v in p.items() if k in names}
    for d in dims:
        p.setdefault(d.name, d.values[len(d.values) // 2])
    if not valid(variant, op, dtype, p):
        combos = iter_params(variant, op, dtype)
        p = combos[len(combos) // 2]
    return p


def hw_choice(family: str, impl: str, gpu: GPU) -> Variant | None:
    """The level-4 rung written for this GPU's architecture class (None if the ladder has none)."""
    cls = {"sm_90a": "hopper", "sm_120": "blackwell", "sm_80": "ampere", "sm_86": "ampere"}[
        gpu.arch
    ]
    rungs = [v for v in ladder(family, impl) if v.level == 4]
    if not rungs:
        return None
    for want in (cls, "blackwell" if cls == "hopper" else cls, "any", "ampere"):
        for v in rungs:
            if v.hw == want and all(f in gpu.features for f in v.features):
                return v
    # Triton ladders have a single level-4 rung; if the arch lacks its features, use level 3.
    for v in rungs:
        if all(f in gpu.features for f in v.features):
            return v
    return None


def tempting_wrong_hw(family: str, impl: str, gpu: GPU) -> Variant | None:
    """A level-4 rung an engineer might reach for out of habit that this GPU cannot run."""
    rungs = [
        v
        for v in ladder(family, impl)
        if v.level == 4 and any(f not in gpu.features for f in v.features)
    ]
    if not rungs:
        return None
    # Hopper habits first (wgmma), then TMA on Ampere.
    rungs.sort(key=lambda v: (v.hw != "hopper", v.tag))
    return rungs[0]
