"""Simulator calibration: kernels measured on a real H200 beside the simulator's predictions.

The measurements are ours, committed with the simulator
(``dagster_project/sim/data/calibration/h200_measured.csv``, written by
``benchmarks/gpu_calibrate.py``); this asset recomputes the predictions with the packaged
efficiency tables and with the pre-calibration baseline, so the lake always shows how far
the current simulator is from the hardware and what calibration bought. ``code_version``
is the generator version: new tables or new measurements come with a version bump.

The headline is out of sample: ``leave_one_group_out`` refits the shipped (per-rung,
card-safe) fit from the pre-calibration table without each (op, shape) in turn and scores
each group with the fit that never saw it (``sim.calibration_holdout``); the in-sample
figures (the shipped tables on the points they were fitted to) stand beside it.
"""

import dagster as dg
import polars as pl

from dagster_project.execution import policy
from dagster_project.resources import LakeResource
from dagster_project.sim import GENERATOR_VERSION
from dagster_project.table_metadata import table_schema
from dagster_project.versions import table_version

_SCRIPT = "benchmarks/gpu_calibrate.py"


@dg.asset(
    automation_condition=policy.on_missing_or_new_code(),
    tags={policy.CODE_VERSION_TAG: policy.SIM_PARAMS},
    group_name="simulated",
    kinds={"python", "duckdb"},
    owners=["team:kernelhouse"],
    code_version=GENERATOR_VERSION,
    metadata={"tables": "sim.calibration, sim.calibration_summary, sim.calibration_holdout"},
    description=(
        "Kernels measured on an H200 (the simulator's own CUDA/Triton templates and PyTorch "
        "references) beside the simulator's predicted times, before and after calibration."
    ),
)
def sim_calibration(lake: LakeResource) -> dg.MaterializeResult:
    """Write one row per measured point and the error metrics per scope."""
    from dagster_project.sim.calibration import (
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

    measured = read_measured()
    before = load_table(baseline_table_path())
    rows = comparison_rows(measured, table=None, before=before)
    by_id = {(m.point.point_id): m for m in measured}
    for r, m in zip(rows, measured, strict=True):
        r["params"] = m.point.params_json
        r["source_script"] = _SCRIPT
        r["measured_at"] = m.row.get("measured_at", "")
        r["device"] = m.row.get("device", "")
        r["generator_version"] = GENERATOR_VERSION
    schema = {
        "measured_ms": pl.Float64,
        "spread_pct": pl.Float64,
        "predicted_ms": pl.Float64,
        "predicted_before_ms": pl.Float64,
        "ratio": pl.Float64,
        "ratio_before": pl.Float64,
    }
    points = pl.DataFrame(rows, schema_overrides=schema, infer_schema_length=None)
    summary = pl.DataFrame(
        summary_rows(measured, table=None, before=before), infer_schema_length=None
    )
    handle = lake.lake()
    handle.replace_table("sim", "calibration", points)
    handle.replace_table("sim", "calibration_summary", summary)
    loo = leave_one_group_out(measured, tie="rung", base=before)
    handle.replace_table("sim", "calibration_holdout",
                         pl.DataFrame(holdout_rows([loo]), infer_schema_length=None))
    ho = loo.held_out

    b = error_metrics(pairs_for(measured, before))
    a = error_metrics(pairs_for(measured))
    status = points.group_by("status").len().sort("status").to_dicts()
    return dg.MaterializeResult(
        data_version=dg.DataVersion(table_version(handle, "sim.calibration", "sim.calibration_summary")),
        metadata={
            "dagster/row_count": points.height,
            "held_out_median_abs_log_err": round(ho.median_abs_log_err, 4),
            f"held_out_share_within_{GOAL_RATIO}x": round(ho.share_within, 4),
            "held_out_spearman_by_op": dg.MetadataValue.json(
                {k: round(v, 3) for k, v in ho.spearman_by_op.items()}),
            "held_out_how": "leave one (op, shape) out: refit from the baseline table, "
                            "predict the held-out group",
            "free_parameters": loo.free_parameters,
            **table_schema(lake.lake(), "sim.calibration"),
            "points_ok": a.n,
            "unique_points": len(by_id),
            "status_counts": dg.MetadataValue.json({d["status"]: d["len"] for d in status}),
            "median_abs_log_err_before": round(b.median_abs_log_err, 4),
            "median_abs_log_err_after": round(a.median_abs_log_err, 4),
            f"share_within_{GOAL_RATIO}x_before": round(b.share_within, 4),
            f"share_within_{GOAL_RATIO}x_after": round(a.share_within, 4),
            "spearman_by_op_before": dg.MetadataValue.json(
                {k: round(v, 3) for k, v in b.spearman_by_op.items()}
            ),
            "spearman_by_op_after": dg.MetadataValue.json(
                {k: round(v, 3) for k, v in a.spearman_by_op.items()}
            ),
            "goal": f"within {GOAL_RATIO}x for every point, Spearman >= {GOAL_SPEARMAN} per op",
            "metrics": dg.MetadataValue.md(metrics_markdown(b, a)),
            "generator_version": GENERATOR_VERSION,
        }
    )
