"""Simulator calibration: kernels measured on a real H200 beside the simulator's predictions.

The measurements are ours, committed with the simulator
(``dagster_project/sim/data/calibration/h200_measured.csv``, written by
``benchmarks/device/gpu_calibrate.py``); this asset recomputes the predictions with the packaged
efficiency tables and with the pre-calibration baseline, so the lake always shows how far
the current simulator is from the hardware and what calibration bought. ``code_version``
is the generator version: new tables or new measurements come with a version bump.

The headline is out of sample: ``leave_one_group_out`` refits the shipped (per-rung,
card-safe) fit from the pre-calibration table without each (op, shape) in turn and scores
each group with the fit that never saw it (``sim.calibration_holdout``); the in-sample
figures (the shipped tables on the points they were fitted to) stand beside it.
"""

import dagster as dg

from dagster_project.execution import policy
from dagster_project.sim import GENERATOR_VERSION
from dagster_project.wiring import lineage
from dagster_project.wiring.resources import LakeResource
from dagster_project.wiring.table_metadata import materialize_result


@dg.asset(
    automation_condition=policy.on_missing_or_new_code(),
    tags={policy.CODE_VERSION_TAG: policy.SIM_PARAMS},
    group_name="simulated",
    kinds={"python", "duckdb"},
    owners=["team:kernelhouse"],
    code_version=GENERATOR_VERSION,
    metadata=lineage.tables("sim_calibration"),
    description=(
        "Kernels measured on an H200 (the simulator's own CUDA/Triton templates and PyTorch "
        "references) beside the simulator's predicted times, before and after calibration."
    ),
)
def sim_calibration(lake: LakeResource) -> dg.MaterializeResult:
    """Write one row per measured point and the error metrics per scope."""
    from dagster_project.sim.calibration_tables import calibration_tables

    tables = calibration_tables(GENERATOR_VERSION)
    handle = lake.lake()
    handle.replace_table("sim", "calibration", tables.points)
    handle.replace_table("sim", "calibration_summary", tables.summary)
    handle.replace_table("sim", "calibration_holdout", tables.holdout)
    return materialize_result(
        handle, tables.metadata, version=("sim.calibration", "sim.calibration_summary")
    )
