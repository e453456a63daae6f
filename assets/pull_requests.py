"""pull_requests layer: PR titles and bodies from GitHub, cached in raw.pr_bodies."""

import dagster as dg
import polars as pl

from dagster_project.execution import policy
from dagster_project.storage.versions import table_version
from dagster_project.wiring.resources import GitHubResource, LakeResource
from dagster_project.wiring.table_metadata import table_schema


@dg.asset(
    automation_condition=policy.daily(),
    tags=policy.observer(policy.GITHUB),
    group_name="pull_requests",
    kinds={"github", "duckdb"},
    owners=["team:kernelhouse"],
    deps=[dg.AssetKey("config_attribution"), dg.AssetKey("kernel_commit_files")],
    metadata={"table": "raw.pr_bodies"},
    description=(
        "Bodies of every PR referenced by kernel_commits and tuned-config attribution (only "
        "missing/stale fetched)."
    ),
)
def pr_bodies(
    context: dg.AssetExecutionContext, lake: LakeResource, github: GitHubResource
) -> dg.MaterializeResult:
    """Fetch missing or stale PRs with PyGithub; without network, keep the cache."""
    from dagster_project.gains.pipeline import pr_numbers_needed
    from dagster_project.github.sync import api_reachable, sync_pr_bodies
    from dagster_project.settings import GITHUB_SLUGS

    handle = lake.lake()
    # Only the PR columns: kernel_commit_files also holds every file's code and diff.
    needed = pr_numbers_needed(
        *(
            handle.query(f"SELECT DISTINCT repo, pr_number FROM {table}")
            if handle.table_exists(*table.split("."))
            else None
            for table in ("derived.config_attribution", "raw.kernel_commit_files")
        )
    )
    offline = not api_reachable(github.base_url())
    if offline:
        context.log.warning("GitHub API unreachable: materialising from the cached PR bodies only")

    def progress(ev) -> None:  # noqa: ANN001
        if ev.event in ("rate_limited", "retrying"):
            context.log.info(
                f"PR #{ev.number}: {ev.event}, waiting {ev.wait_s:.0f}s ({ev.done}/{ev.total})"
            )
        elif ev.done and ev.done % 50 == 0:
            context.log.info(f"PR bodies: {ev.done}/{ev.total}")

    counters = sync_pr_bodies(
        handle,
        needed,
        GITHUB_SLUGS,
        token=github.token(),
        base_url=github.base_url(),
        offline=offline,
        on_progress=progress,
    )
    if handle.table_exists("raw", "pr_bodies"):
        n = handle.query("SELECT count(*) AS n FROM raw.pr_bodies")["n"][0]
    else:
        from dagster_project.github.sync import BODIES_SCHEMA

        handle.replace_table("raw", "pr_bodies", pl.DataFrame(schema=BODIES_SCHEMA))
        n = 0
    # Fetch times and ETags are bookkeeping: only content changes are new data.
    version = table_version(
        handle, "raw.pr_bodies", columns=("pr_key", "title", "body", "state", "merged_at", "status")
    )
    return dg.MaterializeResult(
        data_version=dg.DataVersion(version),
        metadata={
            "dagster/row_count": int(n),
            **table_schema(lake.lake(), "raw.pr_bodies"),
            "offline": offline,
            **{k: int(v) for k, v in counters.items()},
        },
    )
