"""The mined layers end to end through Dagster on the engine fixture repos: every
planted config file, row, PR attribution, exclusion and gate, then incremental refresh
(no-op, one new commit, a force push) with row-level equality checks."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from dagster_project.definitions import build_definitions
from dagster_project.execution.planner import run_build
from dagster_project.storage.lake import Lake
from tests.fixtures.factory import RepoBuilder

pytestmark = pytest.mark.slow

MINED = (
    "repo_clone,config_files,config_entries,kernel_sources,moe_model_shapes,config_attribution,"
    "perf_commits,kernel_commit_files,pr_bodies,pr_gains,kernel_commits,tuned_configs"
)


@pytest.fixture
def offline_github(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing listens on port 9: the PR step must fall back to the (empty) cache.
    monkeypatch.setenv("KERNELHOUSE_GITHUB_API_URL", "http://127.0.0.1:9")


def _build(select: str = MINED, partitions: list[str] | None = None):  # noqa: ANN202
    defs = build_definitions()
    return run_build(defs, dg.DagsterInstance.ephemeral(), select, partitions=partitions)


def _lake(home: Path) -> Lake:
    return Lake(home / "lake.duckdb", str(home / "lake"))


def test_mined_layers_match_planted_truth(use_engine_repos, offline_github, kh_home: Path) -> None:
    outcome = _build()
    assert outcome.ok, (outcome.failed, outcome.skipped)
    assert outcome.checks_failed == []
    lake = _lake(kh_home)

    files = lake.read_table("raw", "config_files")
    tc = lake.read_table("datasets", "tuned_configs")
    att = lake.read_table("derived", "config_attribution")
    for engine in ("vllm", "sglang"):
        truth = use_engine_repos[engine].planted["configs"]
        mine = files.filter(pl.col("repo") == engine)
        assert set(mine["path"]) == set(truth["files"]), engine
        for path, want in truth["files"].items():
            row = mine.filter(pl.col("path") == path).row(0, named=True)
            assert row["parse_status"] == want["status"], path
            if want["status"] == "ok":
                assert (
                    tc.filter((pl.col("repo") == engine) & (pl.col("config_path") == path)).height
                    == want["rows"]
                ), path
                got_pr = att.filter((pl.col("repo") == engine) & (pl.col("path") == path))[
                    "pr_number"
                ][0]
                assert got_pr == want["pr"], path
    assert (
        tc.filter(pl.col("split") == "test")["split_group"]
        .is_in(tc.filter(pl.col("split") == "train")["split_group"].implode())
        .sum()
        == 0
    )

    kc = lake.read_table("datasets", "kernel_commits")
    excluded = lake.read_table("raw", "kernel_commit_excluded")
    for engine, repo in use_engine_repos.items():
        truth = repo.planted["commits"]
        got = {
            (r["sha"], r["path"]) for r in kc.filter(pl.col("repo") == engine).iter_rows(named=True)
        }
        assert got == set(truth["rows"]), engine
        reasons = {
            (r["sha"], r["path"]): r["reason"]
            for r in excluded.filter(pl.col("repo") == engine).iter_rows(named=True)
        }
        for key, reason in truth["excluded"].items():
            assert reasons.get(key) == reason, (engine, key)
    assert not kc["license"].is_in(["NVIDIA-TensorRT", "NVIDIA-proprietary"]).any()
    assert set(kc["split"]) <= {"train", "test"} and "test" in set(kc["split"])


def _table_snapshot(lake: Lake) -> dict[str, pl.DataFrame]:
    out = {}
    for schema, table, key in [
        ("raw", "perf_commits", "sha"),
        ("raw", "kernel_commit_files", "id"),
        ("raw", "config_entries", "path"),
        ("datasets", "kernel_commits", "id"),
        ("datasets", "tuned_configs", "id"),
    ]:
        df = lake.read_table(schema, table)
        out[table] = df.select(sorted(c for c in df.columns if df.schema[c] != pl.Object)).sort(key)
    return out


def _build_md() -> dict:
    """A MINED build, then the vLLM partition's metadata of the two miners as that build
    recorded it (its mode: what the build found upstream). Read from the build's own
    instance: no separate run of the miners (which would move the watermark first)."""
    instance = dg.DagsterInstance.ephemeral()
    outcome = run_build(build_definitions(), instance, MINED)
    assert outcome.ok, (outcome.failed, outcome.skipped)
    out = {}
    for name in ("perf_commits", "kernel_commit_files"):
        (record,) = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(name), asset_partitions=["vllm"]),
            limit=1,
        ).records
        mat = record.event_log_entry.asset_materialization
        assert mat is not None
        out[name] = {m: v.value for m, v in mat.metadata.items()}
    return out


def test_incremental_refresh(vllm_upstream: RepoBuilder, offline_github, kh_home: Path) -> None:
    b = vllm_upstream
    assert _build().ok
    lake = _lake(kh_home)
    before = _table_snapshot(lake)

    # 1. Nothing new upstream: no mining work, no table changes.
    md = _build_md()
    assert md["perf_commits"]["mode"] == "noop" and md["perf_commits"]["new_commits"] == 0
    assert md["kernel_commit_files"]["mined_commits"] == 0
    after = _table_snapshot(lake)
    for name, df in before.items():
        assert df.equals(after[name]), f"{name} changed on a no-op refresh"

    # 2. One new perf commit and one new config file upstream: exactly their rows.
    kernel = "csrc/fixture_new_kernel.cu"
    b.write(
        kernel,
        "// SPDX-License-Identifier: Apache-2.0\n"
        "__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }\n",
    )
    b.commit("[Kernel] add scale kernel (#9001)")
    b.write(
        kernel,
        "// SPDX-License-Identifier: Apache-2.0\n"
        "__global__ void scale(float4* x, float a) {\n"
        "  float4 v = x[threadIdx.x]; v.x *= a; v.y *= a; v.z *= a; v.w *= a; x[threadIdx.x] = v;\n"
        "}\n",
    )
    new_sha = b.commit("[Perf] Vectorize scale kernel with float4 loads (#9002)")
    cfg_dir = "vllm/model_executor/layers/fused_moe/configs"
    cfg = f"{cfg_dir}/E=16,N=512,device_name=NVIDIA_L40S.json"
    b.write(
        cfg,
        '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
        '"num_warps": 4, "num_stages": 3}, '
        '"64": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
        '"num_warps": 4, "num_stages": 3}}\n',
    )
    b.commit("[Misc] Add L40S tuned config for E=16 (#9003)")
    md = _build_md()
    assert md["perf_commits"]["mode"] == "incremental"
    grown = _table_snapshot(lake)
    new_perf = grown["perf_commits"].join(
        before["perf_commits"].select("sha"), on="sha", how="anti"
    )
    # Only the three new commits can be new perf commits (titles decide which qualify).
    assert (
        new_sha in set(new_perf["sha"])
        and new_perf.height == md["perf_commits"]["new_commits"] <= 3
    )
    added = grown["kernel_commits"].join(before["kernel_commits"].select("id"), on="id", how="anti")
    assert added.select("sha", "path").rows() == [(new_sha, kernel)]
    added_cfg = grown["tuned_configs"].join(
        before["tuned_configs"].select("id"), on="id", how="anti"
    )
    assert set(added_cfg["config_path"]) == {cfg} and added_cfg.height == 2
    assert set(added_cfg["config_pr_url"]) == {"https://github.com/vllm-project/vllm/pull/9003"}

    # 3. Force push: drop the two commits and publish a different one. The repo is
    #    re-mined cleanly; the vanished commit's row disappears.
    b.git("reset", "-q", "--hard", "HEAD~2")
    b.write(
        kernel,
        "// SPDX-License-Identifier: Apache-2.0\n"
        "__global__ void scale(float* x, float a) { "
        "x[threadIdx.x] = __fmul_rn(x[threadIdx.x], a); }\n",
    )
    other = b.commit("[Perf] Faster scale via fused multiply (#9004)")
    md = _build_md()
    assert md["perf_commits"]["mode"] == "remine"
    final = lake.read_table("datasets", "kernel_commits")
    assert new_sha not in set(final["sha"]) and other in set(final["sha"])
    remined = final.filter(pl.col("repo") != "vllm").sort("id")
    assert remined.select("id").equals(
        before["kernel_commits"].filter(pl.col("repo") != "vllm").select("id").sort("id")
    )


def test_rule_change_reaches_the_lake_on_refresh(
    vllm_upstream: RepoBuilder, kh_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stricter title rule with a version bump: refresh re-mines, says why, drops rows;
    the next refresh is a no-op again (issue 21: the watermark used to store heads only)."""
    import re

    from dagster_project.mining.commits import perf_filter
    from dagster_project.mining.versions import asset_code_version

    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    assert run_build(build_definitions(), instance, MINED).ok
    lake = _lake(kh_home)
    kc = lake.read_table("datasets", "kernel_commits").filter(pl.col("repo") == "vllm")
    victim = kc["title"].sort()[0]
    n_victim = kc.filter(pl.col("title") == victim).height
    assert n_victim > 0
    wm = lake.read_table("raw", "mining_watermarks")
    assert set(wm["rules_version"]) == {asset_code_version("perf_commits")}

    # The rule changes (a new veto) and its version is bumped, as a code change would.
    monkeypatch.setattr(
        perf_filter,
        "EXCLUDE_RE",
        re.compile(perf_filter.EXCLUDE_RE.pattern + "|" + re.escape(victim), re.IGNORECASE),
    )
    monkeypatch.setattr(perf_filter, "RULES_VERSION", "test-veto")
    out = run_build(build_definitions(), instance, MINED, refresh=True)
    assert out.ok, (out.failed, out.skipped)
    assert "code version" in out.reasons["perf_commits[vllm]"], out.reasons
    assert "kernel_commits" in out.reasons
    after = lake.read_table("datasets", "kernel_commits")
    assert after.filter(pl.col("title") == victim).height == 0
    assert after.filter(pl.col("repo") == "vllm").height == kc.height - n_victim
    wm = lake.read_table("raw", "mining_watermarks")
    assert "title_filter=test-veto" in wm.filter(pl.col("repo") == "vllm")["rules_version"][0]
    assert set(wm["mode"]) == {"rules_changed"}

    # Unchanged rules: nothing mined again.
    out = run_build(build_definitions(), instance, MINED, refresh=True)
    assert out.ok and "perf_commits[vllm]" not in out.reasons and "kernel_commits" in out.fresh
