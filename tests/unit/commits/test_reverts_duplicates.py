"""reverted_by and duplicate_of on the fixture repos: a squash-merge revert (quoted
subject), a `git revert` (sha in the body) and a reland with the same before/after."""

from __future__ import annotations

import polars as pl
import pytest

from dagster_project.mining.commits import DEFAULT_SPECS, mine_repo, row_id
from dagster_project.mining.commits.lake_sync import assemble_kernel_commits
from dagster_project.mining.git import GitRepo
from tests.unit.commits.conftest import ENGINES


@pytest.mark.parametrize("engine", ENGINES)
def test_reverted_by_and_duplicate_of(engine, perf_repos) -> None:
    repo = perf_repos[engine]
    commits, rows, _ = mine_repo(GitRepo(repo.path), DEFAULT_SPECS[engine], head="HEAD")
    out, _ = assemble_kernel_commits(rows, commits)
    planted_revert = planted_dup = 0
    for (sha, path), expect in repo.truth["rows"].items():
        row = out.filter((pl.col("sha") == sha) & (pl.col("path") == path)).row(0, named=True)
        assert row["reverted_by"] == expect.get("reverted_by"), (engine, path, sha)
        dup_sha = expect.get("duplicate_of_sha")
        assert row["duplicate_of"] == (row_id(engine, dup_sha, path) if dup_sha else None), path
        planted_revert += "reverted_by" in expect and expect["reverted_by"] is not None
        planted_dup += dup_sha is not None
    assert planted_revert == 2 and planted_dup == 1
    # Reverted rows stay in the dataset (users filter on the column).
    assert out["reverted_by"].drop_nulls().len() == 2


def test_revert_of_a_revert_cancels(tmp_path) -> None:
    from dagster_project.mining.commits.reverts import find_reverts
    from tests.fixtures.factory import RepoBuilder

    b = RepoBuilder(tmp_path / "r")
    k = "csrc/fixture_kernel.cu"
    b.write(k, "__global__ void k() {}\n")
    b.commit("[Kernel] add (#1)")
    b.write(k, "__global__ void k() { int x = 1; }\n")
    first = b.commit("[Perf] Faster k (#2)")
    b.write(k, "__global__ void k() {}\n")
    rev = b.commit('Revert "[Perf] Faster k (#2)" (#3)')
    assert find_reverts(GitRepo(b.path), "HEAD", {first: "[Perf] Faster k (#2)"}) == {first: rev}
    b.write(k, "__global__ void k() { int x = 1; }\n")
    b.commit('Revert "Revert "[Perf] Faster k (#2)" (#3)" (#4)')
    assert find_reverts(GitRepo(b.path), "HEAD", {first: "[Perf] Faster k (#2)"}) == {}


def test_a_later_revert_reaches_an_old_row_on_an_incremental_refresh(tmp_path) -> None:
    from dagster_project.mining.commits.lake_sync import refresh_perf_commits
    from dagster_project.mining.versions import asset_code_version
    from dagster_project.storage.lake import Lake
    from tests.fixtures.factory import RepoBuilder

    b = RepoBuilder(tmp_path / "r")
    spec = DEFAULT_SPECS["vllm"]
    k = "csrc/fixture_kernel.cu"
    b.write(k, "__global__ void k() {}\n")
    b.commit("[Kernel] add (#1)")
    b.write(k, "__global__ void k() { int x = 1; }\n")
    first = b.commit("[Perf] Faster k (#2)")
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "parts"))
    git = GitRepo(b.path)
    rules = asset_code_version("perf_commits")  # what the asset passes
    assert (
        refresh_perf_commits(lake, git, spec, "vllm", git.head("HEAD"), rules=rules)["mode"]
        == "full"
    )
    assert lake.read_table("raw", "perf_commits")["reverted_by"].to_list() == [None]
    b.write(k, "__global__ void k() {}\n")
    rev = b.commit('Revert "[Perf] Faster k (#2)" (#3)')
    assert (
        refresh_perf_commits(lake, git, spec, "vllm", git.head("HEAD"), rules=rules)["mode"]
        == "incremental"
    )
    got = lake.read_table("raw", "perf_commits")
    assert got.filter(pl.col("sha") == first)["reverted_by"].to_list() == [rev]
