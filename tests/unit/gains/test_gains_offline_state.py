"""Honest offline state: no PR body -> "gains not extracted: N of N PR bodies unavailable",
and the gains gate reports not evaluated (with that reason) instead of passing on zero rows."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl

from dagster_project.gains.pipeline import RUNS_SCHEMA, STATE_SCHEMA, extraction_state, gains_frame
from dagster_project.quality.suites import load_suite, run_suite

ROOT = Path(__file__).resolve().parents[3]
NEEDED = pl.DataFrame({"repo": ["vllm"] * 3, "number": [1, 2, 3]})


def test_state_in_words() -> None:
    missing = pl.DataFrame({"repo": ["vllm"] * 3, "number": [1, 2, 3], "status": ["missing"] * 3})
    s = extraction_state(NEEDED, missing)
    assert (s["extracted"], s["reason"]) == (False, "gains not extracted: 3 of 3 PR bodies unavailable")
    assert extraction_state(NEEDED, None)["reason"] == "gains not extracted: 3 of 3 PR bodies unavailable"
    part = missing.with_columns(status=pl.Series(["ok", "missing", "ok"]))
    assert extraction_state(NEEDED, part)["reason"] == "gains extracted from 2 of 3 PR bodies (1 unavailable)"


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
        con.sql("UPDATE derived.pr_gains_state SET extracted = true, reason = 'gains extracted from all 3 PR bodies'")
    res = run_suite(suite, db)
    assert res.not_evaluated is None and res.outcomes
