"""The upstream tuners' whole search spaces, pruned only by configs that cannot launch.

Issue 38 asks for each row's *true* optimum: the fastest config of the space the engine's
own tuning script searches, not of the ~13 candidates around the tuned config. This module
enumerates that space per row and writes the device plans that time it (run by
``run_batch`` like any batch; ``benchmarks/device/gpu_exhaustive_plan.py`` is the CLI).
A row's plan line holds its usual table (tuned, default, the tuned config's one-step
neighbours, by their labels) and then every other launchable config of the space, so
the fastest of one session over all of them is the row's optimum.

The spaces, read from the tuning scripts at the snapshot the rows' kernel sources come
from (vLLM ``28be48fa944d``, SGLang ``30cb848d4b45``; our own restatement of their grids,
``SPACES``), on NVIDIA (the ROCm branches differ and are not ours to time):

* vLLM fused MoE, ``benchmarks/kernels/benchmark_moe.py`` ``get_configs_compute_bound``:
  BLOCK_SIZE_M 16-256, BLOCK_SIZE_N 32-256, BLOCK_SIZE_K 64-256, GROUP_SIZE_M
  {1, 16, 32, 64}, num_warps {4, 8}, num_stages 2-5 (1,920 configs); for fp8 block
  quantisation it keeps configs whose BLOCK_SIZE_K and BLOCK_SIZE_N are multiples of
  the quantisation block.
* SGLang fused MoE, ``benchmark/kernels/fused_moe_triton/common_utils.py`` (same grid,
  1,920) as filtered by ``tuning_fused_moe_triton.py``: with a block shape, BLOCK_SIZE_K
  must divide the block's k.
* Block-fp8 matmul, vLLM ``benchmarks/kernels/benchmark_w8a8_block_fp8.py`` and SGLang
  ``benchmark/kernels/quantization/tuning_block_wise_kernel.py``: the same grid with
  BLOCK_SIZE_K {64, 128} (1,280), filtered to BLOCK_SIZE_K dividing the block's k.

Two configs the engine launches identically are timed once (``launch_key``): vLLM's MoE
launcher caps BLOCK_SIZE_K at the quantisation block, so 256 and 128 are one launch; and
GROUP_SIZE_M only orders the output tiles, by the kernels' grouped mapping (both engines'
fused-MoE and block-fp8 kernels at the snapshots: tiles go to programs in groups of
GROUP_SIZE_M row-blocks), so every GROUP_SIZE_M at or above the launch's number of row
blocks gives every program the same tile (one group holds them all): those configs are
one launch, keyed by ``min(GROUP_SIZE_M, row blocks)`` of each of the row's launches.

Pruning. The tuners try every config and skip the ones Triton refuses; we drop only the
configs that certainly cannot launch on an sm_90 GPU (H100 and H200 alike): those whose
pipelined operand tiles cannot fit the 232,448 bytes of shared memory a block may use
(the "Hardware limit" Triton reports on the H200 in the shipped results). The bound is a
*lower* bound of what Triton allocates, ``max(num_stages - 1, 1)`` buffers of
``(BLOCK_SIZE_M + BLOCK_SIZE_N) · BLOCK_SIZE_K`` operand elements: over the shipped
results no ``ok`` config exceeds it (``tests/unit/rewards/test_exhaustive_space.py``),
while Triton's own figure (``num_stages`` buffers, plus scale rows for the block-fp8
matmul) matched the reported requirement in 1,111 of 1,183 ``out_of_resources`` results.
Configs between the two are kept and left to the device (Triton refuses them at compile
time, a worker's second, not a timing). Registers prune nothing: the spaces' 4 or 8 warps
are at most 256 threads, within sm_90's 1,024, and register pressure spills instead of
failing to launch.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .neighbours import Candidate, candidates
from .plan import cdiv, moe_extent, policy_for, problems_for
from .spec import ConfigError, MeasureRow, config_key, normalise_config

#: Shared memory one block may use on sm_90 (H100, H200), in bytes.
SMEM_LIMIT_SM90 = 232_448
#: Version of the space and pruning rules (stamped through the space name on each row).
SPACE_RULES = "1"
#: Device cost figures for planning, from the H200 runs of harness 1.1.0 (RESULTS,
#: "Rows per GPU-minute"): 22.5 candidates timed per second with a warm pipeline, and
#: about 18 kernel variants compiled per second by 15 pre-compile workers.
CANDIDATES_PER_S = 22.5
COMPILES_PER_S = 18.0

_MOE_GRID: dict[str, tuple[int, ...]] = {
    "BLOCK_SIZE_M": (16, 32, 64, 128, 256),
    "BLOCK_SIZE_N": (32, 64, 128, 256),
    "BLOCK_SIZE_K": (64, 128, 256),
    "GROUP_SIZE_M": (1, 16, 32, 64),
    "num_warps": (4, 8),
    "num_stages": (2, 3, 4, 5),
}
_MM_GRID = {**_MOE_GRID, "BLOCK_SIZE_K": (64, 128)}


@dataclass(frozen=True)
class TunerSpace:
    """One tuning script's grid and its block-quantisation filter (``SPACES``)."""

    name: str
    grid: Mapping[str, tuple[int, ...]]
    #: vLLM MoE: BK and BN multiples of the block; the others: BK divides the block's k.
    block_filter: str


