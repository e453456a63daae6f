"""Speedup statistics: ratio of medians, bootstrap CI, Mann-Whitney U."""

from __future__ import annotations

import random

from dagster_project.commit_exec.device import stats


def _noisy(center: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.gauss(0, 0.02)) for _ in range(n)]


def test_same_distribution_is_not_significant() -> None:
    a, b = _noisy(10.0, 21, 1), _noisy(10.0, 21, 2)
    lo, hi = stats.bootstrap_ci([(a, b)])
    assert lo <= 1.0 <= hi
    assert not stats.significant(lo, hi)
    assert stats.mann_whitney_p(a, b) > 0.05


def test_a_real_speedup_is_significant_and_its_size_is_right() -> None:
    before, after = _noisy(20.0, 21, 3), _noisy(10.0, 21, 4)
    assert abs(stats.ratio_of_medians(before, after) - 2.0) < 0.1
    lo, hi = stats.bootstrap_ci([(before, after)])
    assert 1.8 < lo < 2.0 < hi < 2.2
    assert stats.significant(lo, hi)
    assert stats.mann_whitney_p(before, after) < 1e-6


def test_geomean_over_shapes() -> None:
    pairs = [([4.0] * 5, [1.0] * 5), ([1.0] * 5, [1.0] * 5)]
    assert abs(stats.geomean_ratio(pairs) - 2.0) < 1e-12
    lo, hi = stats.bootstrap_ci(pairs)
    assert lo == hi == 2.0


def test_slowdown_is_below_one() -> None:
    lo, hi = stats.bootstrap_ci([(_noisy(10.0, 21, 5), _noisy(13.0, 21, 6))])
    assert hi < 1.0
