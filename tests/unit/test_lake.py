"""The lake's write contract: atomic replace, idempotent keyed writes, Parquet views."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project.storage.lake import Lake, LakeError, write_atomically


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))


def test_replace_table_is_idempotent(lake: Lake) -> None:
    df = pl.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    lake.replace_table("raw", "t", df)
    lake.replace_table("raw", "t", df)
    assert lake.read_table("raw", "t").sort("a").equals(df)


class _CrashBeforeCommit:
    """A connection proxy that dies right before COMMIT, as a killed process would."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def execute(self, sql: str, *args: object):  # noqa: ANN201
        if sql.strip().upper() == "COMMIT":
            raise RuntimeError("simulated crash mid-write")
        return self._con.execute(sql, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self._con, name)


class _CrashingLake(Lake):
    @contextlib.contextmanager
    def connect(self, *, read_only: bool = False):  # noqa: ANN201
        with Lake.connect(self, read_only=read_only) as con:
            yield _CrashBeforeCommit(con) if not read_only else con


def test_failed_replace_keeps_previous_table(lake: Lake) -> None:
    lake.replace_table("raw", "t", pl.DataFrame({"a": [1, 2]}))
    crashing = _CrashingLake(lake.path, lake.parquet_root)
    with pytest.raises(LakeError, match="previous table kept"):
        crashing.replace_table("raw", "t", pl.DataFrame({"a": [7, 8, 9]}))
    assert lake.read_table("raw", "t")["a"].to_list() == [1, 2]


def test_failed_keyed_write_keeps_previous_rows(lake: Lake) -> None:
    lake.replace_rows("raw", "r", pl.DataFrame({"k": [1, 2], "v": [1, 2]}), "k", [1, 2])
    crashing = _CrashingLake(lake.path, lake.parquet_root)
    with pytest.raises(LakeError):
        crashing.replace_rows("raw", "r", pl.DataFrame({"k": [1], "v": [5]}), "k", [1])
    assert lake.read_table("raw", "r").sort("k").to_dicts() == [{"k": 1, "v": 1}, {"k": 2, "v": 2}]


def test_replace_rows_by_key_never_duplicates(lake: Lake) -> None:
    lake.replace_rows("raw", "r", pl.DataFrame({"repo": ["a", "a"], "v": [1, 2]}), "repo", ["a"])
    lake.replace_rows("raw", "r", pl.DataFrame({"repo": ["b"], "v": [3]}), "repo", ["b"])
    lake.replace_rows("raw", "r", pl.DataFrame({"repo": ["a"], "v": [9]}), "repo", ["a"])
    got = lake.read_table("raw", "r").sort("repo")
    assert got.to_dicts() == [{"repo": "a", "v": 9}, {"repo": "b", "v": 3}]


def test_replace_rows_adds_new_columns(lake: Lake) -> None:
    lake.replace_rows("raw", "r", pl.DataFrame({"k": [1], "v": [1]}), "k", [1])
    lake.replace_rows("raw", "r", pl.DataFrame({"k": [2], "v": [2], "extra": ["e"]}), "k", [2])
    got = lake.read_table("raw", "r").sort("k")
    assert got["extra"].to_list() == [None, "e"]


def test_replace_rows_failure_rolls_back(lake: Lake) -> None:
    lake.replace_rows("raw", "r", pl.DataFrame({"k": [1], "v": [1]}), "k", [1])
    # A frame whose column cannot be cast into the existing INTEGER column fails the
    # insert after the delete ran: the transaction must restore the deleted row.
    with pytest.raises(LakeError):
        lake.replace_rows("raw", "r", pl.DataFrame({"k": [1], "v": ["not a number"]}), "k", [1])
    assert lake.read_table("raw", "r").to_dicts() == [{"k": 1, "v": 1}]


def test_parquet_partitions_and_view(lake: Lake) -> None:
    lake.write_partition("sessions", "000", pl.DataFrame({"shard": [0, 0], "x": [1, 2]}))
    lake.write_partition("sessions", "001", pl.DataFrame({"shard": [1], "x": [3]}))
    lake.refresh_view("sim", "sessions")
    assert lake.query("SELECT sum(x) AS s FROM sim.sessions")["s"][0] == 6
    # Rewriting a partition replaces it; the view sees the new file without a refresh.
    lake.write_partition("sessions", "001", pl.DataFrame({"shard": [1], "x": [10]}))
    assert lake.query("SELECT sum(x) AS s FROM sim.sessions")["s"][0] == 13
    assert not list((Path(lake.parquet_root) / "sessions").glob(".*tmp"))


def test_read_only_connection_rejects_writes(lake: Lake) -> None:
    lake.replace_table("raw", "t", pl.DataFrame({"a": [1]}))
    with lake.connect(read_only=True) as con, pytest.raises(duckdb.Error):
        con.execute("DROP TABLE raw.t")


def test_missing_table_error_names_it(lake: Lake) -> None:
    lake.replace_table("raw", "t", pl.DataFrame({"a": [1]}))
    with pytest.raises(LakeError, match="raw.nope"):
        lake.read_table("raw", "nope")


def test_write_atomically_keeps_the_old_file_when_the_writer_fails(tmp_path: Path) -> None:
    path = tmp_path / "out" / "table.parquet"
    assert write_atomically(path, lambda tmp: tmp.write_text("v1")) == path
    assert path.read_text() == "v1"

    def torn(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(path, torn)
    assert path.read_text() == "v1"
    assert sorted(p.name for p in path.parent.iterdir()) == ["table.parquet"]


def _hold_writer_lock(path: Path, seconds: float) -> subprocess.Popen[bytes]:
    """Another process that opens the DuckDB file for writing (DuckDB's one-writer lock)
    and keeps it for ``seconds``; returns once the lock is taken."""
    code = (
        "import sys, time, duckdb\n"
        "con = duckdb.connect(sys.argv[1])\n"
        "print('locked', flush=True)\n"
        "time.sleep(float(sys.argv[2]))\n"
        "con.close()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path), str(seconds)], stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"locked"
    return proc


def test_connect_waits_for_another_writer(lake: Lake) -> None:
    """A second process's writer lock is waited out (backoff), not a failed run."""
    with lake.connect() as con:  # create the file
        con.execute("CREATE TABLE raw.t AS SELECT 1 AS x")
    holder = _hold_writer_lock(lake.path, 1.5)
    try:
        start = time.monotonic()
        with lake.connect() as con:
            assert con.execute("SELECT x FROM raw.t").fetchone() == (1,)
        assert time.monotonic() - start >= 0.5  # it did wait for the holder
    finally:
        holder.wait(timeout=30)


def test_connect_gives_up_after_the_lock_timeout(tmp_path: Path) -> None:
    """Past ``lock_timeout_s`` the error names the lake file, and nothing was written."""
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"), lock_timeout_s=0.4)
    with lake.connect() as con:
        con.execute("CREATE TABLE raw.t AS SELECT 1 AS x")
    holder = _hold_writer_lock(lake.path, 5)
    try:
        start = time.monotonic()
        with pytest.raises(LakeError, match="cannot open lake .*lake.duckdb"), lake.connect():
            pass
        assert time.monotonic() - start < 4  # gave up at its own deadline, not the holder's
    finally:
        holder.kill()
        holder.wait(timeout=30)
