"""kernel_commits layer: real perf commits of vLLM, SGLang and FlashInfer as
optimise-this-file tasks, mined incrementally per repo."""

import dagster as dg

from dagster_project.execution import policy
from dagster_project.mining.versions import asset_code_version
from dagster_project.quality.suites import gate_threshold
from dagster_project.storage.versions import table_version
from dagster_project.wiring import lineage
from dagster_project.wiring.partitions import repo_partitions
from dagster_project.wiring.resources import LakeResource
from dagster_project.wiring.table_metadata import check_result, materialize_result, table_schema

GROUP = "kernel_commits"

#: The oracle gate's thresholds, from expectations/kernel_commits.json
#: (meta.kernelhouse.thresholds.oracle_patch_reward): the share of rows whose reference
#: edit must score 1.0, and the score below which a row is listed as low.
ORACLE_MIN_SHARE_PERFECT = gate_threshold(
    "kernel_commits", "oracle_patch_reward", "min_share_perfect"
)
ORACLE_LOW_SCORE = gate_threshold("kernel_commits", "oracle_patch_reward", "low_score")


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags={policy.CODE_VERSION_TAG: policy.MINING_RULES},
    code_version=asset_code_version("perf_commits"),
    group_name=GROUP,
    kinds={"git", "duckdb"},
    owners=["team:kernelhouse"],
    partitions_def=repo_partitions,
    deps=lineage.deps("perf_commits"),
    metadata=lineage.tables("perf_commits"),
    description=(
        "Non-merge commits touching kernel paths whose title carries a perf signal "
        "(watermark..head only)."
    ),
)
def perf_commits(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Mine new perf commits since the repo's watermark; no-op when the head is unchanged."""
    from dagster_project.mining.commits import DEFAULT_SPECS
    from dagster_project.mining.commits.lake_sync import refresh_perf_commits

    repo = context.partition_key
    git, head = lake.repo_snapshot(repo)
    handle = lake.lake()
    counters = refresh_perf_commits(
        handle, git, DEFAULT_SPECS[repo], repo, head, rules=asset_code_version("perf_commits")
    )
    version = table_version(handle, "raw.perf_commits", where="repo = ?", params=[repo])
    return dg.MaterializeResult(
        data_version=dg.DataVersion(version),
        metadata={
            "dagster/row_count": int(counters.get("total_commits", 0)),
            **counters,
            **table_schema(lake.lake(), "raw.perf_commits"),
        },
    )


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags={policy.CODE_VERSION_TAG: policy.MINING_RULES},
    code_version=asset_code_version("kernel_commit_files"),
    group_name=GROUP,
    kinds={"git", "duckdb"},
    owners=["team:kernelhouse"],
    partitions_def=repo_partitions,
    deps=lineage.deps("kernel_commit_files"),
    metadata=lineage.tables("kernel_commit_files"),
    description=(
        "Modified kernel files of the perf commits (filters, licences, diffs), excluded files with "
        "reasons."
    ),
)
def kernel_commit_files(
    context: dg.AssetExecutionContext, lake: LakeResource
) -> dg.MaterializeResult:
    """Mine the files of commits not mined yet (one batched blob fetch per repo)."""
    from dagster_project.mining.commits import DEFAULT_SPECS
    from dagster_project.mining.commits.lake_sync import refresh_commit_files

    repo = context.partition_key
    git = lake.repo_git(repo)
    handle = lake.lake()
    counters = refresh_commit_files(
        handle, git, DEFAULT_SPECS[repo], repo, rules=asset_code_version("kernel_commit_files")
    )
    version = table_version(
        handle,
        "raw.kernel_commit_files",
        "raw.kernel_commit_excluded",
        where="repo = ?",
        params=[repo],
    )
    return dg.MaterializeResult(
        data_version=dg.DataVersion(version),
        metadata={
            "dagster/row_count": int(counters.get("rows", 0)),
            **counters,
            **table_schema(lake.lake(), "raw.kernel_commit_files"),
        },
    )


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags={policy.CODE_VERSION_TAG: policy.MINING_RULES},
    code_version=asset_code_version("kernel_commits"),
    group_name=GROUP,
    kinds={"duckdb"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("kernel_commits"),
    metadata=lineage.tables("kernel_commits"),
    check_specs=[
        dg.AssetCheckSpec(
            "diff_roundtrip",
            asset="kernel_commits",
            blocking=True,
            description="every diff applied to before_code gives after_code exactly",
        ),
        dg.AssetCheckSpec(
            "oracle_patch_reward",
            asset="kernel_commits",
            blocking=True,
            description=(
                f"the reference SEARCH/REPLACE edit scores 1.0 on >= "
                f"{ORACLE_MIN_SHARE_PERFECT:.1%} of rows"
            ),
        ),
    ],
    description=(
        "datasets.kernel_commits: optimise before_code the way the PR did (temporal split, gains "
        "attached)."
    ),
)
def kernel_commits(context: dg.AssetExecutionContext, lake: LakeResource):  # noqa: ANN201
    """Union the repos, attach PR bodies and gains, mentions and prompt, temporal split."""
    from dagster_project.mining.commits.dataset import (
        PROPERTY_KEY,
        diff_roundtrip,
        kernel_commits_dataset,
    )
    from dagster_project.rewards.oracle_check import oracle_patch_reward

    handle = lake.lake()
    out = kernel_commits_dataset(
        handle.read_table("raw", "kernel_commit_files"),
        handle.read_table_or_none("derived", "pr_gains"),
        handle.read_table_or_none("raw", "pr_bodies"),
        handle.read_table("raw", "perf_commits"),
        handle.read_table_or_none("raw", "kernel_commit_excluded"),
        handle.read_table_or_none("derived", "commit_exec_runs"),
    )
    handle.replace_table("datasets", "kernel_commits", out.table)
    handle.replace_rows("derived", "build_properties", out.properties, "key", [PROPERTY_KEY])
    yield materialize_result(handle, out.metadata, version=("datasets.kernel_commits",))
    yield check_result(diff_roundtrip(out.rows))
    yield check_result(oracle_patch_reward(out.rows, ORACLE_MIN_SHARE_PERFECT, ORACLE_LOW_SCORE))
