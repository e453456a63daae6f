"""Launch geometry, resource use and executed work of one candidate kernel.

``plan()`` turns (op, shape, dtype, gpu, variant, params) into a ``KernelPlan``: threads,
grid, shared memory, registers, launches, executed FLOPs (tile padding included), DRAM
bytes (re-reads, materialised intermediates and split partials included) and bytes in
flight per CTA. Timing reads the plan; templates read its constants; checks read its
shared memory. Keeping one model for all three means a config that times well also
renders and compiles consistently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from .hardware import GPU
from .ops import ELEM_BYTES, OpSpec, Shape, experts_hit
from .variants import Params, Variant, knob, mma_operand_bytes

#: Per-CTA shared memory the driver reserves on every SM (1 KB since Ampere).
RESERVED_SMEM = 1024


@dataclass(frozen=True)
class KernelPlan:
    """Everything timing, templates and checks need to know about a candidate."""

    threads: int
    grid: int
    smem: int
    regs: int
    launches: int
    flops: float
    path: str
    bytes: float
    inflight: float
    tile_eff: float = 1.0
    alu_flops: float = 0.0
    persistent: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    #: Dependent memory round trips on one program's critical path (see ``timing``): loops
    #: whose every iteration ends in a block-wide reduction the next iteration waits on, or
    #: a thread walking a contiguous segment element by element. 0 for kernels whose loads
    #: are independent enough that only bandwidth matters.
    chain: float = 0.0
    #: Local-memory (spill) traffic in bytes over all programs: register tiles larger than
    #: the register file are stored and re-read through L1/L2 at a per-SM rate.
    spill_local: float = 0.0
    #: Thread-instructions the busiest SM must issue in sequence: a one-CTA-per-row kernel
    #: that walks its row once per pass is bounded by one SM's issue rate when there are
    #: fewer rows than SMs, however idle DRAM and the other SMs are.
    sm_issue: float = 0.0
    #: Programs that make the ``chain`` (0: every program). When only some do (the last of
    #: a row's split CTAs selects and draws alone), only those are counted in waves.
    chain_programs: int = 0
    #: Dependent ALU cycles each ``chain`` trip adds after its loads land: the statistic
    #: updates a thread folds in sequence before the next iteration's loads issue (an
    #: online softmax's branchy max/exp-sum update costs ~100x a sum of squares' FFMA).
    trip_cycles: float = 0.0
    #: Local-memory bytes one CTA keeps spilled (its register tile past the budget). While
    #: an SM's resident CTAs' spills fit in its L1 they are re-read from there at no cost
    #: the model charges; past it, a pass over the tile evicts what the next pass needs
    #: (cyclic access through LRU), so every spilled byte goes to L2.
    spill_footprint: float = 0.0
    #: Special-function-unit operations (MUFU: the ``ex2`` behind ``__expf``/``tl.exp``)
    #: the op needs at the least (``sfu_ops``): every correct rung evaluates them, so no
    #: time under ``sfu_ops / (SFU_PER_CLK · SMs · clock)`` is possible (issue 36).
    sfu_ops: float = 0.0


#: Registers a thread can devote to a register-resident tile: the 255-register cap less
#: the ~30 that indices, masks, pointers and reduction temporaries take.
TILE_REG_BUDGET = 224


def tile_spill_bytes(elems_per_thread: float, threads: int, programs: int, uses: int) -> float:
    """Local-memory traffic of a register tile of ``elems_per_thread`` fp32 values.

    What exceeds ``TILE_REG_BUDGET`` is stored once and re-read by each of the ``uses``
    passes the kernel makes over the tile (max, exp-sum and store for a softmax; sum of
    squares and scale-store for a norm), in every one of ``programs`` programs.
    """
    excess = max(0.0, elems_per_thread - TILE_REG_BUDGET)
    return excess * 4.0 * threads * programs * (1 + uses)


def occupancy(gpu: GPU, threads: int, smem: int, regs: int) -> int:
    """Resident CTAs per SM from the thread, register and shared-memory limits."""
    if threads <= 0 or threads > 1024:
        return 0
    by_threads = gpu.max_threads_per_sm // threads
    # ptxas caps registers to what one CTA of this size can hold (excess spills)
    regs_per_cta = min(regs, gpu.max_regs_per_thread, gpu.regs_per_sm // threads) * threads
    by_regs = gpu.regs_per_sm // max(regs_per_cta, 1)
    by_smem = gpu.smem_per_sm // (smem + RESERVED_SMEM) if smem else gpu.max_blocks_per_sm
    return max(0, min(gpu.max_blocks_per_sm, by_threads, by_regs, by_smem))


def spills(gpu: GPU, threads: int, regs: int) -> bool:
    """Whether the register demand exceeds what ptxas can give each thread."""
    return regs > min(gpu.max_regs_per_thread, gpu.regs_per_sm // max(threads, 1))


def _cdiv(a: float, b: float) -> int:
    return int(math.ceil(a / b))


def _act_bytes(dtype: str) -> float:
    return 2.0 if dtype in ("int4", "fp4") else ELEM_BYTES[dtype]


def _tile_reuse_eff(bm: int, bn: int) -> float:
    """Compute efficiency from register reuse: 128×128 saturates, 32×32 reaches ~60%."""
    r = bm * bn / (bm + bn)
    return min(1.0, (r / 64.0) ** 0.35)


# --------------------------------------------------------------------------------------
# gemm family
# --------------------------------------------------------------------------------------


def gemm_mnk(op: OpSpec, s: Shape) -> tuple[int, int, int]:
    """(M, N, K) of the GEMM an op lowers to."""
    if op.name == "fused_qkv_rope":
        return s["T"], (s["Hq"] + 2 * s["Hkv"]) * s["D"], s["H"]
    if op.name == "moe_grouped_gemm":
        return s["T"] * s["k"], s["N"], s["K"]
    if op.name == "conv2d_nhwc":
        return s["N"] * s["H"] * s["W"], s["Cout"], s["R"] * s["S"] * s["Cin"]
    return s["M"], s["N"], s["K"]


def _storage_bytes(op: OpSpec, dtype: str) -> tuple[float, float]:
    """Bytes per element of the A and W tiles as stored in shared memory (scales included)."""
    if op.name == "fp4_gemm":
        return 0.5 + 1 / 16, 0.5 + 1 / 16
    if op.name == "int4_gemm":
        return 2.0, 0.5 + 2 / 128
    if op.name == "w4a8_gemm":
        return 1.0, 0.5
    if dtype in ("int8", "fp8"):
        return 1.0, 1.0
    if op.name == "moe_grouped_gemm" and dtype == "fp8":
        return 2.0, 1.0
    return 2.0, 2.0


_RAW_A = {
    "fp4_gemm": 0.5,
    "int8_gemm": 1.0,
    "w4a8_gemm": 1.0,
    "fp8_gemm": 1.0,
    "fp8_gemm_persistent": 1.0,
    "fp8_blockwise_gemm": 1.0,
}
_RAW_W = {
    "fp4_gemm": 0.5,
    "int4_gemm": 0.5,
    "w4a8_gemm": 0.5,
    "int8_gemm": 1.0,
    "fp8_gemm": 1.0,
    "fp8_gemm_persistent": 1.0,
    "fp8_blockwise_gemm": 1.0,
}


def gemm_layout(op: OpSpec, dtype: str, variant: Variant, p: Params) -> dict[str, Any]:
    """Byte layout of a CUDA tensor-core GEMM rung's shared memory (template and model agree).

    ``ring`` holds ``stages`` raw A/W tiles; operands whose storage format differs from the
    MMA operand (int4, fp8 or fp4 feeding fp16 MMA, int4 feeding IMMA) are converted into
    one staging tile per operand before ldmatrix/wgmma reads them.
    """
    e_mma = mma_operand_bytes(op, dtype, p)
    a_raw = _RAW_A.get(op.name, 2.0)
    w_raw = _RAW_W.get(op.name, 1.0 if (op.name == "moe_grouped_gemm" and dtype == "fp8") else 2.0)
    a_conv = a_raw != e_mma
    w_conv = w_raw != e_mma
    bm = p.get("BM", 64)
    bn = p.get("BN", 64)
    # wgmma tiles are one 128-byte swizzle atom deep along K
    bk = int(128 / e_mma) if variant.tag == "v4_wgmma_tma" else p["BK"]
    stages = p.get("stages", 1)
    out: dict[str, Any] = {
        "e_mma": e_mma,
        "a_raw": a_raw,
        "w_raw": w_raw,
        "a_conv": a_conv,
        "w_conv": w_conv,
        "BK": bk,
        "stages": stages,
    }
    if variant.tag == "v2_mma_sync":
        out["a_tile"] = int(bm * bk * e_mma)
        out["w_tile"] = int(bn * bk * e_mma)
        out["ring"] = out["a_tile"] + out["w_tile"]
        out["a_stage"] = out["w_stage"] = 0
        out["conv"] = 0
    else:
        out["a_tile"] = int(bm * bk * a_raw)
        out["w_tile"] = int(bn * bk * w_raw)
        out["ring"] = stages * (out["a_tile"] + out["w_tile"])
        out["a_stage"] = int(bm * bk * e_mma) if a_conv else 0
        out["w_stage"] = int(bn * bk * e_mma) if w_conv else 0
        out["conv"] = out["a_stage"] + out["w_stage"]
    extra = 0
    if op.name == "fp8_blockwise_gemm":
        extra += stages * (bm + 4) * 4
    if p.get("mma") == "e2m1":
        extra += stages * (bm + bn) * (bk // 16)
    if variant.tag in ("v4_wgmma_tma", "v4_tma_mma"):
        extra += 1024
    out["extra"] = extra
    out["total"] = out["ring"] + out["conv"] + extra
    return out


def _gemm_path(op: OpSpec, dtype: str, variant: Variant, p: Params) -> str:
    if not variant.tensor_cores:
        return "fp32"
    mma = p.get("mma")
    if mma == "e4m3":
        return "fp8"
    if mma == "e2m1":
        return "fp4"
    if op.mma_path == "int8":
        return "int8"
    return "bf16" if dtype == "bf16" else "fp16"


def _dequant_alu(op: OpSpec, dtype: str, p: Params, n: int, k: int, m_tiles: int) -> float:
    """CUDA-core work to unpack/convert quantized operands (per weight, per M tile)."""
    mma = p.get("mma")
    if op.name in ("int4_gemm", "w4a8_gemm"):
        return 3.0 * n * k * m_tiles
    if mma == "f16" and (op.mma_path in ("fp8", "fp4") or dtype == "fp8"):
        return 2.0 * n * k * m_tiles * (2.0 if op.name == "fp4_gemm" else 1.0)
    if op.name == "fp8_blockwise_gemm":
        return 0.0
    return 0.0


@dataclass(frozen=True)
class _GemmWork:
    """Shape-derived quantities every gemm rung's plan reads (one computation for all)."""

    op: OpSpec
    m: int
    n: int
    k: int
    ea: float
    ew: float
    ideal: float
    a_bytes: float
    w_bytes: float
    flops: float
    l2: float
    #: MoE: distinct experts the tokens hit; 1.0 for every other op
    hit: float
    rows_e: float

    def m_tiles(self, bm: int) -> int:
        """M tiles of height ``bm``; MoE rows are grouped per expert and padded per expert."""
        if self.op.name == "moe_grouped_gemm":
            return int(round(self.hit)) * _cdiv(self.rows_e, bm)
        return _cdiv(self.m, bm)


