"""The publication policy (issue 40): which audited measurements reach the datasets.

Why it exists: the audit proves a value is *in* the PR under the right roles, not that it
is the PR's gain. Seven blind rounds showed audited values that were still wrong (a
reference run paired with the baseline, a header's shape read as a value) and that how
often a value is right depends mostly on the structure it was read from. For rewards a
missing number is cheap and a wrong one is expensive, so a measurement is **published**
(reaches ``gains``, ``config_pr_gains``, ``kernel_speedup``, ``e2e_speedup``,
``speedup_vs_default``) only when

1. it passed the audit, and
2. its evidence class — the structure the audit located it in (:attr:`Measurement.
   evidence_class`, set by :mod:`dagster_project.gains.audit` for both extractors) — was
   right at least :data:`THRESHOLD` of the time on the development sets
   (:data:`CONFIDENCE`), and
3. its direction is known (a pair without ``higher_is_better`` has no speedup to publish).

Everything else stays in ``derived.pr_gains`` with ``published = false`` and the reason in
``withheld_reason``. :data:`CONFIDENCE` and :data:`THRESHOLD` are figures, not guesses:
``benchmarks/eval_extractors.py --fit-policy`` recomputes them from the development texts
in the cache: a class's confidence is the 95% Wilson lower bound (:func:`wilson_lower`) of
the precision of its audited measurements against the hand labels — the extractor was
written on those texts, so the bound, not the point estimate, is what a handful of
in-sample successes is worth — and the threshold is the highest cut (steps of 0.05) that
still keeps at least half of the correct development measurements. A class not seen there
has no confidence and is withheld. The rule is versioned (:data:`POLICY_VERSION`, part of
``pr_gains``' code version); a change of either table is a new version.
"""

from __future__ import annotations

from dagster_project.gains.schema import Measurement

POLICY_VERSION = "1"

#: the least confidence (lower bound of development precision) a class needs to publish
THRESHOLD = 0.90

#: 95% Wilson lower bound of each evidence class's precision on the development texts
#: (``--fit-policy``; counts in benchmarks/RESULTS.md, issue 40)
#: Fitted on 31 development texts re-collected for issue 40 from the search excerpts they were
#: labelled on (20 positive, 93 labels; extractor 2.12): predicted / matched in the comments.
CONFIDENCE: dict[str, float] = {
    "pair:table:roles": 0.93,  # 51 / 51
    "pair:record:runs": 0.7008,  # 9 / 9
    "pair:prose:transition": 0.6097,  # 6 / 6
    "pair:table:row": 0.5101,  # 4 / 4
    "ratio:prose": 0.2307,  # 5 / 3
    "pair:record:inline": 0.2065,  # 1 / 1
}

_Z = 1.96  # two-sided 95%


def wilson_lower(successes: int, n: int) -> float:
    """The 95% Wilson score lower bound of a proportion (0.0 for no observations)."""
    if n <= 0:
        return 0.0
    p = successes / n
    denom = 1 + _Z * _Z / n
    centre = p + _Z * _Z / (2 * n)
    margin = _Z * ((p * (1 - p) + _Z * _Z / (4 * n)) / n) ** 0.5
    return (centre - margin) / denom


def confidence_of(evidence_class: str | None) -> float | None:
    """The development precision of an evidence class (``None``: never seen often enough)."""
    return CONFIDENCE.get(evidence_class) if evidence_class else None


def withheld_reason(m: Measurement) -> str:
    """Why ``m`` may not be published ("" when it may); the first failed condition."""
    if m.audit_pass is not True:
        return f"audit failed: {m.audit_reason}" if m.audit_reason else "not audited"
    if m.evidence_class is None:
        return "no structural evidence recorded"
    conf = confidence_of(m.evidence_class)
    if conf is None:
        return f"evidence {m.evidence_class}: not seen on the development sets"
    if conf < THRESHOLD:
        return f"evidence {m.evidence_class}: right {conf:.2f} of the time, below {THRESHOLD}"
    if m.is_pair and m.higher_is_better is None and m.stated_speedup is None:
        return "direction unknown: no speedup to publish"
    return ""


def apply_policy(m: Measurement) -> Measurement:
    """Stamp ``confidence``, ``published`` and ``withheld_reason`` on an audited ``m``.

    Idempotent (a pure function of the measurement's fields), so the lake re-applies it to
    cached extractions and the CLI, the lake and the evaluation agree."""
    m.confidence = confidence_of(m.evidence_class)
    m.withheld_reason = withheld_reason(m)
    m.published = m.withheld_reason == ""
    return m


__all__ = [
    "CONFIDENCE",
    "POLICY_VERSION",
    "THRESHOLD",
    "apply_policy",
    "confidence_of",
    "wilson_lower",
    "withheld_reason",
]
