"""The pr_tasks asset through Dagster on the engine fixture repos (issue 41): a perf commit
that changes two kernel files, added to a copy of the vLLM fixture, becomes one two-file
task; every task holds exactly its commit's kernel_commits rows, in their split, and its
oracle edit scores 1.0 (the asset's blocking check passes)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from dagster_project.definitions import build_definitions
from dagster_project.execution.planner import run_build
from dagster_project.rewards import pr_oracle_edit, pr_patch_reward
from dagster_project.storage.lake import Lake
from tests.fixtures.factory import RepoBuilder

pytestmark = pytest.mark.slow

SELECT = "repo_clone,perf_commits,kernel_commit_files,pr_bodies,pr_gains,kernel_commits,pr_tasks"

LICENCE = "// SPDX-License-Identifier: Apache-2.0\n"


def _plant_two_file_commit(b: RepoBuilder) -> str:
    """A kernel and its launcher in two files, then one perf commit that changes both."""
    kernel, launcher = "csrc/fixture_pr_scale.cu", "csrc/fixture_pr_launch.cu"
    b.write(kernel, LICENCE + "__global__ void scale(float* x, float a) {\n  x[0] *= a;\n}\n")
    b.write(launcher, LICENCE + "void launch(float* x, float a) {\n  scale<<<1, 1>>>(x, a);\n}\n")
    b.commit("[Kernel] add scale kernel and launcher (#9101)")
    b.write(
        kernel,
        LICENCE + "__global__ void scale(float4* x, float a) {\n"
        "  float4 v = x[threadIdx.x];\n  v.x *= a; v.y *= a; v.z *= a; v.w *= a;\n"
        "  x[threadIdx.x] = v;\n}\n",
    )
    b.write(
        launcher,
        LICENCE + "void launch(float* x, float a, int n) {\n"
        "  scale<<<1, n / 4>>>(reinterpret_cast<float4*>(x), a);\n}\n",
    )
    return b.commit("[Perf] Vectorize scale kernel with float4 loads (#9102)")


def test_pr_tasks_materialise_one_task_per_commit(
    vllm_upstream: RepoBuilder, kh_home: Path
) -> None:
    sha = _plant_two_file_commit(vllm_upstream)
    outcome = run_build(build_definitions(), dg.DagsterInstance.ephemeral(), SELECT)
    assert outcome.ok, (outcome.failed, outcome.skipped)
    assert outcome.checks_failed == []
    lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))
    gx = lake.read_table("derived", "quality_results").filter(pl.col("asset") == "pr_tasks")
    assert gx.height >= 8 and gx["success"].all()
    kc = lake.read_table("datasets", "kernel_commits")
    tasks = lake.read_table("datasets", "pr_tasks")
    assert tasks.height == kc.select("repo", "sha").n_unique() > 1
    assert tasks["n_files"].sum() == kc.height

    planted = tasks.filter(pl.col("sha") == sha).row(0, named=True)
    assert planted["n_files"] == 2
    assert planted["paths"] == ["csrc/fixture_pr_launch.cu", "csrc/fixture_pr_scale.cu"]
    assert "### csrc/fixture_pr_launch.cu" in planted["prompt"]
    assert "## File 2 of 2: `csrc/fixture_pr_scale.cu`" in planted["prompt"]

    for task in tasks.iter_rows(named=True):
        rows = kc.filter((pl.col("repo") == task["repo"]) & (pl.col("sha") == task["sha"]))
        rows = rows.sort("path")
        assert [f["row_id"] for f in task["files"]] == rows["id"].to_list()
        assert [f["before_code"] for f in task["files"]] == rows["before_code"].to_list()
        assert [f["after_code"] for f in task["files"]] == rows["after_code"].to_list()
        assert set(rows["split"]) == {task["split"]}
        assert pr_patch_reward(pr_oracle_edit(task["files"]), task["files"]) == 1.0