def _gemm_work(op: OpSpec, s: Shape, dt: str, gpu: GPU) -> _GemmWork:
    """The ``_GemmWork`` of one (op, shape, dtype, gpu)."""
    m, n, k = gemm_mnk(op, s)
    ea, ew = _storage_bytes(op, dt)
    # MoE: rows are grouped per expert; tiles are padded per expert.
    hit = experts_hit(s["T"], s["k"], s["E"]) if op.name == "moe_grouped_gemm" else 1.0
    return _GemmWork(
        op,
        m,
        n,
        k,
        ea,
        ew,
        op.bytes(s, dt),
        m * k * ea,
        n * k * ew,
        op.flops(s, dt),
        gpu.l2_mb * 2**20,
        hit,
        m / hit,
    )


def _plan_gemm_naive(w: _GemmWork, p: Params) -> KernelPlan:
    """CUDA v0: one thread per output straight from global memory."""
    tb = p["TB"]
    threads = tb * tb
    grid = w.m_tiles(tb) * _cdiv(w.n, tb)
    # Each thread streams a row of A and a row of W; L1/L2 catch part of the reuse.
    reread = 0.5 if w.a_bytes + w.w_bytes > w.l2 else 0.12
    byts = (
        w.ideal + reread * (w.a_bytes * (_cdiv(w.n, tb) - 1) + w.w_bytes * (w.m_tiles(tb) - 1)) / 8
    )
    launches = 1
    if w.op.name == "moe_grouped_gemm":
        launches = int(round(w.hit))  # a loop over experts, one launch each
    return KernelPlan(
        threads,
        grid,
        0,
        40,
        launches,
        w.flops,
        "fp32",
        byts,
        threads * 8.0,
        tile_eff=0.55,
        alu_flops=w.flops * 0.25,
        extra={"M": w.m, "N": w.n, "K": w.k},
    )


def _plan_gemm_rowloop(w: _GemmWork, p: Params) -> KernelPlan:
    """Triton v0: one program per output row block, looping over K."""
    bn, bk = p["BLOCK_N"], p["BLOCK_K"]
    threads = p["num_warps"] * 32
    grid = w.m * _cdiv(w.n, bn)
    reread = 0.2 if bn * w.k * w.ew > w.l2 / 16 else 0.04
    byts = w.ideal + reread * w.w_bytes * max(0, w.m - 1)
    extra: dict[str, Any] = {"M": w.m, "N": w.n, "K": w.k}
    return KernelPlan(
        threads, grid, 0, 64, 1, w.flops, "fp32", byts, bn * bk * w.ew, tile_eff=0.7, extra=extra
    )


