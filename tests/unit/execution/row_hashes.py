"""Order-independent fingerprints of every table a build wrote, for the behaviour test.

Each row is written as one JSON line (polars' ndjson), the lines' SHA-256 digests are
sorted and hashed again: two tables with the same rows in any order get the same
fingerprint, one changed value anywhere changes it. What differs between two honest
builds of the same inputs is taken out first, and only that: wall-clock times, the
temporary paths of the test's home and fixture repos.

Re-record after an intentional change of output (a new rule version, a new generator):

    RECORD_ROW_HASHES=1 .venv/bin/python -m pytest -q tests/unit/execution/test_build_row_hashes.py
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl

from dagster_project.storage.lake import Lake

#: Columns whose value is when a build ran or how long a step took, not what it computed
#: (found by building twice into two homes: these are the only columns that differed).
VOLATILE: dict[str, frozenset[str]] = {
    "derived.quality_results": frozenset({"checked_at"}),
    "raw.mining_watermarks": frozenset({"mined_at"}),
    "raw.repo_heads": frozenset({"fetched_at"}),
    "raw.pr_bodies": frozenset({"fetched_at"}),
    "sim.compile_validation": frozenset({"seconds"}),
}


def _canonical(df: pl.DataFrame, roots: list[str], volatile: frozenset[str]) -> pl.DataFrame:
    df = df.select([c for c in df.columns if c not in volatile])
    exprs = []
    for name, dtype in df.schema.items():
        col = pl.col(name)
        if dtype == pl.Binary:
            col = col.bin.encode("hex")
        elif dtype in (pl.Datetime, pl.Date, pl.Time, pl.Duration) or isinstance(
            dtype, pl.Datetime | pl.Duration
        ):
            col = col.cast(pl.String)
        elif dtype == pl.String:
            for i, root in enumerate(roots):
                col = col.str.replace_all(root, f"<root{i}>", literal=True)
        exprs.append(col.alias(name))
    return df.select(exprs) if exprs else df


def table_hash(df: pl.DataFrame, roots: list[str], volatile: frozenset[str] = frozenset()) -> str:
    """Fingerprint of ``df``'s rows (order-independent) and column names."""
    df = _canonical(df, roots, volatile)
    lines = df.write_ndjson().splitlines() if df.height else []
    digests = sorted(hashlib.sha256(line.encode()).hexdigest() for line in lines)
    h = hashlib.sha256(",".join(df.columns).encode())
    for d in digests:
        h.update(d.encode())
    return h.hexdigest()[:16]


def lake_hashes(home: Path, roots: list[str]) -> dict[str, str]:
    """``{schema.table: "rows:fingerprint"}`` for every table and view of the lake."""
    lake = Lake(home / "lake.duckdb", str(home / "lake"))
    out: dict[str, str] = {}
    for schema, table, _kind, rows in lake.row_counts().iter_rows():
        df = lake.read_table(schema, table)
        name = f"{schema}.{table}"
        out[name] = f"{rows}:{table_hash(df, roots, VOLATILE.get(name, frozenset()))}"
    return out
