"""Speedup statistics of interleaved A/B samples: ratio of medians, a bootstrap confidence
interval and a Mann-Whitney U test. Pure Python + the standard library (no numpy needed),
so CI can test it and the GPU machine can run it."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

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
