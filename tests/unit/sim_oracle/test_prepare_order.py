"""``sim_oracle.py prepare``'s coverage-first order (issue 36, 36o): a device call that is cut
off by its budget has spent it on the (op, impl, rung) no answer covers, then on the sessions
one answer short of the measured tier."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def script() -> Any:
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "device" / "sim_oracle.py"
    spec = importlib.util.spec_from_file_location("sim_oracle_order", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _q(key: str, role: str, rung: str, op: str = "gemv") -> dict[str, Any]:
    return {
        "key": key,
        "role": role,
        "op": op,
        "impl": "cuda",
        "variant": rung,
        "params": {},
        "shape": {},
    }


def _sessions() -> list[tuple[list[Any], list[Any]]]:
    """Four sessions: s1 in the tier already (b1, x1 timed); s2 one answer short (b2
    timed, x2 not); s3 with nothing answered; s4's steps on the new rungs v9 and v8."""
    return [
        ([_q("b1", "baseline", "v0"), _q("x1", "best", "v2")], [_q("s1", "step", "v1")]),
        ([_q("b2", "baseline", "v0"), _q("x2", "best", "v2")], [_q("s2", "step", "v2")]),
        ([_q("b3", "baseline", "v0"), _q("x3", "best", "v1")], [_q("s3", "step", "v1")]),
        (
            [_q("b4", "baseline", "v0"), _q("x4", "best", "v1")],
            [_q("n1", "step", "v9"), _q("n2", "step", "v9"), _q("m1", "step", "v8", "rms")],
        ),
    ]


def test_new_rungs_first_then_one_short_of_the_tier(script: Any) -> None:
    timed = frozenset({"b1", "x1", "b2"})
    covered = frozenset({("gemv", "cuda", "v0"), ("gemv", "cuda", "v1"), ("gemv", "cuda", "v2")})
    order = [q["key"] for q in script._coverage_order(_sessions(), 50, timed, timed, covered)]
    # one kernel of each uncovered rung (round-robin over ops), then x2 (s2 joins the tier),
    # then the other baseline/best, then the second kernel of a new rung, then the rest
    assert order[:3] == ["n1", "m1", "x2"]
    assert order[3:7] == ["b3", "x3", "b4", "x4"]
    assert order[7] == "n2"
    assert sorted(order) == sorted(
        {"n1", "n2", "m1", "x2", "b3", "x3", "b4", "x4", "s1"} | {"s2", "s3"}
    )
    assert not set(order) & timed
    # the tier order (--order tier) is kept as it was: baseline and best first
    assert [q["key"] for q in script._order(_sessions(), 50, timed)][:5] == [
        "x2",
        "b3",
        "x3",
        "b4",
        "x4",
    ]


def test_coverage_summary_counts_what_a_cut_off_plan_adds(script: Any) -> None:
    timed = frozenset({"b1", "x1", "b2"})
    covered = frozenset({("gemv", "cuda", "v0"), ("gemv", "cuda", "v1"), ("gemv", "cuda", "v2")})
    sessions = _sessions()
    plan = script._coverage_order(sessions, 50, timed, timed, covered)
    cov = script._coverage(plan[:3], sessions, timed, covered)
    # n1, m1: two new rungs (one on a new op); x2: s2 has baseline and best answered
    assert cov == {3: (2, 1, 1)}
    assert script._coverage(plan, sessions, timed, covered)[len(plan)] == (2, 3, 1)
