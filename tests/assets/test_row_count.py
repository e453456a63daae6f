"""The UI's row count of a sharded table is the whole table's (issue 34): the UI showed 99
for kernelinfer_sessions (the last shard's rows) where ``kernelhouse status`` said 1,899."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from dagster_project.cli.status import _rows_of
from dagster_project.definitions import build_definitions
from dagster_project.execution.planner import run_build
from dagster_project.storage.lake import Lake

pytestmark = pytest.mark.slow


def test_a_sharded_tables_row_count_is_the_whole_table(
    kh_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 101 sessions fill two shards: 100 and 1.
    monkeypatch.setenv("KERNELHOUSE_SIM_SESSIONS", "101")
    instance = dg.DagsterInstance.ephemeral()
    outcome = run_build(build_definitions(), instance, "sim_tasks,kernelinfer_sessions")
    assert outcome.ok, (outcome.failed, outcome.skipped)

    lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))
    total = int(lake.query("SELECT count(*) AS n FROM sim.kernelinfer_sessions")["n"][0])
    assert total == 101

    key = dg.AssetKey("kernelinfer_sessions")
    latest = instance.get_latest_materialization_event(key)
    assert latest and latest.asset_materialization
    assert latest.asset_materialization.metadata["dagster/row_count"].value == total

    own = {}
    for partition in ("000", "001"):
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
        ).records
        own[partition] = _rows_of(records[0].event_log_entry)
    # status and the build summary add up each shard's own rows, not the table's twice
    assert own == {"000": 100, "001": 1}
    assert outcome.rows["kernelinfer_sessions"] == total
