"""repo_clone: a real blobless clone of a local fixture repo, then an incremental fetch."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from assets.sources import repo_clone
from dagster_project.mining.git import GitRepo
from dagster_project.storage.lake import Lake
from dagster_project.wiring.resources import LakeResource
from tests.fixtures.factory import RepoBuilder


def _run(home: Path, key: str) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [repo_clone],
        partition_key=key,
        resources={"lake": LakeResource(home=str(home))},
        raise_on_error=False,
    )


def test_blobless_clone_then_fetch(
    kh_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    up = RepoBuilder(tmp_path / "upstream")
    up.write("csrc/a.cu", "__global__ void k() {}\n").commit("Initial (#1)")
    monkeypatch.setenv("KERNELHOUSE_FLASHINFER_SOURCE", str(up.path))
    assert _run(kh_home, "flashinfer").success
    clone = GitRepo(kh_home / "repos" / "flashinfer.git")
    assert clone.is_partial(), "first run must be a blobless (partial) clone"
    assert clone.head() == up.head()
    lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))
    row = lake.read_table("raw", "repo_heads").to_dicts()[0]
    assert (row["repo"], row["action"], row["commit_count"]) == ("flashinfer", "clone", 1)

    up.write("csrc/a.cu", "__global__ void k() { /* faster */ }\n").commit("[Perf] faster k (#2)")
    assert _run(kh_home, "flashinfer").success
    row = lake.read_table("raw", "repo_heads").to_dicts()
    assert len(row) == 1 and row[0]["action"] == "fetch" and row[0]["commit_count"] == 2
    assert clone.head() == up.head()


def test_unreachable_source_names_the_setting(
    kh_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELHOUSE_SGLANG_SOURCE", "https://127.0.0.1:9/nothing/sglang.git")
    res = _run(kh_home, "sglang")
    assert not res.success
    failure = next(e for e in res.all_events if e.is_step_failure)
    text = failure.step_failure_data.error.message
    assert "KERNELHOUSE_SGLANG_SOURCE" in text and "local clone" in text
    assert not (kh_home / "repos" / "sglang.git").exists()
    assert not (kh_home / "repos" / "sglang.git.partial").exists()
