"""Column descriptions (issue 34): one source (``storage/columns.py``) for every table users
query, shown by the UI. The whole-build test
(``tests/unit/execution/test_build_row_hashes.py``) holds the entries to the built lake's
columns; these hold the list of relations without a build."""

from __future__ import annotations

import dagster as dg

from dagster_project.storage import lineage
from dagster_project.storage.columns import COLUMNS, columns_markdown, description
from sql import analysis_views


def _published() -> set[str]:
    datasets = {
        t for acc in lineage.ASSETS.values() for t in acc.writes if t.startswith("datasets.")
    }
    return datasets | {f"analysis.{name}" for name, _ in analysis_views()}


def test_every_published_relation_has_descriptions_and_no_other() -> None:
    assert set(COLUMNS) == _published()


def test_every_description_says_something() -> None:
    empty = [(t, c) for t, cols in COLUMNS.items() for c, d in cols.items() if len(d) < 4]
    assert empty == []


def test_the_analysis_asset_table_lists_every_column() -> None:
    md = columns_markdown(["analysis.measured_speedup_by_kernel"])
    assert all(f"`{c}`" in md for c in COLUMNS["analysis.measured_speedup_by_kernel"])
    assert description("datasets.measured_configs", "no_such_column") is None


def test_a_real_lake_table_shows_its_descriptions(tmp_path) -> None:  # noqa: ANN001
    import polars as pl

    from dagster_project.storage.lake import Lake
    from dagster_project.wiring.table_metadata import table_schema

    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))
    cols = list(COLUMNS["datasets.measured_configs"])[:5]
    lake.replace_table("datasets", "measured_configs", pl.DataFrame({c: [1] for c in cols}))
    schema = table_schema(lake, "datasets.measured_configs")["dagster/column_schema"]
    assert isinstance(schema, dg.TableSchema)
    assert [(c.name, c.description) for c in schema.columns] == [
        (c, COLUMNS["datasets.measured_configs"][c]) for c in cols
    ]
