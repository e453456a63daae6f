"""The DuckDB lake: one database file for small/medium tables, Parquet folders for large
partitioned ones, exposed as views of the same names (no dagster import).

Every write is idempotent and atomic:
- whole tables are rebuilt with ``CREATE OR REPLACE TABLE … AS SELECT`` inside one
  transaction, so a failure leaves the previous table untouched;
- keyed rows (a repo partition, a cache) are replaced with delete-by-key + insert in one
  transaction, so re-running never duplicates;
- Parquet partitions are written to a temporary name and renamed into place, so a crash
  mid-write leaves the previous file. Partition writers never take DuckDB's single writer
  lock, which is what lets shards run in parallel on any executor.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

SCHEMAS = ("raw", "derived", "datasets", "sim", "analysis")

_LOCK_MARKERS = ("Could not set lock", "Conflicting lock", "database is locked")


class LakeError(RuntimeError):
    """A lake read or write failed; the message names the table."""


def _is_lock_error(exc: BaseException) -> bool:
    return any(m in str(exc) for m in _LOCK_MARKERS)


def _ident(name: str) -> str:
    """Quote an identifier. Table names come from code, never from users, but quoting
    keeps odd names (``tuned_configs``, partition columns) safe anyway."""
    if not name or "\0" in name:
        raise LakeError(f"invalid identifier {name!r}")
    return '"' + name.replace('"', '""') + '"'


def qualified(schema: str, table: str) -> str:
    return f"{_ident(schema)}.{_ident(table)}"


@dataclass(frozen=True)
class Lake:
    """Handle on a lake: ``path`` is the DuckDB file, ``parquet_root`` the folder (or
    ``s3://bucket/prefix``) holding partitioned tables."""

    path: Path
    parquet_root: str
    lock_timeout_s: float = 60.0

    # -- connections ---------------------------------------------------------------
    @contextlib.contextmanager
    def connect(self, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A short-lived connection; waits (with jittered backoff) while another process
        holds the writer lock instead of failing the run."""
        if read_only and not self.path.exists():
            raise LakeError(f"no lake at {self.path}: run `kernelhouse build` first")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.05
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=read_only)
                break
            except duckdb.Error as exc:
                if not _is_lock_error(exc) or time.monotonic() > deadline:
                    raise LakeError(f"cannot open lake {self.path}: {exc}") from exc
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 2.0)
        try:
            self._configure(con)
            if not read_only:
                for schema in SCHEMAS:
                    con.execute(f"CREATE SCHEMA IF NOT EXISTS {_ident(schema)}")
            yield con
        finally:
            con.close()

    def _configure(self, con: duckdb.DuckDBPyConnection) -> None:
        """Per-connection set-up (kept as the hook an object-store lake will need)."""
        con.execute("SET TimeZone = 'UTC'")

    # -- reads ---------------------------------------------------------------------
    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> pl.DataFrame:
        with self.connect(read_only=self.path.exists()) as con:
            return fetch_frame(con, sql, params)

    def table_exists(self, schema: str, table: str) -> bool:
        if not self.path.exists():
            return False
        with self.connect(read_only=True) as con:
            row = con.execute(
                "SELECT count(*) FROM information_schema.tables "
                "WHERE table_schema = ? AND table_name = ?",
                [schema, table],
            ).fetchone()
        return bool(row and row[0])

    def read_table(self, schema: str, table: str, where: str = "", params: Sequence[Any] = ()) -> pl.DataFrame:
        """Whole table (or a filtered slice); an absent table reads as None-safe empty."""
        if not self.table_exists(schema, table):
            raise LakeError(f"table {schema}.{table} does not exist in {self.path}")
        sql = f"SELECT * FROM {qualified(schema, table)}" + (f" WHERE {where}" if where else "")
        with self.connect(read_only=True) as con:
            return fetch_frame(con, sql, list(params))

    def read_table_or_none(self, schema: str, table: str) -> pl.DataFrame | None:
        return self.read_table(schema, table) if self.table_exists(schema, table) else None

    def row_counts(self) -> pl.DataFrame:
        """(schema, table, kind, rows) for every table and view in the lake."""
        if not self.path.exists():
            return pl.DataFrame(schema={"schema": pl.String, "table": pl.String, "kind": pl.String, "rows": pl.Int64})
        with self.connect(read_only=True) as con:
            objs = con.execute(
                "SELECT table_schema, table_name, table_type FROM information_schema.tables "
                "WHERE table_schema IN ('raw','derived','datasets','sim','analysis') "
                "ORDER BY 1, 2"
            ).fetchall()
            rows = []
            for schema, table, kind in objs:
                try:
                    n = con.execute(f"SELECT count(*) FROM {qualified(schema, table)}").fetchone()
                    count = int(n[0]) if n else 0
                except duckdb.Error:
                    count = -1  # a view whose files are gone
                rows.append((schema, table, "view" if "VIEW" in kind else "table", count))
        return pl.DataFrame(rows, schema=["schema", "table", "kind", "rows"], orient="row")

    # -- writes --------------------------------------------------------------------
    def replace_table(self, schema: str, table: str, df: pl.DataFrame) -> int:
        """Atomically replace ``schema.table`` with ``df``."""
        with self.connect() as con:
            try:
                con.execute("BEGIN TRANSACTION")
                con.register("_incoming", df.to_arrow())
                con.execute(
                    f"CREATE OR REPLACE TABLE {qualified(schema, table)} AS SELECT * FROM _incoming"
                )
                con.execute("COMMIT")
            except Exception as exc:
                con.execute("ROLLBACK")
                raise LakeError(f"writing {schema}.{table} failed; previous table kept: {exc}") from exc
            finally:
                with contextlib.suppress(Exception):
                    con.unregister("_incoming")
        return df.height

    def replace_rows(
        self, schema: str, table: str, df: pl.DataFrame, key: str, keys: Sequence[Any]
    ) -> int:
        """Replace the rows whose ``key`` is in ``keys`` with ``df`` (one transaction).

        The table is created from ``df``'s schema on first write; columns added later by
        a newer version of the code are added to the table (nullable) so older rows stay.
        """
        qn = qualified(schema, table)
        with self.connect() as con:
            try:
                con.execute("BEGIN TRANSACTION")
                con.register("_incoming", df.to_arrow())
                con.execute(f"CREATE TABLE IF NOT EXISTS {qn} AS SELECT * FROM _incoming LIMIT 0")
                existing = {
                    r[0]
                    for r in con.execute(
                        "SELECT column_name FROM information_schema.columns "
                        "WHERE table_schema = ? AND table_name = ?",
                        [schema, table],
                    ).fetchall()
                }
                for name, typ, *_ in con.execute("DESCRIBE SELECT * FROM _incoming").fetchall():
                    if name not in existing:
                        con.execute(f"ALTER TABLE {qn} ADD COLUMN {_ident(name)} {typ}")
                if keys:
                    con.execute(
                        f"DELETE FROM {qn} WHERE {_ident(key)} IN (SELECT unnest(?))", [list(keys)]
                    )
                cols = ", ".join(_ident(c) for c in df.columns)
                con.execute(f"INSERT INTO {qn} ({cols}) SELECT {cols} FROM _incoming")
                con.execute("COMMIT")
            except Exception as exc:
                con.execute("ROLLBACK")
                raise LakeError(f"writing {schema}.{table} failed; previous rows kept: {exc}") from exc
            finally:
                with contextlib.suppress(Exception):
                    con.unregister("_incoming")
        return df.height

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> None:
        with self.connect() as con:
            con.execute(sql, params or [])

    # -- partitioned Parquet tables ---------------------------------------------------
    def partition_uri(self, table: str, partition: str) -> str:
        return f"{self.parquet_root}/{table}/{partition}.parquet"

    def write_partition(self, table: str, partition: str, df: pl.DataFrame) -> str:
        """Write one partition file atomically (temp name + rename) and return its path.
        Byte-identical for identical frames."""
        uri = self.partition_uri(table, partition)
        path = Path(uri)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            df.write_parquet(tmp, compression="zstd", statistics=False)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        return uri

    def delete_partition(self, table: str, partition: str) -> bool:
        """Remove one partition file (a shard beyond a smaller build); True if it existed."""
        path = Path(self.partition_uri(table, partition))
        if path.exists():
            path.unlink()
            return True
        return False

    def partition_files(self, table: str) -> list[str]:
        folder = Path(self.parquet_root) / table
        return sorted(str(p) for p in folder.glob("*.parquet")) if folder.exists() else []

    def refresh_view(self, schema: str, table: str, empty_schema: pl.DataFrame | None = None) -> int:
        """(Re)create ``schema.table`` as a view over every partition file of ``table``."""
        files = self.partition_files(table)
        qn = qualified(schema, table)
        with self.connect() as con:
            if files:
                # A glob, not a file list: new partitions show up without a refresh.
                # The path comes from settings, never from a query, and is quoted.
                pattern = f"{self.parquet_root}/{table}/*.parquet".replace("'", "''")
                con.execute(
                    f"CREATE OR REPLACE VIEW {qn} AS "
                    f"SELECT * FROM read_parquet('{pattern}', union_by_name = true)"
                )
            elif empty_schema is not None:
                con.register("_empty", empty_schema.head(0).to_arrow())
                con.execute(f"CREATE OR REPLACE TABLE {qn} AS SELECT * FROM _empty")
        return len(files)


def fetch_frame(con: duckdb.DuckDBPyConnection, sql: str, params: Any) -> pl.DataFrame:
    """DuckDB 2.x: results of ``execute`` have no ``.pl()``; a relation from ``sql`` does."""
    rel = con.sql(sql, params=params or None)
    if rel is None:
        return pl.DataFrame()
    return _utc(rel.pl())


def _utc(df: pl.DataFrame) -> pl.DataFrame:
    """DuckDB hands ``UTC`` timestamps back as ``Etc/UTC``; polars will not concat the two.
    Normalise to ``UTC`` so frames read from the lake combine with freshly mined ones."""
    fix = [
        pl.col(name).dt.convert_time_zone("UTC")
        for name, dtype in df.schema.items()
        if isinstance(dtype, pl.Datetime) and dtype.time_zone not in (None, "UTC")
    ]
    return df.with_columns(fix) if fix else df
