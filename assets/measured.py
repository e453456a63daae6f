"""measured layer: tuned configs re-timed on a real GPU (the execution reward's data).

On a machine with a CUDA GPU the asset measures one budgeted batch of not-yet-measured
H200 rows in-process (their own Triton kernels, tuned config vs the repo's default vs
the tuned config's neighbours) and ingests it. Everywhere else it says so and rebuilds
``datasets.measured_configs`` from whatever ``raw.measured_configs`` holds, which is
where results measured on a lent GPU machine arrive (``kernelhouse gpu ingest``).
Every build first ingests the batches shipped with the package
(``dagster_project/data/measured/<gpu>/batch-NNN.parquet``), so a fresh machine without a
GPU has every row the project measured.
"""

import dagster as dg
import polars as pl

from dagster_project.execution import policy
from dagster_project.frames import md_table
from dagster_project.resources import LakeResource
from dagster_project.table_metadata import table_schema
from dagster_project.versions import table_version

GROUP = "measured"
NO_GPU = ("skipped: no CUDA GPU here; ingest device results with `kernelhouse gpu ingest` "
          "(see benchmarks/gpu_measure_configs.sh)")


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    group_name=GROUP, kinds={"cuda", "duckdb"}, owners=["team:kernelhouse"],
    deps=[dg.AssetKey("tuned_configs")], metadata={"table": "datasets.measured_configs"},
    description="H200 tuned configs re-timed on a GPU with their own Triton kernels: partial "
                "latency table (tuned, default, neighbours), measured speedup vs default.",
)
def measured_configs(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Measure a batch where a GPU is present; always rebuild and export the dataset."""
    from dagster_project.rewards.measured import (
        build_measured_dataset,
        cuda_available,
        export_measured,
        ingest_shipped,
        run_local_batch,
        shipped_batches,
        status_frame,
    )

    handle = lake.lake()
    settings = lake.settings()
    shipped = shipped_batches()
    ingest_shipped(handle)
    run_meta: dict = {"shipped_batches": len(shipped)}
    gpu = settings.gpu
    if gpu.disabled:
        context.log.info("KERNELHOUSE_GPU_DISABLE=1: not measuring on this machine's GPU")
        run_meta["gpu_batch"] = "disabled by KERNELHOUSE_GPU_DISABLE"
    elif cuda_available():
        run = run_local_batch(handle, settings.home / "gpu", rows=gpu.rows,
                              budget_s=gpu.budget_s, workers=gpu.workers)
        if run is None:
            context.log.info("every measurable H200 row is measured already")
            run_meta["gpu_batch"] = "nothing left to measure"
        else:
            context.log.info(f"measured {run.measured} candidates of {run.rows} rows "
                             f"({run.batch.name}); budget stop: {run.stopped_by_budget}")
            run_meta["gpu_batch"] = dg.MetadataValue.json({
                "batch": run.batch.name, "rows": run.rows, "measured": run.measured,
                "stopped_by_budget": run.stopped_by_budget, "context_lost": run.context_lost,
                "precompile": run.precompile})
    else:
        context.log.info(NO_GPU)
        run_meta["gpu_batch"] = NO_GPU
    rows = build_measured_dataset(handle)
    path = export_measured(handle, settings.exports_dir / "measured_configs")
    ds = handle.read_table("datasets", "measured_configs")
    status = status_frame(handle)
    timed = ds.filter(pl.col("t_tuned_us").is_not_null())
    return dg.MaterializeResult(data_version=dg.DataVersion(table_version(handle, "datasets.measured_configs")), metadata={
        "dagster/row_count": rows,
        **table_schema(lake.lake(), "datasets.measured_configs"),
        **run_meta,
        "rows_with_tuned_time": timed.height,
        "median_measured_speedup_vs_default": float(timed["measured_speedup_vs_default"]
                                                    .drop_nulls().median() or 0.0)
        if timed.height else 0.0,
        "tuned_still_best_share": round(float(timed["tuned_is_best"].mean() or 0.0), 4)
        if timed.height else 0.0,
        # within each row's own noise (the larger replay spread of the two timings)
        "tuned_within_noise_of_best_share": round(float(
            timed["tuned_within_noise_of_best"].cast(pl.Float64).mean() or 0.0), 4)
        if timed.height else 0.0,
        "default_faster_beyond_noise_share": round(float(
            timed["default_faster_beyond_noise"].cast(pl.Float64).mean() or 0.0), 4)
        if timed.height else 0.0,
        "export": str(path),
        "by_kernel": dg.MetadataValue.md(md_table(status, n=20)) if status.height else "",
        "preview": dg.MetadataValue.md(md_table(ds.select(
            "kernel", "repo", "quant", "M", "t_tuned_us", "t_default_us",
            "measured_speedup_vs_default", "best_label"))),
    })
