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

from dagster_project.execution import policy
from dagster_project.rewards.measured import NO_GPU, refresh_measured
from dagster_project.wiring import lineage
from dagster_project.wiring.resources import LakeResource
from dagster_project.wiring.table_metadata import materialize_result

__all__ = ["NO_GPU", "measured_configs"]

GROUP = "measured"


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags=policy.lineage_tags("measured_configs"),
    group_name=GROUP,
    kinds={"cuda", "duckdb"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("measured_configs"),
    metadata=lineage.tables("measured_configs"),
    description="H200 tuned configs re-timed on a GPU with their own Triton kernels: partial "
    "latency table (tuned, default, neighbours), measured speedup vs default.",
)
def measured_configs(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Measure a batch where a GPU is present; always rebuild and export the dataset."""
    from dagster_project.publish.measured import DATASET, write_measured_card

    handle = lake.lake()
    settings = lake.settings()
    metadata = refresh_measured(handle, settings, context.log.info)
    prefix = settings.hub_repo_prefix
    write_measured_card(
        handle, settings.exports_dir / DATASET, f"{prefix}-{DATASET}" if prefix else None
    )
    return materialize_result(handle, metadata, version=("datasets.measured_configs",))
