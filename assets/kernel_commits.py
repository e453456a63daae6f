"""kernel_commits layer: real perf commits of vLLM, SGLang and FlashInfer as
optimise-this-file tasks, mined incrementally per repo."""

import dagster as dg
import polars as pl

from dagster_project.execution import policy
from dagster_project.mining.versions import asset_code_version
from dagster_project.partitions import repo_partitions
from dagster_project.quality.suites import gate_threshold
from dagster_project.resources import LakeResource
from dagster_project.table_metadata import table_schema
from dagster_project.versions import table_version

GROUP = "kernel_commits"

#: The oracle gate's thresholds, from expectations/kernel_commits.json
#: (meta.kernelhouse.thresholds.oracle_patch_reward): the share of rows whose reference
#: edit must score 1.0, and the score below which a row is listed as low.
ORACLE_MIN_SHARE_PERFECT = gate_threshold("kernel_commits", "oracle_patch_reward", "min_share_perfect")
ORACLE_LOW_SCORE = gate_threshold("kernel_commits", "oracle_patch_reward", "low_score")


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags={policy.CODE_VERSION_TAG: policy.MINING_RULES},
    code_version=asset_code_version("perf_commits"),
    group_name=GROUP, kinds={"git", "duckdb"}, owners=["team:kernelhouse"],
    partitions_def=repo_partitions, deps=[dg.AssetKey("repo_clone")],
    metadata={"table": "raw.perf_commits"},
    description="Non-merge commits touching kernel paths whose title carries a perf signal (watermark..head only).",
)
def perf_commits(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Mine new perf commits since the repo's watermark; no-op when the head is unchanged."""
    from dagster_project.mining.commits import DEFAULT_SPECS
    from dagster_project.mining.commits.lake_sync import refresh_perf_commits

    repo = context.partition_key
    git, head = lake.repo_snapshot(repo)
    handle = lake.lake()
    counters = refresh_perf_commits(handle, git, DEFAULT_SPECS[repo], repo, head)
    version = table_version(handle, "raw.perf_commits", where="repo = ?", params=[repo])
    return dg.MaterializeResult(data_version=dg.DataVersion(version), metadata={"dagster/row_count": int(counters.get("total_commits", 0)), **counters, **table_schema(lake.lake(), "raw.perf_commits")})


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags={policy.CODE_VERSION_TAG: policy.MINING_RULES},
    code_version=asset_code_version("kernel_commit_files"),
    group_name=GROUP, kinds={"git", "duckdb"}, owners=["team:kernelhouse"],
    partitions_def=repo_partitions, deps=[perf_commits],
    metadata={"table": "raw.kernel_commit_files"},
    description="Modified kernel files of the perf commits (filters, licences, diffs), excluded files with reasons.",
)
def kernel_commit_files(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Mine the files of commits not mined yet (one batched blob fetch per repo)."""
    from dagster_project.mining.commits import DEFAULT_SPECS
    from dagster_project.mining.commits.lake_sync import refresh_commit_files

    repo = context.partition_key
    git, _ = lake.repo_snapshot(repo)
    handle = lake.lake()
    counters = refresh_commit_files(handle, git, DEFAULT_SPECS[repo], repo)
    version = table_version(handle, "raw.kernel_commit_files", "raw.kernel_commit_excluded", where="repo = ?", params=[repo])
    return dg.MaterializeResult(data_version=dg.DataVersion(version), metadata={"dagster/row_count": int(counters.get("rows", 0)), **counters, **table_schema(lake.lake(), "raw.kernel_commit_files")})


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags={policy.CODE_VERSION_TAG: policy.MINING_RULES},
    code_version=asset_code_version("kernel_commits"),
    group_name=GROUP, kinds={"duckdb"}, owners=["team:kernelhouse"],
    deps=[kernel_commit_files, dg.AssetKey("pr_gains")],
    metadata={"table": "datasets.kernel_commits"},
    check_specs=[
        dg.AssetCheckSpec("diff_roundtrip", asset="kernel_commits", blocking=True,
                          description="every diff applied to before_code gives after_code exactly"),
        dg.AssetCheckSpec("oracle_patch_reward", asset="kernel_commits", blocking=True,
                          description=f"the reference SEARCH/REPLACE edit scores 1.0 on >= {ORACLE_MIN_SHARE_PERFECT:.1%} of rows"),
    ],
    description="datasets.kernel_commits: optimise before_code the way the PR did (temporal split, gains attached).",
)
def kernel_commits(context: dg.AssetExecutionContext, lake: LakeResource):  # noqa: ANN201
    """Union the repos, attach PR bodies and gains, mentions and prompt, temporal split."""
    from dagster_project.frames import md_table
    from dagster_project.gains.pipeline import attach_commit_gains
    from dagster_project.mining.commits.diffs import apply_patch
    from dagster_project.mining.commits.lake_sync import assemble_kernel_commits
    from dagster_project.mining.commits.mine import EXCLUDED_SCHEMA, exclusion_counts
    from dagster_project.report import plots_markdown

    handle = lake.lake()
    rows = handle.read_table("raw", "kernel_commit_files")
    rows = attach_commit_gains(rows, handle.read_table_or_none("derived", "pr_gains"), handle.read_table_or_none("raw", "pr_bodies"))
    rows, cutoff = assemble_kernel_commits(rows, handle.read_table("raw", "perf_commits"))
    handle.replace_table("datasets", "kernel_commits", rows.sort("authored_at", "id"))
    handle.replace_rows(
        "derived", "build_properties",
        pl.DataFrame({"key": ["kernel_commits.split_cutoff"], "value": [cutoff.isoformat() if cutoff else None]}),
        "key", ["kernel_commits.split_cutoff"],
    )
    excluded = handle.read_table_or_none("raw", "kernel_commit_excluded")
    excl = exclusion_counts(excluded if excluded is not None else pl.DataFrame(schema=EXCLUDED_SCHEMA))
    split = dict(rows.group_by("split").len().iter_rows())
    monthly = rows.with_columns(month=pl.col("authored_at").dt.strftime("%Y-%m")).group_by("repo", "month").agg(pl.len().alias("rows"))
    plots = plots_markdown(monthly, "line", x="month", y="rows", series="repo", title="rows per month")
    for col in ("kernel_speedup", "e2e_speedup"):
        if rows[col].is_not_null().any():
            plots += "\n\n" + plots_markdown(rows.filter(pl.col(col).is_not_null()), "histogram", x=col, log_x=True, title=col)
    yield dg.MaterializeResult(data_version=dg.DataVersion(table_version(handle, "datasets.kernel_commits")), metadata={
        "plots": dg.MetadataValue.md(plots),
        "dagster/row_count": rows.height,
        **table_schema(lake.lake(), "datasets.kernel_commits"),
        "prs": rows.filter(pl.col("pr_number").is_not_null()).select("repo", "pr_number").unique().height,
        "train": split.get("train", 0), "test": split.get("test", 0),
        "split_cutoff": cutoff.isoformat() if cutoff else "none",
        "excluded_non_oss": excl.get("license_tensorrt", 0) + excl.get("license_proprietary", 0),
        "excluded": dg.MetadataValue.json(excl),
        "languages": dg.MetadataValue.json(dict(rows.group_by("language").len().iter_rows())),
        "with_kernel_speedup": int(rows["kernel_speedup"].is_not_null().sum()),
        "preview": dg.MetadataValue.md(md_table(rows.select("repo", "pr_number", "title", "path", "language", "split"))),
    })
    bad = []
    for r in rows.select("id", "before_code", "after_code", "diff").iter_rows(named=True):
        try:
            ok = apply_patch(r["before_code"], r["diff"]) == r["after_code"]
        except Exception as exc:  # noqa: BLE001 - a malformed diff is a failed row
            ok, r["error"] = False, str(exc)[:200]
        if not ok:
            bad.append(r["id"])
    yield dg.AssetCheckResult(check_name="diff_roundtrip", passed=not bad,
                              metadata={"rows": rows.height, "failing": len(bad), "failing_ids": dg.MetadataValue.json(bad[:20])})
    yield oracle_check(rows)


def oracle_check(rows: pl.DataFrame) -> dg.AssetCheckResult:
    """patch_reward(oracle_edit(before, after)) over every row: the card promises 1.0 on
    at least ``ORACLE_MIN_SHARE_PERFECT`` of rows (98.7%) and >= ``ORACLE_LOW_SCORE`` (0.95)
    on all but a handful; both numbers live in expectations/kernel_commits.json."""
    from dagster_project.rewards import oracle_edit, patch_reward

    scores = []
    for r in rows.select("id", "path", "before_code", "after_code").iter_rows(named=True):
        edit = oracle_edit(r["before_code"], r["after_code"], r["path"])
        scores.append((r["id"], patch_reward(edit, r["before_code"], r["after_code"])))
    n = len(scores)
    perfect = sum(1 for _, v in scores if v == 1.0)
    share = perfect / n if n else 1.0
    low = [i for i, v in scores if v < ORACLE_LOW_SCORE]
    return dg.AssetCheckResult(
        check_name="oracle_patch_reward",
        passed=share >= ORACLE_MIN_SHARE_PERFECT,
        metadata={"rows": n, "share_1.0": round(share, 5), f"below_{ORACLE_LOW_SCORE:g}": len(low),
                  f"below_{ORACLE_LOW_SCORE:g}_ids": dg.MetadataValue.json(low[:20])},
    )
