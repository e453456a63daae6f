"""Dagster UI metadata for table assets: column schemas and per-expectation tables.

``table_schema(lake, "schema.table")`` gives ``dagster/column_schema`` (the Columns tab of
an asset in the UI), read from DuckDB's catalogue after the asset wrote the table, so it is
the schema users query, views over Parquet partitions included. Assets merge it into the
metadata they already return; a partitioned asset's ``dagster/row_count`` is the whole
table's rows and ``partition_rows`` the partition's own (``table_rows``).

``expectations_table(outcomes)`` turns a Great Expectations suite's results into a
``MetadataValue.table`` (one row per expectation: result, column, observed, expected),
which the UI renders as a table instead of raw JSON.

``materialize_result(lake, metadata, version=tables)`` is the one metadata helper of the
assets: the metadata a domain function assembled (plain values and the ``frames`` markers
``Markdown``, ``Json``, ``ColumnSchema``) as Dagster metadata, key order kept, with the
written tables' content fingerprint as the data version; ``check_result(outcome)`` the same for an
asset check's result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dagster as dg

from dagster_project.frames import CheckOutcome, ColumnSchema, Json, Markdown
from dagster_project.storage.columns import description
from dagster_project.storage.versions import table_version
from sql import load_sql

__all__ = [
    "asset_metadata",
    "check_result",
    "expectations_table",
    "materialize_result",
    "table_rows",
    "table_schema",
]


def table_schema(lake: Any, table: str) -> dict[str, Any]:
    """``{"dagster/column_schema": TableSchema}`` of ``schema.table`` (a table or a view);
    empty when the table does not exist (an asset that wrote nothing this time)."""
    schema, _, name = table.partition(".")
    with lake.connect(read_only=True) as con:
        rows = con.execute(load_sql("meta/table_columns"), [schema, name]).fetchall()
    if not rows:
        return {}
    columns = [
        dg.TableColumn(
            name=str(col),
            type=str(dtype),
            description=description(table, str(col)),
            constraints=dg.TableColumnConstraints(nullable=bool(nullable)),
        )
        for col, dtype, nullable in rows
    ]
    return {"dagster/column_schema": dg.TableSchema(columns=columns)}


def table_rows(lake: Any, table: str, partition_rows: int) -> dict[str, int]:
    """``dagster/row_count``: the rows of the whole partitioned ``table`` once this partition
    was written, which is what the UI shows as the asset's row count (it showed the last
    shard's 99 for kernelinfer_sessions where ``kernelhouse status`` counted 1,899);
    ``partition_rows``: the partition's own rows, which the build summary and ``status``
    add up over partitions. Every shard counts after writing its own file, so the shard
    that counts last counts every shard's rows."""
    from dagster_project.storage.lake import qualified

    schema, _, name = table.partition(".")
    if not lake.table_exists(schema, name):
        return {"partition_rows": partition_rows}
    df = lake.query(f"SELECT count(*) AS n FROM {qualified(schema, name)}")
    return {"dagster/row_count": int(df["n"][0]), "partition_rows": partition_rows}


def asset_metadata(lake: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """Dagster metadata from domain-assembled ``values``, in their order: ``Markdown`` →
    ``MetadataValue.md``, ``Json`` → ``MetadataValue.json``, ``ColumnSchema`` → the table's
    ``dagster/column_schema`` (its key is ignored), anything else as it is."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, ColumnSchema):
            out.update(table_schema(lake, value.table))
        elif isinstance(value, Markdown):
            out[key] = dg.MetadataValue.md(str(value))
        elif isinstance(value, Json):
            out[key] = dg.MetadataValue.json(value.value)
        else:
            out[key] = value
    return out


def materialize_result(
    lake: Any,
    values: Mapping[str, Any],
    *,
    version: Sequence[str] = (),
    data_version: str | None = None,
) -> dg.MaterializeResult:
    """The asset's result: ``asset_metadata(lake, values)`` and, as its data version,
    either the content fingerprint (``versions.table_version``) of the ``version`` tables
    or a ``data_version`` the domain computed (a pure generator's parameters)."""
    if bool(version) == (data_version is not None):
        raise ValueError("materialize_result: give exactly one of version= or data_version=")
    return dg.MaterializeResult(
        data_version=dg.DataVersion(data_version or table_version(lake, *version)),
        metadata=asset_metadata(lake, values),
    )


def check_result(outcome: CheckOutcome) -> dg.AssetCheckResult:
    """An asset check's result from a domain ``frames.CheckOutcome`` (``name``, ``passed``,
    ``metadata`` as for ``asset_metadata``)."""
    return dg.AssetCheckResult(
        check_name=outcome.name,
        passed=outcome.passed,
        metadata=asset_metadata(None, outcome.metadata),
    )


def _cell(value: Any, width: int = 120) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def expectations_table(outcomes: Iterable[Any]) -> dg.MetadataValue:
    """One row per expectation of a suite run (``quality.suites.ExpectationOutcome``)."""
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn("expectation", "string"),
            dg.TableColumn("column", "string"),
            dg.TableColumn("result", "string"),
            dg.TableColumn("unexpected", "int"),
            dg.TableColumn("observed", "string"),
            dg.TableColumn("expected", "string"),
        ]
    )
    records = [
        dg.TableRecord(
            {
                "expectation": o.type.removeprefix("expect_"),
                "column": o.column or "",
                "result": "pass" if o.success else "FAIL",
                "unexpected": int(o.unexpected_count or 0),
                "observed": _cell(o.observed),
                "expected": _cell(o.expected),
            }
        )
        for o in outcomes
    ]
    return dg.MetadataValue.table(records=records, schema=schema)
