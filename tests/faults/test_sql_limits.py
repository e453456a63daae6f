"""Issue 42 probes of the SQL door's limits, through the real ``kernelhouse sql`` process:
a recursive CTE is stopped at the time limit, a big self-join at the memory limit (each
with a message naming the setting), and a write to the lake is not blocked while a
reader's query runs (the door reads a snapshot)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from dagster_project.settings import SettingsError, SqlLimits, load_settings, load_sql_limits
from dagster_project.storage.home import orphaned_temporaries
from dagster_project.storage.lake import Lake, QueryLimit

EXE = str(Path(sys.executable).with_name("kernelhouse"))
ENDLESS = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT max(n) FROM r"


def _lake(home: Path, rows: int = 10) -> Lake:
    lake = Lake(home / "lake.duckdb", str(home / "lake"))
    lake.replace_table("raw", "numbers", pl.DataFrame({"i": list(range(rows))}))
    return lake


def _kh_sql(query: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [EXE, "sql", query],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "250", **env},
    )


def test_recursive_cte_is_stopped_at_the_time_limit(kh_home: Path) -> None:
    _lake(kh_home)
    start = time.monotonic()
    proc = _kh_sql(ENDLESS, {"KERNELHOUSE_SQL_TIMEOUT_S": "2"})
    out, err = proc.communicate(timeout=120)
    took = time.monotonic() - start
    assert proc.returncode == 1, out
    text = " ".join(err.split())
    assert "query stopped after 2 s" in text and "KERNELHOUSE_SQL_TIMEOUT_S" in text, text
    assert took < 60, took  # the CLI's own start-up is most of it on a loaded machine
    assert not [p for p in kh_home.iterdir() if p.name.endswith(".tmp")]  # snapshot removed


def test_big_self_join_hits_the_memory_limit_with_a_clear_message(kh_home: Path) -> None:
    _lake(kh_home, rows=200_000)
    join = (
        "SELECT count(*) FROM (SELECT a.i, b.i AS j, repeat('x', 100) AS pad "
        "FROM raw.numbers a JOIN raw.numbers b ON a.i % 1000 = b.i % 1000 ORDER BY pad, j)"
    )
    proc = _kh_sql(join, {"KERNELHOUSE_SQL_MEMORY_LIMIT": "64MB"})
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    text = " ".join(err.split())
    assert "needs more than 64MB" in text and "KERNELHOUSE_SQL_MEMORY_LIMIT" in text, text
    assert "Traceback" not in err


def test_a_write_is_not_blocked_while_a_reader_runs(kh_home: Path) -> None:
    lake = _lake(kh_home)
    reader = _kh_sql(ENDLESS, {"KERNELHOUSE_SQL_TIMEOUT_S": "40"})
    try:
        deadline = time.monotonic() + 60
        # the reader is past its snapshot once the copy exists (it lives while the query runs)
        while not [p for p in kh_home.iterdir() if p.name.startswith(".lake.duckdb.")]:
            assert reader.poll() is None, reader.communicate()
            assert time.monotonic() < deadline, "the reader never started its query"
            time.sleep(0.2)
        time.sleep(1.0)
        writer = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"), lock_timeout_s=5.0)
        start = time.monotonic()
        writer.replace_table("raw", "numbers", pl.DataFrame({"i": [1, 2, 3]}))
        assert time.monotonic() - start < 5.0
        assert reader.poll() is None, "the reader should still be running its query"
        # a live reader's snapshot is not an orphan: a build starting now leaves it alone
        assert orphaned_temporaries(load_settings()) == []
    finally:
        reader.kill()
        reader.communicate()
    assert lake.query("SELECT count(*) AS n FROM raw.numbers")["n"][0] == 3


def test_limits_are_settable_and_checked(monkeypatch: pytest.MonkeyPatch, kh_home: Path) -> None:
    assert load_sql_limits() == SqlLimits(120.0, "2GB")
    monkeypatch.setenv("KERNELHOUSE_SQL_MEMORY_LIMIT", "lots")
    with pytest.raises(SettingsError, match="KERNELHOUSE_SQL_MEMORY_LIMIT"):
        load_sql_limits()
    monkeypatch.setenv("KERNELHOUSE_SQL_MEMORY_LIMIT", "512MiB")
    monkeypatch.setenv("KERNELHOUSE_SQL_TIMEOUT_S", "0")
    with pytest.raises(SettingsError, match="KERNELHOUSE_SQL_TIMEOUT_S"):
        load_sql_limits()
    monkeypatch.delenv("KERNELHOUSE_SQL_TIMEOUT_S")
    lake = _lake(kh_home)
    with pytest.raises(QueryLimit, match="stopped after 0.5 s"):
        lake.read_only_query(ENDLESS, SqlLimits(0.5, "512MiB"))
    assert lake.read_only_query("SELECT count(*) AS n FROM raw.numbers")["n"][0] == 10
