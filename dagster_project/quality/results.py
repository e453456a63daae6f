"""Persist suite results in the lake so gates are visible to SQL and to publish steps
that run in another process or run (``derived.quality_results``)."""

from __future__ import annotations

import json
import time

import polars as pl

from dagster_project.quality.suites import SuiteResult
from dagster_project.storage.lake import Lake


def record(lake: Lake, result: SuiteResult) -> None:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rows = [
        {
            "suite": result.suite,
            "asset": result.asset,
            "table_name": result.table,
            "blocking": result.blocking,
            "expectation": o.type,
            "column_name": o.column,
            "description": o.description,
            "success": o.success,
            "observed": json.dumps(o.observed, default=str),
            "unexpected_count": o.unexpected_count,
            "checked_at": now,
        }
        for o in result.outcomes
    ]
    if result.not_evaluated:
        rows = [
            {
                "suite": result.suite,
                "asset": result.asset,
                "table_name": result.table,
                "blocking": result.blocking,
                "expectation": "not_evaluated",
                "column_name": None,
                "description": "suite not evaluated",
                "success": True,
                "observed": json.dumps(result.not_evaluated),
                "unexpected_count": 0,
                "checked_at": now,
            }
        ]
    # Typed: a not-evaluated row (or a suite of table-wide expectations) has no column
    # name, and an all-null column would be inferred as Null, which DuckDB cannot insert
    # into the table's VARCHAR column.
    frame = pl.DataFrame(
        rows, schema_overrides={"column_name": pl.String, "unexpected_count": pl.Int64}
    )
    lake.replace_rows("derived", "quality_results", frame, "suite", [result.suite])


def failing_gates(lake: Lake, assets: list[str]) -> list[str]:
    """'suite: expectation (column)' for every failed blocking expectation of ``assets``
    in the latest recorded results; an asset never checked counts as a failure too."""
    if not lake.table_exists("derived", "quality_results"):
        return [f"{a}: never checked" for a in assets]
    df = lake.read_table("derived", "quality_results")
    out = []
    for asset in assets:
        mine = df.filter(pl.col("asset") == asset)
        if mine.height == 0:
            out.append(f"{asset}: never checked")
            continue
        bad = mine.filter(pl.col("blocking") & ~pl.col("success"))
        out += [
            f"{r['suite']}: {r['expectation']}"
            + (f" ({r['column_name']})" if r["column_name"] else "")
            for r in bad.iter_rows(named=True)
        ]
    return out
