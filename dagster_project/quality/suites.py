"""Great Expectations suites from ``expectations/*.json``, run against lake tables.

No dagster import: ``kernelhouse check``, the asset checks and tests all call
``run_suite``. Two kinds of expectation live in one suite file:

- column expectations (not-null, in-set, between, regex …) run on a pandas batch of the
  table, the GX path that needs no patching;
- ``unexpected_rows_expectation`` (cross-row / cross-table rules such as split
  disjointness) runs on DuckDB through GX's SQL datasource. GX has no DuckDB dialect:
  it must keep one connection per engine (as it does for sqlite) or every metric fails
  with "list index out of range"; ``_patch_gx_for_duckdb`` does that, which is why GX is
  pinned. The file is opened read-only and released afterwards, so the lake stays
  writable for the rest of the run.

GX is imported inside functions only: it costs ~3 s to import.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

SUITES_DIR = Path(__file__).resolve().parents[2] / "expectations"

SQL_EXPECTATION = "unexpected_rows_expectation"
NULL_ONLY_EXPECTATION = "expect_column_values_to_not_be_null"
SAMPLE_ROWS = 10


class SuiteError(ValueError):
    """A suite file is malformed; the message names the file."""


@dataclass
class ExpectationOutcome:
    type: str
    column: str | None
    description: str
    success: bool
    observed: Any = None
    expected: Any = None
    unexpected_count: int | None = None
    unexpected_percent: float | None = None
    sample: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class SuiteResult:
    suite: str
    asset: str
    table: str
    blocking: bool
    rows: int
    outcomes: list[ExpectationOutcome]
    seconds: float
    #: why the suite was not evaluated (an empty table whose emptiness the suite's
    #: ``not_evaluated_sql`` explains, e.g. "gains not extracted: 845 of 845 PR bodies
    #: unavailable"); None when it ran. Not a pass: nothing was checked.
    not_evaluated: str | None = None

    @property
    def success(self) -> bool:
        return all(o.success for o in self.outcomes)

    @property
    def failed(self) -> list[ExpectationOutcome]:
        return [o for o in self.outcomes if not o.success]

    def summary(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in asdict(o).items() if k != "sample"} for o in self.outcomes]


def suite_files(directory: Path | None = None) -> list[Path]:
    return sorted((directory or SUITES_DIR).glob("*.json"))


def load_suite(path: Path) -> dict[str, Any]:
    """Read and sanity-check one suite file (GX JSON plus a ``meta.kernelhouse`` block)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SuiteError(f"{path}: not readable JSON ({exc})") from exc
    kh = (data.get("meta") or {}).get("kernelhouse")
    if not isinstance(kh, dict) or "asset" not in kh or "table" not in kh:
        raise SuiteError(f"{path}: meta.kernelhouse needs 'asset' and 'table'")
    if not isinstance(data.get("expectations"), list) or not data["expectations"]:
        raise SuiteError(f"{path}: no expectations")
    data.setdefault("name", path.stem)
    for spec in data["expectations"]:
        _resolve_value_set(path, spec)
        _resolve_max_value(path, spec)
    return data


#: A suite's ``kwargs`` may name, instead of a literal ``value_set``, the Python sequence
#: that holds it (``"value_set_from": "dagster_project.<module>:<NAME>"``): a rule with
#: one home in code (the licence allow-list) is then not copied into JSON.
VALUE_SET_FROM = "value_set_from"


def _resolve_value_set(path: Path, spec: dict[str, Any]) -> None:
    """Replace ``value_set_from`` by ``value_set`` in place, keeping the key's position."""
    kwargs = spec.get("kwargs") or {}
    ref = kwargs.get(VALUE_SET_FROM)
    if ref is None:
        return
    module, _, name = str(ref).partition(":")
    if not module.startswith("dagster_project.") or not name:
        raise SuiteError(
            f"{path}: {VALUE_SET_FROM} {ref!r} must be 'dagster_project.<module>:<NAME>'"
        )
    try:
        values = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise SuiteError(f"{path}: {VALUE_SET_FROM} {ref!r} does not resolve ({exc})") from exc
    if "value_set" in kwargs:
        raise SuiteError(f"{path}: both value_set and {VALUE_SET_FROM} {ref!r}")
    spec["kwargs"] = {
        ("value_set" if k == VALUE_SET_FROM else k): (list(values) if k == VALUE_SET_FROM else v)
        for k, v in kwargs.items()
    }


