"""The one number format (issue 34): the same value reads the same in the CLI, the
report and the cards."""

from __future__ import annotations

import math

from dagster_project.report.numbers import number, row_cells


def test_whole_numbers_always_carry_separators() -> None:
    assert number(1726) == "1,726" and number(19287) == "19,287"  # one column, one style
    assert number(2637.0) == "2,637" and number(7) == "7" and number(-12000) == "-12,000"


def test_fractions_keep_what_they_have() -> None:
    assert number(120.5) == "120.5"  # gains extract printed 120
    assert number(1.2345) == "1.23" and number(19287.25) == "19,287.25"
    assert number(0.0123) == "0.0123" and number(-0.5) == "-0.5"


def test_labels_blanks_and_others() -> None:
    assert number(None) == "" and number(None, missing="—") == "—"
    assert number(True) == "true" and number("x") == "x" and number(math.nan) == "nan"
    assert number(2023, as_label=True) == "2023"
    assert row_cells(["first year", 2023, 2023.0]) == ["first year", "2023", "2023"]
    assert row_cells(["rows", 2023, 1.5]) == ["rows", "2,023", "1.5"]
