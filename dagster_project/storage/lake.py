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

The partition root may be a folder or an S3-compatible bucket prefix (``s3://bucket/p``).
On a bucket, files go through s3fs (one PUT per partition, which S3 makes atomic: a
reader sees the old object or the new one), and the same s3fs filesystem object is
registered on every DuckDB connection, so the views' ``s3://`` globs resolve from any
process, read-only ``kernelhouse sql`` included, without DuckDB's httpfs extension
(which would have to be downloaded). Both backends store the same bytes for a frame.

Three more guarantees (issue 22):
- ``read_only_query`` is the SQL door for users (``kernelhouse sql``): one read statement,
  checked with DuckDB's own parser, on a read-only connection that can reach no file
  outside the partition root, with its configuration locked.
- A home is relocatable: views store the absolute glob of the root they were made on,
  and the first connection of a process re-binds views made on another root (a copied,
  moved or restored home) to this one.
- Temporary files carry the writer's PID, so a sweep at build start (``home.py``) can
  tell an orphan of a killed writer from the temporary of a live one.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import duckdb
import polars as pl
import tenacity

from dagster_project.settings import ObjectStore, SqlLimits, load_object_store, load_sql_limits
from dagster_project.storage import lineage

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

SCHEMAS = lineage.SCHEMAS

_LOCK_MARKERS = ("Could not set lock", "Conflicting lock", "database is locked")


class LakeError(RuntimeError):
    """A lake read or write failed; the message names the table."""


class QueryLimit(LakeError):
    """A ``read_only_query`` statement ran past the door's time or memory limit."""


class QueryRefused(LakeError):
    """``read_only_query`` would not run a statement; the message says why."""


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


S3_PREFIX = "s3://"


def parquet_bytes(df: pl.DataFrame) -> bytes:
    """The one Parquet encoding of a partition (zstd, no statistics). Both backends store
    exactly these bytes, so a shard is byte-identical whichever executor or store wrote it."""
    buf = io.BytesIO()
    df.write_parquet(buf, compression="zstd", statistics=False)
    return buf.getvalue()


FAULT_VAR = "KERNELHOUSE_FAULT_STOP"


def fault_point(name: str) -> None:
    """Where the fault-injection tier (tests/faults) kills a build: with ``name`` listed in
    ``KERNELHOUSE_FAULT_STOP`` the process stops itself (SIGSTOP) right here, so the test
    can ``kill -9`` it at exactly this point instead of racing a timer. Points:
    ``partition_write`` (temporary written, not renamed), ``transaction`` (table replaced,
    not committed), ``export`` (export folder written, not swapped in). Unset, this is one
    dictionary lookup."""
    wanted = os.environ.get(FAULT_VAR)
    if wanted and name in wanted.split(","):
        os.kill(os.getpid(), signal.SIGSTOP)


# ``.<name>.<writer pid>.<uuid>.tmp`` (or ``.<name>.<uuid>.tmp`` before the PID was
# recorded): a temporary of ``write_atomically``; ``home.sweep_temporaries`` parses it.
TEMP_NAME = re.compile(r"^\.(?P<name>.+?)\.(?:(?P<pid>\d+)\.)?(?P<uuid>[0-9a-f]{32})\.tmp$")


def temp_path(path: Path) -> Path:
    """A fresh temporary sibling of ``path``, named with this process's PID."""
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")


def write_atomically(path: Path, write: Callable[[Path], object]) -> Path:
    """Have ``write`` fill a temporary sibling of ``path``, then rename it into place.

    Readers see the old file or the whole new one, never a torn one; a failed write
    leaves the old file and no temporary behind (a killed one leaves a temporary that the
    next build sweeps: its name carries the dead writer's PID).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        write(tmp)
        fault_point("partition_write")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def s3_filesystem(store: ObjectStore) -> AbstractFileSystem:
    """An s3fs filesystem for ``store``. fsspec caches instances per arguments (and per
    process), so calling this per connection is cheap. Directory listings are never
    cached: another worker may have written a partition a moment ago, and a stale listing
    would hide it from ``partition_files`` and the views' globs."""
    try:
        import s3fs
    except ImportError as exc:  # pragma: no cover - s3fs is a dependency
        raise LakeError("an s3:// lake needs the s3fs package (pip install s3fs)") from exc
    return s3fs.S3FileSystem(use_listings_cache=False, **store.storage_options())


@dataclass(frozen=True)
class Lake:
    """Handle on a lake: ``path`` is the DuckDB file, ``parquet_root`` the folder (or
    ``s3://bucket/prefix``) holding partitioned tables."""

    path: Path
    parquet_root: str
    lock_timeout_s: float = 60.0
    # How to reach an s3:// root; None reads the AWS variables when first needed, so
    # every ``Lake(path, root)`` in the code base works unchanged on a bucket.
    object_store: ObjectStore | None = field(default=None, repr=False, compare=False)
    # The asset this handle was opened for (``LakeResource.lake()`` inside a run): every
    # statement is checked against its lineage declaration (``storage/lineage.py``), so
    # an undeclared read fails instead of hiding a dependency. None: no check (CLI, tests).
    asset: str | None = field(default=None, compare=False)

    @property
    def on_object_store(self) -> bool:
        return self.parquet_root.startswith(S3_PREFIX)

    def filesystem(self) -> AbstractFileSystem:
        """The s3fs filesystem behind an ``s3://`` root (LakeError for a local root)."""
        if not self.on_object_store:
            raise LakeError(f"{self.parquet_root} is a local folder, not an object store")
        return s3_filesystem(self.object_store or load_object_store())

    # -- connections ---------------------------------------------------------------
    @contextlib.contextmanager
    def connect(self, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A short-lived connection; waits (with jittered backoff) while another process
        holds the writer lock instead of failing the run."""
        if read_only and not self.path.exists():
            raise LakeError(f"no lake at {self.path}: run `kernelhouse build` first")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._rebind_once()
        with self._open(read_only=read_only) as con:
            if self.asset is not None and self.asset in lineage.ASSETS:
                yield cast(duckdb.DuckDBPyConnection, _DeclaredReads(con, self.asset))
            else:
                yield con

    @contextlib.contextmanager
    def _open(self, *, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        # DuckDB allows one writer process: while another holds the file lock, retry with
        # jittered exponential backoff (50 ms doubling to 2 s) until ``lock_timeout_s``;
        # any other error, or the lock past the deadline, is a LakeError naming the file.
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(
                lambda e: isinstance(e, duckdb.Error) and _is_lock_error(e)
            ),
            wait=tenacity.wait_exponential_jitter(initial=0.05, max=2.0, jitter=0.05),
            stop=tenacity.stop_after_delay(self.lock_timeout_s),
            reraise=True,
        )
        if "?" in str(self.path):
            # DuckDB reads '?' as the start of connection options and loses the WAL
            raise LakeError(
                f"cannot open lake {self.path}: DuckDB cannot use a path holding '?'; "
                "move KERNELHOUSE_HOME to a folder without it"
            )
        try:
            con = retrying(duckdb.connect, str(self.path), read_only=read_only)
        except duckdb.Error as exc:
            raise LakeError(f"cannot open lake {self.path}: {exc}") from exc
        try:
            self._configure(con)
            if not read_only:
                for schema in SCHEMAS:
                    con.execute(f"CREATE SCHEMA IF NOT EXISTS {_ident(schema)}")
            yield con
        finally:
            con.close()

    # -- a home that moves --------------------------------------------------------
    def _rebind_once(self) -> None:
        """Re-bind moved views the first time this process opens this lake."""
        key = (str(self.path), self.parquet_root)
        if key in _BOUND or not self.path.exists():
            return
        _BOUND.add(key)
        # Best effort, once: a lake on a read-only disk, or one whose writer lock another
        # process holds past the timeout, still opens; its moved views then fail to read
        # with DuckDB's message naming the old path, and ``broken_views`` lists them.
        with contextlib.suppress(LakeError, duckdb.Error, OSError):
            self.rebind_views()

    def moved_views(self) -> list[tuple[str, str, str]]:
        """(schema, view, partition folder) of every view over a partition glob of another
        root than this lake's: the home was copied, moved or restored from a backup."""
        if not self.path.exists():
            return []
        with self._open(read_only=True) as con:
            rows = con.execute(
                "SELECT schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal"
            ).fetchall()
            home = _database_path(con)
        moved = []
        for schema, view, sql in rows:
            match = _VIEW_GLOB.search(sql or "")
            if not match:
                continue
            guard = _VIEW_GUARD.search(sql or "")
            # compared as glob text: a view written before roots were escaped is re-bound
            # too, and so is one guarded by another lake file (or by none: an older lake)
            if (
                match.group("root").replace("''", "'") != glob_escape(self.parquet_root)
                or guard is None
                or guard.group("home").replace("''", "'") != home
            ):
                moved.append((str(schema), str(view), match.group("table").replace("''", "'")))
        return moved

    def rebind_views(self) -> list[str]:
        """Point every moved view (``moved_views``) at this lake's root; returns the views
        re-bound. A view whose partition folder is empty here is left as it is (it cannot
        be bound) and shows as broken (``broken_views``) until its asset runs again.

        Why re-bind rather than store relative globs: DuckDB resolves a relative path
        against the reading process's working directory, so any plain ``duckdb`` client
        (a user's shell, Great Expectations) would read nothing; absolute globs work
        everywhere, and only a moved home needs this one-off rewrite."""
        moved = self.moved_views()
        if not moved:
            return []
        done = []
        with self._open(read_only=False) as con:
            for schema, view, table in moved:
                if not self.partition_files(table):
                    continue
                con.execute(
                    f"CREATE OR REPLACE VIEW {qualified(schema, view)} AS "
                    + self._view_sql(con, table)
                )
                done.append(f"{schema}.{view}")
        return done

    def _view_sql(self, con: duckdb.DuckDBPyConnection, table: str) -> str:
        """The body of a view over ``table``'s partitions, guarded by the lake file it lives
        in: the glob is absolute, so a copy of the home opened by a plain DuckDB client
        would silently read the *original* home's files. The guard makes such a read fail
        with a message saying how to re-bind (kernelhouse re-binds on first open); in the
        home itself, or with the lake ATTACHed under any name, the file is among the
        open databases and the guard is one constant check. The SQL door reads a private
        snapshot of the file and names the home in ``HOME_VARIABLE`` instead."""
        home = _database_path(con)
        message = (
            f"this lake's views read the Parquet files beside {home}, not beside the lake "
            "file you opened (a copied or moved home): open it once with kernelhouse "
            "(KERNELHOUSE_HOME=<its folder> kernelhouse status), which re-binds its views "
            "to its own files"
        )
        return (
            f"SELECT * FROM read_parquet('{self.view_glob(table)}', union_by_name = true) "
            f"WHERE EXISTS (SELECT 1 FROM duckdb_databases() WHERE path = '{_sql_str(home)}') "
            f"OR getvariable('{HOME_VARIABLE}') = '{_sql_str(home)}' "
            f"OR error('{_sql_str(message)}')"
        )

    def broken_views(self) -> list[str]:
        """Views of the lake that no longer read (their partition files are gone, or they
        point at another root): a refresh must rebuild them, not call them up to date."""
        if not self.path.exists():
            return []
        broken = []
        with self.connect(read_only=True) as con:
            views = con.execute(
                "SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal "
                "AND schema_name IN ('raw','derived','datasets','sim','analysis') ORDER BY 1, 2"
            ).fetchall()
            for schema, view in views:
                try:
                    con.execute(f"SELECT * FROM {qualified(schema, view)} LIMIT 0").fetchall()
                except duckdb.Error:
                    broken.append(f"{schema}.{view}")
        return broken

    # -- the read-only SQL door ----------------------------------------------------
    def read_only_query(self, sql: str, limits: SqlLimits | None = None) -> pl.DataFrame:
        """Run one user statement that can only read: ``kernelhouse sql``'s door.

        Three independent walls, each enough for what it guards:
        1. DuckDB's own parser splits the text (``duckdb.extract_statements``): exactly one
           statement, of type SELECT (which covers WITH, FROM-first, VALUES, DESCRIBE,
           SHOW, SUMMARIZE and PIVOT-free queries). COPY, EXPORT, ATTACH, DETACH, SET,
           RESET, USE, INSTALL, LOAD, PRAGMA, CALL, CREATE, INSERT, UPDATE, DELETE, DROP,
           ALTER, CHECKPOINT, VACUUM and transactions are refused by type, before
           anything runs.
        2. The connection is read-only: no catalog or table change can commit.
        3. External access is off except for the partition root (``allowed_directories``;
           the database's own files are allowed by DuckDB), extension auto-loading is off
           and the configuration is locked, so no later statement can widen it. Reading
           ``/etc/passwd`` or another home's files is refused.
        DuckDB's allow-list also permits writes under the root, which is why wall 1 does
        not rely on wall 3 (a ``COPY … TO`` a partition file is refused by type).

        The walls are database-wide settings of DuckDB's per-process instance, so this
        runs on a connection of its own, in a process (the CLI) that opens no other.

        Limits (issue 42): the statement is interrupted after ``limits.timeout_s`` and
        capped at ``limits.memory_limit`` with spilling off (``settings.SqlLimits``), each
        failing with a message that names the variable to raise. And a reader never
        blocks a build: DuckDB lets no writer in while any process holds the file, so the
        door queries a snapshot (``_snapshot``: the file copied under a brief shared lock,
        deleted afterwards), and a build waits at most for the copy, not for the query.
        """
        statement = _one_read_statement(sql)
        if not self.path.exists():
            raise LakeError(f"no lake at {self.path}: run `kernelhouse build` first")
        limits = limits or load_sql_limits()
        self._rebind_once()
        with self._open(read_only=True) as con:
            home = _database_path(con)
        snapshot = self._snapshot()
        try:
            with Lake(snapshot, self.parquet_root, object_store=self.object_store)._open(
                read_only=True
            ) as con:
                root = self.parquet_root.rstrip("/") + "/"
                # the snapshot is another file: tell the views' guard which home it is
                con.execute(f"SET VARIABLE {HOME_VARIABLE} = ?", [home])
                con.execute("SET memory_limit = ?", [limits.memory_limit])
                con.execute("SET temp_directory = ''")  # no spilling: past the limit, it fails
                # the views name the root as an escaped glob (``glob_escape``): DuckDB checks
                # that text against the list, and then the files it expands to
                allowed = sorted({root, glob_escape(root)})
                con.execute("SET allowed_directories = ?", [allowed])
                con.execute("SET autoinstall_known_extensions = false")
                con.execute("SET autoload_known_extensions = false")
                con.execute("SET enable_external_access = false")
                con.execute("SET lock_configuration = true")
                return _limited_fetch(con, statement.query, limits, root)
        finally:
            for leftover in (snapshot, snapshot.with_name(snapshot.name + ".wal")):
                with contextlib.suppress(OSError):
                    leftover.unlink()

    def _snapshot(self) -> Path:
        """A private copy of the database file (and its WAL), taken while holding a
        read-only connection, i.e. DuckDB's shared lock: no writer is mid-commit, so the
        copy is consistent, and the lock is held only for the copy. It is written next to
        the lake (same disk) under ``temp_path``'s name, so the build-start sweep removes
        the copy of a killed reader; a lake folder that cannot be written to (a read-only
        disk) falls back to the system temporary folder."""
        wal = self.path.with_name(self.path.name + ".wal")
        for folder in (self.path.parent, Path(tempfile.gettempdir())):
            dest = temp_path(folder / self.path.name)
            try:
                with self._open(read_only=True):
                    shutil.copyfile(self.path, dest)
                    if wal.exists():
                        shutil.copyfile(wal, dest.with_name(dest.name + ".wal"))
                return dest
            except OSError:
                for leftover in (dest, dest.with_name(dest.name + ".wal")):
                    with contextlib.suppress(OSError):
                        leftover.unlink()
        raise LakeError(f"cannot take a snapshot of {self.path} for a read (no writable folder)")

    def _configure(self, con: duckdb.DuckDBPyConnection) -> None:
        """Per-connection set-up: UTC, and on a bucket the s3fs filesystem, so views over
        ``s3://`` globs bind and read on every connection (writers, readers, ``kernelhouse
        sql``). Connections of one process to one file share a database instance, which
        refuses a second registration, hence the check.

        FSST string compression is switched off for what this process writes: our tables
        hold long, repetitive text (prompts that embed one of a few kernel sources), and
        for them DuckDB's automatic choice, DICT_FSST, is both slow and large. Measured on
        the real ``datasets.tuned_configs`` (18,370 rows, 354 MB of prompt and source
        text; DuckDB 2.0.1; ``benchmarks/bench_lake_write.py``): automatic 15.5-18.5 s to
        write and 90.5 MB, without FSST 2.1 s (ZSTD is chosen) and 15.0 MB; the rows hash
        the same, scans are no slower. Files written with FSST still read."""
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET disabled_compression_methods = 'dict_fsst,fsst'")
        if self.on_object_store and "s3" not in con.list_filesystems():
            con.register_filesystem(self.filesystem())

    # -- reads ---------------------------------------------------------------------
    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> pl.DataFrame:
        with self.connect(read_only=self.path.exists()) as con:
            return fetch_frame(con, sql, params)

    def table_exists(self, schema: str, table: str) -> bool:
        lineage.check_reads(self.asset, [f"{schema}.{table}"])
        if not self.path.exists():
            return False
        with self.connect(read_only=True) as con:
            row = con.execute(
                "SELECT count(*) FROM information_schema.tables "
                "WHERE table_schema = ? AND table_name = ?",
                [schema, table],
            ).fetchone()
        return bool(row and row[0])

    def read_table(
        self, schema: str, table: str, where: str = "", params: Sequence[Any] = ()
    ) -> pl.DataFrame:
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
            return pl.DataFrame(
                schema={
                    "schema": pl.String,
                    "table": pl.String,
                    "kind": pl.String,
                    "rows": pl.Int64,
                }
            )
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
        """Atomically replace ``schema.table`` with ``df``.

        One DuckDB thread for the copy: writing the largest table (tuned_configs, 350 MB
        of text) then adds 0.70-0.75 GB to the process instead of 1.12 GB, and is no slower
        (``benchmarks/bench_lake_write.py``: more threads each buffer and compress row
        groups at once); the setting is put back afterwards, so queries keep every core."""
        with self.connect() as con:
            try:
                con.execute("SET threads = 1")
                con.execute("BEGIN TRANSACTION")
                con.register("_incoming", df.to_arrow())
                con.execute(
                    f"CREATE OR REPLACE TABLE {qualified(schema, table)} AS SELECT * FROM _incoming"
                )
                fault_point("transaction")
                con.execute("COMMIT")
            except Exception as exc:
                con.execute("ROLLBACK")
                raise LakeError(
                    f"writing {schema}.{table} failed; previous table kept: {exc}"
                ) from exc
            finally:
                with contextlib.suppress(Exception):
                    con.unregister("_incoming")
                with contextlib.suppress(Exception):
                    con.execute("RESET threads")
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
                fault_point("transaction")
                con.execute("COMMIT")
            except Exception as exc:
                con.execute("ROLLBACK")
                raise LakeError(
                    f"writing {schema}.{table} failed; previous rows kept: {exc}"
                ) from exc
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
        """Write one partition file atomically and return its URI. Byte-identical for
        identical frames, locally and on a bucket.

        Locally: temp name + rename. On a bucket: one PUT of the whole object (S3 makes a
        PUT atomic; a temp key + copy would only double the traffic)."""
        uri = self.partition_uri(table, partition)
        data = parquet_bytes(df)
        if self.on_object_store:
            try:
                self.filesystem().pipe_file(uri.removeprefix(S3_PREFIX), data)
            except OSError as exc:
                raise LakeError(f"writing {uri} failed; previous object kept: {exc}") from exc
            _UNVIEWED.setdefault((self.parquet_root, table), set()).add(uri)
            return uri
        write_atomically(Path(uri), lambda tmp: tmp.write_bytes(data))
        _UNVIEWED.setdefault((self.parquet_root, table), set()).add(uri)
        return uri

    def delete_partition(self, table: str, partition: str) -> bool:
        """Remove one partition file (a shard beyond a smaller build); True if it existed."""
        uri = self.partition_uri(table, partition)
        if self.on_object_store:
            fs = self.filesystem()
            key = uri.removeprefix(S3_PREFIX)
            if not fs.exists(key):
                return False
            fs.rm_file(key)
            return True
        path = Path(uri)
        if path.exists():
            path.unlink()
            return True
        return False

    def view_glob(self, table: str) -> str:
        """The glob a view of ``table`` reads, quoted for a SQL string: the partition root
        with DuckDB's glob characters escaped (a home at ``/data/h[1]`` would otherwise
        read ``/data/h1``'s files, issue 42), then ``/<table>/*.parquet``."""
        return f"{glob_escape(self.parquet_root)}/{table}/*.parquet".replace("'", "''")

    def partition_files(self, table: str) -> list[str]:
        """Every partition file of ``table`` (URIs, sorted)."""
        if self.on_object_store:
            pattern = f"{self.parquet_root}/{table}/*.parquet".removeprefix(S3_PREFIX)
            return sorted(S3_PREFIX + key for key in self.filesystem().glob(pattern))
        folder = Path(self.parquet_root) / table
        return sorted(str(p) for p in folder.glob("*.parquet")) if folder.exists() else []

    def refresh_view(
        self, schema: str, table: str, empty_schema: pl.DataFrame | None = None
    ) -> int:
        """(Re)create ``schema.table`` as a view over every partition file of ``table``.

        Creating the view binds it, and binding a ``union_by_name`` glob reads the footer
        of every file: cheap for a few local files, but O(files) requests on a bucket, so
        a build that refreshes after each shard would be quadratic, all of it under
        DuckDB's single writer lock (measured on a local S3 server: 1.7 s at 50 files,
        5.7 s at 200). When the view already reads this glob and every partition this
        process wrote since has exactly the view's columns, the union is unchanged and
        the view is kept: the footers of the new files are read without the lake open,
        the catalog through a read-only connection, which does not exclude other readers.
        Anything else (a new column or type, no record of the write) re-binds.
        """
        files = self.partition_files(table)
        qn = qualified(schema, table)
        written = _UNVIEWED.pop((self.parquet_root, table), set())
        # A glob, not a file list: new partitions show up without a refresh. The path
        # comes from settings, never from a query, and is quoted (``_view_sql``).
        if files and written and self.path.exists():
            columns = self._file_columns(written)
            if columns is not None:
                with self.connect(read_only=True) as con:
                    pattern = self.view_glob(table)
                    if _view_columns(con, schema, table, pattern) == columns:
                        return len(files)
        with self.connect() as con:
            if files:
                con.execute(f"CREATE OR REPLACE VIEW {qn} AS " + self._view_sql(con, table))
            elif empty_schema is not None:
                con.register("_empty", empty_schema.head(0).to_arrow())
                con.execute(f"CREATE OR REPLACE TABLE {qn} AS SELECT * FROM _empty")
        return len(files)

    def _file_columns(self, uris: set[str]) -> list[tuple[str, str]] | None:
        """The (name, DuckDB type) columns the files share, or None when they differ or
        one cannot be read. An in-memory DuckDB: the lake file stays free meanwhile."""
        found: set[tuple[tuple[str, str], ...]] = set()
        with duckdb.connect() as mem:
            self._configure(mem)
            for uri in sorted(uris):
                quoted = uri.replace("'", "''")
                try:
                    rows = mem.execute(
                        f"DESCRIBE SELECT * FROM read_parquet('{quoted}')"
                    ).fetchall()
                except duckdb.Error:  # gone already (a concurrent delete): re-bind
                    return None
                found.add(tuple((str(r[0]), str(r[1])) for r in rows))
        return list(found.pop()) if len(found) == 1 else None


# Partition files this process wrote since it last refreshed their table's view, per
# (partition root, table): what ``refresh_view`` checks before it keeps a view.
_UNVIEWED: dict[tuple[str, str], set[str]] = {}

# (lake file, partition root) pairs whose views this process has checked for a move.
_BOUND: set[tuple[str, str]] = set()

_GLOB_SPECIAL = {"[": "[[]", "]": "[]]", "*": "[*]", "?": "[?]"}


def glob_escape(path: str) -> str:
    """``path`` with DuckDB's glob characters written as one-character classes, so it
    matches only itself (``[`` -> ``[[]``; DuckDB has no backslash escape in globs)."""
    return "".join(_GLOB_SPECIAL.get(ch, ch) for ch in path)


# The glob ``refresh_view`` writes into a view: read_parquet('<root>/<table>/*.parquet'.
# Only ever matched against view text this module generated.
_VIEW_GLOB = re.compile(
    r"read_parquet\('(?P<root>(?:[^']|'')+)/(?P<table>(?:[^'/]|'')+)/\*\.parquet'"
)
# The lake-file guard ``Lake._view_sql`` writes after it, and the session variable that
# stands for the lake file where a reader opened a snapshot of it (the SQL door).
HOME_VARIABLE = "kernelhouse_lake"
_VIEW_GUARD = re.compile(r"WHERE \(?path = '(?P<home>(?:[^']|'')+)'")


def _database_path(con: duckdb.DuckDBPyConnection) -> str:
    """The lake file ``con`` opened, as DuckDB records it (absolute), which is what a
    view's guard compares with the databases open in the reading session."""
    row = con.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchone()
    return str(row[0]) if row else ""


def _sql_str(text: str) -> str:
    """``text`` inside a SQL string literal (quotes doubled). Only for text this module
    writes itself (paths from settings, its own messages) in DDL, which takes no
    parameters."""
    return text.replace("'", "''")


# Statement types ``read_only_query`` runs: only SELECT (DuckDB's parser gives DESCRIBE,
# SHOW, SUMMARIZE, VALUES and FROM-first queries this type too).
READ_STATEMENT_TYPES = frozenset({duckdb.StatementType.SELECT})


def _one_read_statement(sql: str) -> duckdb.Statement:
    """The single read statement in ``sql``, else QueryRefused saying what was found."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRefused(f"the SQL does not parse: {str(exc).splitlines()[0]}") from exc
    if not statements:
        raise QueryRefused("no SQL statement given")
    if len(statements) > 1:
        kinds = ", ".join(st.type.name for st in statements)
        raise QueryRefused(
            f"one statement at a time: got {len(statements)} ({kinds}); kernelhouse sql "
            "runs a single read statement"
        )
    statement = statements[0]
    if statement.type not in READ_STATEMENT_TYPES:
        raise QueryRefused(
            f"{statement.type.name} statements are refused: kernelhouse sql only reads "
            "(SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE); it cannot change a "
            "table, view, setting or file"
        )
    return statement


def _limited_fetch(
    con: duckdb.DuckDBPyConnection, query: str, limits: SqlLimits, root: str
) -> pl.DataFrame:
    """Run the door's statement under its limits; a limit or a refused path is a LakeError
    whose first line says what happened and which setting changes it."""
    timer = threading.Timer(limits.timeout_s, con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        return fetch_frame(con, query, None)
    except duckdb.InterruptException as exc:
        raise QueryLimit(
            f"query stopped after {limits.timeout_s:g} s, the SQL door's time limit "
            "(raise KERNELHOUSE_SQL_TIMEOUT_S to allow longer)"
        ) from exc
    except duckdb.OutOfMemoryException as exc:
        raise QueryLimit(
            f"query stopped: it needs more than {limits.memory_limit}, the SQL door's memory "
            "limit (raise KERNELHOUSE_SQL_MEMORY_LIMIT, or add filters or a LIMIT)"
        ) from exc
    except duckdb.PermissionException as exc:
        where = _refused_path(str(exc))
        raise QueryRefused(
            f"{'reading ' + where if where else 'that access'} is refused: kernelhouse sql "
            f"reads only the lake (tables, views and files under {root})"
        ) from exc
    finally:
        timer.cancel()


def _refused_path(message: str) -> str | None:
    """The file DuckDB's permission error names (for the message), if it names one."""
    match = re.search(r'Cannot access (?:file|directory) "([^"]+)"', message)
    return match.group(1) if match else None


def _view_columns(
    con: duckdb.DuckDBPyConnection, schema: str, table: str, pattern: str
) -> list[tuple[str, str]] | None:
    """The stored columns of ``schema.table`` if it is a ``union_by_name`` view of
    ``pattern`` guarded by this lake file (from the catalog: no binding, no file read),
    else None. DuckDB stores a view's SQL normalised, so its parts are matched."""
    row = con.execute(
        "SELECT sql FROM duckdb_views() WHERE schema_name = ? AND view_name = ?", [schema, table]
    ).fetchone()
    guard = _VIEW_GUARD.search(row[0]) if row else None
    if (
        not row
        or f"read_parquet('{pattern}'" not in row[0]
        or "union_by_name" not in row[0]
        or guard is None
        or guard.group("home").replace("''", "'") != _database_path(con)
    ):
        return None
    return [
        (str(name), str(typ))
        for name, typ in con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() "
            "WHERE schema_name = ? AND table_name = ? ORDER BY column_index",
            [schema, table],
        ).fetchall()
    ]


class _DeclaredReads:
    """A connection of a lake opened for an asset: ``execute`` and ``sql`` first check
    the lake tables the statement names against the asset's lineage declaration."""

    def __init__(self, con: duckdb.DuckDBPyConnection, asset: str) -> None:
        self._con = con
        self._asset = asset

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        lineage.check_reads(self._asset, lineage.tables_in(sql))
        return self._con.execute(sql, *args, **kwargs)

    def sql(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        lineage.check_reads(self._asset, lineage.tables_in(sql))
        return self._con.sql(sql, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


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
