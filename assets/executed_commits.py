"""executed_commits: kernel_commits rows run on a GPU (issue 35), from the batches shipped
in ``dagster_project/commit_exec/data/``; no GPU needed to build it."""

import dagster as dg

from dagster_project.execution import policy
from dagster_project.wiring import lineage
from dagster_project.wiring.resources import LakeResource
from dagster_project.wiring.table_metadata import materialize_result


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags=policy.lineage_tags("executed_commits"),
    group_name="kernel_commits",
    kinds={"cuda", "duckdb"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("executed_commits"),
    metadata=lineage.tables("executed_commits"),
    description="kernel_commits rows executed before/after on a GPU: per-row runs (status, "
    "equivalence, speedups with CIs, toolchain) and per-shape measurements.",
)
def executed_commits(lake: LakeResource) -> dg.MaterializeResult:
    """Ingest every shipped device batch into derived.commit_exec_runs / _shapes."""
    from dagster_project.commit_exec.tables import refresh_executed

    handle = lake.lake()
    meta = refresh_executed(handle)
    return materialize_result(handle, meta, version=("derived.commit_exec_runs",))
