"""sim_calibration: measured points and predictions land in sim.calibration(_summary)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from assets.calibration import sim_calibration
from dagster_project.sim.calibration import read_measured
from dagster_project.storage.lake import Lake
from dagster_project.wiring.resources import LakeResource


def test_sim_calibration_writes_points_and_summary(kh_home: Path) -> None:
    res = dg.materialize([sim_calibration], resources={"lake": LakeResource(home=str(kh_home))})
    assert res.success
    lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))
    points = lake.read_table("sim", "calibration")
    assert points.height == len(read_measured())
    for col in (
        "op",
        "shape",
        "variant",
        "gpu",
        "measured_ms",
        "predicted_ms",
        "ratio",
        "predicted_before_ms",
        "source_script",
        "measured_at",
    ):
        assert col in points.columns
    ok = points.filter(points["status"] == "ok")
    assert ok.height > 150 and (ok["ratio"] > 0).all() and set(ok["gpu"]) == {"h200"}
    summary = lake.read_table("sim", "calibration_summary")
    row = summary.filter(summary["scope"] == "all").to_dicts()[0]
    assert row["median_abs_log_err_after"] < row["median_abs_log_err_before"]
    md = res.asset_materializations_for_node("sim_calibration")[0].metadata
    assert "median abs log error" in md["metrics"].value
    assert md["dagster/row_count"].value == points.height
    # out of sample is the headline, and it is worse than in sample (it must be: every
    # group is scored by a fit that never saw it)
    holdout = lake.read_table("sim", "calibration_holdout")
    head = holdout.filter(holdout["scope"] == "all").to_dicts()[0]
    assert head["points"] == ok.height
    assert head["held_out_median_abs_log_err"] > head["in_sample_median_abs_log_err"]
    assert md["held_out_median_abs_log_err"].value == round(head["held_out_median_abs_log_err"], 4)
    assert set(md["held_out_spearman_by_op"].value) == set(ok["op"])
