"""The kernel_commits asset's reward check: the patch reward of every row's own oracle edit.

Why here: it is a property of the reward (``rewards.patch``) measured on the dataset, so it
lives with the reward and the miner never imports the rewards; the asset passes the
thresholds it reads from its suite (``expectations/kernel_commits.json``).
"""

from __future__ import annotations

import polars as pl

from dagster_project.frames import CheckOutcome, Json
from dagster_project.rewards.patch import oracle_edit, patch_reward


def oracle_patch_reward(
    rows: pl.DataFrame, min_share_perfect: float, low_score: float
) -> CheckOutcome:
    """patch_reward(oracle_edit(before, after)) over every row: passes when at least
    ``min_share_perfect`` of rows score 1.0; rows below ``low_score`` are listed."""
    scores = []
    for r in rows.select("id", "path", "before_code", "after_code").iter_rows(named=True):
        edit = oracle_edit(r["before_code"], r["after_code"], r["path"])
        scores.append((r["id"], patch_reward(edit, r["before_code"], r["after_code"])))
    return _outcome("oracle_patch_reward", "rows", scores, min_share_perfect, low_score)


def pr_oracle_patch_reward(
    tasks: pl.DataFrame, min_share_perfect: float, low_score: float
) -> CheckOutcome:
    """The same check over ``datasets.pr_tasks``: ``pr_patch_reward(pr_oracle_edit(files))``
    of every PR task (all its files at once), with the files-per-task distribution."""
    from dagster_project.rewards.pr_patch import pr_oracle_edit, pr_patch_reward

    scores = [
        (r["id"], pr_patch_reward(pr_oracle_edit(r["files"]), r["files"]))
        for r in tasks.select("id", "files").iter_rows(named=True)
    ]
    return _outcome("pr_oracle_patch_reward", "tasks", scores, min_share_perfect, low_score)


def _outcome(
    name: str,
    unit: str,
    scores: list[tuple[str, float]],
    min_share_perfect: float,
    low_score: float,
) -> CheckOutcome:
    """Both checks' verdict: the share of perfect oracle scores against the bar, and the
    first ids scoring below ``low_score`` (one place, so the two checks read alike)."""
    n = len(scores)
    perfect = sum(1 for _, v in scores if v == 1.0)
    share = perfect / n if n else 1.0
    low = [i for i, v in scores if v < low_score]
    return CheckOutcome(
        name,
        share >= min_share_perfect,
        {
            unit: n,
            "share_1.0": round(share, 5),
            f"below_{low_score:g}": len(low),
            f"below_{low_score:g}_ids": Json(low[:20]),
        },
    )
