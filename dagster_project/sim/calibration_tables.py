"""The ``sim_calibration`` asset's tables and metadata, from the shipped H200 measurements.

``calibration_tables`` recomputes the predictions (packaged efficiency tables, and the
pre-calibration baseline), runs the leave-one-(op, shape)-out refit, and returns the three
frames (``sim.calibration``, ``sim.calibration_summary``, ``sim.calibration_holdout``)
with the asset's metadata (plain values and ``frames`` markers; no dagster import).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from dagster_project.frames import ColumnSchema, Json, Markdown

from .calibration import (
    GOAL_RATIO,
    GOAL_SPEARMAN,
    baseline_table_path,
    comparison_rows,
    error_metrics,
    holdout_rows,
    leave_one_group_out,
    load_table,
    metrics_markdown,
    pairs_for,
    read_measured,
    summary_rows,
)

#: The script that measured the points (``source_script`` of every row).
SOURCE_SCRIPT = "benchmarks/device/gpu_calibrate.py"

_POINT_SCHEMA = {
    "measured_ms": pl.Float64,
    "spread_pct": pl.Float64,
    "predicted_ms": pl.Float64,
    "predicted_before_ms": pl.Float64,
    "ratio": pl.Float64,
    "ratio_before": pl.Float64,
}


@dataclass(frozen=True)
class CalibrationTables:
    points: pl.DataFrame
    summary: pl.DataFrame
    holdout: pl.DataFrame
    metadata: dict[str, Any]


def _rounded(by_op: Mapping[str, float]) -> Json:
    return Json({k: round(v, 3) for k, v in by_op.items()})


def calibration_tables(generator_version: str) -> CalibrationTables:
    """One row per measured point, error metrics per scope, the held-out errors, and the
    metadata the UI shows (out of sample first)."""
    measured = read_measured()
    before = load_table(baseline_table_path())
    rows = comparison_rows(measured, table=None, before=before)
    for r, m in zip(rows, measured, strict=True):
        r["params"] = m.point.params_json
        r["source_script"] = SOURCE_SCRIPT
        r["measured_at"] = m.row.get("measured_at", "")
        r["device"] = m.row.get("device", "")
        r["generator_version"] = generator_version
    points = pl.DataFrame(rows, schema_overrides=_POINT_SCHEMA, infer_schema_length=None)
    summary = pl.DataFrame(
        summary_rows(measured, table=None, before=before), infer_schema_length=None
    )
    loo = leave_one_group_out(measured, tie="rung", base=before)
    holdout = pl.DataFrame(holdout_rows([loo]), infer_schema_length=None)
    ho = loo.held_out
    b = error_metrics(pairs_for(measured, before))
    a = error_metrics(pairs_for(measured))
    status = points.group_by("status").len().sort("status").to_dicts()
    metadata: dict[str, Any] = {
        "dagster/row_count": points.height,
        "held_out_median_abs_log_err": round(ho.median_abs_log_err, 4),
        f"held_out_share_within_{GOAL_RATIO}x": round(ho.share_within, 4),
        "held_out_spearman_by_op": _rounded(ho.spearman_by_op),
        "held_out_how": "leave one (op, shape) out: refit from the baseline table, "
        "predict the held-out group",
        "free_parameters": loo.free_parameters,
        "dagster/column_schema": ColumnSchema("sim.calibration"),
        "points_ok": a.n,
        "unique_points": len({m.point.point_id for m in measured}),
        "status_counts": Json({d["status"]: d["len"] for d in status}),
        "median_abs_log_err_before": round(b.median_abs_log_err, 4),
        "median_abs_log_err_after": round(a.median_abs_log_err, 4),
        f"share_within_{GOAL_RATIO}x_before": round(b.share_within, 4),
        f"share_within_{GOAL_RATIO}x_after": round(a.share_within, 4),
        "spearman_by_op_before": _rounded(b.spearman_by_op),
        "spearman_by_op_after": _rounded(a.spearman_by_op),
        "goal": f"within {GOAL_RATIO}x for every point, Spearman >= {GOAL_SPEARMAN} per op",
        "metrics": Markdown(metrics_markdown(b, a)),
        "generator_version": generator_version,
    }
    return CalibrationTables(points, summary, holdout, metadata)
