"""The equivalence rule: one row's status from its per-shape comparisons (versioned).

The oracle is the repo's torch reference where the spec has one (re-written from the
repo's tests), else the ``before`` side. With a reference, a row is ``executed`` when on
every shape the after side matches the reference *and* the before side does too (a
harness that misfeeds both sides would otherwise pass); ``reference_mismatch`` when only
the before side misses it. Without one, ``executed`` when after matches before on every
shape. The rule runs on the device (``runner``) and again on ingestion, on the recorded
comparisons, so a batch's statuses always follow ``JUDGE_VERSION``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Bump when the rule changes.
JUDGE_VERSION = "3"


def _ok(shape: dict[str, Any], key: str) -> bool:
    return bool((shape.get(key) or {}).get("ok"))


def judge(shapes: Sequence[dict[str, Any]]) -> tuple[str, bool]:
    """(status, equivalent) of checked shapes (A/A timing controls are skipped)."""
    checked = [s for s in shapes if "after_vs_before" in s]
    if not checked:
        return "run_error", False
    if all("after_vs_reference" in s for s in checked):
        equivalent = all(_ok(s, "after_vs_reference") for s in checked)
        if not equivalent:
            return "not_equivalent", False
        if not all(_ok(s, "before_vs_reference") for s in checked):
            return "reference_mismatch", False
        return "executed", True
    equivalent = all(_ok(s, "after_vs_before") for s in checked)
    return ("executed" if equivalent else "not_equivalent"), equivalent
