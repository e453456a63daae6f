"""The equivalence rule: one row's status from its per-shape comparisons (versioned).

The oracle is the repo's torch reference where the spec has one (re-written from the
repo's tests), else the ``before`` side. With a reference, a row is ``executed`` when on
every shape the after side matches the reference *and* the before side does too (a
harness that misfeeds both sides would otherwise pass); ``reference_mismatch`` when the
before side misses it, whether or not the after side does too wherever after matches
before (judge 4: the commit left such a result unchanged, so the miss questions the oracle,
not the commit; judge 3 called a4df2c85 ``not_equivalent`` with after == before bitwise on
every shape); ``not_equivalent`` when after misses the reference anywhere else. Without
one, ``executed`` when after matches before on every shape. The rule runs on the device
(``runner``) and again on ingestion, on the recorded comparisons, so a batch's statuses
always follow ``JUDGE_VERSION``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Bump when the rule changes.
JUDGE_VERSION = "5"  # 5: harness-6 block intervals (stats.scope_interval); 4: both sides
#   missing the reference alike is the oracle's miss


def _ok(shape: dict[str, Any], key: str) -> bool:
    return bool((shape.get(key) or {}).get("ok"))


def _oracle_in_question(shape: dict[str, Any]) -> bool:
    """After misses the reference where it matches before and before misses it too: the
    commit left the result as it was, so the miss is the oracle's (its bound or its
    arithmetic), never evidence that the commit changed behaviour."""
    return _ok(shape, "after_vs_before") and not _ok(shape, "before_vs_reference")


def judge(shapes: Sequence[dict[str, Any]]) -> tuple[str, bool]:
    """(status, equivalent) of checked shapes (A/A timing controls are skipped)."""
    checked = [s for s in shapes if "after_vs_before" in s]
    if not checked:
        return "run_error", False
    if all("after_vs_reference" in s for s in checked):
        equivalent = all(_ok(s, "after_vs_reference") for s in checked)
        if not equivalent:
            if all(_ok(s, "after_vs_reference") or _oracle_in_question(s) for s in checked):
                return "reference_mismatch", False
            return "not_equivalent", False
        if not all(_ok(s, "before_vs_reference") for s in checked):
            return "reference_mismatch", False
        return "executed", True
    equivalent = all(_ok(s, "after_vs_before") for s in checked)
    return ("executed" if equivalent else "not_equivalent"), equivalent
