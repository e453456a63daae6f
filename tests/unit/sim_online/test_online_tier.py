"""The online measured tier in the build (issue 36, 36w): shipped rows replay identically,
anything else is reported and fails the blocking check, and the tables have the modelled
tier's layout plus ``measured_on``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dagster_project.sim.kernelinfer import session_frames
from dagster_project.sim.online_tier import (
    CHECK,
    FAILED,
    IDENTICAL,
    OnlineTier,
    attach_online_labels,
    check_outcome,
    materialise,
    online_frames,
    replay_tier,
)
from dagster_project.sim.oracle import answer_key, tier_answers
from dagster_project.storage.lake import Lake
from tests.unit.sim_online.conftest import ROWS, write_list


def _replay(tmp_path: Path, rows: list[dict[str, str]], tasks: dict[str, Any], **kw: Any):  # noqa: ANN202
    path = write_list(tmp_path / "h100_online.csv", rows)
    return replay_tier(("h100",), tasks, paths={"h100": path}, **kw)


def test_shipped_rows_replay_identically(tier: OnlineTier, shipped_rows) -> None:  # noqa: ANN001
    assert tier.listed == ROWS
    assert [s["session_id"] for s in tier.sessions] == [r["session_id"] for r in shipped_rows]
    assert {r["online_status"] for r in tier.report} == {IDENTICAL}
    outcome = check_outcome(tier)
    assert outcome.name == CHECK and outcome.passed
    assert outcome.metadata["identical"] == ROWS and outcome.metadata["failed"] == 0
    assert all(s["measured_on"] == "h100" for s in tier.sessions)


def test_a_tampered_digest_is_reported_and_fails_the_check(
    tmp_path: Path,
    shipped_rows,
    tasks,  # noqa: ANN001
) -> None:
    rows = [dict(r) for r in shipped_rows]
    rows[1]["digest"] = "0" * 64
    got = _replay(tmp_path, rows, tasks)
    assert got.listed == ROWS and len(got.sessions) == ROWS - 1
    assert [(r["session_id"], r["online_status"]) for r in got.failed] == [
        (rows[1]["session_id"], FAILED)
    ]
    assert "differs from the device's" in got.failed[0]["reason"]
    outcome = check_outcome(got)
    assert not outcome.passed and outcome.metadata["failed"] == 1
    assert f"h100:{rows[1]['session_id']}" in outcome.metadata["failures"].value


def test_other_evidence_or_generator_is_reported(tmp_path: Path, shipped_rows, tasks) -> None:  # noqa: ANN001
    rows = [dict(r) for r in shipped_rows]
    rows[0]["evidence"] = "ffffffffffffffff"
    rows[2]["generator_version"] = "0.0.1"
    got = _replay(tmp_path, rows, tasks)
    why = {r["session_id"]: r["reason"] for r in got.failed}
    assert why[rows[0]["session_id"]].startswith("evidence ffffffffffffffff (now ")
    assert why[rows[2]["session_id"]].startswith("generator 0.0.1 (now ")
    assert len(got.sessions) == 1 and not check_outcome(got).passed


def test_a_missing_answer_is_reported_never_modelled(
    tmp_path: Path,
    tier: OnlineTier,
    shipped_rows,
    tasks,  # noqa: ANN001
) -> None:
    s = tier.sessions[0]
    baseline_code = s["messages"][2]["content"]
    answers = dict(tier_answers("h100"))
    del answers[answer_key(baseline_code, s["shape"], s["dtype"], "h100")]
    got = _replay(tmp_path, shipped_rows, tasks, answers={"h100": answers})
    assert [r["session_id"] for r in got.failed] == [s["session_id"]]
    assert "no measured answer" in got.failed[0]["reason"]
    assert not check_outcome(got).passed


def test_tables_are_the_modelled_layout_plus_measured_on(tier: OnlineTier) -> None:
    sessions = [dict(s) for s in tier.sessions]
    attach_online_labels(sessions)
    sdf, tdf = online_frames(sessions)
    base, base_steps = session_frames(sessions)
    assert sdf.columns == [*base.columns, "measured_on"]
    assert tdf.schema == base_steps.schema
    assert sdf["measured_on"].to_list() == ["h100"] * ROWS
    # every step that ran was measured on the GPU; a step without a time has no timing
    ran = tdf.filter(tdf["time_ms"].is_not_null())
    assert set(ran["timing"]) == {"measured:h100"}
    assert (ran["measured_ms"] == ran["time_ms"]).all()
    assert tdf.filter(tdf["time_ms"].is_null())["timing"].null_count() == tdf.height - ran.height
    # an online label is the measured speedup or unknown, never a model's figure
    for s in sessions:
        if s["speedup_label"] is None:
            assert s["speedup_provenance"] == "unknown" and s["speedup_unknown_reason"]
        else:
            assert s["speedup_provenance"] == "measured:h100"
            assert s["speedup_error_scale"] is None
            best = s["trace"][s["best"]["step"]]["measured_ms"]
            assert s["speedup_label"] == pytest.approx(s["baseline_ms"] / best, abs=1e-4)


def test_a_failed_replay_writes_the_rest_and_fails_the_check(
    tmp_path: Path,
    shipped_rows,
    tasks,  # noqa: ANN001
) -> None:
    rows = [dict(r) for r in shipped_rows]
    rows[0]["digest"] = "1" * 64
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))
    out = materialise(lake, _replay(tmp_path, rows, tasks))
    assert not out.check.passed
    assert out.metadata["dagster/row_count"] == ROWS - 1 and out.metadata["listed"] == ROWS
    got = lake.query("SELECT session_id, measured_on FROM sim.kernelinfer_online_sessions")
    assert sorted(got["session_id"]) == sorted(r["session_id"] for r in rows[1:])
    steps = lake.query("SELECT count(*) AS n FROM sim.kernelinfer_online_steps")["n"][0]
    assert steps == out.metadata["steps"] > 0


def test_the_tier_is_wired_as_a_shipped_input_of_the_export() -> None:
    from dagster_project.execution.policy import CODE_VERSION_TAG, SHIPPED, lineage_tags
    from dagster_project.sim import GENERATOR_VERSION
    from dagster_project.sim.online_tier import code_version
    from dagster_project.sim.oracle import evidence_digest
    from dagster_project.storage import lineage

    assert lineage.writer_of("sim.kernelinfer_online_sessions") == "kernelinfer_online"
    assert "kernelinfer_online" in lineage.upstream("kernelinfer_export")
    # new lists, answers or evidence files make the tier stale (shipped_data code version)
    assert lineage_tags("kernelinfer_online")[CODE_VERSION_TAG] == SHIPPED
    assert GENERATOR_VERSION in code_version() and evidence_digest() in code_version()
