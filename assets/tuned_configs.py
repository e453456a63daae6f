"""tuned_configs layer: every tuned Triton launch config of vLLM and SGLang as RL rows.

Assets are thin: each reads the snapshot recorded by ``repo_clone``, calls
``dagster_project.mining.configs`` and writes one lake table.
"""

import dagster as dg
import polars as pl

from dagster_project.execution import policy
from dagster_project.mining.versions import asset_code_version
from dagster_project.storage.versions import table_version
from dagster_project.wiring import lineage
from dagster_project.wiring.resources import LakeResource
from dagster_project.wiring.table_metadata import materialize_result, table_schema

CONFIG_REPOS = ("vllm", "sglang")
GROUP = "tuned_configs"


def _concat(frames: list[pl.DataFrame], schema: dict) -> pl.DataFrame:
    return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame(schema=schema)


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags={policy.CODE_VERSION_TAG: policy.MINING_RULES},
    code_version=asset_code_version("config_files"),
    group_name=GROUP,
    kinds={"git", "duckdb"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("config_files"),
    metadata=lineage.tables("config_files"),
    description=(
        "Every tuned-config JSON at the snapshot commit, name parsed (bad files kept with a "
        "reason)."
    ),
)
def config_files(lake: LakeResource) -> dg.MaterializeResult:
    """Discover config files in every directory the families ever lived in."""
    from dagster_project.mining.configs import FILES_SCHEMA, discover_config_files

    frames = []
    for repo in CONFIG_REPOS:
        git, head = lake.repo_snapshot(repo)
        frames.append(discover_config_files(git, repo, head))
    files = _concat(frames, FILES_SCHEMA)
    lake.lake().replace_table("raw", "config_files", files)
    bad = files.filter(pl.col("parse_status") != "ok")
    return dg.MaterializeResult(
        data_version=dg.DataVersion(table_version(lake.lake(), "raw.config_files")),
        metadata={
            "dagster/row_count": files.height,
            **table_schema(lake.lake(), "raw.config_files"),
            "per_repo": dg.MetadataValue.json(dict(files.group_by("repo").len().iter_rows())),
            "unparsed": dg.MetadataValue.json(
                bad.select("path", "parse_status", "parse_error").head(20).to_dicts()
            ),
            "device_names": files["device_name"].n_unique(),
        },
    )


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags={policy.CODE_VERSION_TAG: policy.MINING_RULES},
    code_version=asset_code_version("config_entries"),
    group_name=GROUP,
    kinds={"git", "duckdb"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("config_entries"),
    metadata=lineage.tables("config_entries"),
    description="One row per (config file, M) with the config JSON; unchanged blobs are reused.",
)
def config_entries(lake: LakeResource) -> dg.MaterializeResult:
    """Read every file's entries; only files whose blob id changed are parsed again."""
    from dagster_project.mining.configs import ENTRIES_SCHEMA, read_config_entries

    handle = lake.lake()
    files = handle.read_table("raw", "config_files")
    previous = handle.read_table_or_none("raw", "config_entries")
    frames = []
    for repo in CONFIG_REPOS:
        git = lake.repo_git(repo)
        frames.append(read_config_entries(git, files.filter(pl.col("repo") == repo), previous))
    entries = _concat(frames, ENTRIES_SCHEMA)
    reused = 0
    if previous is not None and previous.height:
        reused = entries.join(
            previous.select("blob_oid").unique(), on="blob_oid", how="semi"
        ).height
    handle.replace_table("raw", "config_entries", entries)
    return dg.MaterializeResult(
        data_version=dg.DataVersion(table_version(handle, "raw.config_entries")),
        metadata={
            "dagster/row_count": entries.height,
            **table_schema(lake.lake(), "raw.config_entries"),
            "reused_rows": reused,
            "distinct_M": entries["M"].n_unique() if entries.height else 0,
        },
    )


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags={policy.CODE_VERSION_TAG: policy.MINING_RULES},
    code_version=asset_code_version("kernel_sources"),
    group_name=GROUP,
    kinds={"git", "duckdb"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("kernel_sources"),
    metadata=lineage.tables("kernel_sources"),
    description="The Triton kernel each config family drives, extracted at the snapshot commit.",
)
def kernel_sources(lake: LakeResource) -> dg.MaterializeResult:
    """Extract the decorated kernels and the helpers they call."""
    from dagster_project.mining.configs import KERNELS_SCHEMA, extract_kernel_sources

    frames = []
    for repo in CONFIG_REPOS:
        git, head = lake.repo_snapshot(repo)
        frames.append(extract_kernel_sources(git, repo, head))
    kernels = _concat(frames, KERNELS_SCHEMA)
    lake.lake().replace_table("raw", "kernel_sources", kernels)
    return dg.MaterializeResult(
        data_version=dg.DataVersion(table_version(lake.lake(), "raw.kernel_sources")),
        metadata={
            "dagster/row_count": kernels.height,
            **table_schema(lake.lake(), "raw.kernel_sources"),
            "kernels": dg.MetadataValue.json(kernels.select("repo", "kernel", "path").to_dicts()),
        },
    )


