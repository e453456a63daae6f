"""The six simulated GPUs: datasheet facts, limits and architecture feature gates.

Every number here comes from ``reference/roofline.md`` §1 (dense TFLOPS, spec DRAM
bandwidth, per-block opt-in shared memory). The simulator never invents a capability: a
variant may only use a feature listed in its GPU's ``features`` set, and anything else is a
compile error whose message is modelled on what nvcc 13 / ptxas really prints (checked by
``compile_check``). Keep this module free of timing policy; achieved-efficiency figures live
in the per-GPU CSV tables read by ``efficiency``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from dagster_project.gpus import SIM_GPU_NAMES

#: Feature names understood across the simulator (variants, templates, checks).
#:  mma_sync      warp-level tensor-core MMA (HMMA/IMMA), sm_80+
#:  cp_async      LDGSTS asynchronous global->shared copies, sm_80+
#:  tma           cp.async.bulk / cp.async.bulk.tensor + mbarrier tx-count, sm_90+ (incl. sm_120)
#:  tma_multicast cp.async.bulk.tensor .multicast::cluster; full-rate only on sm_90a
#:  wgmma         warpgroup MMA, sm_90a only
#:  setmaxnreg    warp-specialised register reallocation, sm_90a only
#:  fp8_mma       mma.sync with e4m3/e5m2 operands, sm_89+ (sm_90a, sm_120 here)
#:  fp4_mma       block-scaled e2m1 mma (kind::mxf4nvf4), sm_120a only
FEATURES: tuple[str, ...] = (
    "mma_sync",
    "cp_async",
    "tma",
    "tma_multicast",
    "wgmma",
    "setmaxnreg",
    "fp8_mma",
    "fp4_mma",
)

#: The PTX spelling of each feature, used in compiler messages and by ``check_session`` to
#: match a gated feature with the compile error that must accompany it.
FEATURE_INSTRUCTION: Mapping[str, str] = MappingProxyType(
    {
        "mma_sync": "mma.sync",
        "cp_async": "cp.async",
        "tma": "cp.async.bulk",
        "tma_multicast": ".multicast::cluster",
        "wgmma": "wgmma",
        "setmaxnreg": "setmaxnreg",
        "fp8_mma": "mma with FP8 floating point type",
        "fp4_mma": "mma with block scale",
    }
)


@dataclass(frozen=True)
class GPU:
    """One simulated GPU SKU.

    Peaks are dense TFLOPS (TOPS for integer paths) keyed by compute path: ``fp32`` is the
    CUDA-core FMA rate, the others are tensor-core rates with FP32 accumulation. A missing key
    means the hardware has no such path (for example ``fp8`` on Ampere).
    """

    id: str
    name: str
    arch: str
    sms: int
    clock_ghz: float
    bw_tbs: float
    mem_gb: int
    l2_mb: int
    smem_per_sm: int
    smem_per_block_optin: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    peaks_tflops: Mapping[str, float]
    features: frozenset[str]
    dram_latency_ns: float
    launch_us: float
    regs_per_sm: int = 65536
    max_regs_per_thread: int = 255
    memory_kind: str = "HBM3"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // 32

    @property
    def smem_cap_kb(self) -> int:
        """Per-block opt-in cap in KB as people quote it (99 / 163 / 227)."""
        return self.smem_per_block_optin // 1024

    def has(self, feature: str) -> bool:
        return feature in self.features

    def peak(self, path: str) -> float:
        """Dense peak of a compute path in FLOP/s; 0 when the path does not exist."""
        return self.peaks_tflops.get(path, 0.0) * 1e12

    @property
    def bandwidth(self) -> float:
        """Spec DRAM bandwidth in bytes/s."""
        return self.bw_tbs * 1e12


_HOPPER = frozenset(
    {"mma_sync", "cp_async", "tma", "tma_multicast", "wgmma", "setmaxnreg", "fp8_mma"}
)
_AMPERE = frozenset({"mma_sync", "cp_async"})
# sm_120: TMA unicast, fp8 and block-scaled fp4 MMA; no wgmma, no setmaxnreg, no multicast.
_BLACKWELL_GEFORCE = frozenset({"mma_sync", "cp_async", "tma", "fp8_mma", "fp4_mma"})

_HOPPER_PEAKS = {
    "fp32": 66.9,
    "fp16": 989.4,
    "bf16": 989.4,
    "tf32": 494.7,
    "fp8": 1978.9,
    "int8": 1978.9,
}

GPUS: Mapping[str, GPU] = MappingProxyType(
    {
        "h100": GPU(
            id="h100",
            name=SIM_GPU_NAMES["h100"],
            arch="sm_90a",
            sms=132,
            clock_ghz=1.98,
            bw_tbs=3.35,
            mem_gb=80,
            l2_mb=50,
            smem_per_sm=228 * 1024,
            smem_per_block_optin=232448,
            max_threads_per_sm=2048,
            max_blocks_per_sm=32,
            peaks_tflops=MappingProxyType(dict(_HOPPER_PEAKS)),
            features=_HOPPER,
            dram_latency_ns=600.0,
            launch_us=4.0,
            memory_kind="HBM3",
        ),
        "h200": GPU(
            id="h200",
            name=SIM_GPU_NAMES["h200"],
            arch="sm_90a",
            sms=132,
            clock_ghz=1.98,
            bw_tbs=4.8,
            mem_gb=141,
            l2_mb=50,
            smem_per_sm=228 * 1024,
            smem_per_block_optin=232448,
            max_threads_per_sm=2048,
            max_blocks_per_sm=32,
            peaks_tflops=MappingProxyType(dict(_HOPPER_PEAKS)),
            features=_HOPPER,
            dram_latency_ns=620.0,
            launch_us=4.0,
            memory_kind="HBM3e",
        ),
        "a100": GPU(
            id="a100",
            name=SIM_GPU_NAMES["a100"],
            arch="sm_80",
            sms=108,
            clock_ghz=1.41,
            bw_tbs=2.039,
            mem_gb=80,
            l2_mb=40,
            smem_per_sm=164 * 1024,
            smem_per_block_optin=166912,
            max_threads_per_sm=2048,
            max_blocks_per_sm=32,
            peaks_tflops=MappingProxyType(
                {
                    "fp32": 19.5,
                    "fp16": 312.0,
                    "bf16": 312.0,
                    "tf32": 156.0,
                    "int8": 624.0,
                    "int4": 1248.0,
                }
            ),
            features=_AMPERE,
            dram_latency_ns=560.0,
            launch_us=4.5,
            memory_kind="HBM2e",
        ),
        "a10": GPU(
            id="a10",
            name=SIM_GPU_NAMES["a10"],
            arch="sm_86",
            sms=72,
            clock_ghz=1.695,
            bw_tbs=0.600,
            mem_gb=24,
            l2_mb=6,
            smem_per_sm=100 * 1024,
            smem_per_block_optin=101376,
            max_threads_per_sm=1536,
            max_blocks_per_sm=16,
            peaks_tflops=MappingProxyType(
                {
                    "fp32": 31.2,
                    "fp16": 125.0,
                    "bf16": 125.0,
                    "tf32": 62.5,
                    "int8": 250.0,
                    "int4": 500.0,
                }
            ),
            features=_AMPERE,
            dram_latency_ns=480.0,
            launch_us=5.0,
            memory_kind="GDDR6",
        ),
        "rtx_a6000": GPU(
            id="rtx_a6000",
            name=SIM_GPU_NAMES["rtx_a6000"],
            arch="sm_86",
            sms=84,
            clock_ghz=1.80,
            bw_tbs=0.768,
            mem_gb=48,
            l2_mb=6,
            smem_per_sm=100 * 1024,
            smem_per_block_optin=101376,
            max_threads_per_sm=1536,
            max_blocks_per_sm=16,
            peaks_tflops=MappingProxyType(
                {
                    "fp32": 38.7,
                    "fp16": 154.8,
                    "bf16": 154.8,
                    "tf32": 77.4,
                    "int8": 309.7,
                    "int4": 619.3,
                }
            ),
            features=_AMPERE,
            dram_latency_ns=480.0,
            launch_us=5.0,
            memory_kind="GDDR6",
        ),
        "rtx_5090": GPU(
            id="rtx_5090",
            name=SIM_GPU_NAMES["rtx_5090"],
            arch="sm_120",
            sms=170,
            clock_ghz=2.407,
            bw_tbs=1.792,
            mem_gb=32,
            l2_mb=96,
            smem_per_sm=100 * 1024,
            smem_per_block_optin=101376,
            max_threads_per_sm=1536,
            max_blocks_per_sm=32,
            # GeForce halves FP32-accumulate tensor rates; cuBLAS bf16 tops out near 224 TF.
            peaks_tflops=MappingProxyType(
                {
                    "fp32": 104.8,
                    "fp16": 209.5,
                    "bf16": 209.5,
                    "tf32": 104.8,
                    "fp8": 419.0,
                    "int8": 838.0,
                    "int4": 79.0,
                    "fp4": 1676.0,
                }
            ),
            features=_BLACKWELL_GEFORCE,
            dram_latency_ns=520.0,
            launch_us=3.5,
            memory_kind="GDDR7",
        ),
    }
)

GPU_IDS: tuple[str, ...] = tuple(GPUS)

#: Numeric value of ``__CUDA_ARCH__`` per arch, for messages and template guards.
CUDA_ARCH_VALUE: Mapping[str, int] = MappingProxyType(
    {"sm_80": 800, "sm_86": 860, "sm_90a": 900, "sm_120": 1200}
)


def get_gpu(gpu_id: str) -> GPU:
    """Look a GPU up by its lower-case id, with a helpful error for typos."""
    try:
        return GPUS[gpu_id]
    except KeyError:
        raise KeyError(f"unknown gpu {gpu_id!r}; expected one of {', '.join(GPU_IDS)}") from None


def arch_features(arch: str) -> frozenset[str]:
    """Feature set of an arch string (all GPUs of one arch share it)."""
    for gpu in GPUS.values():
        if gpu.arch == arch:
            return gpu.features
    raise KeyError(f"unknown arch {arch!r}")


def nvcc_arch_flag(arch: str, features: frozenset[str] | set[str] = frozenset()) -> str:
    """The ``-arch`` value every candidate of a GPU is compiled with (and the prompt states).

    One flag per GPU, whatever the candidate uses: the prompt, the harness and the compile
    check must agree (generator 1.6.0). Blackwell consumer parts compile for ``sm_120a``:
    under plain ``sm_120`` the block-scaled FP4 MMA path of a template compiles out (0 MMA
    instructions in its PTX) and the kernel would return zeros, so the arch-specific target
    is the only one a harness can use. ``features`` is kept for callers that pass it.
    """
    del features
    return "sm_120a" if arch == "sm_120" else arch


def compile_command(gpu_arch: str) -> str:
    """The nvcc command line of a CUDA candidate on a GPU of ``gpu_arch`` (prompt and feedback)."""
    return f"nvcc -O3 -std=c++17 -arch={nvcc_arch_flag(gpu_arch)} -c candidate.cu"


def min_arch_for(feature: str) -> str:
    """Human wording of the minimum target a feature needs (used in messages)."""
    return {
        "mma_sync": "sm_80",
        "cp_async": "sm_80",
        "tma": "sm_90",
        "tma_multicast": "sm_90a",
        "wgmma": "sm_90a",
        "setmaxnreg": "sm_90a",
        "fp8_mma": "sm_89",
        "fp4_mma": "sm_120a",
    }[feature]