SPACES: dict[tuple[str, str], TunerSpace] = {
    ("vllm", "moe"): TunerSpace(
        "vllm:benchmarks/kernels/benchmark_moe.py@28be48fa944d", _MOE_GRID, "multiple"
    ),
    ("sglang", "moe"): TunerSpace(
        "sglang:benchmark/kernels/fused_moe_triton/tuning_fused_moe_triton.py@30cb848d4b45",
        _MOE_GRID,
        "divides_k",
    ),
    ("vllm", "block_mm"): TunerSpace(
        "vllm:benchmarks/kernels/benchmark_w8a8_block_fp8.py@28be48fa944d", _MM_GRID, "divides_k"
    ),
    ("sglang", "block_mm"): TunerSpace(
        "sglang:benchmark/kernels/quantization/tuning_block_wise_kernel.py@30cb848d4b45",
        _MM_GRID,
        "divides_k",
    ),
}


def space_for(row: MeasureRow) -> TunerSpace:
    """The tuner space of a row's engine and kernel family (``KeyError`` for others)."""
    return SPACES[(row.repo, str(row.kind))]


def tuner_configs(row: MeasureRow) -> list[dict[str, int]]:
    """The tuner's configs for this row, in the grid's order, after its block filter."""
    space = space_for(row)
    keys = list(space.grid)
    out = [dict(zip(keys, vals, strict=True)) for vals in itertools.product(*space.grid.values())]
    if row.block_shape is None or row.quant != "fp8_block":
        return out
    bn, bk = row.block_shape
    if space.block_filter == "multiple":
        return [c for c in out if c["BLOCK_SIZE_K"] % bk == 0 and c["BLOCK_SIZE_N"] % bn == 0]
    return [c for c in out if bk % c["BLOCK_SIZE_K"] == 0]


def launch_config(row: MeasureRow, config: Mapping[str, int]) -> dict[str, int]:
    """The config as the engine's launcher runs it (vLLM caps a MoE config's
    BLOCK_SIZE_K at the quantisation block, as ``plan._moe_args`` does)."""
    cfg = dict(config)
    if row.kind == "moe" and policy_for(row.repo).clamp_block_k and row.block_shape:
        cfg["BLOCK_SIZE_K"] = min(cfg["BLOCK_SIZE_K"], *row.block_shape)
    return cfg


def row_blocks(row: MeasureRow, config: Mapping[str, int]) -> tuple[int, ...]:
    """Row blocks (``cdiv(EM, BLOCK_SIZE_M)`` or ``cdiv(M, BLOCK_SIZE_M)``) of each of the
    row's launches, on the engine's grid (``plan.moe_extent`` for MoE)."""
    policy = policy_for(row.repo)
    names = frozenset({"naive_block_assignment"})  # the snapshot kernels' parameters
    bm = config["BLOCK_SIZE_M"]
    out = []
    for p in problems_for(row):
        em = moe_extent(p, bm, policy, names)[2] if p.kind == "moe" else p.rows
        out.append(cdiv(em, bm))
    return tuple(out)


def launch_key(
    row: MeasureRow, config: Mapping[str, Any], blocks: dict[int, tuple[int, ...]] | None = None
) -> str:
    """Equal for two configs the engine launches identically (module docstring); the
    config must be normalised. ``blocks`` caches ``row_blocks`` by BLOCK_SIZE_M (they
    depend on nothing else of the config)."""
    cfg = launch_config(row, config)
    cache = {} if blocks is None else blocks
    bm = cfg["BLOCK_SIZE_M"]
    if bm not in cache:
        cache[bm] = row_blocks(row, cfg)
    groups = [min(cfg["GROUP_SIZE_M"], n) for n in cache[bm]]
    return config_key({**cfg, "GROUP_SIZE_M": 0}) + json.dumps(groups)