@dg.asset(
    automation_condition=policy.daily(),
    tags={**policy.observer(policy.HUB), policy.CODE_VERSION_TAG: policy.MINING_RULES},
    code_version=asset_code_version("moe_model_shapes"),
    group_name=GROUP,
    kinds={"huggingface", "duckdb"},
    owners=["team:kernelhouse"],
    metadata=lineage.tables("moe_model_shapes"),
    description=(
        "MoE model shapes (experts, intermediate, hidden, top_k) from the Hub, or the checked-in "
        "snapshot offline."
    ),
)
def moe_model_shapes(lake: LakeResource) -> dg.MaterializeResult:
    """Refresh each model's shape from its config.json when the Hub answers."""
    from datetime import UTC, datetime

    from dagster_project.mining.configs import load_model_shapes_snapshot, refresh_model_shapes
    from dagster_project.mining.hub import fetch_model_config, hub_reachable

    snapshot = load_model_shapes_snapshot()
    online = hub_reachable()
    shapes = refresh_model_shapes(fetch_model_config, snapshot) if online else snapshot
    lake.lake().replace_table("raw", "moe_model_shapes", shapes)
    return dg.MaterializeResult(
        data_version=dg.DataVersion(table_version(lake.lake(), "raw.moe_model_shapes")),
        metadata={
            "dagster/row_count": shapes.height,
            **table_schema(lake.lake(), "raw.moe_model_shapes"),
            "source": "hub" if online else "snapshot (offline)",
            # When the shapes were last read from the Hub (the snapshot's rows say "verified").
            "refreshed_at": datetime.now(UTC).isoformat(timespec="seconds")
            if online
            else "never in this run (offline: checked-in snapshot)",
            "verified_shapes": int(shapes["verified"].sum()),
            "refreshed_from_hub": int(shapes["source"].str.starts_with("hf:").sum()),
        },
    )


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags={policy.CODE_VERSION_TAG: policy.MINING_RULES},
    code_version=asset_code_version("config_attribution"),
    group_name=GROUP,
    kinds={"git", "duckdb"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("config_attribution"),
    metadata=lineage.tables("config_attribution"),
    description=(
        "The newest PR whose commit changed each config file's content (rename-aware, one pass per "
        "repo)."
    ),
)
def config_attribution(lake: LakeResource) -> dg.MaterializeResult:
    """One rename-aware ``git log --raw`` pass per repo; pure moves never count."""
    from dagster_project.mining.configs import ATTRIBUTION_SCHEMA, attribute_config_prs

    handle = lake.lake()
    files = handle.read_table("raw", "config_files")
    frames = []
    for repo in CONFIG_REPOS:
        git, head = lake.repo_snapshot(repo)
        paths = files.filter(pl.col("repo") == repo)["path"].to_list()
        frames.append(attribute_config_prs(git, repo, head, paths))
    att = _concat(frames, ATTRIBUTION_SCHEMA)
    handle.replace_table("derived", "config_attribution", att)
    with_pr = att.filter(pl.col("pr_number").is_not_null()).height
    return dg.MaterializeResult(
        data_version=dg.DataVersion(table_version(handle, "derived.config_attribution")),
        metadata={
            "dagster/row_count": att.height,
            **table_schema(lake.lake(), "derived.config_attribution"),
            "with_pr": with_pr,
            "share_with_pr": round(with_pr / att.height, 4) if att.height else 0.0,
            "distinct_prs": att["pr_number"].n_unique(),
        },
    )


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags={policy.CODE_VERSION_TAG: policy.MINING_RULES},
    code_version=asset_code_version("tuned_configs"),
    group_name=GROUP,
    kinds={"duckdb"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("tuned_configs"),
    metadata=lineage.tables("tuned_configs"),
    description=(
        "datasets.tuned_configs: kernel + deployment (shape, GPU, dtype, M) → best launch config."
    ),
)
def tuned_configs(lake: LakeResource) -> dg.MaterializeResult:
    """Assemble the rows, then attach documented gains where attribution is unambiguous."""
    from dagster_project.mining.configs.dataset import tuned_configs_dataset

    handle = lake.lake()
    rows, metadata = tuned_configs_dataset(
        handle.read_table("raw", "config_files"),
        handle.read_table("raw", "config_entries"),
        handle.read_table("derived", "config_attribution"),
        handle.read_table("raw", "kernel_sources"),
        handle.read_table("raw", "moe_model_shapes"),
        handle.read_table("raw", "repo_heads"),
        handle.read_table_or_none("derived", "pr_gains"),
    )
    handle.replace_table("datasets", "tuned_configs", rows)
    return materialize_result(handle, metadata, version=("datasets.tuned_configs",))
