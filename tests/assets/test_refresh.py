"""The refresh planner (``run_build(refresh=True)``, ``kernelhouse refresh``): on real
fixture repositories and a persistent Dagster instance, a refresh runs only what
observes the outside world plus whatever Dagster calls stale, and content data versions
stop a re-run that produced the same rows from cascading."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from dagster_project.definitions import build_definitions
from dagster_project.execution.planner import observers, run_build
from dagster_project.storage.lake import Lake
from tests.fixtures.factory import RepoBuilder

pytestmark = pytest.mark.slow

MINED = (
    "repo_clone,config_files,config_entries,kernel_sources,moe_model_shapes,config_attribution,"
    "perf_commits,kernel_commit_files,pr_bodies,pr_gains,kernel_commits,tuned_configs"
)


def _snapshot(home: Path) -> dict[str, pl.DataFrame]:
    lake = Lake(home / "lake.duckdb", str(home / "lake"))
    out = {}
    for schema, table in (
        ("raw", "config_files"),
        ("raw", "config_entries"),
        ("raw", "perf_commits"),
        ("raw", "kernel_commit_files"),
        ("datasets", "tuned_configs"),
        ("datasets", "kernel_commits"),
    ):
        df = lake.read_table(schema, table)
        out[f"{schema}.{table}"] = df.sort(df.columns[0])
    return out


def _instance(tmp_path: Path) -> dg.DagsterInstance:
    """A persistent instance: staleness is read from the previous runs' records."""
    (tmp_path / "dagster").mkdir()
    return dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))


def _ran(outcome) -> set[str]:  # noqa: ANN001
    return set(outcome.reasons)


def test_refresh_runs_only_what_changed(
    vllm_upstream: RepoBuilder, kh_home: Path, tmp_path: Path
) -> None:
    instance = _instance(tmp_path)
    defs = build_definitions()
    assert run_build(defs, instance, MINED).ok
    before = _snapshot(kh_home)

    # 1. Nothing new anywhere: only the observers run, and no table changes.
    out = run_build(defs, instance, MINED, refresh=True)
    assert out.ok
    assert {r.split("[")[0] for r in _ran(out)} <= observers(defs), _ran(out)
    assert {"repo_clone[vllm]", "repo_clone[sglang]", "repo_clone[flashinfer]"} <= _ran(out)
    assert "tuned_configs" in out.fresh and "kernel_commits" in out.fresh
    after = _snapshot(kh_home)
    for name, df in before.items():
        assert df.equals(after[name]), f"{name} changed on a no-op refresh"

    # 2. A new vLLM head that touches no kernel and no config: the vLLM miners look
    #    (their input changed) but write the same rows, so their children stay put.
    #    tuned_configs does re-run: its rows carry the snapshot commit, which moved.
    vllm_upstream.write("docs/notes.md", "fixture: documentation only\n")
    head = vllm_upstream.commit("[Doc] notes")
    out = run_build(defs, instance, MINED, refresh=True)
    assert out.ok
    ran = _ran(out)
    assert (
        "perf_commits[vllm]" in ran
        and "repo_clone has a new data version" in out.reasons["perf_commits[vllm]"]
    )
    assert "perf_commits[sglang]" not in ran and "kernel_commit_files[vllm]" not in ran
    # config_attribution walks the history up to the recorded head (it reads
    # raw.repo_heads), so it looks too, finds the same PRs and starts nothing after it.
    assert {"config_files", "kernel_sources", "config_attribution", "tuned_configs"} <= ran
    assert not ran & {"config_entries", "pr_bodies", "kernel_commits", "pr_gains"}, sorted(
        out.reasons.items()
    )
    now = _snapshot(kh_home)
    for name, df in before.items():
        if name == "datasets.tuned_configs":
            vllm = pl.col("repo") == "vllm"
            assert set(now[name].filter(vllm)["snapshot_commit"]) == {head}
            assert df.drop("snapshot_commit").equals(now[name].drop("snapshot_commit"))
        elif name != "raw.config_files":  # config_files also records the snapshot
            assert df.equals(now[name]), name

    # 3. A real perf commit: its rows flow all the way to the dataset.
    kernel = "csrc/fixture_refresh_kernel.cu"
    vllm_upstream.write(
        kernel,
        "// SPDX-License-Identifier: Apache-2.0\n"
        "__global__ void k(float* x) { x[threadIdx.x] += 1.f; }\n",
    )
    vllm_upstream.commit("[Kernel] add k (#9101)")
    vllm_upstream.write(
        kernel,
        "// SPDX-License-Identifier: Apache-2.0\n"
        "__global__ void k(float4* x) { "
        "float4 v = x[threadIdx.x]; v.x += 1.f; x[threadIdx.x] = v; }\n",
    )
    sha = vllm_upstream.commit("[Perf] Vectorise k (#9102)")
    out = run_build(defs, instance, MINED, refresh=True)
    assert out.ok
    assert {"perf_commits[vllm]", "kernel_commit_files[vllm]", "kernel_commits"} <= _ran(out)
    rows = _snapshot(kh_home)["datasets.kernel_commits"]
    assert rows.filter(pl.col("sha") == sha)["path"].to_list() == [kernel]
    # ... and the next refresh is a no-op again.
    out = run_build(defs, instance, MINED, refresh=True)
    assert {r.split("[")[0] for r in _ran(out)} <= observers(defs), _ran(out)

    # 4. The upstream disappears: the fetch fails, nothing downstream of it runs, the
    #    lake keeps its data, and once the source is back a refresh is clean again.
    kept = _snapshot(kh_home)
    gone = vllm_upstream.path.with_name("vllm-moved")
    vllm_upstream.path.rename(gone)
    out = run_build(defs, instance, MINED, refresh=True)
    assert not out.ok and "repo_clone[vllm]" in out.failed
    assert "config_files" in out.skipped and "tuned_configs" not in _ran(out)
    for name, df in kept.items():
        assert df.equals(_snapshot(kh_home)[name]), name
    gone.rename(vllm_upstream.path)
    out = run_build(defs, instance, MINED, refresh=True)
    assert out.ok and {r.split("[")[0] for r in _ran(out)} <= observers(defs), _ran(out)


