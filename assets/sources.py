"""Sources layer: the three engine repositories as blobless clones under ``repos/``."""

import dagster as dg

from dagster_project.execution import policy
from dagster_project.wiring import lineage
from dagster_project.wiring.partitions import repo_partitions
from dagster_project.wiring.resources import LakeResource
from dagster_project.wiring.table_metadata import materialize_result


@dg.asset(
    # No automation_condition: the daily schedule fetches the repositories.
    tags=policy.observer(policy.GIT),
    group_name="sources",
    partitions_def=repo_partitions,
    kinds={"git", "duckdb"},
    owners=["team:kernelhouse"],
    metadata={"schema": "raw", **lineage.tables("repo_clone")},
    description="Blobless clone (first run) or git fetch of one engine repository.",
)
def repo_clone(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Clone or fetch ``KERNELHOUSE_<REPO>_SOURCE`` and record its head in raw.repo_heads."""
    from dagster_project.mining.repos import SourceUnreachable, refresh_repo

    handle = lake.lake()
    try:
        head, metadata = refresh_repo(handle, lake.settings(), context.partition_key)
    except SourceUnreachable as exc:
        raise dg.Failure(description=str(exc)) from exc
    return materialize_result(handle, metadata, data_version=head)
