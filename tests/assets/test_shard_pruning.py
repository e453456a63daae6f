"""A build smaller than the default runs only the shards it fills, plus any shard an
earlier, larger build wrote (so that shard's file is still dropped); a refresh of the
small build then has nothing to do. Real Dagster runs on a persistent instance."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from dagster_project.definitions import build_definitions
from dagster_project.execution.planner import plan_stages, run_build

pytestmark = pytest.mark.slow

SELECT = "sim_tasks,kernelswarm_episodes"


def _shard_runs(outcome) -> list[str]:  # noqa: ANN001
    return sorted(r[1] for r in outcome.runs if r[1] is not None)


def _episode_keys(
    defs: dg.Definitions, instance: dg.DagsterInstance | None = None
) -> list[str | None]:
    (stage,) = [
        s
        for s in plan_stages(defs, SELECT, instance)
        if dg.AssetKey("kernelswarm_episodes") in s.keys
    ]
    return stage.partition_keys


def test_small_build_runs_only_its_shards_and_cleans_a_larger_one(
    kh_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    defs = build_definitions()
    assert len(_episode_keys(defs)) == 24  # the default build's shards are all declared

    # 130 episodes fill two shards: only those two run.
    monkeypatch.setenv("KERNELHOUSE_SIM_EPISODES", "130")
    defs = build_definitions()
    assert _episode_keys(defs, instance) == ["000", "001"]
    out = run_build(defs, instance, SELECT)
    assert out.ok, out.failed
    assert _shard_runs(out) == ["000", "001"]
    shard1 = kh_home / "lake" / "kernelswarm_episodes" / "001.parquet"
    assert shard1.exists()

    # 40 episodes fill one shard; shard 001 was written by the larger build, so it runs
    # too and drops its file; the 22 never-written shards do not run.
    monkeypatch.setenv("KERNELHOUSE_SIM_EPISODES", "40")
    defs = build_definitions()
    out = run_build(defs, instance, SELECT)
    assert out.ok, out.failed
    assert _shard_runs(out) == ["000", "001"]
    assert not shard1.exists()

    # Nothing is stale now, and the never-written shards are not "missing" work.
    out = run_build(defs, instance, SELECT, refresh=True)
    assert out.ok and not out.reasons, out.reasons
