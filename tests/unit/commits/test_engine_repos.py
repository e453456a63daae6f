"""The planted perf-commit truth holds inside the full engine fixture repositories, where
the tuned-config scenario adds its own history (and perf commits) before ours."""

from __future__ import annotations

import polars as pl
import pytest

from dagster_project.mining.commits import DEFAULT_SPECS, mine_repo
from dagster_project.mining.git import GitRepo


@pytest.mark.parametrize("engine", ["vllm", "sglang", "flashinfer"])
def test_planted_truth_inside_engine_repo(engine, engine_repos):
    repo = engine_repos[engine]
    truth = repo.planted["commits"]
    commits, rows, excluded = mine_repo(GitRepo(repo.path), DEFAULT_SPECS[engine])
    keys = set(zip(rows["sha"].to_list(), rows["path"].to_list(), strict=True))
    assert set(truth["rows"]) <= keys
    got = {(s, p): r for s, p, r in excluded.select("sha", "path", "reason").iter_rows()}
    assert {k: got.get(k) for k in truth["excluded"]} == truth["excluded"]
    mined_shas = set(commits["sha"].to_list())
    assert not (set(truth["not_perf"]) | set(truth["trimmed"])) & mined_shas
    # Whatever else the other scenario contributes obeys the same invariants.
    assert rows.filter(pl.col("license").str.contains("NVIDIA")).height == 0
    assert rows["id"].n_unique() == rows.height
