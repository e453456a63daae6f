"""Roofline timing of a candidate kernel, deterministic or with benchmark noise.

time = max(t_compute, t_memory, t_serial) + 0.1·min(t_compute, t_memory)
       + launches · (device launch + host launch)

* t_compute = executed FLOPs / (path peak · compute_eff · tile · wave · issue factors)
  plus CUDA-core ALU work (dequant, promotion) at the FP32 rate;
* t_memory  = DRAM bytes / (spec BW · mem_eff · latency-hiding factor), where the
  latency-hiding factor is Little's law: bytes in flight over all resident CTAs versus
  bandwidth × DRAM latency, and a grid smaller than the SM count caps the pull rate;
* t_serial  = what one program must do in sequence, however idle the rest of the GPU is:
  ``chain`` dependent round trips (``TRIP_LATENCIES`` DRAM latencies each: an L2 round
  trip plus the block-wide reduction that closes a loop iteration) per wave of programs,
  (plus ``trip_cycles`` of dependent ALU work per trip), plus local-memory
  ``spill_local`` traffic at ``SPILL_BYTES_PER_CYCLE`` per busy SM when the resident
  CTAs' spills overflow L1 (``spill_footprint``; spills L1 holds are not charged),
  plus the ``sm_issue`` thread-instructions the busiest SM issues in sequence at
  ``ISSUE_LANES_PER_CYCLE`` (a lone CTA making many passes over its row is issue-bound).
  This is how a one-row-per-program sampler at batch 1 or a softmax holding a 150K-entry
  row in registers is slow although it moves few DRAM bytes;
* a small deterministic per-config "idiosyncrasy" (±4%) makes the landscape rugged the
  way real autotuning is, without any randomness between calls.

Launch overhead has two parts. ``GRAPH_LAUNCH_US`` is what a launch costs the *device*
(dispatch, ramp-up and drain of one kernel; it remains under CUDA-graph replay); the rest
of the GPU's ``launch_us`` (×1.4 for Triton's Python launcher) is host time, which a
benchmark loop without graphs adds between kernels. ``Prediction.time_ms`` is what the
simulated harness reports (both parts, as before); ``Prediction.device_ms`` is the
graph-replay figure that real measurements (``calibration``) are compared with.

Efficiencies come from the per-GPU tables in ``efficiency``; everything else from the
``KernelPlan``. ``predict_time_ms`` is the public, noise-free entry point.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from .efficiency import efficiency
from .hardware import GPU, get_gpu
from .kernels import KernelPlan, occupancy, plan, spills
from .ops import OpSpec, Shape, get_op
from .rng import unit
from .variants import Params, Variant, get_variant, missing_features

#: Device-side cost of one kernel launch (µs): what remains of launch overhead when a
#: CUDA graph replays the kernels back to back. On the H200 the smallest measured kernels
#: (a few hundred KB moved) take 2.7-3.3 µs under graph replay, of which ~1 µs is the
#: transfer and one DRAM latency, so dispatch, ramp and drain take about 2 µs.
GRAPH_LAUNCH_US = 2.0
#: Cost of one dependent round trip, in DRAM latencies (an L2 hit plus the block-wide
#: reduction ending a loop iteration). Fitted once on the Triton samplers, whose times at
#: every measured batch are within 10% of (trips × 0.45 µs) on the H200 (620 ns latency).
TRIP_LATENCIES = 0.73
#: Local-memory (spill) bytes an SM moves per clock: spilled code alternates dependent
#: local stores and loads, far below L1 bandwidth. Fitted on the Triton softmax rungs that
#: hold 130K-150K-entry rows in registers (about 7 GB/s per SM at 1.98 GHz).
SPILL_BYTES_PER_CYCLE = 3.5
#: Thread-instructions one SM issues per clock: four schedulers, one warp instruction
#: (32 lanes) each. A lone CTA walking its row element by element cannot go faster.
ISSUE_LANES_PER_CYCLE = 128.0
#: No kernel is reported faster than this past the host's share of its launch (µs).
MIN_KERNEL_US = 2.0

#: Physical caps (generator 1.6.0), from the H200 measurements in
#: ``data/calibration/h200_measured.csv``: the fastest memory-bound kernel measured there
#: moved 0.925 of spec DRAM bandwidth (Triton GEMV, B=1, N=128256, K=4096: 0.2367 ms), and
#: the fastest dense product reached 0.816 of dense bf16 peak (cuBLAS, 2048×8192×8192).
#: No predicted or reported time may imply more: ``physical_floor_ms`` is the least time
#: a candidate's counted bytes and FLOPs allow, and every modelled step is checked against
#: it (a measured device time against ``device_floor_ms``, at spec rates).
BW_CAP = 0.925
FLOP_CAP = 0.82
#: MUFU (``ex2``, ``rcp``, ``rsqrt``, ``lg2``, ``sin``/``cos``) results per SM per clock on
#: sm_80 through sm_120 (CUDA programming guide, arithmetic instruction throughput).
#: ``__expf`` / ``tl.exp`` are one ``ex2`` each: ``KernelPlan.sfu_ops`` of them take at
#: least ``sfu_ops / (SFU_PER_CLK · SMs · clock)`` (issue 36: 17 of 46 CUDA mamba_scan
#: bests beat this).
SFU_PER_CLK = 16.0
#: Version of the device-time floor (``device_floor_ms``, ``time_floor_ms``): what a
#: measured device time is checked against. 1.0.0 (issue 36, 36r): no launch term, the op's
#: compulsory bytes, spec rates. It feeds checks only, never a modelled time
#: (``physical_floor_ms`` is the model's, part of ``GENERATOR_VERSION``).
DEVICE_FLOOR_VERSION = "1.0.0"
#: Ops whose reads go through runtime indices a valid input may repeat (token ids; a block
#: mapping, where a forked block is the source of several pairs): a repeated row is read
#: from DRAM once however many outputs it fills, so only the writes, half the op's
#: ``OpSpec.bytes``, are compulsory. The oracle's paged_kv_copy inputs map half the pairs
#: onto the other half's sources (0.75 of the op's bytes are compulsory there; H100 steps
#: measured down to 0.815).
INDEXED_READ_OPS = frozenset({"embedding_gather", "paged_kv_copy"})


class InfeasibleConfig(ValueError):
    """The candidate cannot run on this GPU (missing feature, smem over cap, no occupancy)."""


@dataclass(frozen=True)
class Prediction:
    """Noise-free time and the factors behind it (useful for calibration and messages)."""

    time_ms: float
    t_compute_ms: float
    t_memory_ms: float
    launch_ms: float
    ctas_per_sm: int
    waves: float
    bound: str
    plan: KernelPlan
    t_serial_ms: float = 0.0
    host_ms: float = 0.0  # host-side launch overhead included in time_ms
    #: The part of ``t_compute_ms`` at the FP32 ALU rate (dequant, promotion), which the
    #: rung's compute_eff does not scale; the per-config quirk factor; the efficiencies used.
    t_alu_ms: float = 0.0
    quirk: float = 1.0
    eff: tuple[float, float] = (1.0, 1.0)
    #: ``physical_floor_ms`` of the plan: ``time_ms`` and every noisy measurement of it
    #: are held at or above it.
    floor_ms: float = 0.0

    @property
    def device_ms(self) -> float:
        """Time on the device alone: what a CUDA-graph replay of the kernel measures."""
        return self.time_ms - self.host_ms

    def device_ms_at(self, mem_eff: float, comp_eff: float) -> float:
        """``device_ms`` had the rung's efficiencies been ``(mem_eff, comp_eff)``: compute
        time scales with 1/compute_eff (but for the ALU part), memory time with 1/mem_eff,
        and the rest of the plan is unchanged. The calibration fit's inner loop, which
        would otherwise re-plan every point for every candidate pair."""
        m0, c0 = self.eff
        t_c = (self.t_compute_ms - self.t_alu_ms) * c0 / comp_eff + self.t_alu_ms
        t_m = self.t_memory_ms * m0 / mem_eff
        floor = self.host_ms + MIN_KERNEL_US * 1e-3
        total = _combine(t_c, t_m, self.t_serial_ms, self.quirk, self.launch_ms, floor)
        return total - self.host_ms


def physical_floor_ms(kp: KernelPlan, gpu: GPU, impl: str) -> float:
    """The model's own floor (ms, launch included): the least time the plan's DRAM bytes
    and FLOPs allow at the measured caps, ``bytes / (BW_CAP · bandwidth)`` and
    ``flops / (FLOP_CAP · peak)``, plus every launch's host-inclusive cost. ``predict`` and
    ``benchmark`` hold modelled times at or above it, so it bounds host-inclusive modelled
    times only: a device time (graph replay) pays no host launch, and the plan's bytes
    count re-reads a real kernel may serve from L2 (``device_floor_ms`` is that bound)."""
    peak = gpu.peak(kp.path) or gpu.peak("fp16")
    t_bw = kp.bytes / (gpu.bandwidth * BW_CAP)
    t_fl = kp.flops / (peak * FLOP_CAP) if kp.flops else 0.0
    t_sfu = kp.sfu_ops / (SFU_PER_CLK * gpu.sms * gpu.clock_ghz * 1e9) if kp.sfu_ops else 0.0
    launch_us = gpu.launch_us * (1.4 if impl == "triton" else 1.0)
    return (max(t_bw, t_fl, t_sfu) + kp.launches * launch_us * 1e-6) * 1e3


def compulsory_bytes(kp: KernelPlan, op: OpSpec, shape: Shape, dtype: str) -> float:
    """DRAM bytes no implementation of the op at this shape can avoid: the op's own
    traffic (``OpSpec.bytes``: every input read once, every output written once), halved
    for ``INDEXED_READ_OPS``, and never more than the plan's (a plan that reads less, such
    as the experts a routing hits, is the tighter bound). The plan's bytes alone are not a
    bound: they count the variant's re-reads and naive extra traffic, which the device
    serves from L2 (issue 36: CUDA mamba_step steps measured at 3.8-4.7 TB/s of plan
    bytes on an H100, 1.0 TB/s of the op's)."""
    ideal = op.bytes(shape, dtype) * (0.5 if op.name in INDEXED_READ_OPS else 1.0)
    return min(kp.bytes, ideal)


def floor_terms_ms(
    kp: KernelPlan, gpu: GPU, op: OpSpec, shape: Shape, dtype: str
) -> dict[str, float]:
    """Each physical limit of ``device_floor_ms`` alone (ms): ``bytes`` (compulsory DRAM
    bytes at the spec bandwidth), ``flops`` (executed FLOPs at the path's spec peak) and
    ``sfu`` (the op's exponentials at the MUFU issue rate). Spec rates, not ``BW_CAP`` /
    ``FLOP_CAP``: those are the fastest kernels of one sample (H200), which the model
    never predicts past, and a kernel measured later may beat a sample's best (an H100
    moe_scatter answer moved 0.933 of spec bandwidth on its op's bytes, over 0.925); a
    device time under a spec-rate floor is impossible, so it means a wrong count or a
    warm-L2 measurement, never a fast kernel."""
    peak = gpu.peak(kp.path) or gpu.peak("fp16")
    return {
        "bytes": compulsory_bytes(kp, op, shape, dtype) / gpu.bandwidth * 1e3,
        "flops": kp.flops / peak * 1e3 if kp.flops else 0.0,
        "sfu": kp.sfu_ops / (SFU_PER_CLK * gpu.sms * gpu.clock_ghz * 1e9) * 1e3
        if kp.sfu_ops
        else 0.0,
    }


def device_floor_ms(kp: KernelPlan, gpu: GPU, op: OpSpec, shape: Shape, dtype: str) -> float:
    """The least device time (ms) a kernel doing the op's work at this shape can take: the
    largest of ``floor_terms_ms``, with no launch term at all. It is what a device time
    (CUDA-graph replay, inputs rotated past L2) is checked against: replayed back to back,
    kernels pay neither the host's launch nor all of ``GRAPH_LAUNCH_US`` (the H100 ran
    4-token kv_append steps in 1.29 µs per call). Issue 36 (36r): 322 of 1,111 measured
    online-tier steps were under ``physical_floor_ms``; 288 only by its launch term, 34 by
    the plan's bytes; none is under this floor (``tests/unit/sim/test_floor_device.py``)."""
    return max(floor_terms_ms(kp, gpu, op, shape, dtype).values())


def time_floor_ms(
    kp: KernelPlan, gpu: GPU, impl: str, op: OpSpec, shape: Shape, dtype: str, device: bool
) -> float:
    """The floor a reported time is checked against (``check_session``, ``check_episode``):
    ``device_floor_ms`` for a device time (measured by graph replay), ``physical_floor_ms``
    (host launch included) for a modelled, host-inclusive one."""
    if device:
        return device_floor_ms(kp, gpu, op, shape, dtype)
    return physical_floor_ms(kp, gpu, impl)


def _combine(
    t_c: float, t_m: float, t_s: float, quirk: float, launch: float, floor: float
) -> float:
    """Total time from its parts (one unit throughout): the slowest of compute, memory and
    serial time plus a tenth of the lesser of compute and memory, times the quirk, plus the
    launch cost; never under ``floor`` (the host's launch cost plus 2 µs)."""
    core = max(t_c, t_m, t_s) + 0.1 * min(t_c, t_m)
    return max(core * quirk + launch, floor)


def _latency_factor(gpu: GPU, kp: KernelPlan, occ: int) -> float:
    active = min(kp.grid, gpu.sms * occ)
    needed = gpu.bandwidth * gpu.dram_latency_ns * 1e-9
    # The compiler keeps a few independent loads per thread in flight even in naive loops.
    inflight = active * max(kp.inflight, kp.threads * 8.0)
    f_lat = min(1.0, inflight / needed) ** 0.55
    active_sms = min(kp.grid, gpu.sms)
    f_fill = min(1.0, active_sms * 2.5 / gpu.sms) ** 0.8
    return max(0.03, min(f_lat, f_fill))


def _spills_fit_l1(gpu: GPU, kp: KernelPlan, occ: int) -> bool:
    """Whether the spills of an SM's resident CTAs stay in its L1 (the unified L1/shared
    array less the CTAs' shared memory): a few spilled registers per thread cost little,
    a 100K-entry row tile thrashes L1 and every pass re-reads it from L2."""
    resident = min(occ, max(1, math.ceil(kp.grid / gpu.sms)))
    l1 = gpu.smem_per_sm - resident * kp.smem
    return kp.spill_footprint * resident <= l1


def _wave_factor(gpu: GPU, kp: KernelPlan, occ: int, tensor: bool) -> tuple[float, float]:
    slots = gpu.sms * occ
    waves = kp.grid / slots
    if kp.persistent:
        util = min(1.0, kp.grid / gpu.sms) * 0.97 if kp.grid < gpu.sms else 0.97
    else:
        full = math.ceil(waves)
        util = kp.grid / (full * slots)
        # Fewer co-resident CTAs each get more of the SM; partial compensation.
        util = util**0.6 if occ > 1 else util
        if kp.extra.get("causal_imbalance"):
            util *= 0.9
    resident = min(occ, max(1.0, kp.grid / gpu.sms)) * kp.threads / 32
    need = 8.0 if tensor else 16.0
    issue = min(1.0, (resident / need) ** (0.3 if tensor else 0.4))
    return max(0.02, util * issue), waves


def inert_params(kp: KernelPlan, params: Params) -> frozenset[str]:
    """Parameters of ``params`` that provably leave this kernel's execution unchanged, so
    they may not move its time (issue 39): ``GROUP_M`` with a single row of output tiles
    (the grouped launch order is then the row-major one) and a ``__launch_bounds__``
    ``minb`` whose register cap the kernel already fits (ptxas allocates the same
    registers, so occupancy and code are the same). The per-configuration quirk is keyed
    on the other parameters only; the planner gives such configurations the same plan.
    """
    out: set[str] = set()
    if "GROUP_M" in params and kp.extra.get("m_tiles") == 1:
        out.add("GROUP_M")
    if "minb" in params and not kp.extra.get("reg_capped"):
        out.add("minb")
    return frozenset(out)


def predict(
    op: OpSpec,
    shape: Shape,
    dtype: str,
    gpu: GPU,
    variant: Variant,
    params: Params,
    eff: tuple[float, float] | None = None,
) -> Prediction:
    """Noise-free prediction; raises ``InfeasibleConfig`` for configs that cannot run.

    ``eff`` replaces the table's ``(mem_eff, compute_eff)`` for this rung, so the
    calibration fit can try candidate efficiencies without writing a table.
    """
    missing = missing_features(variant, op, dtype, params, gpu)
    if missing:
        raise InfeasibleConfig(f"{variant.tag} needs {', '.join(missing)} which {gpu.arch} lacks")
    kp = plan(op, shape, dtype, gpu, variant, params)
    if kp.smem > gpu.smem_per_block_optin:
        raise InfeasibleConfig(
            f"{kp.smem} B shared memory over the {gpu.smem_per_block_optin} B cap"
        )
    occ = occupancy(gpu, kp.threads, kp.smem, kp.regs)
    if occ == 0:
        raise InfeasibleConfig("no CTA fits on an SM")
    mem_eff, comp_eff = eff or efficiency(gpu.id, variant.family, variant.impl, variant.tag)
    peak = gpu.peak(kp.path) or gpu.peak("fp16")
    wave, waves = _wave_factor(gpu, kp, occ, kp.path != "fp32")
    spill = 0.55 if spills(gpu, kp.threads, kp.regs) else 1.0
    t_c = kp.flops / (peak * comp_eff * kp.tile_eff * wave * spill) if kp.flops else 0.0
    t_alu = 0.0
    if kp.alu_flops:
        t_alu = kp.alu_flops / (gpu.peak("fp32") * 0.6 * max(wave, 0.05))
        t_c += t_alu
    f_lat = _latency_factor(gpu, kp, occ)
    t_m = kp.bytes / (gpu.bandwidth * mem_eff * f_lat)
    t_s = 0.0
    if kp.chain:
        program_waves = math.ceil((kp.chain_programs or kp.grid) / (gpu.sms * occ))
        trip_s = TRIP_LATENCIES * gpu.dram_latency_ns * 1e-9 + kp.trip_cycles / (
            gpu.clock_ghz * 1e9
        )
        t_s += kp.chain * trip_s * program_waves
    if kp.spill_local and not _spills_fit_l1(gpu, kp, occ):
        busy_sms = min(kp.grid, gpu.sms)
        t_s += kp.spill_local / (busy_sms * SPILL_BYTES_PER_CYCLE * gpu.clock_ghz * 1e9)
    if kp.sm_issue:
        t_s += kp.sm_issue / (ISSUE_LANES_PER_CYCLE * gpu.clock_ghz * 1e9)
    inert = inert_params(kp, params)
    quirk = 1.0 + 0.08 * (
        unit(
            "quirk",
            op.name,
            sorted(shape.items()),
            dtype,
            gpu.id,
            variant.tag,
            sorted((k, v) for k, v in params.items() if k not in inert),
        )
        - 0.5
    )
    launch_us = gpu.launch_us * (1.4 if variant.impl == "triton" else 1.0)
    launch = kp.launches * launch_us * 1e-6
    host = kp.launches * max(0.0, launch_us - GRAPH_LAUNCH_US) * 1e-6
    total = _combine(t_c, t_m, t_s, quirk, launch, host + MIN_KERNEL_US * 1e-6)
    floor_ms = physical_floor_ms(kp, gpu, variant.impl)
    total = max(total, floor_ms * 1e-3)
    bound = "compute" if t_c >= t_m else "memory"
    return Prediction(
        time_ms=total * 1e3,
        t_compute_ms=t_c * 1e3,
        t_memory_ms=t_m * 1e3,
        launch_ms=launch * 1e3,
        ctas_per_sm=occ,
        waves=waves,
        bound="serial" if t_s > max(t_c, t_m) else bound,
        plan=kp,
        t_serial_ms=t_s * 1e3,
        host_ms=host * 1e3,
        t_alu_ms=t_alu * 1e3,
        quirk=quirk,
        eff=(mem_eff, comp_eff),
        floor_ms=floor_ms,
    )


def predict_time_ms(
    op: str,
    shape: Shape,
    dtype: str,
    gpu: str,
    variant: str,
    params: Params,
    impl: str | None = None,
) -> float:
    """Deterministic latency in ms of one candidate (no benchmark noise).

    ``variant`` is a rung tag such as ``"v3_split_kv"``; ``impl`` defaults to CUDA unless
    the tag only exists for Triton. Raises ``InfeasibleConfig`` when the candidate cannot
    run on ``gpu`` (a compile error in a session).
    """
    spec = get_op(op)
    g = get_gpu(gpu)
    if impl is None:
        try:
            v = get_variant(spec.family, "cuda", variant)
        except KeyError:
            v = get_variant(spec.family, "triton", variant)
    else:
        v = get_variant(spec.family, impl, variant)
    return predict(spec, shape, dtype, g, v, params).time_ms


def noise_sigma(time_ms: float) -> float:
    """Relative run-to-run spread: a few percent for µs kernels, under 1% for long ones."""
    return 0.006 + 0.03 / (1.0 + time_ms / 0.01)


def benchmark(pred_ms: float, rng: random.Random, floor_ms: float = 0.0) -> tuple[float, float]:
    """A noisy median measurement and the spread the harness would report (both in ms/%);
    noise never takes it under ``floor_ms`` (the physical floor of the candidate)."""
    sigma = noise_sigma(pred_ms)
    measured = max(pred_ms * math.exp(rng.gauss(0.0, sigma)), floor_ms)
    spread = abs(rng.gauss(sigma, sigma / 3)) * 100
    return measured, spread
