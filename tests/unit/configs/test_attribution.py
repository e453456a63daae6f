"""PR attribution through moves, renames, chmods and direct pushes."""

from __future__ import annotations

import polars as pl
import pytest

from dagster_project.mining.configs.attribution import (
    ATTRIBUTION_SCHEMA,
    attribute_config_prs,
    parse_raw_log,
    pr_number_of,
    verify_attribution,
)
from dagster_project.mining.configs.discover import discover_config_files
from tests.fixtures.config_history import SSU_BRANCH


@pytest.mark.parametrize(
    ("subject", "number"),
    [
        ("[Kernel] Add configs (#2979)", 2979),
        ("[Kernel] Migrate kernels (RFC #29630, Phase 2.5, 1/7) (#30784)", 30784),
        ("Move the remaining MoE configs after #23019 (#24004)", 24004),
        ("Fix (#12) (#34)  ", 34),
        ("Merge pull request #512 from someone/branch", 512),
        ("[Misc][Easy] Remove the space from the file name", None),
        ("mentions (#12) in the middle only", None),
    ],
)
def test_pr_number_of(subject: str, number: int | None) -> None:
    assert pr_number_of(subject) == number


@pytest.mark.parametrize(
    ("engine", "ref_name"), [("vllm", "HEAD"), ("vllm", SSU_BRANCH), ("sglang", "HEAD")]
)
def test_attribution_matches_truth_and_really_changed_content(
    config_repos, engine: str, ref_name: str
) -> None:
    cr = config_repos[engine]
    truth = cr.truth["files"] if ref_name == "HEAD" else cr.truth["branches"][ref_name]
    files = discover_config_files(cr.repo, engine, ref_name)
    attr = attribute_config_prs(cr.repo, engine, ref_name, files["path"].to_list())
    assert dict(attr.schema) == ATTRIBUTION_SCHEMA
    assert attr.height == len(truth)
    got = {r["path"]: r for r in attr.iter_rows(named=True)}
    for path, t in truth.items():
        row = got[path]
        assert row["pr_number"] == t["pr"], path
        assert row["pr_sha"] == t["sha"], path
        if t["pr"] is None:
            assert row["pr_url"] is None
        else:
            assert row["pr_url"].endswith(f"/pull/{t['pr']}")
            repo_slug = "vllm-project/vllm" if engine == "vllm" else "sgl-project/sglang"
            assert row["pr_url"].startswith(f"https://github.com/{repo_slug}/")

    # Pure moves and the chmod-only commit are never the answer.
    never = set(cr.truth["pure_move_commits"]) | {cr.truth.get("mode_only_commit")}
    assert not never & set(attr["pr_sha"].drop_nulls())

    # The acceptance check: at the found commit the blob differs from its parent's,
    # and it is still the blob at the ref.
    check = verify_attribution(cr.repo, attr, ref_name)
    assert check.height == attr.height
    assert check["changed_content"].all()
    assert check["matches_ref"].all()


def test_moves_are_followed_not_counted(config_repos) -> None:
    cr = config_repos["sglang"]
    files = discover_config_files(cr.repo, "sglang")
    attr = attribute_config_prs(cr.repo, "sglang", "HEAD", files["path"].to_list())
    m1 = attr.filter(
        pl.col("path").str.ends_with(
            "triton_3_1_0/E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"
        )
    )
    row = m1.row(0, named=True)
    # S1 -> S2 (#2163) -> S3 (#2563) -> triton_3_1_0 (#5955) -> runner dir (#23019)
    assert row["moves_followed"] == 4
    assert row["pr_number"] == 1800
    assert row["pr_path"].startswith("python/sglang/srt/layers/fused_moe/configs/")


def test_coverage_at_least_99_percent_when_every_change_is_a_pr(config_repos) -> None:
    cr = config_repos["vllm"]
    files = discover_config_files(cr.repo, "vllm")
    attr = attribute_config_prs(cr.repo, "vllm", "HEAD", files["path"].to_list())
    assert attr["pr_url"].is_not_null().mean() >= 0.99


def test_direct_push_has_sha_but_no_url(config_repos) -> None:
    cr = config_repos["sglang"]
    files = discover_config_files(cr.repo, "sglang")
    attr = attribute_config_prs(cr.repo, "sglang", "HEAD", files["path"].to_list())
    direct = attr.filter(pl.col("pr_sha") == cr.truth["direct_push_commit"])
    assert direct.height == 1
    assert direct["pr_url"].to_list() == [None] and direct["pr_number"].to_list() == [None]