#: Likewise ``"max_value_from": "dagster_project.<module>:<NAME>[<key>]"`` names the number
#: that bounds a column (issue 42: the audit's plausibility bound per scope bounds the
#: published speedup columns, with one home in ``gains/audit.py``).
MAX_VALUE_FROM = "max_value_from"
_REF = re.compile(r"(?P<module>dagster_project\.[\w.]+):(?P<name>\w+)(?:\[(?P<key>\w+)\])?")


def _resolve_max_value(path: Path, spec: dict[str, Any]) -> None:
    """Replace ``max_value_from`` by ``max_value`` in place (see :data:`MAX_VALUE_FROM`)."""
    kwargs = spec.get("kwargs") or {}
    ref = kwargs.get(MAX_VALUE_FROM)
    if ref is None:
        return
    match = _REF.fullmatch(str(ref))
    if match is None or "max_value" in kwargs:
        raise SuiteError(
            f"{path}: {MAX_VALUE_FROM} {ref!r} must be 'dagster_project.<module>:<NAME>[key]' "
            "and stand instead of max_value"
        )
    try:
        value = getattr(importlib.import_module(match["module"]), match["name"])
        value = value[match["key"]] if match["key"] else value
    except (ImportError, AttributeError, KeyError, TypeError) as exc:
        raise SuiteError(f"{path}: {MAX_VALUE_FROM} {ref!r} does not resolve ({exc})") from exc
    spec["kwargs"] = {
        ("max_value" if k == MAX_VALUE_FROM else k): (float(value) if k == MAX_VALUE_FROM else v)
        for k, v in kwargs.items()
    }


def gate_threshold(suite: str, check: str, key: str, directory: Path | None = None) -> float:
    """A pass/fail threshold of a check written in Python (not a GX expectation), read
    from ``meta.kernelhouse.thresholds.<check>.<key>`` of ``expectations/<suite>.json``.

    Every gate threshold lives in ``expectations/``: a GX expectation carries its own
    (``mostly``, ``min_value`` …), a Python check reads its numbers here, never from a
    literal. A missing or non-numeric key raises ``SuiteError`` naming the file.
    """
    path = (directory or SUITES_DIR) / f"{suite}.json"
    where = f"meta.kernelhouse.thresholds.{check}.{key}"
    try:
        value = load_suite(path)["meta"]["kernelhouse"]["thresholds"][check][key]
    except (KeyError, TypeError):
        raise SuiteError(f"{path}: {where} is missing (the threshold of check {check!r})") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SuiteError(f"{path}: {where} must be a number, not {value!r}")
    return float(value)


def _gx_context():  # noqa: ANN202
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    return ctx


def _patch_gx_for_duckdb() -> None:
    import great_expectations.execution_engine.sqlalchemy_execution_engine as see

    if not any(getattr(d, "value", d) == "duckdb" for d in see._PERSISTED_CONNECTION_DIALECTS):

        class _DuckDialect(str):
            value = "duckdb"

        duck = _DuckDialect("duckdb")
        # GX types the tuple as exactly its own four dialects; this adds a fifth.
        see._PERSISTED_CONNECTION_DIALECTS += (duck,)  # type: ignore[assignment]  # see above


def _expectation(spec: dict[str, Any]):  # noqa: ANN202
    """Build a GX expectation object from its JSON form (``type`` + ``kwargs``)."""
    import great_expectations.expectations as gxe

    name = "".join(part.title() for part in spec["type"].split("_"))
    cls = getattr(gxe, name, None)
    if cls is None:
        raise SuiteError(f"unknown expectation type {spec['type']!r}")
    kwargs = dict(spec.get("kwargs") or {})
    if spec.get("description"):
        kwargs["description"] = spec["description"]
    return cls(**kwargs)


