"""End-to-end mining of the fixture repositories against their planted truth."""

from __future__ import annotations

import subprocess
from pathlib import Path

import polars as pl
import pytest

from dagster_project.mining.commits import (
    DEFAULT_SPECS,
    EXCLUDED_SCHEMA,
    ROWS_SCHEMA,
    effective_head,
    exclusion_counts,
    find_perf_commits,
    merge_increment,
    mine_commit_files,
    mine_repo,
    needs_full_remine,
    row_id,
)
from dagster_project.mining.commits.diffs import (
    NO_NEWLINE,
    PatchCase,
    apply_patch,
    verify_with_git_apply,
)
from dagster_project.mining.commits.prompt import REPLACE_MARK, SEARCH_MARK
from dagster_project.mining.git import GitRepo, clone_or_fetch
from tests.unit.commits.conftest import ENGINES, PerfRepo

COLUMN_ALIASES = {"models": "models_mentioned", "hardware": "hardware_mentioned"}


@pytest.fixture(scope="module")
def mined(perf_repos: dict[str, PerfRepo]) -> dict[str, tuple[pl.DataFrame, ...]]:
    return {
        e: mine_repo(GitRepo(r.path), DEFAULT_SPECS[e], head="HEAD") for e, r in perf_repos.items()
    }


def _keys(df: pl.DataFrame) -> set[tuple[str, str]]:
    return set(zip(df["sha"].to_list(), df["path"].to_list(), strict=True))


@pytest.mark.parametrize("engine", ENGINES)
def test_rows_and_exclusions_match_the_planted_truth(engine, perf_repos, mined):
    truth = perf_repos[engine].truth
    commits, rows, excluded = mined[engine]
    assert _keys(rows) == set(truth["rows"])
    got_excl = {(s, p): r for s, p, r in excluded.select("sha", "path", "reason").iter_rows()}
    assert got_excl == truth["excluded"]
    # Each file is accounted for exactly once; silent files appear nowhere.
    assert not (_keys(rows) & set(got_excl))
    for key in truth["silent"]:
        assert key not in _keys(rows) and key not in got_excl
    for key, expect in truth["rows"].items():
        row = rows.filter((pl.col("sha") == key[0]) & (pl.col("path") == key[1])).row(0, named=True)
        for field, value in expect.items():
            col = COLUMN_ALIASES.get(field, field)
            if col in row:
                assert row[col] == value, (key[1], field)


@pytest.mark.parametrize("engine", ENGINES)
def test_commit_level_filters(engine, perf_repos, mined):
    truth = perf_repos[engine].truth
    commits = mined[engine][0]
    shas = set(commits["sha"].to_list())
    for sha, why in truth["not_perf"].items():
        assert sha not in shas, why
    for sha in truth["trimmed"]:
        assert sha not in shas
    # Squash merges carry their PR; the direct push carries none.
    direct = commits.filter(pl.col("sha") == truth["shas"]["direct_push"])
    assert direct["pr_number"].to_list() == [None]
    squash = commits.filter(pl.col("sha") == truth["shas"]["perf_squash"]).row(0, named=True)
    assert squash["pr_number"] == 1001
    assert squash["title"] == "[Perf] Optimize RMSNorm CUDA kernel"
    assert squash["subject"].endswith("(#1001)")
    assert squash["rule"] == "core" and squash["rule_match"]
    assert commits.filter(pl.col("sha") == truth["shas"]["cute_mid"])["rule"].to_list() == ["mid"]
    # Added files are candidates (reported), the root-less history gives a parent everywhere.
    assert commits["parent"].null_count() == 0
    assert commits.schema["authored_at"] == pl.Datetime("us", "UTC")


