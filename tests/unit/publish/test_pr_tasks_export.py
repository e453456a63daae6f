"""The pr_tasks subset of kernel-opt-rl (issue 41): built from the publish fixture's
kernel_commits by the real grouping, exported, loaded with ``datasets``, and scored there by
the shipped ``code/reward.py``."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from dagster_project.mining.commits.pr_tasks import pr_tasks_frame
from dagster_project.publish import export_kernel_opt_rl, read_snapshot
from dagster_project.publish.kernel_opt_rl import data_file
from dagster_project.publish.report import ExportReport
from dagster_project.rewards import pr_oracle_edit, render_reward_module
from dagster_project.storage.lake import Lake
from tests.unit.publish import lakes


@pytest.fixture(scope="module")
def pr_export(tmp_path_factory: pytest.TempPathFactory) -> tuple[Lake, ExportReport]:
    root = tmp_path_factory.mktemp("pr-tasks")
    lake = lakes.new_lake(root)
    lakes.build_kernel_opt_rl_lake(lake)
    # The publish fixture leaves out the one kernel_commits column its export does not read.
    commits = _complete(lake.read_table("datasets", "kernel_commits"))
    lake.replace_table("datasets", "kernel_commits", commits)
    tasks = pr_tasks_frame(commits)
    lake.replace_table("datasets", "pr_tasks", tasks)
    report = export_kernel_opt_rl(
        lake,
        root / "kernel-opt-rl",
        reward_module=render_reward_module(),
        licenses=lakes.LICENSES,
        snapshot=read_snapshot(lake),
    )
    return lake, report


def _complete(commits: pl.DataFrame) -> pl.DataFrame:
    """The fixture's rows come in pairs sharing a sha; one repo per pair makes each pair a
    two-file commit (the fixture draws the repo per row)."""
    return commits.with_columns(
        lines_changed=pl.lit(2, pl.Int64), repo=pl.col("repo").first().over("sha")
    )


def _reward_module(report: ExportReport) -> dict:
    namespace: dict = {"__name__": "reward"}
    text = (report.out_dir / "code" / "reward.py").read_text()
    exec(compile(text, "reward.py", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("split", ["train", "test"])
def test_pr_tasks_load_with_datasets_and_their_oracle_scores_one(
    pr_export: tuple[Lake, ExportReport], tmp_path: Path, split: str
) -> None:
    import datasets

    lake, report = pr_export
    ds = datasets.load_dataset(
        str(report.out_dir), "pr_tasks", split=split, cache_dir=str(tmp_path / "hf")
    )
    expected = lake.read_table("datasets", "pr_tasks").filter(pl.col("split") == split)
    assert ds.num_rows == expected.height > 0
    assert sorted(ds["id"]) == sorted(expected["id"].to_list())
    kc = lake.read_table("datasets", "kernel_commits").filter(pl.col("split") == split)
    reward = _reward_module(report)
    for row in ds:
        # files come back as a list of dicts, one per kernel_commits row of the commit
        mine = kc.filter((pl.col("repo") == row["repo"]) & (pl.col("sha") == row["sha"]))
        assert [f["row_id"] for f in row["files"]] == mine.sort("path")["id"].to_list()
        assert [f["after_code"] for f in row["files"]] == mine.sort("path")["after_code"].to_list()
        assert row["n_files"] == len(row["files"]) == len(row["paths"])
        oracle = pr_oracle_edit(row["files"])
        assert reward["pr_patch_reward"](oracle, row["files"]) == 1.0
        assert reward["pr_patch_reward_fn"]([oracle], files=[row["files"]]) == [1.0]
    assert sum(ds["n_files"]) == kc.height
    assert max(ds["n_files"]) == 2


def test_the_card_declares_and_counts_pr_tasks(pr_export: tuple[Lake, ExportReport]) -> None:
    lake, report = pr_export
    readme = (report.out_dir / "README.md").read_text()
    tasks = lake.read_table("datasets", "pr_tasks")
    assert "config_name: pr_tasks" in readme
    assert 'load_dataset("./kernel-opt-rl", "pr_tasks", split="train")' in readme
    train = tasks.filter(pl.col("split") == "train").height
    test = tasks.height - train
    assert "| `pr_tasks` | one performance commit (PR)" in readme
    assert f"| {tasks.height} | {train} | {test} |" in readme
    for n, count in tasks.group_by("n_files").len().iter_rows():
        assert f"\n| {n} | {count} |" in readme
    stats = report.stats["pr_tasks"]
    assert stats["rows"] == tasks.height and stats["files"] == tasks["n_files"].sum()
    assert report.rows[data_file("pr_tasks", "test")] == test


def test_a_lake_without_pr_tasks_exports_the_two_subsets(tmp_path: Path) -> None:
    lake = lakes.new_lake(tmp_path)
    lakes.build_kernel_opt_rl_lake(lake)
    report = export_kernel_opt_rl(
        lake,
        tmp_path / "kernel-opt-rl",
        reward_module=lakes.REWARD_MODULE,
        licenses=lakes.LICENSES,
        snapshot=read_snapshot(lake),
    )
    assert not (report.out_dir / "pr_tasks").exists()
    assert "pr_tasks" not in (report.out_dir / "README.md").read_text()


def test_a_commit_split_across_train_and_test_is_refused() -> None:
    lake_rows = _complete(lakes.kernel_commits_frame(random.Random(7)))
    sha = lake_rows["sha"][0]
    broken = lake_rows.with_columns(
        split=pl.when((pl.col("sha") == sha) & (pl.col("path") == lake_rows["path"][0]))
        .then(pl.lit("test"))
        .otherwise(pl.col("split"))
    )
    from dagster_project.mining.commits.pr_tasks import SplitStraddle

    assert pr_tasks_frame(lake_rows).height == lake_rows["sha"].n_unique()
    with pytest.raises(SplitStraddle, match=sha):
        pr_tasks_frame(broken)


def test_a_pushed_export_with_pr_tasks_waits_for_their_gate(
    kh_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster_project.publish.hub import GATED_ASSETS, PublishBlocked, push_exports
    from dagster_project.quality.results import failing_gates
    from dagster_project.settings import load_settings

    monkeypatch.setenv("KERNELHOUSE_HUB_REPO_PREFIX", "someone/kh")
    monkeypatch.setenv("HF_TOKEN", "hf_fixture_token")
    settings = load_settings()
    lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))
    lakes.build_kernel_opt_rl_lake(lake)
    passed = pl.DataFrame(
        {
            "suite": list(GATED_ASSETS),
            "asset": list(GATED_ASSETS),
            "blocking": [True] * len(GATED_ASSETS),
            "expectation": ["expect_column_values_to_not_be_null"] * len(GATED_ASSETS),
            "column_name": ["id"] * len(GATED_ASSETS),
            "success": [True] * len(GATED_ASSETS),
        }
    )
    lake.replace_table("derived", "quality_results", passed)
    assert failing_gates(lake, list(GATED_ASSETS)) == []
    (settings.exports_dir / "kernel-opt-rl" / "pr_tasks").mkdir(parents=True)
    with pytest.raises(PublishBlocked, match="pr_tasks: never checked"):
        push_exports(lake, settings, lambda _line: None)
