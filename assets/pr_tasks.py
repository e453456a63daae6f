"""pr_tasks layer: kernel_commits one pull request at a time, every kept file of it in one
multi-file SEARCH/REPLACE task (issue 41)."""

import dagster as dg

from dagster_project.execution import policy
from dagster_project.frames import ColumnSchema, Json
from dagster_project.mining.versions import asset_code_version
from dagster_project.quality.suites import gate_threshold
from dagster_project.wiring import lineage
from dagster_project.wiring.resources import LakeResource
from dagster_project.wiring.table_metadata import check_result, materialize_result

GROUP = "kernel_commits"

#: The oracle gate's thresholds, from expectations/pr_tasks.json
#: (meta.kernelhouse.thresholds.pr_oracle_patch_reward).
ORACLE_MIN_SHARE_PERFECT = gate_threshold("pr_tasks", "pr_oracle_patch_reward", "min_share_perfect")
ORACLE_LOW_SCORE = gate_threshold("pr_tasks", "pr_oracle_patch_reward", "low_score")


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags={policy.CODE_VERSION_TAG: policy.MINING_RULES},
    code_version=asset_code_version("pr_tasks"),
    group_name=GROUP,
    kinds={"duckdb"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("pr_tasks"),
    metadata=lineage.tables("pr_tasks"),
    check_specs=[
        dg.AssetCheckSpec(
            "pr_oracle_patch_reward",
            asset="pr_tasks",
            blocking=True,
            description=(
                f"the reference multi-file SEARCH/REPLACE edit scores 1.0 on >= "
                f"{ORACLE_MIN_SHARE_PERFECT:.1%} of PR tasks"
            ),
        ),
    ],
    description=(
        "datasets.pr_tasks: one row per kernel_commits commit (PR) with all its files and a "
        "multi-file SEARCH/REPLACE prompt (kernel_commits' split)."
    ),
)
def pr_tasks(lake: LakeResource):  # noqa: ANN201
    """Group datasets.kernel_commits by commit into PR tasks; score their oracle edits."""
    from dagster_project.mining.commits.pr_tasks import files_per_task, pr_tasks_frame
    from dagster_project.rewards.oracle_check import pr_oracle_patch_reward

    handle = lake.lake()
    tasks = pr_tasks_frame(handle.read_table("datasets", "kernel_commits"))
    handle.replace_table("datasets", "pr_tasks", tasks)
    split = dict(tasks.group_by("split").len().iter_rows())
    metadata = {
        "dagster/row_count": tasks.height,
        "dagster/column_schema": ColumnSchema("datasets.pr_tasks"),
        "train": int(split.get("train", 0)),
        "test": int(split.get("test", 0)),
        "files_per_task": Json(files_per_task(tasks)),
    }
    yield materialize_result(handle, metadata, version=("datasets.pr_tasks",))
    yield check_result(pr_oracle_patch_reward(tasks, ORACLE_MIN_SHARE_PERFECT, ORACLE_LOW_SCORE))
