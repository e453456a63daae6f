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
    assert {"config_files", "kernel_sources", "tuned_configs"} <= ran
    assert not ran & {"config_entries", "config_attribution", "kernel_commits", "pr_gains"}, sorted(
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

    # The shards' code version carries the generator version and its parameters: a
    # new seed is a new code version, and every shard regenerates.
    monkeypatch.setenv("KERNELHOUSE_SIM_SEED", "7")
    out = run_build(build_definitions(), instance, select, refresh=True)
    assert out.ok
    assert "sim_tasks" in _ran(out) and "kernelinfer_sessions[000]" in _ran(out)
    assert "new code version" in out.reasons["kernelinfer_sessions[000]"]
    assert shard0.read_bytes() != first
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
