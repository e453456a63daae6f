"""Issue 42 probe: a home path holding DuckDB glob characters (``[``, ``]``, ``*``, ``?``)
reads its own partition files, never a neighbouring home's (``/data/h[1]`` as a glob
matches ``/data/h1``); views written before the escape are re-bound on first open."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project.storage.lake import Lake, LakeError, glob_escape

EXE = str(Path(sys.executable).with_name("kernelhouse"))


def _home(path: Path, who: str) -> Lake:
    lake = Lake(path / "lake.duckdb", str(path / "lake"))
    lake.write_partition("sessions", "000", pl.DataFrame({"who": [who]}))
    lake.refresh_view("sim", "sessions")
    return lake


@pytest.mark.parametrize("odd", ["h[1]", "h[!x]1", "h*", "h[*]]"])
def test_home_with_glob_characters_reads_its_own_files(tmp_path: Path, odd: str) -> None:
    _home(tmp_path / "h1", "neighbour")
    lake = _home(tmp_path / odd, "own")
    assert lake.query("SELECT who FROM sim.sessions")["who"].to_list() == ["own"]
    env = {**os.environ, "KERNELHOUSE_HOME": str(tmp_path / odd)}
    res = subprocess.run(
        [EXE, "sql", "SELECT who FROM sim.sessions", "--format", "csv"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["who", "own"]


def test_a_view_written_unescaped_is_rebound(tmp_path: Path) -> None:
    _home(tmp_path / "h1", "neighbour")
    odd = tmp_path / "h[1]"
    _home(odd, "own")
    with duckdb.connect(str(odd / "lake.duckdb")) as con:  # the view as an older build wrote it
        con.execute(
            "CREATE OR REPLACE VIEW sim.sessions AS SELECT * FROM "
            f"read_parquet('{odd}/lake/sessions/*.parquet', union_by_name = true)"
        )
        assert con.execute("SELECT who FROM sim.sessions").fetchall() == [("neighbour",)]
    fresh = Lake(odd / "lake.duckdb", str(odd / "lake"))
    assert ("sim", "sessions", "sessions") in fresh.moved_views()
    assert fresh.rebind_views() == ["sim.sessions"]
    assert fresh.query("SELECT who FROM sim.sessions")["who"].to_list() == ["own"]
    assert glob_escape("/a/h[1]/x*?") == "/a/h[[]1[]]/x[*][?]"


def test_home_with_a_question_mark_is_refused_with_a_message(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "h?" / "lake.duckdb", str(tmp_path / "h?" / "lake"))
    with pytest.raises(LakeError, match="cannot use a path holding '\\?'"):
        lake.replace_table("raw", "t", pl.DataFrame({"x": [1]}))
