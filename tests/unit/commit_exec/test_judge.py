"""The equivalence rule (``device.judge``) on recorded comparisons: which miss is the
commit's and which the oracle's."""

from __future__ import annotations

from typing import Any

from dagster_project.commit_exec.device.judge import judge


def _shape(after_before: bool, before_ref: bool, after_ref: bool) -> dict[str, Any]:
    return {
        "after_vs_before": {"ok": after_before},
        "before_vs_reference": {"ok": before_ref},
        "after_vs_reference": {"ok": after_ref},
    }


def test_every_side_on_the_reference_is_executed() -> None:
    assert judge([_shape(True, True, True)] * 3) == ("executed", True)


def test_after_off_the_reference_alone_is_not_equivalent() -> None:
    # the AWQ row of s02: before matched the reference, after did not (K = 14,336)
    assert judge([_shape(True, True, True), _shape(False, True, False)]) == (
        "not_equivalent",
        False,
    )
    # after differs from before too where both miss the reference: still the commit's
    assert judge([_shape(False, False, False)]) == ("not_equivalent", False)


def test_both_sides_missing_the_reference_alike_is_the_oracles_miss() -> None:
    """a4df2c85 in s03: after == before bitwise on every shape, both off the reference on
    the KDA shape only; judge 3 called it not_equivalent."""
    shapes = [_shape(True, True, True)] * 4 + [_shape(True, False, False)]
    assert judge(shapes) == ("reference_mismatch", False)
    assert judge([_shape(True, False, True)]) == ("reference_mismatch", False)


def test_without_a_reference_before_is_the_oracle() -> None:
    plain = [{"after_vs_before": {"ok": True}}, {"after_vs_before": {"ok": False}}]
    assert judge(plain[:1]) == ("executed", True)
    assert judge(plain) == ("not_equivalent", False)
    assert judge([{"role": "control_aa"}]) == ("run_error", False)
