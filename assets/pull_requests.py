"""pull_requests layer: PR titles and bodies from GitHub, cached in raw.pr_bodies."""

import dagster as dg

from dagster_project.execution import policy
from dagster_project.wiring import lineage
from dagster_project.wiring.resources import GitHubResource, LakeResource
from dagster_project.wiring.table_metadata import materialize_result


@dg.asset(
    automation_condition=policy.daily(),
    tags=policy.observer(policy.GITHUB),
    group_name="pull_requests",
    kinds={"github", "duckdb"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("pr_bodies"),
    metadata=lineage.tables("pr_bodies"),
    description=(
        "Bodies of every PR referenced by kernel_commits and tuned-config attribution (only "
        "missing/stale fetched)."
    ),
)
def pr_bodies(
    context: dg.AssetExecutionContext, lake: LakeResource, github: GitHubResource
) -> dg.MaterializeResult:
    """Fetch missing or stale PRs with PyGithub; without network, keep the cache."""
    from dagster_project.github.sync import refresh_pr_bodies

    handle = lake.lake()
    version, metadata = refresh_pr_bodies(
        handle,
        token=github.token(),
        base_url=github.base_url(),
        log=context.log.info,
        warn=context.log.warning,
    )
    return materialize_result(handle, metadata, data_version=version)
