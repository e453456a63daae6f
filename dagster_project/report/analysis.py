"""Analysis views (``sql/analysis/*.sql`` → schema ``analysis``), no dagster import.

DuckDB binds a view when it is created, so a view over a table that is not built yet
cannot exist; ``create_views`` creates what it can and reports the rest, and is re-run
after every dataset build.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from dagster_project.storage import lineage
from dagster_project.storage.lake import Lake, qualified
from sql import analysis_views


@dataclass
class ViewReport:
    created: list[str]
    skipped: dict[str, str]


def missing_tables(con: duckdb.DuckDBPyConnection, tables: set[str]) -> list[str]:
    """The lake tables among ``tables`` (``schema.table``) that do not exist (yet)."""
    rows = con.execute(
        "SELECT table_schema || '.' || table_name FROM information_schema.tables"
    ).fetchall()
    have = {str(r[0]) for r in rows}
    return sorted(t for t in tables if t not in have)


def why_missing(con: duckdb.DuckDBPyConnection, sql: str) -> str | None:
    """For a statement that failed on a missing table: the missing tables and the build
    steps that create them (for an ``analysis.*`` view: the missing tables under it), or
    None when every table it names exists."""
    views = dict(analysis_views())
    out: list[str] = []
    for table in missing_tables(con, lineage.tables_in(sql)):
        name = table.partition(".")[2]
        if table.startswith("analysis.") and name in views:
            under = _base_missing(con, views[name], views, {table})
            out.append(
                f"{table} waits for tables not built yet: {lineage.build_steps(under)}"
                if under
                else f"{table} is created by `kernelhouse build --select analysis_views`"
            )
        else:
            out.append(lineage.build_steps([table]))
    return "; ".join(out) or None


def _base_missing(
    con: duckdb.DuckDBPyConnection, sql: str, views: dict[str, str], seen: set[str]
) -> list[str]:
    """The missing non-view tables ``sql`` reads, through missing analysis views too."""
    out: list[str] = []
    for table in missing_tables(con, lineage.tables_in(sql)):
        name = table.partition(".")[2]
        if table.startswith("analysis.") and name in views:
            if table not in seen:
                seen.add(table)
                out += _base_missing(con, views[name], views, seen)
        else:
            out.append(table)
    return list(dict.fromkeys(out))


def _base_tables(sql: str, views: dict[str, str], seen: set[str]) -> set[str]:
    """The non-view lake tables ``sql`` reads, through the analysis views it names."""
    out: set[str] = set()
    for table in lineage.tables_in(sql):
        name = table.partition(".")[2]
        if table.startswith("analysis.") and name in views:
            if table not in seen:
                seen.add(table)
                out |= _base_tables(views[name], views, seen)
        else:
            out.add(table)
    return out


def explain_empty(lake: Lake, sql: str) -> str | None:
    """Why a query that ran returned no rows, when the lake can say: the tables under it
    that are empty, and the gains state when it reads ``derived.pr_gains`` and no PR body
    was readable (the README's first example query printed an empty table, no word why)."""
    if not lake.path.exists():
        return None
    with lake.connect(read_only=True) as con:
        tables = _base_tables(sql, dict(analysis_views()), set())
        present = [t for t in sorted(tables) if not missing_tables(con, {t})]
        empty = [
            t
            for t in present
            if con.execute(f"SELECT count(*) FROM {qualified(*t.split('.', 1))}").fetchone() == (0,)
        ]
        notes = (
            [f"{', '.join(empty)} {'has' if len(empty) == 1 else 'have'} no rows"] if empty else []
        )
        if "derived.pr_gains" in tables and not missing_tables(con, {"derived.pr_gains_state"}):
            row = con.execute(
                "SELECT reason FROM derived.pr_gains_state WHERE NOT extracted LIMIT 1"
            ).fetchone()
            if row and row[0]:
                notes.append(str(row[0]))
    return "; ".join(notes) or None


def explain_missing(lake: Lake, sql: str) -> str | None:
    """``why_missing`` on a read-only connection of ``lake`` (None: nothing is missing)."""
    if not lake.path.exists():
        return None
    with lake.connect(read_only=True) as con:
        return why_missing(con, sql)


def create_views(lake: Lake) -> ViewReport:
    created, skipped = [], {}
    pending = analysis_views()
    # Views may build on each other: retry until no progress.
    with lake.connect() as con:
        while pending:
            progress = False
            left = []
            for name, sql in pending:
                try:
                    con.execute(f"CREATE OR REPLACE VIEW {qualified('analysis', name)} AS {sql}")
                    created.append(name)
                    progress = True
                except duckdb.Error as exc:
                    left.append((name, sql))
                    under = _base_missing(con, sql, dict(analysis_views()), set())
                    skipped[name] = (
                        lineage.build_steps(under) if under else str(exc).splitlines()[0]
                    )
            pending = left
            if not progress:
                break
    for name in created:
        skipped.pop(name, None)
    return ViewReport(created=sorted(created), skipped=skipped)


def card_comparison(lake: Lake, dataset: str):  # noqa: ANN201 - polars frame
    """Rows (metric, card, ours, ratio) of ``analysis.card_<dataset>``."""
    import polars as pl

    view = "card_" + dataset.replace("-", "_")
    df = lake.query(f"SELECT * FROM {qualified('analysis', view)}")
    return df.with_columns(pl.col("card", "ours").cast(pl.Float64))
