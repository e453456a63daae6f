"""Direction inference, speedup arithmetic and stated-ratio conventions."""

from __future__ import annotations

from typing import Any

import pytest

from dagster_project.gains.normalise import (
    compute_speedup,
    finalise,
    infer_higher_is_better,
    normalise_unit,
    parse_stated_speedup,
)
from dagster_project.gains.schema import Measurement


@pytest.mark.parametrize(
    ("metric", "unit", "expected"),
    [
        ("Mean TTFT", "ms", False),
        ("Output token throughput", "tok/s", True),
        ("kernel", "us", False),
        ("Before", "TFLOPS", True),
        ("value", "GB/s", True),
        ("TPOT", "ms/token", False),
        ("latency", None, False),
        ("Request throughput", None, True),
        ("main", None, None),
        ("speedup", "x", True),
        ("Avg latency", "seconds", False),
    ],
)
def test_direction(metric: str, unit: str | None, expected: bool | None) -> None:
    assert infer_higher_is_better(metric, unit) is expected


def test_units_are_canonical() -> None:
    assert normalise_unit("µs") == "us" and normalise_unit("tokens/s") == "tok/s"
    assert normalise_unit("(ms)") == "ms" and normalise_unit("TFLOP/s") == "TFLOPS"
    assert normalise_unit("widgets") == "widgets" and normalise_unit(" ") is None


def test_speedup_is_oriented_so_above_one_is_better() -> None:
    assert compute_speedup(10.0, 8.0, False) == 1.25  # latency down
    assert compute_speedup(100.0, 125.0, True) == 1.25  # throughput up
    assert compute_speedup(8.0, 10.0, False) == 0.8  # a regression stays < 1
    assert compute_speedup(10.0, 8.0, None) is None
    assert compute_speedup(0.0, 8.0, True) is None


@pytest.mark.parametrize(
    ("phrase", "kwargs", "expected"),
    [
        ("1.3x faster", {}, 1.3),
        ("2x lower latency", {}, 2.0),
        ("1.25x speedup", {}, 1.25),
        ("1.2x slower", {}, round(1 / 1.2, 4)),
        ("23% faster", {}, 1.23),
        ("23% lower latency", {}, round(1 / 0.77, 4)),
        ("15% higher throughput", {}, 1.15),
        ("latency increased by 10%", {}, round(1 / 1.1, 4)),
        ("+3.2%", {"kind": "Output throughput change"}, 1.032),
        ("-2.9%", {"kind": "TPOT change"}, round(1 / 0.971, 4)),
        ("1.42x", {"kind": "speedup"}, 1.42),
        ("1.05", {"kind": "Speedup"}, 1.05),
        ("no number", {}, None),
        (1.3, {}, 1.3),
    ],
)
def test_stated_speedup_conventions(
    phrase: str | float, kwargs: dict[str, Any], expected: float | None
) -> None:
    assert parse_stated_speedup(phrase, **kwargs) == expected


def test_finalise_keeps_stated_beside_a_pair() -> None:
    m = finalise(
        Measurement(
            scope="kernel",
            metric="latency",
            unit="µs",
            baseline=10,
            optimized=5,
            stated_speedup=3.0,
        )
    )
    assert (
        m.unit == "us"
        and m.higher_is_better is False
        and m.speedup == 2.0
        and m.stated_speedup == 3.0  # kept beside the pair; the audit flags the disagreement
    )
    s = finalise(Measurement(scope="e2e", metric="speedup", stated_speedup=1.4, speedup=9.9))
    assert s.speedup is None and s.stated_speedup == 1.4