def test_unknown_path_is_kept_with_null_pr(config_repos) -> None:
    cr = config_repos["vllm"]
    attr = attribute_config_prs(cr.repo, "vllm", "HEAD", ["nowhere/E=1,N=1,device_name=X.json"])
    assert attr.height == 1 and attr["pr_sha"].to_list() == [None]


def test_empty_paths_give_empty_frame(config_repos) -> None:
    attr = attribute_config_prs(config_repos["vllm"].repo, "vllm", "HEAD", [])
    assert attr.is_empty() and dict(attr.schema) == ATTRIBUTION_SCHEMA


def test_parse_raw_log_handles_renames_and_odd_names() -> None:
    z = "0" * 40
    a, b = "a" * 40, "b" * 40
    data = (
        f"@@{'1' * 40}\t2026-01-01T00:00:00+00:00\tMove (#7)\0\n"
        f":100644 100644 {a} {a} R100\0old/x [1, 2].json\0new/x [1,2].json\0"
        f":000000 100644 {z} {b} A\0new/é(R).json\0"
        f"@@{'2' * 40}\t2025-01-01T00:00:00+00:00\tTabs\tin subject\0"
    ).encode()
    commits = list(parse_raw_log(data))
    assert len(commits) == 2
    first = commits[0].changes
    assert first[0].status == "R" and first[0].score == 100
    assert (first[0].old_path, first[0].path) == ("old/x [1, 2].json", "new/x [1,2].json")
    assert first[1].path == "new/é(R).json" and first[1].status == "A"
    assert commits[1].subject == "Tabs\tin subject" and commits[1].changes == ()


def test_fixture_really_has_a_mode_only_and_pure_move_commits(config_repos) -> None:
    cr = config_repos["vllm"]
    raw = cr.repo.text(["show", "--raw", "--no-abbrev", "--format=", cr.truth["mode_only_commit"]])
    (line,) = raw.splitlines()
    old_mode, new_mode, old_oid, new_oid, status = line[1:].split("\t")[0].split()
    assert (old_mode, new_mode, status) == ("100755", "100644", "M") and old_oid == new_oid
    for sha in config_repos["sglang"].truth["pure_move_commits"]:
        raw = config_repos["sglang"].repo.text(["show", "-M", "--raw", "--format=", sha])
        statuses = {
            ln.split("\t")[0].split()[-1]
            for ln in raw.splitlines()
            if ln.endswith(".json") or ".json\t" in ln
        }
        assert statuses == {"R100"}, sha


def test_formatting_only_changes_are_walked_through(config_repos, tmp_path) -> None:
    """Whitespace, key order and a trailing newline leave the parsed JSON equal: the PR
    that last changed a value keeps the file (issue 21)."""
    import json

    from tests.fixtures.config_history import V_MOE_CFG
    from tests.fixtures.factory import RepoBuilder

    cr = config_repos["vllm"]
    files = discover_config_files(cr.repo, "vllm", "HEAD")
    attr = attribute_config_prs(cr.repo, "vllm", "HEAD", files["path"].to_list())
    a2 = attr.filter(pl.col("path").str.contains("E=8,N=7168,device_name=NVIDIA_A100")).row(
        0, named=True
    )
    assert a2["pr_number"] == 2979 and a2["format_only_skipped"] == 1

    b = RepoBuilder(tmp_path / "fmt")
    path = f"{V_MOE_CFG}/E=8,N=64,device_name=NVIDIA_L4.json"
    doc = {"1": {"BLOCK_SIZE_M": 16, "num_warps": 4}, "8": {"BLOCK_SIZE_M": 32, "num_warps": 8}}
    b.write(path, json.dumps(doc, indent=4) + "\n")
    b.commit("[Perf] Tune L4 (#1)")
    reordered = {
        "8": {"num_warps": 8, "BLOCK_SIZE_M": 32},
        "1": {"num_warps": 4, "BLOCK_SIZE_M": 16},
    }
    b.write(path, json.dumps(reordered, indent=2))
    b.commit("[Misc] Reformat configs (#2)")
    from dagster_project.mining.git import GitRepo

    repo = GitRepo(b.path)
    got = attribute_config_prs(repo, "vllm", "HEAD", [path]).row(0, named=True)
    assert got["pr_number"] == 1 and got["format_only_skipped"] == 1
    assert verify_attribution(repo, attribute_config_prs(repo, "vllm", "HEAD", [path]))[
        "matches_ref"
    ].all()
    doc["8"]["num_warps"] = 4
    b.write(path, json.dumps(doc, indent=2))
    b.commit("[Perf] Retune L4 M=8 (#3)")
    got = attribute_config_prs(repo, "vllm", "HEAD", [path]).row(0, named=True)
    assert got["pr_number"] == 3 and got["format_only_skipped"] == 0
