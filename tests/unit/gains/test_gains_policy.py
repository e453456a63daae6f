"""The publication policy (issue 40): only measurements whose evidence class scored well on
the development sets reach dataset columns and medians; the rest stay in ``derived.pr_gains``
with the reason. Real extraction on real texts, real polars frames: nothing is mocked."""

from __future__ import annotations

import json

import polars as pl
import pytest

from dagster_project.gains import policy
from dagster_project.gains.audit import audit_all
from dagster_project.gains.extract import extract_pr_gains
from dagster_project.gains.pipeline import (
    RUNS_SCHEMA,
    attach_commit_gains,
    extractor_code_version,
    gains_frame,
)
from dagster_project.gains.schema import Measurement

#: a role-headed table (the class the development sets trust) and a prose transition (one
#: they do not): the same PR carries both
TEXT = """Speed up the fused moe kernel

| batch | main (us) | this PR (us) |
|---|---|---|
| 1 | 20.0 | 10.0 |
| 8 | 40.0 | 30.0 |

End to end, the output throughput went from 1000 tok/s to 1100 tok/s.
"""


def _by_values(ms: list[Measurement]) -> dict[tuple[float | None, float | None], Measurement]:
    return {(m.baseline, m.optimized): m for m in ms}


def test_table_pairs_with_role_headers_are_published_prose_is_withheld_with_a_reason() -> None:
    ms = _by_values(extract_pr_gains(TEXT).measurements)
    table = ms[(20.0, 10.0)]
    assert table.evidence_class == "pair:table:roles"
    assert table.published is True and table.withheld_reason == ""
    assert table.confidence == policy.CONFIDENCE["pair:table:roles"] >= policy.THRESHOLD
    assert table.usable_speedup == pytest.approx(2.0)
    prose = ms[(1000.0, 1100.0)]
    assert prose.audit_pass is True  # in the text under the right roles: the audit passes it
    assert prose.evidence_class == "pair:prose:transition"
    assert prose.published is False
    assert "pair:prose:transition" in (prose.withheld_reason or "")
    assert str(policy.THRESHOLD) in (prose.withheld_reason or "")
    assert prose.usable_speedup is None  # never feeds a speedup column


def test_audit_failure_and_unknown_classes_are_withheld() -> None:
    m = Measurement(scope="kernel", metric="latency", baseline=7.0, optimized=3.0)
    (m,) = audit_all([m], TEXT)  # 7.0 and 3.0 are not in the text
    assert m.audit_pass is False and m.published is False
    assert (m.withheld_reason or "").startswith("audit failed:")
    unseen = Measurement(scope="kernel", metric="x", stated_speedup=1.5, audit_pass=True)
    unseen.evidence_class = "ratio:table"  # never seen on the development texts
    policy.apply_policy(unseen)
    assert unseen.published is False and unseen.confidence is None
    assert "not seen on the development sets" in (unseen.withheld_reason or "")


def test_an_llm_measurement_meets_the_same_policy_as_the_table_extractor() -> None:
    """The LLM says nothing about where it read a value: the audit locates it, so an LLM
    pair read from the role-headed row gets the row's class and the same verdict, and one
    read from the prose sentence is withheld like the table extractor's."""
    row = Measurement(
        scope="kernel",
        metric="latency",
        baseline=40.0,
        optimized=30.0,
        higher_is_better=False,
        extractor="llm",
        source="llm",
    )
    prose = Measurement(
        scope="e2e",
        metric="throughput",
        baseline=1000.0,
        optimized=1100.0,
        higher_is_better=True,
        extractor="llm",
        source="llm",
    )
    row, prose = audit_all([row, prose], TEXT)
    table = _by_values(extract_pr_gains(TEXT).measurements)
    assert (
        (row.evidence_class, row.published)
        == (
            table[(40.0, 30.0)].evidence_class,
            table[(40.0, 30.0)].published,
        )
        == ("pair:table:roles", True)
    )
    assert (prose.evidence_class, prose.published) == ("pair:prose:transition", False)


def test_policy_is_idempotent_and_versioned_in_the_code_version() -> None:
    (m, *_) = extract_pr_gains(TEXT).measurements
    before = (m.evidence_class, m.confidence, m.published, m.withheld_reason)
    policy.apply_policy(policy.apply_policy(m))
    assert (m.evidence_class, m.confidence, m.published, m.withheld_reason) == before
    assert f"policy-{policy.POLICY_VERSION}" in extractor_code_version(None)


def _runs(measurements: list[dict[str, object]]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "run_key": "k",
                "repo": "o/r",
                "number": 7,
                "body_sha256": "s",
                "extractor": "table",
                "extractor_version": "x",
                "model_used": None,
                "ok": True,
                "error": None,
                "n_measurements": len(measurements),
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "measurements_json": json.dumps(measurements),
            }
        ],
        schema=RUNS_SCHEMA,
    )


def test_withheld_rows_stay_in_pr_gains_with_the_reason_and_never_reach_the_medians() -> None:
    ms = extract_pr_gains(TEXT, repo="o/r", pr_number=7).measurements
    gains = gains_frame(_runs([m.to_row() for m in ms]))
    assert gains.height == 3  # every measurement is kept in derived.pr_gains
    withheld = gains.filter(~pl.col("published"))
    assert withheld.height == 1
    assert "pair:prose:transition" in withheld["withheld_reason"][0]
    rows = attach_commit_gains(pl.DataFrame({"repo": ["o/r"], "pr_number": [7]}), gains, None)
    # the kernel median is the table's (2.0, 1.3333); the prose e2e pair is not published
    assert rows["kernel_speedup"][0] == pytest.approx((2.0 + 1.3333) / 2, abs=1e-4)
    assert rows["e2e_speedup"][0] is None
    assert {g["baseline"] for g in json.loads(rows["gains"][0])} == {20.0, 40.0}


def test_a_cached_extraction_without_evidence_is_withheld_not_published() -> None:
    """Runs cached before the policy carry no evidence class: the lake re-applies the policy
    (a pure function of the fields) and holds them back rather than trusting them."""
    (m, *_) = extract_pr_gains(TEXT, repo="o/r", pr_number=7).measurements
    row = m.to_row()
    for k in ("evidence_class", "confidence", "published", "withheld_reason"):
        row.pop(k)
    gains = gains_frame(_runs([row]))
    assert gains["published"].to_list() == [False]
    assert gains["withheld_reason"][0] == "no structural evidence recorded"
