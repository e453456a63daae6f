"""Sources layer: the three engine repositories as blobless clones under ``repos/``."""

import time

import dagster as dg
import polars as pl

from dagster_project.execution import policy
from dagster_project.mining.git import GitError, clone_or_fetch
from dagster_project.settings import DEFAULT_SOURCES, validate_sources
from dagster_project.wiring.partitions import repo_partitions
from dagster_project.wiring.resources import LakeResource
from dagster_project.wiring.table_metadata import table_schema


@dg.asset(
    # No automation_condition: the daily schedule fetches the repositories.
    tags=policy.observer(policy.GIT),
    group_name="sources",
    partitions_def=repo_partitions,
    kinds={"git", "duckdb"},
    owners=["team:kernelhouse"],
    metadata={"schema": "raw", "table": "raw.repo_heads"},
    description="Blobless clone (first run) or git fetch of one engine repository.",
)
def repo_clone(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Clone or fetch ``KERNELHOUSE_<REPO>_SOURCE`` and record its head in raw.repo_heads."""
    repo = context.partition_key
    settings = lake.settings()
    validate_sources(settings, (repo,))
    source = settings.sources[repo]
    try:
        res = clone_or_fetch(source, settings.repo_dir(repo), ref=settings.refs[repo])
    except GitError as exc:
        raise dg.Failure(
            description=(
                f"{settings.env_name(repo)}={source!r} could not be reached: {exc}. "
                f"Without network, point {settings.env_name(repo)} at a local clone "
                f"(a path or file:// URL); default is {DEFAULT_SOURCES[repo]}."
            )
        ) from exc
    row = pl.DataFrame(
        {
            "repo": [repo],
            "source": [source],
            "ref": [settings.refs[repo] or "HEAD"],
            "head_sha": [res.head_sha],
            "head_date": [res.head_date],
            "commit_count": [res.commit_count],
            "partial_clone": [res.partial],
            "action": [res.action],
            "fetched_at": [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(res.fetched_at))],
        }
    )
    lake.lake().replace_rows("raw", "repo_heads", row, "repo", [repo])
    return dg.MaterializeResult(
        metadata={
            "head_sha": res.head_sha,
            "head_date": res.head_date,
            "commit_count": res.commit_count,
            "action": res.action,
            "seconds": round(res.seconds, 2),
            "dagster/row_count": 1,
            **table_schema(lake.lake(), "raw.repo_heads"),
        },
        data_version=dg.DataVersion(res.head_sha),
    )
