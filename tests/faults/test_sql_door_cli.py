"""``kernelhouse sql`` as a hostile user runs it: the statements that destroyed or
changed the lake through the old door (issue 22), each refused with a message, the home
byte-identical afterwards; reads still work, locally and on an s3:// lake."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from dagster_project.storage.lake import Lake

pytestmark = pytest.mark.slow

EXE = str(Path(sys.executable).with_name("kernelhouse"))


def _kh(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [EXE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "250", **(env or {})},
    )


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def built(kh_home: Path) -> Lake:
    lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))
    lake.replace_table(
        "raw", "repo_heads", pl.DataFrame({"repo": ["vllm", "sglang"], "commit_count": [5, 7]})
    )
    lake.write_partition(
        "kernelinfer_sessions", "000", pl.DataFrame({"session_id": [f"s{i}" for i in range(100)]})
    )
    lake.refresh_view("sim", "kernelinfer_sessions")
    return lake


def test_the_probes_that_changed_the_lake_are_refused(
    built: Lake, kh_home: Path, tmp_path: Path
) -> None:
    part = f"{built.parquet_root}/kernelinfer_sessions/000.parquet"
    # Every statement type is tried in tests/unit/test_lake_sql.py; here, the issue's
    # probes through the real command line.
    probes = [
        # COPY over a partition once replaced 100 sessions with one fake row
        (f"COPY (SELECT 'fake' AS session_id) TO '{part}' (FORMAT parquet)", "COPY"),
        # ATTACH read-write + DETACH + read-write re-attach once dropped a table
        (f"ATTACH '{built.path}' AS rw (READ_WRITE)", "ATTACH"),
        ("DETACH lake", "DETACH"),
        (
            f"ATTACH '{built.path}' AS lake2; DROP TABLE lake2.raw.repo_heads",
            "one statement at a time",
        ),
        (f"EXPORT DATABASE '{tmp_path}/dump'", "EXPORT"),
        ("SET threads = 1", "SET"),
        ("INSTALL httpfs", "LOAD"),
        ("SELECT * FROM read_csv('/etc/passwd')", "reading /etc/passwd is refused"),
    ]
    before = _tree(kh_home)
    for sql, why in probes:
        res = _kh("sql", sql)
        assert res.returncode == 1, (sql, res.stdout)
        text = " ".join(res.stderr.split())
        assert "refused" in text and why in text, (sql, text)
        assert "Traceback" not in res.stderr
    assert _tree(kh_home) == before, "a refused statement changed the home"
    assert not (tmp_path / "dump").exists()
    ok = _kh("sql", "SELECT count(*) AS n FROM sim.kernelinfer_sessions", "-f", "csv")
    assert ok.returncode == 0 and ok.stdout.splitlines() == ["n", "100"], ok.stderr


def test_a_sql_file_is_checked_the_same_way(built: Lake, kh_home: Path) -> None:
    f = kh_home / "evil.sql"
    f.write_text("SELECT 1;\nDROP TABLE raw.repo_heads;\n")
    res = _kh("sql", str(f))
    assert res.returncode == 1 and "one statement at a time" in res.stderr
    assert built.read_table("raw", "repo_heads").height == 2


def test_s3_lake_reads_through_the_cli(kh_home: Path) -> None:
    from tests.unit.test_lake_object_store import moto_s3

    with moto_s3() as s3:
        bucket = s3.new_bucket()
        lake = Lake(kh_home / "lake.duckdb", f"s3://{bucket}/lake", object_store=s3.store())
        lake.write_partition(
            "kernelinfer_sessions", "000", pl.DataFrame({"session_id": ["a", "b", "c"]})
        )
        lake.refresh_view("sim", "kernelinfer_sessions")
        env = {**s3.env(), "KERNELHOUSE_LAKE_URI": f"s3://{bucket}/lake"}
        res = _kh("sql", "SELECT count(*) AS n FROM sim.kernelinfer_sessions", "-f", "csv", env=env)
        assert res.returncode == 0 and res.stdout.splitlines() == ["n", "3"], res.stderr
        res = _kh(
            "sql",
            f"COPY (SELECT 'x' AS session_id) TO 's3://{bucket}/lake/kernelinfer_sessions/000.parquet'",
            env=env,
        )
        assert res.returncode == 1 and "COPY statements are refused" in res.stderr
        res = _kh("sql", "SELECT count(*) AS n FROM sim.kernelinfer_sessions", "-f", "csv", env=env)
        assert res.stdout.splitlines() == ["n", "3"]