def operand_bytes(row: MeasureRow) -> int:
    """Bytes per element of the GEMM operands staged in shared memory."""
    return 1 if row.quant.startswith("fp8") else 2


def smem_lower_bound(row: MeasureRow, config: Mapping[str, int]) -> int:
    """Shared memory the pipelined operand tiles need at least (module docstring)."""
    cfg = launch_config(row, config)
    buffers = max(int(cfg.get("num_stages", 3)) - 1, 1)
    tile = (cfg["BLOCK_SIZE_M"] + cfg["BLOCK_SIZE_N"]) * cfg["BLOCK_SIZE_K"]
    return buffers * tile * operand_bytes(row)


def cannot_launch(row: MeasureRow, config: Mapping[str, int]) -> str | None:
    """Why a config certainly cannot launch on an sm_90 GPU, or ``None``."""
    need = smem_lower_bound(row, config)
    if need > SMEM_LIMIT_SM90:
        return f"shared memory >= {need} bytes > {SMEM_LIMIT_SM90}"
    return None


def short_label(config: Mapping[str, int]) -> str:
    """A space candidate's label: ``s:`` and the config in one token
    (``s:M64N128K128G16w4s3``), unique per config."""
    return (
        f"s:M{config['BLOCK_SIZE_M']}N{config['BLOCK_SIZE_N']}K{config['BLOCK_SIZE_K']}"
        f"G{config['GROUP_SIZE_M']}w{config['num_warps']}s{config['num_stages']}"
    )


@dataclass(frozen=True)
class Space:
    """A row's pruned space: what is timed, and what was left out and why."""

    name: str
    candidates: tuple[Candidate, ...]  # the usual table, then the space (launch-distinct)
    tuner_size: int  # the tuner's configs after its own filter
    aliases: int  # configs launched like tuned, default or an earlier config
    pruned: int  # configs that cannot launch (``cannot_launch``)


def exhaustive_space(row: MeasureRow) -> Space:
    """The row's usual table first (tuned, default and the tuned config's one-step
    neighbours, with their own labels: ``neighbours.candidates``), then every tuner
    config that is launch-distinct from them and from each other and can launch.

    Why the usual table too: a row's results are merged by label, so re-timing every
    label of an earlier table of the row (maybe one launched on a superseded grid)
    leaves no older result beside the new session's; the optimum is then the fastest of
    the tuner's space together with the tuned, default and neighbour configs."""
    configs = tuner_configs(row)
    cands = candidates(row.best_config, row.default_config)
    seen: set[str] = set()
    blocks: dict[int, tuple[int, ...]] = {}
    for c in cands:
        with contextlib.suppress(ConfigError):  # an invalid tuned/default is still listed
            seen.add(launch_key(row, normalise_config(c.config)[0], blocks))
    aliases = pruned = 0
    for cfg in configs:
        key = launch_key(row, cfg, blocks)
        if key in seen:
            aliases += 1
            continue
        if cannot_launch(row, cfg):
            pruned += 1
            continue
        seen.add(key)
        cands.append(Candidate(short_label(cfg), cfg))
    return Space(space_for(row).name, tuple(cands), len(configs), aliases, pruned)


# -- the stratified subset ----------------------------------------------------------------

#: M targets in pick order within a family: the smallest and the largest first, then
#: decode, mid and prefill sizes in between (each mapped to the nearest M of the shape).
M_LADDER = (1, 1 << 30, 64, 8, 1024, 16, 256, 4096, 2, 128, 2048, 32, 512, 4)


def family(row: MeasureRow) -> tuple[str, str, str]:
    """Kernel family of a row: engine, kernel, quantisation."""
    return (row.repo, row.kernel, row.quant)


def shape_of(row: MeasureRow) -> tuple[Any, ...]:
    """Everything but M that fixes the problem (E, N, K, top-k, GEMMs, block shape)."""
    return (row.E, row.N, row.K, row.top_k, row.n_shared, row.moe_gemms, row.block_shape)


def _rank(seed: int, *parts: Any) -> str:
    return hashlib.sha256(json.dumps([seed, *map(str, parts)]).encode()).hexdigest()