def test_simulated_shards_regenerate_only_on_code_version_change(
    kh_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    instance = _instance(tmp_path)
    select = "sim_tasks,kernelinfer_sessions"
    assert run_build(build_definitions(), instance, select).ok
    shard0 = kh_home / "lake" / "kernelinfer_sessions" / "000.parquet"
    first = shard0.read_bytes()

    out = run_build(build_definitions(), instance, select, refresh=True)
    assert out.ok and not _ran(out), _ran(out)
    # The UI's row count is the whole table's (one shard here: the same as its own;
    # tests/assets/test_row_count.py has several), issue 34.
    event = instance.get_latest_materialization_event(dg.AssetKey("kernelinfer_sessions"))
    assert event and event.asset_materialization
    assert event.asset_materialization.metadata["dagster/row_count"].value == 40
    assert event.asset_materialization.metadata["partition_rows"].value == 40
    # Runs carry the command that started them, not __ephemeral_asset_job__ (issue 34).
    assert {r.job_name for r in instance.get_runs()} == {"kernelhouse_build"}

    # The shards' code version carries the generator version and its parameters: a
    # new seed is a new code version, and every shard regenerates.
    monkeypatch.setenv("KERNELHOUSE_SIM_SEED", "7")
    out = run_build(build_definitions(), instance, select, refresh=True)
    assert out.ok
    assert "sim_tasks" in _ran(out) and "kernelinfer_sessions[000]" in _ran(out)
    assert "new code version" in out.reasons["kernelinfer_sessions[000]"]
    assert shard0.read_bytes() != first
    assert {r.job_name for r in instance.get_runs()} == {"kernelhouse_build", "kernelhouse_refresh"}
    out = run_build(build_definitions(), instance, select, refresh=True)
    assert not _ran(out)


def test_automation_sensor_reacts_to_changed_data_only(
    vllm_upstream: RepoBuilder, kh_home: Path, tmp_path: Path
) -> None:
    """The daemon path: after the daily fetch, the automation conditions request work
    only downstream of a head that really moved."""
    instance = _instance(tmp_path)
    defs = build_definitions()
    assert run_build(defs, instance, MINED).ok
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance)

    # The schedule's fetch finds the same heads: nothing is requested.
    assert run_build(defs, instance, "repo_clone").ok
    same = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    mined = [
        k for k in (dg.AssetKey(n) for n in MINED.split(",")) if k != dg.AssetKey("repo_clone")
    ]
    assert sum(same.get_num_requested(k) for k in mined) == 0

    # A new vLLM head: the vLLM miners and the repo-wide assets are requested.
    vllm_upstream.write("docs/more.md", "fixture\n")
    vllm_upstream.commit("[Doc] more")
    assert run_build(defs, instance, "repo_clone", partitions=["vllm"]).ok
    moved = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=same.cursor)
    assert moved.get_requested_partitions(dg.AssetKey("perf_commits")) == {"vllm"}
    assert moved.get_num_requested(dg.AssetKey("config_files")) == 1
    assert moved.get_num_requested(dg.AssetKey("kernel_commits")) == 0