def _plan_gemm_smem_tiled(w: _GemmWork, p: Params) -> KernelPlan:
    """CUDA v1: shared-memory tiles with a TM×TM register micro-tile per thread."""
    bm, bn, bk, tm = p["BM"], p["BN"], p["BK"], p["TM"]
    threads = (bm // tm) * (bn // tm)
    smem = (bm + bn) * bk * 4
    grid = w.m_tiles(bm) * _cdiv(w.n, bn)
    miss = 0.05 if w.a_bytes + w.w_bytes < 0.5 * w.l2 else 0.2
    byts = w.ideal + miss * (w.a_bytes * (_cdiv(w.n, bn) - 1) + w.w_bytes * (w.m_tiles(bm) - 1))
    regs = 30 + tm * tm + 2 * tm
    eff = min(1.0, 0.55 + 0.06 * tm) * _tile_reuse_eff(bm, bn) ** 0.5
    return KernelPlan(
        threads,
        grid,
        smem,
        regs,
        1,
        w.flops,
        "fp32",
        byts,
        smem * 1.0,
        tile_eff=eff,
        extra={"M": w.m, "N": w.n, "K": w.k},
    )


def _gemm_tc_threads_regs(impl: str, tag: str, p: Params, bm: int, bn: int) -> tuple[int, int]:
    """Threads and registers of a tensor-core rung: the accumulator tile split over threads.

    The wgmma kernel runs one producer and one or two consumer warpgroups; the others run
    the ``warps``/``num_warps`` knob.
    """
    if impl == "cuda" and tag == "v4_wgmma_tma":
        consumers = 2 if bm >= 128 else 1
        threads = 128 * (consumers + 1)
        acc_per_thread = (bm // consumers) * bn // 128
        return threads, 40 + acc_per_thread
    if impl == "cuda":
        threads = p["warps"] * 32
        acc_per_thread = bm * bn // threads
        return threads, 48 + int(acc_per_thread * 1.15)
    threads = p["num_warps"] * 32
    acc_per_thread = bm * bn // threads
    return threads, 56 + int(acc_per_thread * 1.1)


def _gemm_tc_smem_inflight(
    op: OpSpec,
    dt: str,
    v: Variant,
    p: Params,
    stages: int,
    tile_bytes: float,
    extra: dict[str, Any],
) -> tuple[int, float]:
    """Shared memory and bytes in flight of a tensor-core rung's operand tiles.

    CUDA rungs take the template's byte layout (recorded in ``extra["layout"]``); Triton
    rungs hold ``stages`` A/W tiles (one for ``tl.dot`` without a pipeline).
    """
    tag = v.tag
    if v.impl == "cuda":
        lay = gemm_layout(op, dt, v, p)
        inflight = tile_bytes if tag == "v2_mma_sync" else max(1, stages - 1) * tile_bytes
        extra["layout"] = lay
        return lay["total"], inflight
    if tag == "v1_tl_dot":
        return int(tile_bytes), tile_bytes
    smem = int(stages * tile_bytes) + (1024 if tag == "v4_tma_desc" else 0)
    return smem, max(1, stages - 1) * tile_bytes


def _persistent_gemm_grid(
    op: OpSpec, gpu: GPU, v: Variant, p: Params, tiles: int, split: int, grid: int
) -> int:
    """What a persistent rung's template launches (generator 1.6.0; the feedback reports it).

    Triton ``grid = (min(num_sms, tiles)[, split])``; the wgmma kernel one CTA per SM
    rounded up to whole clusters; stream-K a couple per SM (occupancy-sized).
    """
    if v.impl == "triton" and op.name != "moe_grouped_gemm":
        return min(tiles, gpu.sms) * split
    if v.tag == "v4_wgmma_tma":
        cluster = max(1, int(p.get("cluster_m", 1)))
        return _cdiv(min(grid, gpu.sms), cluster) * cluster
    return min(grid, gpu.sms * 2)


def _plan_gemm_tensor_core(w: _GemmWork, dt: str, gpu: GPU, v: Variant, p: Params) -> KernelPlan:
    """Tensor-core rungs (CUDA v2+/Triton v1+): padded tiles, pipelines, split-K, persistence."""
    op = w.op
    impl, tag = v.impl, v.tag
    path = _gemm_path(op, dt, v, p)
    launches = 1
    extra: dict[str, Any] = {"M": w.m, "N": w.n, "K": w.k}
    alu = 0.0
    bm = knob(p, "BM", "BLOCK_M", default=64)
    bn = knob(p, "BN", "BLOCK_N", default=64)
    if tag == "v4_wgmma_tma":
        bk = int(128 / mma_operand_bytes(op, dt, p))
    else:
        bk = knob(p, "BK", "BLOCK_K", default=32)
    stages = knob(p, "stages", "num_stages", default=1)
    split = knob(p, "split_k", "SPLIT_K", default=1)
    threads, regs = _gemm_tc_threads_regs(impl, tag, p, bm, bn)
    tile_bytes = bm * bk * w.ea + bn * bk * w.ew
    smem, inflight = _gemm_tc_smem_inflight(op, dt, v, p, stages, tile_bytes, extra)
    if op.name == "fp8_blockwise_gemm":
        if impl == "triton":
            smem += stages * (bm + 4) * 4
        alu += w.flops / 128.0
    mt, nt = w.m_tiles(bm), _cdiv(w.n, bn)
    tiles = mt * nt
    grid = tiles * split
    persistent = tag in ("v4_streamk", "v4_wgmma_tma", "v3_persistent", "v4_tma_desc")
    if persistent:
        grid = _persistent_gemm_grid(op, gpu, v, p, tiles, split, grid)
    # a grouped (GROUP_M) launch order is the row-major one when there is a single row of
    # tiles: both walk the same A rows, so GROUP_M cannot change the traffic (issue 39)
    grouped = p.get("GROUP_M", 8) > 1 or persistent or mt == 1
    miss = 0.02 if w.a_bytes + w.w_bytes < 0.5 * w.l2 else (0.06 if grouped else 0.14)
    byts = w.ideal + miss * (w.a_bytes * (nt - 1) + w.w_bytes * (mt - 1))
    if split > 1:
        byts += split * w.m * w.n * 4.0 * 2
        launches += 1
    # Tensor cores execute whole tiles: padding along M (decode!, per expert for MoE) and N
    # is wasted work.
    m_pad = mt * bm
    exec_flops = 2.0 * m_pad * (nt * bn) * w.k
    alu += _dequant_alu(op, dt, p, w.n, w.k, mt)
    if regs > gpu.max_regs_per_thread and impl == "cuda":
        extra["spill_bytes"] = (regs - gpu.max_regs_per_thread) * 4 * 2
    extra.update({"BK": bk, "tiles": tiles, "m_tiles": mt, "stages": stages, "split": split})
    eff = _tile_reuse_eff(bm, bn)
    return KernelPlan(
        threads,
        grid,
        smem,
        regs,
        launches,
        exec_flops,
        path,
        byts,
        inflight,
        tile_eff=eff,
        alu_flops=alu,
        persistent=persistent,
        extra=extra,
    )


def _plan_gemm(op: OpSpec, s: Shape, dt: str, gpu: GPU, v: Variant, p: Params) -> KernelPlan:
    w = _gemm_work(op, s, dt, gpu)
    impl, tag = v.impl, v.tag
    if impl == "cuda" and tag == "v0_naive":
        return _plan_gemm_naive(w, p)
    if impl == "triton" and tag == "v0_rowloop":
        return _plan_gemm_rowloop(w, p)
    if impl == "cuda" and tag == "v1_smem_tiled":
        return _plan_gemm_smem_tiled(w, p)
    return _plan_gemm_tensor_core(w, dt, gpu, v, p)


# --------------------------------------------------------------------------------------
# gemv family
# --------------------------------------------------------------------------------------


def _w_elem(dt: str) -> float:
    return {"int4": 0.5, "fp4": 0.5, "int8": 1.0, "fp8": 1.0}.get(dt, 2.0)


def _plan_gemv(op: OpSpec, s: Shape, dt: str, gpu: GPU, v: Variant, p: Params) -> KernelPlan:
    b, n, k = s["B"], s["N"], s["K"]
    flops = op.flops(s, dt)
    ideal = op.bytes(s, dt)
    ew = _w_elem(dt)
    alu = (2.0 if dt in ("int4", "fp4") else 1.0 if dt in ("int8", "fp8") else 0.0) * n * k
    tag, impl = v.tag, v.impl
    launches = 1
    byts = ideal
    extra: dict[str, Any] = {}
    if impl == "cuda":
        if tag == "v0_scalar":
            threads = p["threads"]
            grid = _cdiv(n, threads)
            inflight = threads * 16.0
            # each lane walks its own row: every warp load touches 32 different rows
            byts = ideal * 1.6
            return KernelPlan(
                threads, grid, 0, 32, 1, flops, "fp32", byts, inflight, alu_flops=alu, extra=extra
            )
        warps = p["warps"]
        threads = warps * 32
        rows = p.get("rows", 1)
        split = p.get("split_k", 1)
        if tag == "v1_warp_row":
            grid = _cdiv(n, warps)
            inflight = threads * 4.0 * p["unroll"]
            smem = 0
        elif tag == "v2_vec128":
            grid = _cdiv(n, warps * rows)
            inflight = threads * p["vec"] * rows * 1.0
            smem = 0
        elif tag == "v3_splitk":
            grid = _cdiv(n, warps * rows) * split
            inflight = threads * p["vec"] * rows * 1.0
            smem = warps * rows * b * 4
        else:  # v4_tma_bulk / v4_cp_async_pipe: persistent ring of weight slabs
            chunk = p["chunk"]
            smem = p["stages"] * warps * chunk + 64
            grid = _cdiv(n, warps) * split
            inflight = (p["stages"] - 1) * warps * chunk * 1.0
        if split > 1:
            byts += split * b * n * 4.0 * 2
            launches += 1
        regs = 40 + 8 * rows + (16 if dt in ("int4", "fp4") else 0)
        return KernelPlan(
            threads,
            grid,
            int(smem),
            regs,
            launches,
            flops,
            "fp32",
            byts,
            inflight,
            alu_flops=alu,
            persistent=tag.startswith("v4"),
            extra=extra,
        )
    # triton
    threads = p["num_warps"] * 32
    bk = p["BLOCK_K"]
    bn = p.get("BLOCK_N", 1)
    split = p.get("SPLIT_K", 1)
    grid = _cdiv(n, bn) * split
    inflight = bn * bk * ew * (max(1, p.get("num_stages", 1) - 1) if tag == "v4_tma_desc" else 1)
    smem = int(p.get("num_stages", 0) * bn * bk * ew) if tag == "v4_tma_desc" else 0
    if split > 1:
        byts += split * b * n * 4.0 * 2
        launches += 1
    regs = 32 + int(bn * bk * ew / (threads * 4) * 2)
    return KernelPlan(
        threads,
        grid,
        smem,
        min(regs, 255),
        launches,
        flops,
        "fp32",
        byts,
        inflight,
        alu_flops=alu,
        extra=extra,
    )


# --------------------------------------------------------------------------------------
# attention
# --------------------------------------------------------------------------------------


def decode_dims(op: OpSpec, s: Shape) -> dict[str, int]:
    """Normalised decode dims: group size, K/V widths, effective KV length."""
    if op.name == "mla_decode":
        return {
            "B": s["B"],
            "Hkv": 1,
            "group": s["Hq"] * s["Sq"],
            "Dk": 576,
            "Dv": 512,
            "Skv": s["Skv"],
            "Hq": s["Hq"] * s["Sq"],
        }
    skv = min(s["Skv"], s.get("W", s["Skv"]))
    return {
        "B": s["B"],
        "Hkv": s["Hkv"],
        "group": s["Hq"] // s["Hkv"],
        "Dk": s["D"],
        "Dv": s["D"],
        "Skv": skv,
        "Hq": s["Hq"],
    }


def _decode_tiled_threads(impl: str, tag: str, p: Params) -> int:
    """Threads of a KV-tiled decode rung (v2+).

    The wgmma kernel runs three fixed warpgroups; the others run the ``warps``/``num_warps``
    knob.
    """
    if impl == "cuda" and tag == "v4_wgmma_tma":
        return 384
    if impl == "cuda":
        return p["warps"] * 32
    return p["num_warps"] * 32


def _plan_decode(op: OpSpec, s: Shape, dt: str, gpu: GPU, v: Variant, p: Params) -> KernelPlan:
    d = decode_dims(op, s)
    b, hkv, g, dk, dv, skv, hq = d["B"], d["Hkv"], d["group"], d["Dk"], d["Dv"], d["Skv"], d["Hq"]
    ekv = ELEM_BYTES[dt]
    flops = op.flops(s, dt)
    ideal = op.bytes(s, dt)
    kv_bytes = b * skv * hkv * (dk + (dv if op.name != "mla_decode" else 0)) * ekv
    tag, impl = v.tag, v.impl
    extra: dict[str, Any] = {"group": g}
    l2 = gpu.l2_mb * 2**20
    if tag == "v0_naive":
        threads = knob(p, "threads", default=p.get("num_warps", 2) * 32)
        grid = b * hq
        scores = b * hq * skv * 4.0 * (3 if impl == "cuda" else 2)
        byts = ideal + kv_bytes * (g - 1) * (0.5 if kv_bytes > l2 else 0.15) + scores
        launches = 3 if impl == "cuda" else 2
        infl = threads * 4.0 if impl == "cuda" else p["BLOCK_N"] * dk * ekv * 0.5
        return KernelPlan(
            threads,
            grid,
            0,
            40,
            launches,
            flops * 1.1,
            "fp32",
            byts,
            infl,
            tile_eff=0.8,
            extra=extra,
        )
    if tag in ("v1_online_softmax", "v1_online"):
        threads = knob(p, "threads", default=p.get("num_warps", 2) * 32)
        grid = b * hq
        byts = ideal + kv_bytes * (g - 1) * (0.7 if kv_bytes > l2 else 0.3)
        smem = p["BLOCK_N"] * 4 + dk * 4
        inflight = threads * 4.0 if impl == "cuda" else p["BLOCK_N"] * dk * ekv
        return KernelPlan(threads, grid, smem, 48, 1, flops, "fp32", byts, inflight, extra=extra)
    bn = p["BLOCK_N"]
    splits = knob(p, "splits", "NUM_SPLITS", default=1)
    stages = knob(p, "stages", "num_stages", default=1)
    # Query heads served per CTA: the whole GQA group, but MLA's 128+ heads are split
    # into blocks (16 on CUDA cores, 64 for tensor-core rungs) like FlashMLA does.
    hb = min(g, 64 if v.tensor_cores else 16)
    head_blocks = _cdiv(g, hb)
    threads = _decode_tiled_threads(impl, tag, p)
    grid = b * hkv * splits * head_blocks
    launches = 1 + (1 if splits > 1 else 0)
    byts = ideal + (2.0 * b * hq * splits * (dv + 2) * 4 if splits > 1 else 0.0)
    byts += kv_bytes * (head_blocks - 1) * (0.5 if kv_bytes > l2 else 0.15)
    q_rows = max(16, hb) if v.tensor_cores else hb
    if tag == "v4_wgmma_tma":
        q_rows = max(64, hb)
    qtile = q_rows * dk * 2
    kv_tile = bn * (dk + (dv if op.name != "mla_decode" else 0)) * ekv
    kv_elems = bn * (dk + (dv if op.name != "mla_decode" else 0))
    dequant_buf = kv_elems * 2 if (dt == "fp8" and v.tensor_cores and impl == "cuda") else 0
    if tag in ("v2_gqa_vec", "v2_gqa_dot"):
        smem = kv_tile + hb * dk * 4 + hb * bn * 4 if impl == "cuda" else kv_tile
        inflight = kv_tile if impl == "triton" else threads * p["vec"] * 2.0
    elif tag == "v3_split_kv":
        smem = (
            kv_tile + hb * dk * 4 + hb * bn * 4 if impl == "cuda" else int(max(1, stages) * kv_tile)
        )
        inflight = kv_tile * (max(1, stages - 1) if impl == "triton" else 1)
    elif impl == "cuda" and tag == "v4_wgmma_tma":
        smem = 64 * dk * 2 + stages * kv_tile + 64 * bn * 2 + dequant_buf
        inflight = (stages - 1) * kv_tile
    elif impl == "cuda":
        smem = stages * kv_tile + q_rows * dk * 2 + dequant_buf
        inflight = (stages - 1) * kv_tile
    else:
        smem = stages * kv_tile + qtile
        inflight = (stages - 1) * kv_tile
    if v.tensor_cores:
        path = "bf16" if dt in ("bf16", "fp8") else "fp16"
        exec_flops = flops * q_rows / max(hb, 1)
    else:
        path = "fp32"
        exec_flops = flops
    alu = b * skv * hkv * dk * (2.0 if dt == "fp8" else 0.0)
    regs = 64 + (q_rows * dv // max(threads, 1)) + (32 if v.tensor_cores else 0)
    extra.update({"q_rows": q_rows, "splits": splits, "head_block": hb})
    return KernelPlan(
        threads,
        grid,
        int(smem),
        min(regs, 255),
        launches,
        exec_flops,
        path,
        byts,
        inflight,
        alu_flops=alu,
        persistent=False,
        extra=extra,
    )


def prefill_dims(op: OpSpec, s: Shape) -> dict[str, Any]:
    """Normalised prefill dims: query length, key length, causal flag."""
    if op.name == "flash_prefill":
        return {"B": s["B"], "Sq": s["S"], "Skv": s["S"], "causal": True}
    if op.name == "chunked_prefill":
        return {"B": s["B"], "Sq": s["C"], "Skv": s["P"] + s["C"], "causal": True}
    if op.name == "cross_attn":
        return {"B": s["B"], "Sq": s["Sq"], "Skv": s["Senc"], "causal": False}
    return {"B": s["B"], "Sq": s["Tt"], "Skv": s["Skv"] + s["Tt"], "causal": False}


def _plan_prefill(op: OpSpec, s: Shape, dt: str, gpu: GPU, v: Variant, p: Params) -> KernelPlan:
    d = prefill_dims(op, s)
    b, sq, skv, causal = d["B"], d["Sq"], d["Skv"], d["causal"]
    hq, hkv, dh = s["Hq"], s["Hkv"], s["D"]
    e = ELEM_BYTES[dt]
    flops = op.flops(s, dt)
    ideal = op.bytes(s, dt)
    full = 4.0 * b * hq * sq * skv * dh
    kv_bytes = 2.0 * b * skv * hkv * dh * e
    tag, impl = v.tag, v.impl
    extra: dict[str, Any] = {}
    l2 = gpu.l2_mb * 2**20
    if tag == "v0_naive":
        threads = p.get("threads", 128)
        grid = b * hq * _cdiv(sq, 16)
        byts = ideal + b * hq * sq * skv * (4 + 4 + 2 + 2.0)
        return KernelPlan(
            threads, grid, 0, 40, 3, full, "fp32", byts, threads * 8.0, tile_eff=1.0, extra=extra
        )
    bm, bn = p["BLOCK_M"], p["BLOCK_N"]
    stages = knob(p, "stages", "num_stages", default=1)
    q_blocks = _cdiv(sq, bm)
    grid = b * hq * q_blocks
    miss = 0.1 if kv_bytes < 0.5 * l2 else 0.35
    byts = ideal + kv_bytes * max(0, q_blocks - 1) * miss * (
        hq / hkv if tag == "v1_tiled_online" else 1.0
    )
    # Causal: rungs from v2 skip fully-masked blocks; the diagonal costs one extra block.
    if causal and tag not in ("v1_tiled_online",):
        exec_flops = (
            flops * (1.0 + bn / max(skv, 1)) if op.name == "flash_prefill" else flops * 1.05
        )
    else:
        exec_flops = full if causal else flops
    if tag == "v1_tiled_online":
        threads = 128
        smem = (bm + 2 * bn) * dh * 4 + bm * bn * 4
        return KernelPlan(
            threads,
            grid,
            smem,
            64,
            1,
            exec_flops,
            "fp32",
            byts,
            smem * 1.0,
            tile_eff=min(1.0, 0.6 + bm / 160),
            extra=extra,
        )
    if impl == "triton" and tag == "v1_online":
        threads = p["num_warps"] * 32
    elif impl == "cuda" and tag == "v4_wgmma_tma":
        threads = 128 * (bm // 64 + 1)
    else:
        threads = knob(p, "warps", "num_warps", default=4) * 32
    if tag in ("v2_mma_sync", "v1_online"):
        smem = (bm + 2 * bn) * dh * e
        inflight = 2 * bn * dh * e
    else:
        smem = (bm + 2 * bn * stages) * dh * e + (1024 if "tma" in tag else 0)
        if impl == "cuda" and tag == "v4_wgmma_tma":
            smem += bm * bn * 2  # P staged for the PV wgmma
        inflight = 2 * bn * dh * e * max(1, stages - 1)
    path = "bf16" if dt == "bf16" else "fp16"
    regs = 64 + bm * dh // threads + bm * bn // threads // 2
    eff = _tile_reuse_eff(bm, bn)
    persistent = tag in ("v4_persistent_lpt", "v4_wgmma_tma")
    if causal and not persistent:
        extra["causal_imbalance"] = True
    return KernelPlan(
        threads,
        grid,
        int(smem),
        min(regs, 255),
        1,
        exec_flops,
        path,
        byts,
        inflight,
        tile_eff=eff,
        persistent=persistent,
        extra=extra,
    )


# --------------------------------------------------------------------------------------
# rowwise / elementwise / sampling / scan
# --------------------------------------------------------------------------------------


def row_dims(op: OpSpec, s: Shape) -> tuple[int, int]:
    """(rows, row length in elements) of a rowwise op."""
    if op.name == "rmsnorm":
        return s["T"], s["H"]
    if op.name == "logits_softmax":
        return s["B"], s["V"]
    return s["T"] * 2 * s["Hkv"], s["D"]


def _cuda_row_chain(n: int, step: int, rows_per_block: int) -> float:
    """Dependent round trips of a CUDA rowwise block (rungs 0-3), read off the template.

    The statistic loop loads ``step`` elements per iteration and folds them into the running
    statistic before the next iteration's loads issue (in-order issue per warp): one trip
    per iteration. The block reduction then gates the apply pass, whose loads (the weight,
    the re-read row) start a further trip. A block that owns several rows does them one
    after another. This is the fixed cost that keeps these rungs at ~5 µs on a 64-row
    problem where Triton, which loads its whole row in one batch, takes under 3 µs.
    """
    return float(rows_per_block * (_cdiv(n, max(step, 1)) + 1))


#: Dependent cycles of one ``stat_add`` of the CUDA rowwise templates (per element, in
#: sequence within a thread). A sum of squares or an abs-max is one FFMA/FMNMX (~4-6
#: cycles). The softmax's online (max, sum) update branches on ``x > m``; lanes diverge,
#: so a warp runs both sides, each a subtract, an ``__expf`` (FMUL + MUFU.EX2) and an
#: FFMA. Fitted on the H200's CUDA softmax rungs at batch 1, where one CTA walks a 128K
#: row: the vector rung (two unguarded updates per trip) gives 113 cycles per element
#: over a 0.45 µs trip, the single-warp rung (four per trip) 124.
ROW_STAT_CYCLES = {"logits_softmax": 113.0}
ROW_STAT_CYCLES_DEFAULT = 5.0
#: Rungs 1-2 wrap every update in a bounds test (``if (i < kN) stat_add(...)``, after a
#: guarded load): a second branch around the divergent update, whose paths reconverge
#: twice. The same batch-1 softmax rows put these rungs at 165 cycles per element.
GUARDED_STAT_FACTOR = 1.45
#: Iterations nvcc unrolls a constant-trip-count scalar loop by (its default of 4), hoisting
#: their independent loads ahead of the dependent statistic updates: one trip per four.
NVCC_UNROLL = 4


def _row_stat_cycles(op: OpSpec) -> float:
    return ROW_STAT_CYCLES.get(op.name, ROW_STAT_CYCLES_DEFAULT)


def _plan_rowwise(op: OpSpec, s: Shape, dt: str, gpu: GPU, v: Variant, p: Params) -> KernelPlan:
    rows, n = row_dims(op, s)
    e = ELEM_BYTES[dt]
    ideal = op.bytes(s, dt)
    flops = op.flops(s, dt)
    row_bytes = n * e
    tag, impl = v.tag, v.impl
    two_pass = ideal * (1.0 + 0.5 * (1.0 if row_bytes * 8 > 256 * 1024 else 0.3))
    if impl == "cuda":
        if tag == "v0_scalar":
            threads = p["threads"]
            warps = threads // 32
            # each warp walks its own row 32 elements at a time; the warps of a block run
            # side by side, so the block's critical path is one row's
            return KernelPlan(
                threads,
                _cdiv(rows, warps),
                0,
                32,
                1,
                flops,
                "fp32",
                two_pass,
                threads * e,
                extra={},
                chain=_cuda_row_chain(n, 32 * NVCC_UNROLL, rows_per_block=1),
                trip_cycles=NVCC_UNROLL * _row_stat_cycles(op),
            )
        if tag in ("v1_block_reduce", "v2_warp_shuffle"):
            # the two rungs share their loops (``unroll`` loads per thread per statistic
            # iteration, then an apply pass re-reading the row); they differ only in how
            # the block combines its partial statistics (a shared-memory tree vs shuffles)
            threads = p["threads"]
            per_thread = max(1, n // threads)
            inflight = threads * e * min(per_thread, p.get("unroll", 1))
            return KernelPlan(
                threads,
                rows,
                threads * 4 if tag == "v1_block_reduce" else threads // 32 * 8,
                32,
                1,
                flops,
                "fp32",
                two_pass,
                inflight,
                extra={},
                chain=_cuda_row_chain(n, threads * p.get("unroll", 1), rows_per_block=1),
                trip_cycles=p.get("unroll", 1) * _row_stat_cycles(op) * GUARDED_STAT_FACTOR,
            )
        if tag == "v3_vec_onepass":
            threads, vec, r = p["threads"], p["vec"], p["rows"]
            fits = row_bytes <= threads * vec * 8
            per_thread_regs = (row_bytes / (threads * 4)) if fits else vec / 4 * 2
            regs = 32 + int(per_thread_regs)
            byts = ideal if fits else ideal * 1.5
            inflight = min(row_bytes, threads * vec * 8) * r
            extra = {"fits": fits}
            # a row that fits is one batch of independent vector loads (then per x vec
            # statistic updates in sequence); one that does not is streamed by the
            # statistic loop, one vector per thread per iteration
            lanes = max(1, vec // e)  # elements per vector load
            step = n if fits else threads * lanes
            folded = _cdiv(n, threads) if fits else lanes
            return KernelPlan(
                threads,
                _cdiv(rows, r),
                64 * r,
                min(regs, 255),
                1,
                flops,
                "fp32",
                byts,
                inflight,
                extra=extra,
                chain=_cuda_row_chain(n, step, rows_per_block=min(r, rows)),
                trip_cycles=folded * _row_stat_cycles(op),
            )
        threads, r, st = p["threads"], p["rows"], p["stages"]
        chunk = min(row_bytes, 32768)
        smem = int(st * r * chunk) + 64
        byts = ideal if row_bytes <= 32768 else ideal * 1.5
        return KernelPlan(
            threads,
            _cdiv(rows, r),
            smem,
            48,
            1,
            flops,
            "fp32",
            byts,
            (st - 1) * r * chunk,
            persistent=True,
            extra={"chunk": chunk},
            # the ring prefetches the next row while this one is reduced: only the apply
            # pass (weight loads issued after the block reduction) is a round trip per row,
            # after the thread's share of the row is folded from shared memory in sequence
            chain=float(min(r, rows)),
            trip_cycles=_cdiv(n, threads) * _row_stat_cycles(op),
        )
    # triton
    threads = p["num_warps"] * 32
    # passes over a row: max, exp-sum and store for a softmax; statistic and apply otherwise
    uses = 3 if op.name == "logits_softmax" else 2
    if tag == "v0_scalar":
        # one program per row loops over BLOCK-sized chunks; every iteration ends in a
        # tl.sum/tl.max across the program that the next chunk's accumulation waits on
        return KernelPlan(
            threads,
            rows,
            0,
            32,
            1,
            flops,
            "fp32",
            two_pass,
            p["BLOCK"] * e,
            extra={},
            chain=uses * _cdiv(n, p["BLOCK"]),
        )
    block = 1 << max(0, (n - 1).bit_length())
    fits = block * e <= 64 * 1024
    # Triton specialises an integer argument equal to 1 as a constant: with one row, every
    # row of a [ROWS, BLOCK] tile past the first is provably masked off (program ids are
    # non-negative), so its loads, math and registers fold away at compile time.
    r = 1 if rows == 1 else p.get("ROWS", 1)
    # The whole [ROWS, BLOCK] tile is held in registers (upcast to fp32): past the register
    # budget it spills to local memory, which each pass over the tile re-reads. DRAM sees
    # the row once either way.
    per_thread = block * r / threads
    spill = tile_spill_bytes(per_thread, threads, _cdiv(rows, r), uses)
    footprint = tile_spill_bytes(per_thread, threads, 1, 0)
    byts = ideal
    regs = 32 + int(min(per_thread, 400))
    grid = _cdiv(rows, r)
    if tag in ("v3_persistent", "v4_pipelined"):
        grid = min(grid, gpu.sms * p.get("waves", 2) * 2)
    smem = int(p.get("num_stages", 0) * r * min(block * e, 32768)) if tag == "v4_pipelined" else 0
    inflight = min(block * e, 65536) * r
    return KernelPlan(
        threads,
        grid,
        smem,
        min(regs, 255),
        1,
        flops,
        "fp32",
        byts,
        inflight,
        persistent=tag in ("v3_persistent", "v4_pipelined"),
        extra={"fits": fits, "BLOCK": block},
        spill_local=spill,
        spill_footprint=footprint,
    )


#: Input streams per output element (for bytes in flight) and the naive rung's extra traffic.
_EW_STREAMS = {
    "swiglu_act": 2,
    "rope": 2,
    "moe_combine": 4,
    "conv1d_causal": 2,
    "embedding_gather": 1,
    "kv_append": 2,
    "paged_kv_copy": 2,
    "moe_scatter": 1,
}
_EW_NAIVE_BYTES = {
    "rope": 1.35,
    "conv1d_causal": 1.9,
    "moe_combine": 1.15,
    "moe_scatter": 1.1,
    "embedding_gather": 1.05,
    "kv_append": 1.1,
    "paged_kv_copy": 1.0,
    "swiglu_act": 1.0,
}


def ew_elems(op: OpSpec, s: Shape) -> int:
    """Output elements an elementwise op writes."""
    if op.name == "swiglu_act":
        return s["M"] * s["N"]
    if op.name == "rope":
        return s["T"] * (s["Hq"] + s["Hkv"]) * s["D"]
    if op.name == "moe_combine":
        return s["T"] * s["H"]
    if op.name == "moe_scatter":
        return s["T"] * s["k"] * s["H"]
    if op.name == "conv1d_causal":
        return s["B"] * s["L"] * s["C"]
    if op.name == "embedding_gather":
        return s["T"] * s["H"]
    if op.name == "kv_append":
        return s["T"] * 2 * s["Hkv"] * s["D"]
    return 2 * s["n_blocks"] * s["page"] * s["Hkv"] * s["D"] * s["L"]


def _plan_elementwise(op: OpSpec, s: Shape, dt: str, gpu: GPU, v: Variant, p: Params) -> KernelPlan:
    n = ew_elems(op, s)
    e = ELEM_BYTES[dt]
    ideal = op.bytes(s, dt)
    flops = op.flops(s, dt)
    streams = _EW_STREAMS[op.name]
    tag, impl = v.tag, v.impl
    if impl == "cuda":
        threads = p["threads"]
        if tag == "v0_scalar":
            return KernelPlan(
                threads,
                _cdiv(n, threads),
                0,
                24,
                1,
                flops,
                "fp32",
                ideal * _EW_NAIVE_BYTES[op.name],
                threads * e * streams,
                extra={},
            )
        if tag == "v1_coalesced":
            grid = min(_cdiv(n, threads), gpu.sms * p["waves"] * max(1, 2048 // threads))
            return KernelPlan(
                threads, grid, 0, 24, 1, flops, "fp32", ideal, threads * e * streams * 1.5, extra={}
            )
        if tag == "v2_vec":
            vec = p["vec"]
            grid = _cdiv(n * e, threads * vec)
            return KernelPlan(
                threads,
                grid,
                0,
                28,
                1,
                flops,
                "fp32",
                ideal,
                threads * vec * streams * 1.0,
                extra={},
            )
        if tag == "v3_fused_ilp":
            vec, u = p["vec"], p["unroll"]
            grid = _cdiv(n * e, threads * vec * u)
            regs = 24 + vec // 4 * u * streams
            # The unrolled body starts each step with ``if (vi >= total) break;``: the next
            # step's loads sit behind that branch, and a GPU does not issue loads past an
            # unresolved branch, so with in-order issue they wait for this step's stores
            # (one round trip per step). Bandwidth hides it at scale; a small tensor pays
            # ``unroll`` trips (the H200's 5.9 µs at 64 x 14336, slowest of the ladder).
            return KernelPlan(
                threads,
                grid,
                0,
                regs,
                1,
                flops,
                "fp32",
                ideal,
                threads * vec * streams * 1.0,
                extra={},
                chain=float(u),
            )
        chunk, st = p["chunk"], p["stages"]
        smem = st * chunk * min(streams, 2) + 64
        grid = min(_cdiv(n * e, chunk), gpu.sms * 2)
        return KernelPlan(
            threads,
            grid,
            smem,
            32,
            1,
            flops,
            "fp32",
            ideal,
            (st - 1) * chunk * min(streams, 2) * 1.0,
            persistent=True,
            extra={},
        )
    # triton: vector width depends on whether the compiler can prove contiguity
    threads = p.get("num_warps", 4) * 32
    block = p["BLOCK"]
    vec_bytes = 16 if tag in ("v2_vec_hints", "v3_persistent", "v4_persistent_evict") else 4
    grid = _cdiv(n, block)
    if tag in ("v3_persistent", "v4_persistent_evict"):
        grid = min(grid, gpu.sms * p["waves"] * 2)
    byts = ideal * (_EW_NAIVE_BYTES[op.name] if tag == "v0_scalar" else 1.0)
    inflight = (
        min(block * e, threads * vec_bytes * max(1, block * e / (threads * vec_bytes))) * streams
    )
    return KernelPlan(
        threads,
        grid,
        0,
        32,
        1,
        flops,
        "fp32",
        byts,
        inflight,
        persistent=grid < _cdiv(n, block),
        extra={},
    )


def sampling_chain(op: OpSpec, s: Shape, v: Variant, p: Params) -> float:
    """Dependent round trips one row's program makes (read off the templates).

    The samplers give a whole row to one program, so at small batch the row's *serial*
    work, not DRAM bandwidth, sets the time:

    * Triton rungs loop over the row in ``BLOCK`` chunks, and every chunk ends in a
      ``tl.sum``/``tl.max`` the loop carries: one trip per chunk per pass. Passes: the
      statistics (split over ``SPLITS`` programs in the rejection rung), one per bisection
      round of the threshold (32 in the two-pass and fused rungs, ``ROUNDS`` after; min-p
      needs none), and two for the inverse-CDF draw. The naive rung's scan-draw kernel
      makes two passes over the sorted row (three when it must find the cut first).
    * CUDA rungs 1-4 stream their passes with coalesced, independent loads (bandwidth), but
      the draw has each thread walk its own contiguous ``V / threads`` segment element by
      element: one trip per element. The naive CUDA rung's one-thread-per-row scan is left
      to bandwidth (not measured).
    """
    vocab = s["V"]
    if v.impl == "cuda":
        if v.tag == "v0_sort":
            return 0.0
        return float(_cdiv(vocab, p["threads"]))
    chunks = _cdiv(vocab, p["BLOCK"])
    if v.tag == "v0_sort":
        return float((2 if op.name == "topk_sample" else 3) * chunks)
    rounds = 0 if op.name == "minp_sample" else (32 if v.level <= 2 else p.get("ROUNDS", 32))
    stats = _cdiv(chunks, p.get("SPLITS", 1))
    return float(stats + (rounds + 2) * chunks)


#: Thread-instructions per element of one pass over a row in the CUDA samplers (load,
#: convert, temperature, order key or exp, compare, histogram atomic or accumulate, loop
#: control). Rung 1 walks the row with a plain strided scalar loop (~12). Rungs 2-4 load
#: vectors but unpack them in a loop bounded at run time (``e < kVec && i0 + e < kV``, with
#: a per-element tail select), which the compiler cannot unroll: ~7 more per element. The
#: two values are what one SM's issue rate (128 lanes a clock) makes of the measured cost of
#: a pass at batch 1: 6 µs (rung 1) and 9-11 µs (rungs 2-4) over a 128K-entry row.
SAMPLER_ISSUE_SCALAR = 12.0
SAMPLER_ISSUE_VEC_LOOP = 19.0


def sampling_passes(op: OpSpec, v: Variant, p: Params) -> float:
    """Passes one CTA makes over its whole row before the draw (read off the CUDA templates).

    Rungs 1-2 compute the max and the exp-sum in two passes, then select the threshold by an
    8-bit (rung 1: ``radix_bits``) radix select, one histogram pass per digit. Rungs 3-4
    split the statistics over ``split`` CTAs (each streams ``1/split`` of the row), and the
    last CTA to finish selects alone: a radix select (rung 3) or ``rounds`` bisection passes
    (rung 4). Min-p needs no selection. Rung 2's register cache does not save passes: it is
    indexed by a runtime chunk counter, so it lives in local memory and is re-read each pass.
    """
    select_bits = p.get("radix_bits", 8)
    if op.name == "minp_sample":
        select = 0.0
    elif v.tag == "v4_sortfree":
        select = float(p.get("rounds", 8))
    else:
        select = float(_cdiv(32, select_bits))
    if v.level >= 3:
        return 1.0 / p.get("split", 1) + select
    return 2.0 + select


def triton_sampler_passes(op: OpSpec, v: Variant, p: Params) -> float:
    """Passes a Triton sampler's code makes over its row (see ``sampling_chain``): the
    statistics (one read of the row, split or not), one per bisection round of the
    threshold, two for the inverse-CDF draw."""
    rounds = 0 if op.name == "minp_sample" else (32 if v.level <= 2 else p.get("ROUNDS", 32))
    return 1.0 + rounds + 2.0


def _sampler_dram_bytes(
    op: OpSpec, s: Shape, dt: str, gpu: GPU, v: Variant, p: Params, kp: KernelPlan
) -> float:
    """DRAM bytes of a Triton sampler counted from the passes its code makes (generator
    1.6.0). The planner's figure assumes the re-reads of a row hit L2; that holds only
    while the rows the resident programs walk fit in L2 together. Past that every pass
    streams its row from DRAM again (the A10's 6 MB L2 against 64 live 300 KB rows)."""
    if v.impl != "triton" or v.tag == "v0_sort":
        return kp.bytes
    row = s["V"] * ELEM_BYTES[dt]
    live = min(kp.grid, gpu.sms * max(1, 2048 // max(kp.threads, 32)))
    if live * row <= gpu.l2_mb * 2**20:
        return kp.bytes
    return max(kp.bytes, s["B"] * row * triton_sampler_passes(op, v, p))


def _plan_sampling(op: OpSpec, s: Shape, dt: str, gpu: GPU, v: Variant, p: Params) -> KernelPlan:
    kp = replace(_plan_sampling_work(op, s, dt, gpu, v, p), chain=sampling_chain(op, s, v, p))
    kp = replace(kp, bytes=_sampler_dram_bytes(op, s, dt, gpu, v, p, kp))
    if v.impl != "cuda" or v.tag == "v0_sort":
        return kp
    # One CTA owns a row's selection: when rows are few, each SM walks whole rows pass after
    # pass at one SM's issue rate (rows on one SM share it), however idle DRAM is.
    rows_per_sm = _cdiv(s["B"], gpu.sms)
    per_elem = SAMPLER_ISSUE_SCALAR if v.level == 1 else SAMPLER_ISSUE_VEC_LOOP
    return replace(
        kp,
        sm_issue=s["V"] * per_elem * sampling_passes(op, v, p) * rows_per_sm,
        chain_programs=s["B"],
    )


def _plan_sampling_work(
    op: OpSpec, s: Shape, dt: str, gpu: GPU, v: Variant, p: Params
) -> KernelPlan:
    b, vocab = s["B"], s["V"]
    e = ELEM_BYTES[dt]
    flops = op.flops(s, dt)
    base = b * vocab
    tag, impl = v.tag, v.impl
    threads = knob(p, "threads", default=p.get("num_warps", 4) * 32)
    if tag == "v0_sort":
        byts = base * (e + 4 + 40 + 8)
        launches = 10 if impl == "cuda" else 8
        grid = _cdiv(base, threads * 4)
        return KernelPlan(
            threads,
            grid,
            8192,
            40,
            launches,
            flops + 20.0 * base,
            "fp32",
            byts,
            threads * 16.0,
            extra={},
        )
    if tag in ("v1_block_radix",):
        passes = 32 // p["radix_bits"]
        smem = (1 << p["radix_bits"]) * 4 * (threads // 32)
        return KernelPlan(
            threads,
            b,
            smem,
            40,
            2,
            flops * 2,
            "fp32",
            base * e * (1 + passes * 0.5),
            threads * 4.0,
            extra={},
        )
    if tag == "v1_two_pass":
        return KernelPlan(
            threads, b, 0, 40, 2, flops, "fp32", base * e * 2.5, p["BLOCK"] * e * 1.0, extra={}
        )
    if tag == "v2_warp_topk":
        smem = (
            256 * 8 + threads // 32 * 4
        )  # 8-bit radix histogram (counts + mass) and warp partials
        cached = min(1.0, threads * p["items"] * p["vec"] / (vocab * e))
        regs = 48 + p["items"] * p["vec"] // 4
        # rows that fit the register cache are read once; the rest is re-read by every pass
        return KernelPlan(
            threads,
            b,
            smem,
            min(regs, 255),
            1,
            flops,
            "fp32",
            base * e * (1.2 + 2.8 * (1 - cached)),
            threads * p["vec"] * 1.0,
            extra={},
        )
    if tag == "v2_online_fused":
        return KernelPlan(
            threads, b, 0, 48, 1, flops, "fp32", base * e * 2.0, p["BLOCK"] * e * 1.0, extra={}
        )
    split = knob(p, "split", "SPLITS", default=1)
    vec = p.get("vec", 16)
    rounds = knob(p, "rounds", "ROUNDS", default=8)
    if tag in ("v3_fused_online", "v3_pivot_search"):
        passes = 2.0 if tag == "v3_fused_online" else 1.6 + 0.03 * rounds
    else:
        passes = 1.3 + 0.015 * rounds
    launches = 1 + (1 if split > 1 else 0)
    grid = b * split
    inflight = threads * vec * 2.0 if impl == "cuda" else p["BLOCK"] * e * 2.0
    return KernelPlan(
        threads,
        grid,
        4096,
        56,
        launches,
        flops * (1 + rounds / 16),
        "fp32",
        base * e * passes,
        inflight,
        extra={"rounds": rounds},
    )


def _plan_scan(op: OpSpec, s: Shape, dt: str, gpu: GPU, v: Variant, p: Params) -> KernelPlan:
    e = ELEM_BYTES[dt]
    b, din, nst = s["B"], s["Din"], s["N"]
    length = s.get("L", 1)
    flops = op.flops(s, dt)
    ideal = op.bytes(s, dt)
    tag, impl = v.tag, v.impl
    # a Triton launch without num_warps runs Triton's default of 4 warps (the feedback
    # reports this plan's threads, so it must be what the code launches)
    threads = knob(p, "threads", default=p.get("num_warps", 4 if impl == "triton" else 2) * 32)
    # Triton rungs tile channels by BLOCK_D (every one of them has the knob); CUDA rungs
    # never read it
    chan_block: int = 0 if impl == "cuda" else p["BLOCK_D"]
    if tag == "v0_sequential":
        # h (and the discretised dA, dBu) round-trip through global memory in fp32
        byts = ideal + 3.0 * b * length * din * nst * 4
        if impl == "cuda":
            grid = _cdiv(b * din * nst, threads)
            infl = threads * 4.0 * 2
        else:
            grid = _cdiv(b * din, chan_block)
            infl = chan_block * nst * 4.0 * 2
        return KernelPlan(
            threads,
            grid,
            0,
            32,
            4 if impl == "cuda" else 2,
            flops * 1.3,
            "fp32",
            byts,
            infl,
            extra={},
        )
    if tag in ("v1_fused_regs", "v1_fused"):
        grid = _cdiv(b * din, threads if impl == "cuda" else chan_block)
        regs = 40 + 2 * nst
        infl = threads * e * 3.0 * 2 if impl == "cuda" else chan_block * e * 3.0 * 4
        return KernelPlan(threads, grid, 0, min(regs, 255), 1, flops, "fp32", ideal, infl, extra={})
    tile = knob(p, "tile", "CHUNK", default=64)
    st = knob(p, "stages", "num_stages", default=1)
    if impl == "cuda":
        chans = max(1, threads // 4)
        grid = b * _cdiv(din, chans)
        stage_bytes = tile * (3 * chans * e + 2 * nst * e)
        smem = int(stage_bytes * (st if tag != "v2_chunked" else 1))
    else:
        chans = chan_block
        grid = b * _cdiv(din, chans)
        stage_bytes = tile * (3 * chans * e + 2 * nst * e)
        smem = int(stage_bytes * st) if tag != "v2_chunked_assoc" else int(stage_bytes)
    if length == 1:
        # decode step: each program owns channels; the state is the traffic
        grid = _cdiv(b * din, max(1, chans))
        stage_bytes = chans * nst * 4.0
        smem = int(stage_bytes * st)
    inflight = stage_bytes * max(1, st - 1)
    regs = 48 + 2 * nst
    return KernelPlan(
        threads,
        grid,
        smem,
        min(regs, 255),
        1,
        flops,
        "fp32",
        ideal,
        inflight,
        persistent=tag.startswith("v4"),
        extra={"chans": chans},
    )


def _apply_minb(kp: KernelPlan, p: Params, gpu: GPU) -> KernelPlan:
    """``__launch_bounds__(threads, minb)`` caps registers so ``minb`` CTAs fit per SM."""
    minb = p.get("minb")
    if not minb or minb <= 1:
        return kp
    cap = gpu.regs_per_sm // (kp.threads * minb)
    if kp.regs <= cap:
        return kp
    extra = dict(kp.extra)
    extra["reg_capped"] = True
    # spilling what does not fit: local-memory traffic in L1
    return replace(
        kp, regs=max(24, cap), bytes=kp.bytes * (1.0 + 0.02 * (kp.regs - cap)), extra=extra
    )


_PLANNERS = {
    "gemm": _plan_gemm,
    "gemv": _plan_gemv,
    "attn_decode": _plan_decode,
    "attn_prefill": _plan_prefill,
    "rowwise": _plan_rowwise,
    "elementwise": _plan_elementwise,
    "sampling": _plan_sampling,
    "scan": _plan_scan,
}


#: scalar value types a memo key may hold; the key pairs each value with its type, since
#: ``1``, ``1.0`` and ``True`` hash and compare equal but planners tell them apart
_KEY_TYPES = (int, float, str, bool, type(None))

#: (ids of op/gpu/variant, dtype, typed shape and params items) -> (op, gpu, variant, plan).
#: The objects are kept in the value so that their ids cannot be reused while the entry
#: lives; a hit also checks them by identity.
_PLAN_MEMO: dict[tuple[Any, ...], tuple[OpSpec, GPU, Variant, KernelPlan]] = {}
_PLAN_MEMO_MAX = 65_536


def _items_key(d: dict[str, Any]) -> tuple[tuple[str, type, Any], ...] | None:
    """``d``'s items with each value's type, in ``d``'s order; None for a non-scalar value."""
    out = []
    for k, x in d.items():
        if type(x) not in _KEY_TYPES:
            return None
        out.append((k, type(x), x))
    return tuple(out)


def plan(
    op: OpSpec, shape: Shape, dtype: str, gpu: GPU, variant: Variant, params: Params
) -> KernelPlan:
    """Build the ``KernelPlan`` of a candidate (pure, deterministic).

    Memoised: a session asks for the same candidate's plan from the environment, every
    render of it (clean and each probed bug), the prediction and ``check_session``. Safe:
    the planners are pure functions of their arguments, ``OpSpec``, ``GPU``, ``Variant``
    and ``KernelPlan`` are frozen, and no caller mutates a plan (``_apply_minb`` copies
    ``extra``); inputs with a non-scalar value are planned without the memo.
    """
    sk, pk = _items_key(shape), _items_key(params)
    if sk is None or pk is None:
        return _plan(op, shape, dtype, gpu, variant, params)
    key = (id(op), id(gpu), id(variant), dtype, sk, pk)
    hit = _PLAN_MEMO.get(key)
    if hit is not None and hit[0] is op and hit[1] is gpu and hit[2] is variant:
        return hit[3]
    kp = _plan(op, shape, dtype, gpu, variant, params)
    if len(_PLAN_MEMO) >= _PLAN_MEMO_MAX:
        _PLAN_MEMO.clear()  # bounded: the memo only ever saves work
    _PLAN_MEMO[key] = (op, gpu, variant, kp)
    return kp


def _plan(
    op: OpSpec, shape: Shape, dtype: str, gpu: GPU, variant: Variant, params: Params
) -> KernelPlan:
    if variant.family != op.family:
        raise ValueError(
            f"variant {variant.tag} is for {variant.family}, op {op.name} is {op.family}"
        )
    kp = _apply_minb(_PLANNERS[op.family](op, shape, dtype, gpu, variant, params), params, gpu)
    n_sfu = sfu_ops(op.name, shape)
    return replace(kp, sfu_ops=n_sfu) if n_sfu else kp


def sfu_ops(op: str, s: Shape) -> float:
    """The exponentials an op cannot avoid (one ``ex2`` each on the SFU): one per state
    element of a selective scan (``exp(Δ·A)``, plus the output gate's SiLU), one per
    visible score of prefill attention (causal: the lower triangle and the prefix), one
    per gated element of SiLU ops, one per logit of a full softmax or a sampler that needs
    the whole distribution. 0 for ops with no unavoidable exponential (or none that could
    bind: decode attention is memory-bound by a wide margin)."""
    g = s.get
    if op == "mamba_scan":
        return float(s["B"] * s["L"] * s["Din"] * (s["N"] + 1))
    if op == "mamba_step":
        return float(s["B"] * s["Din"] * (s["N"] + 1))
    if op == "flash_prefill":
        return float(s["B"] * s["Hq"] * s["S"] * (s["S"] + 1) / 2)
    if op == "chunked_prefill":
        return float(s["B"] * s["Hq"] * s["C"] * (s["P"] + (s["C"] + 1) / 2))
    if op == "cross_attn":
        return float(s["B"] * s["Hq"] * s["Sq"] * s["Senc"])
    if op == "swiglu_act":
        return float(s["M"] * s["N"])
    if op == "conv1d_causal":
        return float(s["B"] * s["L"] * s["C"])
    if op in ("logits_softmax", "minp_sample", "nucleus_sample"):
        return float((g("B") or 1) * s["V"])
    return 0.0
