"""Analysis views (``sql/analysis/*.sql`` → schema ``analysis``), no dagster import.

DuckDB binds a view when it is created, so a view over a table that is not built yet
cannot exist; ``create_views`` creates what it can and reports the rest, and is re-run
after every dataset build.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from dagster_project.storage.lake import Lake, qualified
from sql import analysis_views


@dataclass
class ViewReport:
    created: list[str]
    skipped: dict[str, str]


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
                    skipped[name] = str(exc).splitlines()[0]
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