def test_frames_have_the_documented_schema(mined):
    _, rows, excluded = mined["vllm"]
    assert dict(rows.schema) == ROWS_SCHEMA
    assert dict(excluded.schema) == EXCLUDED_SCHEMA
    assert rows["id"].n_unique() == rows.height
    first = rows.row(0, named=True)
    assert first["id"] == row_id("vllm", first["sha"], first["path"])
    assert rows["pr_body"].null_count() == rows.height
    assert rows["gains"].null_count() == rows.height
    assert rows["kernel_speedup"].null_count() == rows["e2e_speedup"].null_count() == rows.height
    urls = rows.filter(pl.col("pr_number").is_not_null())
    assert all(
        u == f"https://github.com/vllm-project/vllm/pull/{n}"
        for u, n in urls.select("pr_url", "pr_number").iter_rows()
    )
    assert (
        rows.filter(pl.col("pr_number").is_null())["pr_url"].null_count()
        == rows.filter(pl.col("pr_number").is_null()).height
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_exclusion_counts_report_nvidia_licences(engine, mined):
    _, rows, excluded = mined[engine]
    counts = exclusion_counts(excluded)
    # TensorRT: the plain file and the before-side of the relicensing commit.
    assert counts["license_tensorrt"] == 2
    # Proprietary: LicenseRef-Nvidia and the BSD-looking "not permit-ted" trap.
    assert counts["license_proprietary"] == 2
    assert not rows.filter(pl.col("license").str.contains("NVIDIA")).height
    assert set(rows["license"].to_list()) == {"Apache-2.0", "BSD-3-Clause", "MIT"}


def test_mentions_prompt_and_flags(perf_repos, mined):
    truth = perf_repos["vllm"].truth
    rows = mined["vllm"][1]
    row = rows.filter(pl.col("sha") == truth["shas"]["perf_squash"]).row(0, named=True)
    assert any("1.8x" in c for c in row["speedup_claims"])
    assert "THOR" not in row["hardware_mentioned"]  # a Signed-off-by name
    prompt = row["prompt"]
    assert "Optimize RMSNorm CUDA kernel" in prompt and "(#1001)" not in prompt
    assert "H100" in prompt and "llama3.1" in prompt
    assert row["before_code"] in prompt
    assert SEARCH_MARK in prompt and REPLACE_MARK in prompt
    assert "Signed-off-by" not in prompt
    assert row["lines_changed"] == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_every_diff_applies_with_git_apply_and_reproduces_after_code(engine, mined, tmp_path):
    rows = mined[engine][1]
    cases = [
        PatchCase(r["id"], r["path"], r["before_code"], r["after_code"], r["diff"])
        for r in rows.iter_rows(named=True)
    ]
    assert verify_with_git_apply(cases, workdir=tmp_path) == []
    for c in cases:
        assert apply_patch(c.before, c.diff) == c.after
        assert c.diff.startswith(f"diff --git a/{c.path} b/{c.path}\n")
        assert f"\n--- a/{c.path}\n+++ b/{c.path}\n" in c.diff


def test_non_utf8_and_missing_final_newline_round_trip(perf_repos, mined, tmp_path):
    truth = perf_repos["sglang"].truth
    rows = mined["sglang"][1]
    lossy = [k for k, v in truth["rows"].items() if v.get("lossy")]
    nonl = [k for k, v in truth["rows"].items() if v.get("no_final_newline")]
    for sha, path in lossy:
        r = rows.filter((pl.col("sha") == sha) & (pl.col("path") == path)).row(0, named=True)
        assert "\ufffd" in r["before_code"] and "\ufffd" in r["after_code"]
        assert "\ufffd" in r["diff"]  # the changed line itself carries the byte
    for sha, path in nonl:
        r = rows.filter((pl.col("sha") == sha) & (pl.col("path") == path)).row(0, named=True)
        assert not r["before_code"].endswith("\n") and not r["after_code"].endswith("\n")
        assert r["diff"].count(NO_NEWLINE) == 2
    # And the real git apply, on a fresh directory, per row.
    for sha, path in lossy + nonl:
        r = rows.filter((pl.col("sha") == sha) & (pl.col("path") == path)).row(0, named=True)
        work = tmp_path / sha[:8]
        (work / path).parent.mkdir(parents=True)
        (work / path).write_bytes(r["before_code"].encode())
        (work / "p.diff").write_bytes(r["diff"].encode())
        subprocess.run(["git", "apply", "p.diff"], cwd=work, check=True, capture_output=True)
        assert (work / path).read_bytes() == r["after_code"].encode()


def test_effective_head_trims_the_fork_tip(perf_repos):
    r = perf_repos["vllm"]
    repo = GitRepo(r.path)
    assert repo.head() == r.truth["shas"]["fork_tip_2"]
    assert effective_head(repo, DEFAULT_SPECS["vllm"], "HEAD") == r.truth["head"]
    # stop_at pins an older commit when it is an ancestor; otherwise it is ignored.
    older = r.truth["shas"]["licences"]
    pinned = DEFAULT_SPECS["vllm"].with_(stop_at=older)
    assert effective_head(repo, pinned, "HEAD") == older
    bogus = DEFAULT_SPECS["vllm"].with_(stop_at="f" * 40)
    assert effective_head(repo, bogus, "HEAD") == r.truth["head"]
    # Other repos keep their tip.
    s = perf_repos["sglang"]
    assert effective_head(GitRepo(s.path), DEFAULT_SPECS["sglang"], "HEAD") == s.truth["head"]


def test_incremental_since_mines_only_the_new_range(perf_repos, mined):
    r = perf_repos["flashinfer"]
    repo, spec = GitRepo(r.path), DEFAULT_SPECS["flashinfer"]
    mid = r.truth["shas"]["licences"]
    _, first, _ = mine_repo(repo, spec, head=mid)
    commits = find_perf_commits(repo, spec, head="HEAD", since=mid)
    assert commits.height and commits["authored_at"].min() > first["authored_at"].max()
    second, _ = mine_commit_files(repo, spec, commits)
    merged = merge_increment(first, second)
    full = mined["flashinfer"][1]
    assert merged["id"].sort().to_list() == full["id"].sort().to_list()
    # Nothing new: an empty frame, quickly, and merging it changes nothing.
    head = effective_head(repo, spec, "HEAD")
    empty = find_perf_commits(repo, spec, head="HEAD", since=head)
    assert empty.height == 0
    assert merge_increment(full, mine_commit_files(repo, spec, empty)[0]).equals(full)


def test_needs_full_remine_after_force_push(tmp_path):
    from tests.unit.commits.conftest import build_perf_repo

    r = build_perf_repo(tmp_path / "repo", "sglang")
    repo = GitRepo(r.path)
    old = r.truth["head"]
    assert needs_full_remine(repo, None, old)
    assert not needs_full_remine(repo, r.truth["shas"]["licences"], old)
    # Rewrite history: reset two commits back and commit something else.
    r.builder.git("reset", "-q", "--hard", r.truth["shas"]["encoding"])
    r.builder.write("README.md", "rewritten\n")
    new = r.builder.commit("Rewrite")
    assert needs_full_remine(repo, old, new)
    assert needs_full_remine(repo, "0" * 40, new)


def test_blobless_clone_is_prefetched_in_one_fetch(perf_repos, tmp_path, monkeypatch):
    src = perf_repos["flashinfer"]
    clone = clone_or_fetch(str(src.path), tmp_path / "clone.git")
    repo = GitRepo(clone.path)
    assert repo.is_partial()
    spec = DEFAULT_SPECS["flashinfer"]
    commits = find_perf_commits(repo, spec, head="HEAD")  # needs no blob at all
    fetches: list[list[str]] = []
    real_run = GitRepo.run

    def spy(self, args, **kw):
        if args and args[0] == "fetch":
            fetches.append(list(args))
        return real_run(self, args, **kw)

    monkeypatch.setattr(GitRepo, "run", spy)
    # Any lazy (one-by-one) fetch would fail loudly instead of hiding in the timing.
    monkeypatch.setenv("GIT_NO_LAZY_FETCH", "1")
    rows, excluded = mine_commit_files(repo, spec, commits)
    assert len(fetches) == 1 and "--stdin" in fetches[0]
    assert _keys(rows) == set(src.truth["rows"])
    # A second mining finds every blob local: no fetch at all.
    fetches.clear()
    again, _ = mine_commit_files(repo, spec, commits)
    assert fetches == [] and again.equals(rows)


def test_engine_layout_globs(perf_repos):
    spec = DEFAULT_SPECS["vllm"]
    assert spec.kernel_kind("csrc/quantization/fp8/common.cu") == "native"
    assert spec.kernel_kind("vllm/models/deepseek_v4/ops/cute_gemm.py") == "python"
    assert spec.kernel_kind("vllm/models/deepseek_v4/model.py") is None
    assert spec.kernel_kind("csrc/tests/test_x.cu") is None
    assert spec.kernel_kind("docs/assets/x.cu") is None
    sg = DEFAULT_SPECS["sglang"]
    assert sg.kernel_kind("sgl-kernel/src/sgl-kernel/csrc/moe_align.cu") == "native"
    assert sg.kernel_kind("sgl-kernel/3rdparty/trtllm/x.cu") is None
    fi = DEFAULT_SPECS["flashinfer"]
    assert fi.kernel_kind("src/bench_norm.cu") is None
    assert fi.kernel_kind("src/norm_kernels.cu") == "native"
    assert fi.kernel_kind("flashinfer/cute_dsl/gemm.py") == "python"
    assert fi.kernel_kind("include/flashinfer/vec_dtypes_test.cu") is None
    # Plain directories for git (tree pruning), globs only where a wildcard is inner.
    assert "csrc" in spec.pathspecs()
    assert ":(glob)vllm/models/**/ops/**" in spec.pathspecs()


def test_empty_inputs(perf_repos):
    repo = GitRepo(perf_repos["vllm"].path)
    spec = DEFAULT_SPECS["vllm"]
    empty = find_perf_commits(repo, spec, head="HEAD", since=effective_head(repo, spec, "HEAD"))
    rows, excluded = mine_commit_files(repo, spec, empty)
    assert rows.height == excluded.height == 0
    assert dict(rows.schema) == ROWS_SCHEMA


def test_limits_are_configurable(perf_repos):
    from dagster_project.mining.commits import Limits

    r = perf_repos["vllm"]
    repo, spec = GitRepo(r.path), DEFAULT_SPECS["vllm"]
    commits = find_perf_commits(repo, spec, head="HEAD")
    rows, excluded = mine_commit_files(
        repo, spec, commits, limits=Limits(max_files=20, max_lines=5000)
    )
    reasons = exclusion_counts(excluded)
    assert reasons["too_many_files"] == 0 and reasons["too_many_lines"] == 0
    assert rows.height == len(r.truth["rows"]) + 11 + 1


def test_repo_path_is_not_written(perf_repos):
    """Mining only reads: the fixture repo's refs and config are unchanged."""
    path = Path(perf_repos["sglang"].path)
    before = (path / ".git" / "config").read_bytes()
    mine_repo(GitRepo(path), DEFAULT_SPECS["sglang"])
    assert (path / ".git" / "config").read_bytes() == before


def test_summarize(perf_repos, mined):
    from dagster_project.mining.commits import summarize

    _, rows, excluded = mined["flashinfer"]
    s = summarize(rows, excluded)
    assert s["rows"] == len(perf_repos["flashinfer"].truth["rows"])
    assert s["excluded_non_oss"] == 4
    assert s["languages"] == dict(rows.group_by("language").len().iter_rows())
    assert s["first_authored"] <= s["last_authored"]
