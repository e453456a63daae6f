"""Speedup statistics of interleaved A/B samples: ratio of medians, confidence intervals and a
Mann-Whitney U test. Pure Python + the standard library (no numpy needed), so CI can test it
and the GPU machine can run it.

Two interval designs, told apart by what the runner recorded:

* harness <= 5 (``bootstrap_ci``): one capture per side, 21 interleaved samples, a 95%
  bootstrap over the samples. It sees only sample-to-sample noise. Over the 65 graph-scope
  A/A controls of s01-s05 (before timed against a second copy of itself) 7 excluded 1.0, one
  by 4.4%: two captures of the same kernel differ by more than their samples vary, and the
  same row's control fell on opposite sides of 1.0 in two sessions (5651f475: 1.005
  [1.002, 1.007] in s01, 0.993 [0.992, 0.995] in s03).
* harness >= 6 (``block_interval``): ``BLOCKS`` independent blocks per shape, each with
  fresh input allocations and fresh graph captures, interleaved samples inside a block. The
  point estimate is the mean over blocks of the log ratio of medians; the interval is a
  Student-t interval at ``BLOCK_LEVEL`` over the blocks, so what differs between captures and
  allocations is in the interval, not hidden in a floor. Its variance is the larger of the
  between-block variance and the samples' own scatter (``_within_variance``), so blocks that
  agree by chance cannot make it narrower than the samples allow. Each block's first sample
  per side is warm-up (``BLOCK_WARMUP``).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

#: Bootstrap resamples and the two-sided level of every interval.
BOOTSTRAP = 2000
LEVEL = 0.95


def ratio_of_medians(before: Sequence[float], after: Sequence[float]) -> float:
    """before / after: > 1 means after is faster."""
    return statistics.median(before) / statistics.median(after)


def bootstrap_ci(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]], seed: int = 0
) -> tuple[float, float]:
    """CI of the geometric mean over ``pairs`` of ratio_of_medians, resampling each side of
    each pair independently (the samples of one side are exchangeable; the two sides were
    interleaved, so drift affects both)."""
    rng = random.Random(seed)
    stats = []
    for _ in range(BOOTSTRAP):
        logs = []
        for before, after in pairs:
            b = [before[rng.randrange(len(before))] for _ in before]
            a = [after[rng.randrange(len(after))] for _ in after]
            logs.append(math.log(ratio_of_medians(b, a)))
        stats.append(math.exp(sum(logs) / len(logs)))
    stats.sort()
    lo = stats[int((1 - LEVEL) / 2 * BOOTSTRAP)]
    hi = stats[min(BOOTSTRAP - 1, int((1 + LEVEL) / 2 * BOOTSTRAP))]
    return lo, hi


#: Harness-6 design: blocks per shape, the interval's two-sided level, and Student-t
#: quantiles at that level by degrees of freedom (standard table values; the block count
#: is small and fixed, so a table is exact where a series approximation would not be).
BLOCKS = 6
BLOCK_LEVEL = 0.99
T_QUANTILE_995 = {
    1: 63.657,
    2: 9.925,
    3: 5.841,
    4: 4.604,
    5: 4.032,
    6: 3.707,
    7: 3.499,
    8: 3.355,
    9: 3.250,
    10: 3.169,
}
#: Samples per side dropped at the start of each block: the first replay after a capture
#: (and the first eager call on fresh allocations) carries one-time costs — on the H100 in
#: s06 it ran 1.2-2x the block's other samples on every shape — so it is warm-up, not a
#: sample of the kernel's time.
BLOCK_WARMUP = 1


def split_blocks(samples: Sequence[float], block_size: int) -> list[list[float]]:
    """The runner's pooled samples back into their blocks (it writes them block by block)."""
    if block_size <= 0 or len(samples) % block_size:
        raise ValueError(f"{len(samples)} samples do not split into blocks of {block_size}")
    return [list(samples[i : i + block_size]) for i in range(0, len(samples), block_size)]


def _kept(block: list[float]) -> list[float]:
    return block[BLOCK_WARMUP:] if len(block) > BLOCK_WARMUP else block


def _within_variance(before: list[list[float]], after: list[list[float]]) -> float:
    """Variance of one block's log ratio of medians from the samples' own scatter: the pooled
    variance of log samples around their block's mean, times the median's efficiency factor
    (pi/2) and (1/n_before + 1/n_after). Pooled over every block of both sides, so a block of
    three samples is not its own noisy judge (a bootstrap of a three-sample median is)."""
    devs = [
        (math.log(x) - m) ** 2
        for block in before + after
        for m in [statistics.fmean(math.log(v) for v in block)]
        for x in block
    ]
    dof = sum(len(b) - 1 for b in before + after)
    if dof <= 0:
        return 0.0
    pooled = sum(devs) / dof
    return math.pi / 2 * pooled * (1 / len(before[0]) + 1 / len(after[0]))


