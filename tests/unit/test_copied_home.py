"""A copied home read by a plain DuckDB client (issue 34): its views hold absolute globs, so
a copy opened without kernelhouse used to read the *original* home's Parquet files without
a word. Now such a read fails with a message saying how to re-bind; the home itself (opened
directly or ATTACHed) reads as before, and the copy reads its own files once kernelhouse
has opened it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project.storage.lake import Lake


def _home(root: Path) -> Lake:
    lake = Lake(root / "lake.duckdb", str(root / "lake"))
    lake.write_partition("kernelswarm_episodes", "000", pl.DataFrame({"x": [1, 2]}))
    lake.refresh_view("sim", "kernelswarm_episodes")
    return lake


def _plain(path: Path, sql: str = "SELECT sum(x) FROM sim.kernelswarm_episodes") -> object:
    """What a user's own DuckDB client reads (no kernelhouse code on the way)."""
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql).fetchone()[0]  # type: ignore[index]


def test_a_plain_client_never_reads_the_original_homes_files_from_a_copy(
    tmp_path: Path,
) -> None:
    original = tmp_path / "home"
    _home(original)
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(original), str(copy)], check=True)
    # The copy's own files now differ from the original's.
    (copy / "lake" / "kernelswarm_episodes" / "000.parquet").unlink()
    pl.DataFrame({"x": [40]}).write_parquet(copy / "lake" / "kernelswarm_episodes" / "000.parquet")

    assert _plain(original / "lake.duckdb") == 3
    with pytest.raises(duckdb.Error, match="copied or moved home") as err:
        _plain(copy / "lake.duckdb")
    assert "kernelhouse status" in str(err.value)

    # kernelhouse opening the copy re-binds its views; then any client reads its own files.
    Lake(copy / "lake.duckdb", str(copy / "lake")).table_exists("sim", "kernelswarm_episodes")
    assert _plain(copy / "lake.duckdb") == 40
    assert _plain(original / "lake.duckdb") == 3


def test_the_home_attached_under_another_name_still_reads(tmp_path: Path) -> None:
    _home(tmp_path / "home")
    with duckdb.connect() as con:
        con.execute(f"ATTACH '{tmp_path / 'home' / 'lake.duckdb'}' AS kh (READ_ONLY)")
        assert con.execute("SELECT sum(x) FROM kh.sim.kernelswarm_episodes").fetchone() == (3,)


def test_a_view_without_the_guard_is_rebound(tmp_path: Path) -> None:
    """A lake built before the guard: kernelhouse's first open adds it."""
    lake = _home(tmp_path / "home")
    glob = lake.view_glob("kernelswarm_episodes")
    with duckdb.connect(str(lake.path)) as con:
        con.execute(
            "CREATE OR REPLACE VIEW sim.kernelswarm_episodes AS "
            f"SELECT * FROM read_parquet('{glob}', union_by_name = true)"
        )
    assert lake.moved_views() == [("sim", "kernelswarm_episodes", "kernelswarm_episodes")]
    assert lake.rebind_views() == ["sim.kernelswarm_episodes"]
    assert lake.moved_views() == []
