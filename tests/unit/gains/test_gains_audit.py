"""Verbatim audit: the number-format normalisation table, flags and the dataset rate."""

from __future__ import annotations

import pytest

from dagster_project.gains.audit import (
    appears_verbatim,
    audit_all,
    audit_measurement,
    audit_rate,
    structure_index,
)
from dagster_project.gains.numbers import iter_numbers, parse_number
from dagster_project.gains.schema import Measurement


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("throughput 1,234.50 tok/s", 1234.5, True),  # thousands separator + trailing zero
        ("1234.5", 1234.50, True),
        ("12.3ms", 12.3, True),  # unit glued on
        ("12.3 ms", 12.3, True),
        ("**0.760**", 0.76, True),  # markdown emphasis, trailing zero
        ("1.2e3 us", 1200.0, True),  # scientific notation
        ("+4.0%", 4.0, True),  # sign and percent
        ("\u22124.1%", 4.1, True),  # unicode minus
        ("12.5k tok/s", 12500.0, True),  # k suffix
        ("8\u2009192 tokens", 8192.0, True),  # thin-space grouping
        ("1,2,3", 123.0, False),  # a list, not a grouped number
        ("1,2,3", 2.0, True),
        ("0.7621450612", 0.762, False),  # rounded by the extractor
        ("10.1 and 10.3", 10.2, False),  # an average nobody wrote
        ("on H100", 100.0, False),  # part of a name
        ("E2E latency", 2.0, False),
        ("v1.2.3", 2.3, False),  # version strings are not measurements
    ],
)
def test_normalisation_table(text: str, value: float, expected: bool) -> None:
    assert appears_verbatim(value, text) is expected


def test_number_parsing() -> None:
    assert parse_number("1,234.50") == 1234.5
    assert parse_number("OOM") is None and parse_number("-") is None and parse_number(None) is None
    assert parse_number(3) == 3.0
    assert [t.value for t in iter_numbers("bs=8, 1,024 tokens, 3.5x")] == [8.0, 1024.0, 3.5]


def test_flags_and_rate() -> None:
    text = "title\nmain 1,234.50 us, PR 1010 us; runs 10.1 / 10.3. Overall 1.3x faster."
    good = Measurement(scope="kernel", metric="latency", baseline=1234.5, optimized=1010.0)
    bad = Measurement(scope="e2e", metric="latency", baseline=10.2, optimized=1010.0)
    stated = Measurement(scope="e2e", metric="speedup", stated_speedup=1.3, stated_text="1.3x")
    invented = Measurement(scope="e2e", metric="speedup", stated_speedup=1.7, stated_text="1.7x")
    audit_all([good, bad, stated, invented], text)
    assert (
        good.baseline_verbatim,
        good.optimized_verbatim,
        good.same_structure,
        good.audit_pass,
    ) == (True, True, True, True)
    assert (bad.baseline_verbatim, bad.optimized_verbatim, bad.audit_pass) == (False, True, False)
    assert bad.audit_reason == "baseline not in the text"
    # stated ratios are audited too: every extracted value counts in the rate
    assert (stated.stated_verbatim, stated.audit_pass) == (True, True)
    assert (invented.stated_verbatim, invented.audit_pass) == (False, False)
    assert audit_rate([good, bad, stated, invented]) == 0.5
    assert audit_rate([good.to_row(), bad.to_row()]) == 0.5
    assert audit_rate([]) is None


def test_audit_accepts_a_prebuilt_index() -> None:
    idx = structure_index("t\n| bs | main | PR |\n|---|---|---|\n| 1 | 3.5 | 3.1 |")
    m = audit_measurement(
        Measurement(scope="kernel", metric="t", baseline=3.5, optimized=3.10), idx
    )
    assert m.audit_pass is True and m.same_structure is True


def test_pair_from_two_unrelated_places_or_invented_batch_fails() -> None:
    text = (
        "t\n| bs | main (us) | PR (us) |\n|---|---|---|\n"
        "| 8 | 12.0 | 10.0 |\n| 16 | 20.0 | 15.0 |\n"
        "\nWe ran 100 iterations."
    )
    idx = structure_index(text)
    ok = audit_measurement(
        Measurement(scope="kernel", metric="t", baseline=12.0, optimized=10.0, batch_size=8), idx
    )
    crossed = audit_measurement(
        Measurement(scope="kernel", metric="t", baseline=12.0, optimized=15.0), idx
    )
    swapped = audit_measurement(
        Measurement(scope="kernel", metric="t", baseline=10.0, optimized=12.0), idx
    )
    counts = audit_measurement(
        Measurement(scope="kernel", metric="t", baseline=100.0, optimized=10.0), idx
    )
    invented = audit_measurement(
        Measurement(scope="kernel", metric="t", baseline=12.0, optimized=10.0, batch_size=77), idx
    )
    assert ok.audit_pass and ok.same_structure
    for m in (crossed, swapped, counts):
        assert m.same_structure is False and m.audit_pass is False, m
    assert invented.audit_pass is False and "batch_size" in (invented.audit_reason or "")


def test_stated_ratio_that_disagrees_with_its_pair_is_flagged() -> None:
    text = (
        "t\n| bs | main (us) | PR (us) | speedup |\n|---|---|---|---|\n| 8 | 12.0 | 10.0 | 3.0x |"
    )
    m = audit_measurement(
        Measurement(
            scope="kernel",
            metric="t",
            unit="us",
            baseline=12.0,
            optimized=10.0,
            speedup=1.2,
            stated_speedup=3.0,
            stated_text="3.0x",
        ),
        structure_index(text),
    )
    assert (m.stated_verbatim, m.stated_agrees, m.audit_pass) == (True, False, False)
