"""Running the named publish queries (``sql/publish/*.sql``) on an open connection.

Results come back as plain dicts: statistics feed a card, ``stats.json`` and the
``ExportReport``, none of which want a DataFrame. A query over a table that is not built
yet becomes an ``ExportError`` naming the query, instead of a bare DuckDB catalog error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import duckdb

from sql import load_sql

from .report import ExportError


def publish_sql(name: str) -> str:
    """Text of ``sql/publish/<name>.sql``."""
    return load_sql(f"publish/{name}")


def relation(
    con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, Any] | None = None
) -> duckdb.DuckDBPyRelation:
    """The relation of a named query, with its parameters bound."""
    try:
        rel = con.sql(publish_sql(name), params=dict(params) if params else None)
    except (duckdb.CatalogException, duckdb.BinderException) as exc:
        first = str(exc).splitlines()[0]
        raise ExportError(
            f"publish query {name!r} cannot run ({first}); build its tables first"
        ) from exc
    if rel is None:  # only statements without results return None
        raise ExportError(f"publish query {name!r} returned no result set")
    return rel


def records(
    con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """All rows of a named query as dicts (for small aggregate results only)."""
    rel = relation(con, name, params)
    columns = rel.columns
    return [dict(zip(columns, row, strict=True)) for row in rel.fetchall()]


def record(
    con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The single row of a one-row summary query."""
    rows = records(con, name, params)
    if len(rows) != 1:
        raise ExportError(f"publish query {name!r} returned {len(rows)} rows, expected 1")
    return rows[0]
