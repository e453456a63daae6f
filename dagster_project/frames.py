"""Small helpers over polars frames shared by assets and reports (no dagster import)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl


def md_table(df: pl.DataFrame, n: int = 5, width: int = 60) -> str:
    """A Markdown preview of the first ``n`` rows (cells cut to ``width`` chars), for
    asset metadata. The table itself is ``tabulate``'s GitHub format (a dependency of
    Dagster already); only the cell clean-up is ours: pipes escaped, newlines flattened,
    long values cut, so a kernel source cannot break the table."""
    from tabulate import tabulate

    head = df.head(n)

    def cell(v: object) -> str:
        s = "" if v is None else str(v)
        s = s.replace("|", "\\|").replace("\n", " ")
        return s if len(s) <= width else s[: width - 1] + "…"

    rows = [[cell(v) for v in row] for row in head.iter_rows()]
    return tabulate(rows, headers=head.columns, tablefmt="github", disable_numparse=True)


def series_mean(series: pl.Series) -> float:
    """Mean of a numeric series as a float, 0.0 for an empty or all-null one (what the UI
    shows for a shard with nothing to average). polars types ``Series.mean`` as any
    Python literal, so the numeric case is narrowed here once."""
    value = series.mean() if series.len() else None
    return float(value) if isinstance(value, int | float) else 0.0


# Asset metadata values, marked in domain code (which never imports dagster) and turned into
# Dagster's metadata values by ``table_metadata.asset_metadata``.


class Markdown(str):
    """Text the UI renders as Markdown (``MetadataValue.md``)."""


@dataclass(frozen=True)
class Json:
    """A value the UI shows as JSON (``MetadataValue.json``)."""

    value: Any


@dataclass(frozen=True)
class ColumnSchema:
    """Stands for ``dagster/column_schema`` of ``table`` (``schema.table``), read from the
    lake after the asset wrote it; at its place in the metadata, nothing if no such table."""

    table: str


@dataclass(frozen=True)
class CheckOutcome:
    """An asset check's result as domain code states it: the check's ``name``, whether it
    ``passed`` and its ``metadata`` (plain values and the markers above), turned into a
    Dagster ``AssetCheckResult`` by ``table_metadata.check_result``."""

    name: str
    passed: bool
    metadata: dict[str, Any]
