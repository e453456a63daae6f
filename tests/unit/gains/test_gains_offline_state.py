"""Honest offline state: no PR body -> "gains not extracted: N of N PR bodies unavailable",
and the gains gate reports not evaluated (with that reason) instead of passing on zero rows."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
from pytest_httpserver import HTTPServer

from dagster_project.gains.pipeline import (
    RUNS_SCHEMA,
    STATE_SCHEMA,
    attach_commit_gains,
    extract_bodies,
    extraction_state,
    gains_frame,
)
from dagster_project.quality.suites import load_suite, run_suite

ROOT = Path(__file__).resolve().parents[3]
NEEDED = pl.DataFrame({"repo": ["vllm"] * 3, "number": [1, 2, 3]})


def test_state_in_words() -> None:
    missing = pl.DataFrame({"repo": ["vllm"] * 3, "number": [1, 2, 3], "status": ["missing"] * 3})
    s = extraction_state(NEEDED, missing)
    assert (s["extracted"], s["reason"]) == (
        False,
        "gains not extracted: 3 of 3 PR bodies unavailable",
    )
    assert (
        extraction_state(NEEDED, None)["reason"]
        == "gains not extracted: 3 of 3 PR bodies unavailable"
    )
    part = missing.with_columns(status=pl.Series(["ok", "missing", "ok"]))
    assert (
        extraction_state(NEEDED, part)["reason"]
        == "gains extracted from 2 of 3 PR bodies (1 unavailable)"
    )


def test_gate_not_evaluated_without_bodies(tmp_path: Path) -> None:
    db = tmp_path / "lake.duckdb"
    gains = gains_frame(pl.DataFrame(schema=RUNS_SCHEMA))
    state = pl.DataFrame([extraction_state(NEEDED, None)], schema=STATE_SCHEMA)
    with duckdb.connect(str(db)) as con:
        con.sql("CREATE SCHEMA derived")
        con.register("g", gains.to_arrow())
        con.sql("CREATE TABLE derived.pr_gains AS SELECT * FROM g")
        con.register("s", state.to_arrow())
        con.sql("CREATE TABLE derived.pr_gains_state AS SELECT * FROM s")
    suite = load_suite(ROOT / "expectations" / "pr_gains.json")
    res = run_suite(suite, db)
    assert res.not_evaluated == "gains not extracted: 3 of 3 PR bodies unavailable"
    assert res.outcomes == []
    # with bodies, an empty table is evaluated like any other
    with duckdb.connect(str(db)) as con:
        con.sql(
            "UPDATE derived.pr_gains_state SET extracted = true, "
            "reason = 'gains extracted from all 3 PR bodies'"
        )
    res = run_suite(suite, db)
    assert res.not_evaluated is None and res.outcomes


def test_bodies_unavailable_from_github_end_to_end(tmp_path: Path, httpserver: HTTPServer) -> None:
    """PyGithub against a local GitHub-REST server that refuses every PR (403): the lake
    says in words that gains were not extracted, rows claim neither a body nor "no gains",
    and the gate is not evaluated."""
    from dagster_project.github.sync import sync_pr_bodies
    from dagster_project.storage.lake import Lake

    for n in (1, 2, 3):
        httpserver.expect_request(f"/repos/vllm-project/vllm/pulls/{n}").respond_with_json(
            {"message": "Resource not accessible by integration", "status": "403"}, status=403
        )
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "parquet"))
    counters = sync_pr_bodies(
        lake,
        NEEDED,
        {"vllm": "vllm-project/vllm"},
        token=None,
        base_url=httpserver.url_for("/"),
        offline=False,
    )
    assert counters["still_missing"] == 3 and httpserver.log, counters
    bodies = lake.read_table_or_none("raw", "pr_bodies")
    state = extraction_state(NEEDED, bodies)
    assert state["reason"] == "gains not extracted: 3 of 3 PR bodies unavailable"
    runs, new = extract_bodies(
        bodies if bodies is not None else pl.DataFrame(schema={"status": pl.String}), None, None
    )
    assert new == 0
    gains = gains_frame(runs)
    lake.replace_table("derived", "pr_gains", gains)
    lake.replace_table("derived", "pr_gains_state", pl.DataFrame([state], schema=STATE_SCHEMA))
    res = run_suite(load_suite(ROOT / "expectations" / "pr_gains.json"), lake.path)
    assert res.not_evaluated == state["reason"] and res.outcomes == []
    rows = attach_commit_gains(pl.DataFrame({"repo": ["vllm"], "pr_number": [2]}), gains, bodies)
    # unknown, not "no benchmark numbers": no body was read
    assert rows.select("pr_body", "gains", "kernel_speedup").rows() == [(None, None, None)]
