"""What the Dagster UI shows for table assets and checks: column schemas, row counts and
per-expectation results as a table (not raw JSON)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from dagster_project.quality.suites import ExpectationOutcome, SuiteResult
from dagster_project.wiring.checks import to_check_result


def test_table_assets_carry_column_schema_and_row_count(kh_home: Path) -> None:
    from dagster_project.definitions import build_definitions
    from dagster_project.settings import load_settings
    from dagster_project.storage.lake import Lake

    defs = build_definitions("in_process")
    result = dg.materialize(
        list(defs.assets or []),
        resources=defs.resources,
        selection=["sim_tasks"],
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    (event,) = result.get_asset_materialization_events()
    md = event.step_materialization_data.materialization.metadata
    schema = md["dagster/column_schema"].value
    settings = load_settings()
    lake = Lake(settings.lake_path, settings.parquet_root)
    cols = lake.query(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = 'sim' AND table_name = 'kernelinfer_tasks' ORDER BY ordinal_position"
    )["column_name"].to_list()
    assert [c.name for c in schema.columns] == cols and "shape" in cols
    assert md["dagster/row_count"].value == 40


def test_check_results_list_every_expectation_as_a_table() -> None:
    outcomes = [
        ExpectationOutcome("expect_column_values_to_not_be_null", "id", "ids", True, observed=0),
        ExpectationOutcome(
            "expect_column_values_to_be_between",
            "speedup",
            "range",
            False,
            observed={"min": -1},
            expected={"min_value": 0},
            unexpected_count=3,
        ),
    ]
    res = SuiteResult(
        "tuned_configs", "tuned_configs", "datasets.tuned_configs", True, 10, outcomes, 0.1
    )
    check = to_check_result(res)
    table = check.metadata["expectations_table"]
    assert isinstance(table, dg.TableMetadataValue)
    rows = [r.data for r in table.records]
    assert [r["expectation"] for r in rows] == [
        "column_values_to_not_be_null",
        "column_values_to_be_between",
    ]
    assert [r["result"] for r in rows] == ["pass", "FAIL"] and rows[1]["unexpected"] == 3
    assert [c.name for c in table.schema.columns][:3] == ["expectation", "column", "result"]
