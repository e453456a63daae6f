"""Issue 39 (39f): the engineer stops when the move it would make next is one its own rules
of thumb expect slower (stop rule 1.1.0, generator 1.15.0).

The measured tier's answers are addressed by kernel text, so the rule may only end a session
earlier: every step it still takes is the step generator 1.14.0 took, and what it adds is at
most the closing re-benchmark of a kernel it already wrote. 1.14.0's engineer remains as
``AgentProfile(foresight_stop=False)``; both run here on real sessions of the shared small
build (``benchmarks/sim_engineer.py --prefix-of`` checks a whole seed against a checkout).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from dagster_project.sim.agent import AgentProfile
from dagster_project.sim.kernelinfer import simulate_session
from dagster_project.sim.stop_rule import DEQUANTISED_MMA, Move, foreseen_slower

from .conftest import SMALL_SEED

#: Sessions of the small build compared (the first 30 hold three the rule ends earlier).
COMPARED = 30


def _move(dim: str, old: object, new: object, measured: bool = False, hunch: float = 0.0) -> Move:
    return Move(dim, old, new, measured, hunch)


def test_dropping_a_native_low_precision_mma_is_foreseen_slower() -> None:
    assert foreseen_slower([_move("mma", "e4m3", DEQUANTISED_MMA)]) == "dequantise"
    assert foreseen_slower([_move("mma", "e2m1", DEQUANTISED_MMA)]) == "dequantise"
    # going native, or a kernel with no MMA choice, is no such warning
    assert foreseen_slower([_move("mma", DEQUANTISED_MMA, "e4m3")]) is None
    assert foreseen_slower([_move("mma", None, DEQUANTISED_MMA)]) is None
    # measured or not, giving up the native rate is the same physics
    assert foreseen_slower([_move("mma", "e4m3", "f16", measured=True)]) == "dequantise"


def test_only_an_unmeasured_move_the_occupancy_calls_slower_stops() -> None:
    assert foreseen_slower([_move("BM", 64, 128, hunch=0.08)]) == "occupancy"
    # the engineer measured this direction on the rung: its measurement decides, not the hunch
    assert foreseen_slower([_move("BM", 64, 128, measured=True, hunch=0.08)]) is None
    # no hunch, or one that calls the move faster: the move is worth its step
    assert foreseen_slower([_move("BM", 64, 128)]) is None
    assert foreseen_slower([_move("splits", 2, 4, hunch=-0.08)]) is None
    # a pair of moves stops if either part is foreseen slower
    pair = [_move("warps", 4, 8), _move("splits", 4, 2, hunch=0.08)]
    assert foreseen_slower(pair) == "occupancy"
    assert foreseen_slower([]) is None


def _codes(s: dict[str, Any]) -> list[str]:
    return [m["content"] for m in s["messages"][2::2]]


@pytest.fixture(scope="module")
def pairs(small_build: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(1.14.0's session, the build's session) for the first tasks of the small build."""
    old = AgentProfile(foresight_stop=False)
    both = list(zip(small_build["tasks"], small_build["sessions"], strict=True))[:COMPARED]
    return [(simulate_session(t, SMALL_SEED, old), s) for t, s in both]


def test_the_rule_only_ends_sessions_earlier_before_a_tuning_move(
    pairs: list[tuple[dict[str, Any], dict[str, Any]]],
) -> None:
    cut = 0
    for old, new in pairs:
        a, b = _codes(old), _codes(new)
        sid = new["session_id"]
        if a == b:
            assert old["trace"] == new["trace"], sid
            continue
        cut += 1
        assert len(b) <= len(a), sid
        # every step but the last is 1.14.0's step, byte for byte; the last is one of its
        # steps or the closing re-benchmark of a kernel it wrote: no new kernel to measure
        assert b[:-1] == a[: len(b) - 1] and set(b) <= set(a), sid
        assert new["trace"][:-1] == old["trace"][: len(b) - 1], sid
        # it stopped where 1.14.0 made a tuning move, and after it nothing more was tuned
        stop = len(b) - 1 if new["trace"][-1]["kind"] == "rebench" else len(b)
        assert old["trace"][stop]["kind"] == "tune", sid
        assert all(r["kind"] != "tune" for r in new["trace"][stop:]), sid
    # the rule really ends sessions here (none would differ without it)
    assert cut >= 2


def test_the_default_profile_stops_on_a_foreseen_slowdown() -> None:
    assert AgentProfile().foresight_stop
    assert not AgentProfile(foresight_stop=False).foresight_stop


def test_the_slow_tail_report_lists_what_the_rule_removed(
    pairs: list[tuple[dict[str, Any], dict[str, Any]]],
) -> None:
    """``benchmarks/sim_engineer.py --slow-tail`` on real sessions: every line it lists is an
    ok tune step after the best at >= 1.5x the best, and the rule never adds one."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    from sim_engineer import slow_tail

    olds = [o for o, _ in pairs]
    news = [n for _, n in pairs]
    old_lines, old_moved = slow_tail(olds)
    new_lines, _ = slow_tail(news)
    assert sum(old_moved.values()) >= len(old_lines)
    for line in old_lines + new_lines:
        ratio = float(line.split(" x", 1)[1].split()[0])
        assert ratio >= 1.5, line
    assert len(new_lines) <= len(old_lines)