def _clean(value: Any) -> Any:
    """JSON-safe observed values (NaN → None, numpy → python)."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value][:SAMPLE_ROWS]
    return value


def run_suite(
    suite: dict[str, Any], lake_path: Path, *, frame: pl.DataFrame | None = None
) -> SuiteResult:
    """Validate ``suite`` against its table in the lake (or against ``frame``)."""
    started = time.monotonic()
    kh = suite["meta"]["kernelhouse"]
    table: str = kh["table"]
    id_col: str | None = kh.get("id_column")
    col_specs = [e for e in suite["expectations"] if e["type"] != SQL_EXPECTATION]
    sql_specs = [e for e in suite["expectations"] if e["type"] == SQL_EXPECTATION]
    if frame is None:
        # Only the columns the column expectations name: datasets carry large text
        # columns (prompts, sources) that would cost seconds to hand to pandas.
        wanted = list(
            dict.fromkeys(
                [c for c in [id_col] if c]
                + [e["kwargs"]["column"] for e in col_specs if "column" in (e.get("kwargs") or {})]
            )
        )
        # A column whose every expectation asks only whether it is null (prompts, kernel
        # sources: 18,370 sources are ~1.9 GB once in pandas) travels as a null marker:
        # '' where the value is set, NULL where it is not. The verdict and the failing
        # rows' ids are the same; only a failing sample shows '' instead of the text.
        null_only = {
            c
            for c in wanted
            if c != id_col
            and all(
                e["type"] == NULL_ONLY_EXPECTATION
                for e in col_specs
                if (e.get("kwargs") or {}).get("column") == c
            )
        }
        cols = (
            ", ".join(
                (f"CASE WHEN {q} IS NULL THEN NULL ELSE '' END AS {q}" if c in null_only else q)
                for c in wanted
                for q in ['"' + c.replace('"', '""') + '"']
            )
            or "*"
        )
        with duckdb.connect(str(lake_path), read_only=True) as con:
            frame = con.sql(
                f"SELECT {cols} FROM {table}"
            ).pl()  # table name from our own suite file
    outcomes: list[ExpectationOutcome] = []
    if frame.height == 0 and kh.get("not_evaluated_sql"):
        with duckdb.connect(str(lake_path), read_only=True) as con:
            try:
                rows = (
                    con.sql(kh["not_evaluated_sql"]).limit(1).fetchall()
                )  # SQL from our own suite file
                got = rows[0] if rows else None
            except duckdb.Error:
                got = None
        if got and got[0]:
            return SuiteResult(
                suite=suite["name"],
                asset=kh["asset"],
                table=table,
                blocking=bool(kh.get("blocking", False)),
                rows=0,
                outcomes=[],
                seconds=time.monotonic() - started,
                not_evaluated=str(got[0]),
            )
    ctx = _gx_context()
    if col_specs:
        outcomes += _run_pandas(ctx, col_specs, frame, id_col)
    if sql_specs:
        outcomes += _run_sql(ctx, sql_specs, lake_path, table)
    return SuiteResult(
        suite=suite["name"],
        asset=kh["asset"],
        table=table,
        blocking=bool(kh.get("blocking", False)),
        rows=frame.height,
        outcomes=outcomes,
        seconds=time.monotonic() - started,
    )


def _run_pandas(ctx, specs, frame: pl.DataFrame, id_col: str | None) -> list[ExpectationOutcome]:  # noqa: ANN001
    # Nested/list columns are opaque to GX column expectations: pass them as JSON text.
    flat = (
        frame.with_columns(
            [
                pl.col(c).map_elements(lambda v: json.dumps(v, default=str), return_dtype=pl.String)
                for c, t in frame.schema.items()
                if isinstance(t, pl.List | pl.Struct | pl.Array)
            ]
        )
        if frame.height
        else frame
    )
    pdf = flat.to_pandas()
    batch = (
        ctx.data_sources.add_pandas("frame")
        .add_dataframe_asset("table")
        .add_batch_definition_whole_dataframe("all")
        .get_batch(batch_parameters={"dataframe": pdf})
    )
    result_format: dict[str, Any] = {"result_format": "COMPLETE"}
    if id_col and id_col in pdf.columns:
        result_format["unexpected_index_column_names"] = [id_col]
    outcomes = []
    for spec in specs:
        res = batch.validate(_expectation(spec), result_format=result_format)
        r = res.result or {}
        column = (spec.get("kwargs") or {}).get("column")
        sample: list[dict[str, Any]] = []
        if not res.success:
            idx = r.get("unexpected_index_list") or []
            if idx and isinstance(idx[0], dict):
                sample = [{k: _clean(v) for k, v in d.items()} for d in idx[:SAMPLE_ROWS]]
            else:
                sample = [
                    {"value": _clean(v)}
                    for v in (r.get("partial_unexpected_list") or [])[:SAMPLE_ROWS]
                ]
        outcomes.append(
            ExpectationOutcome(
                type=spec["type"],
                column=column,
                description=spec.get("description") or "",
                success=bool(res.success),
                observed=_clean(r.get("observed_value")),
                expected={k: v for k, v in (spec.get("kwargs") or {}).items() if k != "column"},
                unexpected_count=r.get("unexpected_count"),
                unexpected_percent=_clean(r.get("unexpected_percent")),
                sample=sample,
            )
        )
    return outcomes


def _run_sql(ctx, specs, lake_path: Path, table: str) -> list[ExpectationOutcome]:  # noqa: ANN001
    _patch_gx_for_duckdb()
    ds = ctx.data_sources.add_sql(
        "lake",
        connection_string=f"duckdb:///{lake_path.resolve()}",
        kwargs={"connect_args": {"read_only": True}},
    )
    outcomes = []
    try:
        batch = (
            ds.add_query_asset("table", query=f"SELECT * FROM {table}")
            .add_batch_definition_whole_table("all")
            .get_batch()
        )
        for spec in specs:
            res = batch.validate(_expectation(spec))
            observed = (res.result or {}).get("observed_value")
            outcomes.append(
                ExpectationOutcome(
                    type=spec["type"],
                    column=None,
                    description=spec.get("description") or "",
                    success=bool(res.success),
                    observed=_clean(observed),
                    expected="no rows",
                    unexpected_count=int(observed) if isinstance(observed, int | float) else None,
                )
            )
    finally:
        _release(ds)
    # Samples are read after GX let go of the file: DuckDB refuses a second connection
    # with another configuration while GX's engine still holds one.
    for spec, outcome in zip(specs, outcomes, strict=True):
        if not outcome.success:
            outcome.sample = _sample_sql(lake_path, spec, table)
    return outcomes


def _sample_sql(lake_path: Path, spec: dict[str, Any], table: str) -> list[dict[str, Any]]:
    query = spec["kwargs"]["unexpected_rows_query"].replace("{batch}", f"(SELECT * FROM {table})")
    with duckdb.connect(str(lake_path), read_only=True) as con:
        rows = con.sql(f"SELECT * FROM ({query}) LIMIT {SAMPLE_ROWS}").pl().to_dicts()
    return [{k: _clean(v) for k, v in r.items()} for r in rows]


def _release(ds) -> None:  # noqa: ANN001
    """Close GX's persisted DuckDB connection and dispose both engines, or the file stays
    opened read-only and the next writer in this process fails."""
    with contextlib.suppress(Exception):  # best-effort cleanup
        ee = ds.get_execution_engine()
        conn = getattr(ee, "_connection", None)
        if conn is not None:
            conn.close()
        ee.engine.dispose()
    with contextlib.suppress(Exception):
        ds.get_engine().dispose()