def select_exhaustive(rows: Sequence[MeasureRow], n_rows: int, seed: int) -> list[MeasureRow]:
    """``n_rows`` rows stratified over kernel families (round-robin), within a family
    over its shapes (E/N/K, top-k: a seeded order, cycled) and over M (``M_LADDER``: the
    smallest and largest M of the shape first). Deterministic for a seed; the result is
    in pick order, so a plan cut short by its budget still covers every family."""
    by_family: dict[tuple[str, str, str], dict[tuple[Any, ...], list[MeasureRow]]] = {}
    for r in rows:
        by_family.setdefault(family(r), {}).setdefault(shape_of(r), []).append(r)
    queues: dict[tuple[str, str, str], list[list[MeasureRow]]] = {}
    for fam, shapes in by_family.items():
        ranks = {s: _rank(seed, fam, s) for s in shapes}
        ordered = sorted(shapes, key=ranks.__getitem__)
        queues[fam] = [sorted(shapes[s], key=lambda r: (r.M, r.id)) for s in ordered]
    picks = {fam: 0 for fam in queues}
    chosen: list[MeasureRow] = []
    while len(chosen) < n_rows and any(any(q) for q in queues.values()):
        for fam in sorted(queues):
            if len(chosen) >= n_rows:
                break
            row = _next_pick(queues[fam], picks[fam])
            if row is not None:
                picks[fam] += 1
                chosen.append(row)
    return chosen


def _next_pick(shapes: list[list[MeasureRow]], n: int) -> MeasureRow | None:
    """The family's ``n``-th pick: the next non-empty shape in turn, its row nearest the
    ``n``-th M target (removed from the queue)."""
    live = [s for s in shapes if s]
    if not live:
        return None
    rows = live[n % len(live)]
    target = M_LADDER[n % len(M_LADDER)]
    best = min(range(len(rows)), key=lambda i: (abs(rows[i].M - target), rows[i].M))
    return rows.pop(best)


# -- plans ---------------------------------------------------------------------------------


def compile_key(row: MeasureRow, config: Mapping[str, int]) -> tuple[Any, ...]:
    """An estimate of what a compiled kernel variant is keyed on (``Launch.spec_key``
    without planning the launch): the source, the quantisation, the constexprs a row fixes
    (top-k, GEMMs, K divisible by the tile) and the launch config. Used only to estimate
    device time."""
    cfg = launch_config(row, config)
    even = tuple(p.k % cfg["BLOCK_SIZE_K"] == 0 for p in problems_for(row))
    return (row.kernel, row.repo, row.quant, row.routed_top_k, row.moe_gemms, even, config_key(cfg))


@dataclass(frozen=True)
class PlanEstimate:
    rows: int
    candidates: int
    variants: int

    @property
    def device_s(self) -> float:
        """Seconds of device time: the slower of timing and compiling (they overlap)."""
        return max(self.candidates / CANDIDATES_PER_S, self.variants / COMPILES_PER_S)


def estimate(items: Iterable[tuple[MeasureRow, Space]]) -> PlanEstimate:
    rows = cands = 0
    keys: set[tuple[Any, ...]] = set()
    for row, space in items:
        rows += 1
        cands += len(space.candidates)
        for c in space.candidates:
            try:
                keys.add(compile_key(row, normalise_config(c.config)[0]))
            except (ConfigError, KeyError):
                continue
    return PlanEstimate(rows, cands, len(keys))


def plan_order(rows: Sequence[MeasureRow]) -> list[MeasureRow]:
    """Rows in the order a plan times them: by family, top-k and shape, so consecutive
    rows share compiled kernels (compiling is the cost of an exhaustive row)."""
    return sorted(rows, key=lambda r: (family(r), r.routed_top_k, str(shape_of(r)), r.M, r.id))


def exhaustive_line(row: MeasureRow, space: Space) -> dict[str, Any]:
    """A batch line in the existing plan format (``run_batch.read_batch``) with the
    space's candidates and the ``exhaustive_space`` / ``space_size`` stamps."""
    extra = {**row.extra, "exhaustive_space": space.name, "space_size": len(space.candidates)}
    d = {**row.to_json(), "extra": extra}
    d["candidates"] = [{"label": c.label, "config": c.config} for c in space.candidates]
    return d


def split_parts(
    items: Sequence[tuple[MeasureRow, Space]], part_s: float
) -> list[list[tuple[MeasureRow, Space]]]:
    """Consecutive parts of the plan of about ``part_s`` device seconds each (whole rows,
    at least one per part), so one device call finishes a part or resumes it."""
    parts: list[list[tuple[MeasureRow, Space]]] = [[]]
    for item in items:
        trial = [*parts[-1], item]
        if parts[-1] and estimate(trial).device_s > part_s:
            parts.append([item])
        else:
            parts[-1] = trial
    return [p for p in parts if p]
