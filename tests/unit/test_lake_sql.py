"""The read-only SQL door (``Lake.read_only_query``, behind ``kernelhouse sql``): every
statement that could change a table, view, setting or file is refused with a reason,
and the lake (database file and partition files) is byte-identical afterwards.

Each hostile statement is one a tester tried on the old door (issue 22): ``COPY … TO``
over a partition replaced 100 sessions with one row, ``ATTACH … (READ_WRITE)`` +
``DETACH`` dropped a table, ``EXPORT DATABASE`` wrote files, ``SET`` was accepted."""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project.storage.lake import Lake, QueryRefused


def _tree(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (the home: database file and partitions)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One lake for the module: every test asserts it unchanged, so sharing it is safe
    (and a test that did change it would fail the next ones too)."""
    return tmp_path_factory.mktemp("door")


@pytest.fixture(scope="module")
def lake(outside: Path) -> Lake:
    tmp_path = outside
    home = tmp_path / "home"
    lk = Lake(home / "lake.duckdb", str(home / "lake"))
    lk.replace_table(
        "raw", "repo_heads", pl.DataFrame({"repo": ["vllm", "sglang"], "commit_count": [5, 7]})
    )
    lk.write_partition(
        "kernelinfer_sessions", "000", pl.DataFrame({"session_id": ["a", "b"], "best": [1.5, 2.0]})
    )
    lk.write_partition(
        "kernelinfer_sessions", "001", pl.DataFrame({"session_id": ["c"], "best": [3.0]})
    )
    lk.refresh_view("sim", "kernelinfer_sessions")
    (tmp_path / "outside.csv").write_text("secret\nleaked\n")
    return lk


def _part(lake: Lake) -> str:
    return f"{lake.parquet_root}/kernelinfer_sessions/000.parquet"


HOSTILE = {
    "copy_to_partition": (
        "COPY (SELECT 'fake' AS session_id, 0.0 AS best) TO '{part}' (FORMAT parquet)"
    ),
    "copy_table_to_outside": "COPY raw.repo_heads TO '{outside_dir}/dump.csv'",
    "copy_from": "COPY raw.repo_heads FROM '{outside_dir}/outside.csv'",
    "export_database": "EXPORT DATABASE '{outside_dir}/export'",
    "export_into_lake": "EXPORT DATABASE '{root}/export'",
    "import_database": "IMPORT DATABASE '{outside_dir}/export'",
    "attach_read_write": "ATTACH '{db}' AS rw (READ_WRITE)",
    "attach_default": "ATTACH '{outside_dir}/other.duckdb' AS other",
    "attach_read_only": "ATTACH '{db}' AS ro (READ_ONLY)",
    "attach_memory": "ATTACH ':memory:' AS mem",
    "detach": "DETACH lake",
    "use": "USE sim",
    "set": "SET threads = 1",
    "set_external_access": "SET enable_external_access = true",
    "set_global": "SET GLOBAL lock_configuration = false",
    "reset": "RESET threads",
    "install": "INSTALL httpfs",
    "force_install": "FORCE INSTALL httpfs",
    "load": "LOAD httpfs",
    "load_path": "LOAD '{outside_dir}/evil.duckdb_extension'",
    "create_table": "CREATE TABLE raw.evil AS SELECT 1 AS x",
    "create_or_replace_view": "CREATE OR REPLACE VIEW sim.kernelinfer_sessions AS SELECT 1 AS x",
    "create_temp": "CREATE TEMP TABLE t AS SELECT 1 AS x",
    "create_macro": "CREATE MACRO evil() AS 1",
    "create_secret": "CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 's')",
    "insert": "INSERT INTO raw.repo_heads VALUES ('evil', 0)",
    "update": "UPDATE raw.repo_heads SET commit_count = 0",
    "delete": "DELETE FROM raw.repo_heads",
    "drop_table": "DROP TABLE raw.repo_heads",
    "drop_view": "DROP VIEW sim.kernelinfer_sessions",
    "alter": "ALTER TABLE raw.repo_heads RENAME TO gone",
    "truncate": "TRUNCATE raw.repo_heads",
    "pragma_write": "PRAGMA enable_profiling",
    "pragma_threads": "PRAGMA threads = 1",
    "pragma_read": "PRAGMA table_info('raw.repo_heads')",
    "call_checkpoint": "CALL checkpoint()",
    "checkpoint": "FORCE CHECKPOINT",
    "call_pragma": "CALL pragma_version()",
    "vacuum": "VACUUM",
    "analyze": "ANALYZE",
    "begin": "BEGIN TRANSACTION",
    "explain_analyze_copy": "EXPLAIN ANALYZE COPY raw.repo_heads TO '{outside_dir}/x.csv'",
    "multi_select_then_drop": "SELECT 1; DROP TABLE raw.repo_heads",
    "multi_two_selects": "SELECT 1; SELECT 2",
    "multi_hidden_copy": "SELECT 1 AS x; COPY raw.repo_heads TO '{part}'",
    "empty": "  ;  ",
    "does_not_parse": "SELEC 1",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_every_changing_statement_is_refused(lake: Lake, outside: Path, name: str) -> None:
    tmp_path = outside
    sql = HOSTILE[name].format(
        part=_part(lake),
        root=lake.parquet_root,
        db=lake.path,
        outside_dir=tmp_path,
    )
    before = _tree(tmp_path)
    with pytest.raises(QueryRefused) as err:
        lake.read_only_query(sql)
    assert str(err.value).strip(), "a refusal says why"
    assert _tree(tmp_path) == before, f"{name} changed a file"
    # The door still reads afterwards, and the lake still has everything.
    assert lake.read_only_query("SELECT count(*) AS n FROM sim.kernelinfer_sessions")[
        "n"
    ].to_list() == [3]
    assert lake.read_only_query("SELECT count(*) AS n FROM raw.repo_heads")["n"].to_list() == [2]


def test_refusals_name_the_statement_type(lake: Lake) -> None:
    with pytest.raises(QueryRefused, match="COPY statements are refused"):
        lake.read_only_query(HOSTILE["copy_to_partition"].format(part=_part(lake)))
    with pytest.raises(QueryRefused, match=r"one statement at a time: got 2 \(SELECT, DROP\)"):
        lake.read_only_query(HOSTILE["multi_select_then_drop"])
    with pytest.raises(QueryRefused, match="does not parse"):
        lake.read_only_query("SELEC 1")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT repo FROM raw.repo_heads ORDER BY repo",
        "WITH s AS (SELECT * FROM sim.kernelinfer_sessions) SELECT count(*) FROM s",
        "FROM raw.repo_heads",
        "DESCRIBE raw.repo_heads",
        "SHOW ALL TABLES",
        "SUMMARIZE raw.repo_heads",
        "VALUES (1, 'a')",
        "SELECT * FROM read_parquet('{root}/kernelinfer_sessions/*.parquet')",
        "SELECT 'a[/oops]b' AS x",
        "SELECT 1;",
    ],
)
def test_reads_still_work(lake: Lake, sql: str) -> None:
    df = lake.read_only_query(sql.format(root=lake.parquet_root))
    assert df.height >= 1


@pytest.mark.parametrize(
    "target",
    ["{outside_dir}/outside.csv", "/etc/passwd", "{root}/../outside.csv", "{outside_dir}/*.csv"],
)
def test_files_outside_the_lake_are_refused(lake: Lake, outside: Path, target: str) -> None:
    tmp_path = outside
    path = target.format(outside_dir=tmp_path, root=lake.parquet_root)
    with pytest.raises(QueryRefused, match="reads only the lake") as err:
        lake.read_only_query(f"SELECT * FROM read_csv('{path}')")
    assert "refused" in str(err.value)
    for fn in ("read_text", "read_blob", "glob", "sniff_csv"):
        with pytest.raises(QueryRefused):
            lake.read_only_query(f"SELECT * FROM {fn}('{path}')")


def test_the_door_leaves_writers_working(tmp_path: Path) -> None:
    """The walls are settings of DuckDB's per-process instance: once the door's
    connection closes, a build in the same process writes as before."""
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))
    lake.write_partition(
        "kernelinfer_sessions",
        "000",
        pl.DataFrame({"session_id": ["a", "b", "c"], "best": [1.0, 2, 3]}),
    )
    lake.refresh_view("sim", "kernelinfer_sessions")
    lake.read_only_query("SELECT 1")
    lake.replace_table("raw", "after", pl.DataFrame({"x": [1]}))
    lake.write_partition(
        "kernelinfer_sessions", "002", pl.DataFrame({"session_id": ["d"], "best": [4.0]})
    )
    assert lake.query("SELECT count(*) AS n FROM sim.kernelinfer_sessions")["n"].to_list() == [4]


def test_bucket_lake_reads_through_the_door(tmp_path: Path) -> None:
    """An s3:// lake (s3fs registered per connection) keeps working read-only: its views
    read, another prefix of the bucket is refused, and writes are refused by type."""
    from tests.unit.test_lake_object_store import moto_s3

    with moto_s3() as s3:
        bucket = s3.new_bucket()
        lk = Lake(tmp_path / "lake.duckdb", f"s3://{bucket}/lake", object_store=s3.store())
        lk.write_partition("t", "000", pl.DataFrame({"a": [1, 2]}))
        lk.refresh_view("sim", "t")
        other = Lake(tmp_path / "other.duckdb", f"s3://{bucket}/other", object_store=s3.store())
        other.write_partition("t", "000", pl.DataFrame({"a": [9]}))
        assert lk.read_only_query("SELECT sum(a) AS s FROM sim.t")["s"].to_list() == [3]
        with pytest.raises(QueryRefused, match="reads only the lake"):
            lk.read_only_query(f"SELECT * FROM read_parquet('s3://{bucket}/other/t/000.parquet')")
        with pytest.raises(QueryRefused, match="COPY"):
            lk.read_only_query(f"COPY (SELECT 7 AS a) TO 's3://{bucket}/lake/t/000.parquet'")
        assert lk.read_only_query("SELECT sum(a) AS s FROM sim.t")["s"].to_list() == [3]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM query('DROP TABLE raw.repo_heads')",
        "SELECT * FROM query('COPY raw.repo_heads TO ''{part}''')",
        "FROM query('ATTACH ''{db}'' AS rw (READ_WRITE)')",
        "SELECT * FROM checkpoint()",
        "SELECT * FROM force_checkpoint()",
        "SELECT * FROM duckdb_secrets()",
        "SELECT * FROM read_parquet('http://127.0.0.1:9/x.parquet')",
    ],
)
def test_select_shaped_writes_change_nothing(lake: Lake, outside: Path, sql: str) -> None:
    """Statements of type SELECT that reach for a side effect (a table function running
    other SQL, a checkpoint, the secret store, the network): refused by DuckDB itself on
    this connection (SELECT-only ``query()``, read-only database, no external access), or
    a no-op; either way nothing under the home changes."""
    before = _tree(outside)
    with contextlib.suppress(duckdb.Error, QueryRefused):
        lake.read_only_query(sql.format(part=_part(lake), db=lake.path))
    assert _tree(outside) == before
    assert lake.read_only_query("SELECT count(*) AS n FROM raw.repo_heads")["n"].to_list() == [2]