# -- declared lineage reaches refresh (issue 34) ---------------------------------------------
def _github_without_measurements(httpserver) -> str:  # noqa: ANN001
    """A local GitHub REST server whose PRs all say something that holds no measurement,
    so a new body changes kernel_commits' ``pr_body`` but no gains."""
    import json
    import re

    from werkzeug import Request, Response

    def handle(request: Request) -> Response:
        m = re.match(r".*/repos/([^/]+/[^/]+)/pulls/(\d+)$", request.path)
        if not m:
            return Response(json.dumps({"resources": {}}), 200, content_type="application/json")
        number = int(m.group(2))
        data = {
            "number": number,
            "title": f"Kernel change {number}",
            "body": "Rewrites the kernel's inner loop; no benchmark numbers here.",
            "state": "closed",
            "merged_at": "2025-01-02T03:04:05Z",
            "html_url": f"https://github.com/{m.group(1)}/pull/{number}",
            "url": f"http://127.0.0.1/api/repos/{m.group(1)}/pulls/{number}",
        }
        return Response(json.dumps(data), 200, content_type="application/json")

    httpserver.expect_request(re.compile(".*")).respond_with_handler(handle)
    return str(httpserver.url_for("/api")).rstrip("/")


def test_a_new_pr_body_reruns_gains_and_kernel_commits(
    use_engine_repos, kh_home: Path, tmp_path: Path, httpserver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kernel_commits reads raw.pr_bodies itself (the PR's title and body are columns), so
    a body that arrives later re-runs it even when it holds no gains (pr_gains then writes
    the same rows, and before issue 34 nothing else told kernel_commits)."""
    instance = _instance(tmp_path)
    defs = build_definitions()
    assert run_build(defs, instance, MINED).ok  # GitHub unreachable: no bodies
    lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))
    assert lake.read_table("datasets", "kernel_commits")["pr_body"].is_null().all()

    monkeypatch.setenv("KERNELHOUSE_GITHUB_API_URL", _github_without_measurements(httpserver))
    out = run_build(build_definitions(), instance, MINED, refresh=True)
    assert out.ok, (out.failed, out.skipped)
    assert {"pr_bodies", "pr_gains", "kernel_commits"} <= _ran(out), sorted(out.reasons.items())
    assert "pr_bodies has a new data version" in out.reasons["kernel_commits"]
    bodies = lake.read_table("datasets", "kernel_commits")["pr_body"]
    assert bodies.drop_nulls().len() > 0


def test_a_lookup_or_names_rule_change_reruns_tuned_configs(
    use_engine_repos, kh_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tuned_configs applies the engine-lookup rule (through raw.config_files'
    ``loaded_at_runtime``) and the GPU-name rules: a new version of either re-runs it,
    even when config_files writes the same rows."""
    from dagster_project.mining.configs import lookup, names

    instance = _instance(tmp_path)
    assert run_build(build_definitions(), instance, MINED).ok
    # One no-op refresh after both bumps (not one after each): a bump that left
    # tuned_configs stale for good would make the names step pass without names' own
    # effect, but then fails the final refresh, so every failure is still caught.
    for module in (lookup, names):
        monkeypatch.setattr(module, "RULES_VERSION", f"{module.RULES_VERSION}-test")
        out = run_build(build_definitions(), instance, MINED, refresh=True)
        assert out.ok, (out.failed, out.skipped)
        assert "tuned_configs" in _ran(out), (module.__name__, sorted(out.reasons.items()))
        assert "new code version" in out.reasons["tuned_configs"]
    out = run_build(build_definitions(), instance, MINED, refresh=True)
    assert "tuned_configs" not in _ran(out)


def test_an_extractor_version_change_reruns_pr_gains(
    use_engine_repos, kh_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster_project.gains.extract import choose

    instance = _instance(tmp_path)
    assert run_build(build_definitions(), instance, MINED).ok
    # That a refresh without the change leaves pr_gains alone is step 1 of
    # test_refresh_runs_only_what_changed (only observers run); here the reason is checked.
    monkeypatch.setattr(choose, "EXTRACTOR_VERSION", f"{choose.EXTRACTOR_VERSION}.test")
    out = run_build(build_definitions(), instance, MINED, refresh=True)
    assert out.ok, (out.failed, out.skipped)
    assert "pr_gains" in _ran(out) and "new code version" in out.reasons["pr_gains"]