def shape_blocks(
    before: Sequence[float], after: Sequence[float], block_size: int
) -> tuple[float, float, int]:
    """(mean log ratio, variance of that mean, degrees of freedom) of one shape's blocks."""
    bb = [_kept(b) for b in split_blocks(before, block_size)]
    ab = [_kept(a) for a in split_blocks(after, block_size)]
    if len(bb) != len(ab) or len(bb) < 2:
        raise ValueError(f"need >= 2 matched blocks, got {len(bb)} and {len(ab)}")
    logs = [math.log(ratio_of_medians(b, a)) for b, a in zip(bb, ab, strict=True)]
    between = statistics.variance(logs)
    return statistics.fmean(logs), max(between, _within_variance(bb, ab)) / len(logs), len(logs) - 1


def block_interval(
    shapes: Sequence[tuple[Sequence[float], Sequence[float], int]],
) -> tuple[float, float, float]:
    """(speedup, lo, hi) over one or more shapes' blocks: the geometric mean of the shapes'
    block estimates and a t interval at ``BLOCK_LEVEL`` (shapes independent; the smallest
    shape's degrees of freedom, which errs wide)."""
    parts = [shape_blocks(b, a, size) for b, a, size in shapes]
    if not parts:
        raise ValueError("no shapes")
    k = len(parts)
    mean = sum(m for m, _, _ in parts) / k
    var = sum(v for _, v, _ in parts) / k**2
    df = min(d for _, _, d in parts)
    half = T_QUANTILE_995[min(df, max(T_QUANTILE_995))] * math.sqrt(var)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


#: The two timing scopes, in the order a row's speedup is read from them.
SCOPES = ("graph", "host")

#: The shapes a row's speedup is read over: the spec's named shapes (repo tests, call sites,
#: the models the title names). The random held-out shape is drawn anew by every run, and one
#: commit's per-shape speedups span 0.5-3.8x (s06), so pooling it made the label move with
#: the draw: of 26 rows timed in two sessions, the pooled labels' intervals overlapped in
#: 19, the named-only ones in 23 (stop 42). It keeps its own figure (heldout_graph_speedup)
#: and is still checked for correctness; the execution reward times the same named shapes.
LABEL_ROLES = ("named",)
#: Version of the label rule (LABEL_ROLES + label_scope), stored as ``exec_label_version``:
#: 1 pooled the named and the random shape; 2 (stop 42) reads the named shapes only.
LABEL_VERSION = "2"


def label_scope(timed: Mapping[str, bool]) -> str | None:
    """The scope a row's speedup is read in: CUDA-graph replay where the graph captured the
    calls (``timed["graph"]``), else host-inclusive wall time (a launcher that synchronises
    or allocates cannot be captured), else None. One home for the choice: the shipped label
    (``reward_checks``) and the execution reward (``candidate``) both read it, so a row
    timed only on the host is rewarded in the scope its label was measured in."""
    return next((s for s in SCOPES if timed.get(s)), None)


def scope_interval(
    timings: Sequence[Mapping[str, Any]], seed: int = 0
) -> tuple[float, float, float]:
    """(speedup, lo, hi) over one scope's timings of one or more shapes, by the design that
    recorded them: blocks (``block_size`` present, harness >= 6) or the single-capture
    bootstrap (harness <= 5). One home for the choice: the runner's reward path and the
    ingestion of shipped batches both call it. Mixed designs are refused."""
    if not timings:
        raise ValueError("no timings")
    blocked = ["block_size" in t for t in timings]
    if all(blocked):
        return block_interval(
            [(t["samples_before"], t["samples_after"], int(t["block_size"])) for t in timings]
        )
    if any(blocked):
        raise ValueError("timings mix the block design (harness >= 6) with the single capture")
    pairs = [(t["samples_before"], t["samples_after"]) for t in timings]
    lo, hi = bootstrap_ci(pairs, seed=seed)
    return geomean_ratio(pairs), lo, hi


def geomean_ratio(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> float:
    logs = [math.log(ratio_of_medians(b, a)) for b, a in pairs]
    return math.exp(sum(logs) / len(logs))


def mann_whitney_p(before: Sequence[float], after: Sequence[float]) -> float:
    """Two-sided p of Mann-Whitney U (normal approximation with tie correction)."""
    n1, n2 = len(before), len(after)
    values = sorted([(v, 0) for v in before] + [(v, 1) for v in after])
    ranks = [0.0] * len(values)
    i = 0
    ties = 0.0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1][0] == values[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    r1 = sum(r for r, (_, side) in zip(ranks, values, strict=True) if side == 0)
    u = r1 - n1 * (n1 + 1) / 2
    mu = n1 * n2 / 2
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    if sigma == 0:
        return 1.0
    z = (abs(u - mu) - 0.5) / sigma
    return max(0.0, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


#: Smallest effect called a difference. The A/A controls (before timed against a second
#: copy of itself) of the first H100 session stayed within 0.8% of 1.0, which set 2%; the
#: second session (stop 35, 54 controls over both) found one at 0.956 [0.955, 0.957]
#: (vLLM's moe_align_block_size, a few-microsecond kernel), so two identical kernels can
#: differ by 4.4% under this harness. The floor is the widest A/A deviation seen, rounded
#: up: 5%. Judge version 3 (``judge.JUDGE_VERSION``) carries it.
MIN_EFFECT = 0.05


def significant(lo: float, hi: float, floor: float = MIN_EFFECT) -> bool:
    """The interval lies wholly above 1 + floor or below 1 / (1 + floor)."""
    return lo > 1.0 + floor or hi < 1.0 / (1.0 + floor)
