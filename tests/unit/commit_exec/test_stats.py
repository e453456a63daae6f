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


def _blocked(center: float, offsets: list[float], size: int, seed: int) -> list[float]:
    """Samples in blocks, each block's level shifted by its offset (what a fresh capture or
    allocation does to the same kernel)."""
    out: list[float] = []
    for k, off in enumerate(offsets):
        out += _noisy(center * (1 + off), size, seed + k)
    return out


def test_blocks_that_differ_widen_the_interval_where_the_single_capture_does_not() -> None:
    # An A/A control: the same kernel, but each block's capture sits a little apart, as the
    # shipped controls did (5651f475: 1.005 in s01, 0.993 in s03). The single-capture bootstrap
    # over the pooled samples misses 1.0 or nearly so; the block interval holds it.
    offs_b = [0.03, -0.02, 0.01, -0.03, 0.02, 0.0]
    offs_a = [-0.01, 0.02, -0.03, 0.01, 0.0, 0.03]
    before = _blocked(10.0, offs_b, 4, 10)
    after = _blocked(10.0, offs_a, 4, 40)
    sp, lo, hi = stats.block_interval([(before, after, 4)])
    assert lo <= 1.0 <= hi
    blo, bhi = stats.bootstrap_ci([(before, after)])
    assert (hi - lo) > (bhi - blo)


def test_block_interval_keeps_a_real_speedup_significant() -> None:
    offs = [0.01, -0.01, 0.0, 0.01, -0.01, 0.0]
    before, after = _blocked(20.0, offs, 4, 1), _blocked(10.0, offs[::-1], 4, 2)
    sp, lo, hi = stats.block_interval([(before, after, 4)])
    assert 1.9 < sp < 2.1 and stats.significant(lo, hi) and lo < sp < hi


def test_blocks_that_agree_by_chance_cannot_beat_the_samples_noise() -> None:
    # Identical block medians: the between-block variance is ~0, the within-block bootstrap
    # still bounds the interval's width from below.
    block = [9.0, 10.0, 11.0, 10.0]
    sp, lo, hi = stats.block_interval([(block * 6, block * 6, 4)])
    assert sp == 1.0 and lo < 0.99 and hi > 1.01


def test_scope_interval_chooses_the_design_and_refuses_a_mix() -> None:
    old = {"samples_before": [2.0] * 5, "samples_after": [1.0] * 5}
    new = {"samples_before": [2.0, 2.1] * 6, "samples_after": [1.0, 1.05] * 6, "block_size": 2}
    assert stats.scope_interval([old])[0] == 2.0
    assert abs(stats.scope_interval([new])[0] - 2.0) < 1e-9
    import pytest

    with pytest.raises(ValueError, match="mix"):
        stats.scope_interval([old, new])
    with pytest.raises(ValueError, match="do not split"):
        stats.split_blocks([1.0] * 5, 2)


def test_each_blocks_first_sample_is_warm_up() -> None:
    # The first replay after a capture ran 1.2-2x the rest on the H100 (s06). With it kept, a
    # cold first sample on one side in every block would move the estimate; it is dropped.
    warm = [40.0, 20.0, 20.2, 19.8]
    cold_after = [70.0, 20.0, 20.2, 19.8]
    sp, lo, hi = stats.block_interval([(warm * 6, cold_after * 6, 4)])
    assert abs(sp - 1.0) < 1e-9 and lo <= 1.0 <= hi and hi / lo < 1.1


def test_label_scope_is_graph_where_it_captured_else_host() -> None:
    """One rule for the label and the reward: a row whose launcher the graph cannot capture
    is read in host wall time (stop 42: 4 of 25 reward checks had no speedup without it)."""
    assert stats.label_scope({"graph": True, "host": True}) == "graph"
    assert stats.label_scope({"graph": False, "host": True}) == "host"
    assert stats.label_scope({"host": True}) == "host"
    assert stats.label_scope({"graph": False, "host": False}) is None
