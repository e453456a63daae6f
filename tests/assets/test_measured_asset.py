"""The measured_configs asset on a machine without a GPU: it says it skipped measuring
and still rebuilds and exports datasets.measured_configs from ingested device results."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from assets.measured import NO_GPU, measured_configs
from dagster_project.resources import LakeResource
from dagster_project.rewards import measured
from dagster_project.rewards.gpu import run_batch as rb
from tests.unit.test_execution_reward import make_lake, runner_measure


def test_asset_rebuilds_from_ingested_results_without_a_gpu(
        kh_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measured, "cuda_available", lambda: False)
    kh_home.mkdir(parents=True, exist_ok=True)
    lake = make_lake(kh_home)  # lake.duckdb under KERNELHOUSE_HOME
    batch, _ = measured.plan_batch(lake, 2, m_per_file=1)
    path = kh_home / "batch.jsonl"
    measured.write_batch(batch, path)
    out = kh_home / "out.jsonl"
    rb.run_batch(path, out, measure=runner_measure({"tuned": 8.0, "default": 10.0}), env={})
    measured.ingest_results(lake, [out])

    result = dg.materialize([measured_configs],
                            resources={"lake": LakeResource(home=str(kh_home))})
    assert result.success
    md = result.asset_materializations_for_node("measured_configs")[0].metadata
    assert md["dagster/row_count"].value == 2
    assert md["gpu_batch"].value == NO_GPU
    assert md["median_measured_speedup_vs_default"].value == 1.25
    exported = pl.read_parquet(kh_home / "exports" / "measured_configs" /
                               "measured_configs.parquet")
    assert exported.height == 2 and set(exported["best_label"]) == {"tuned"}


def test_gpu_disable_keeps_the_asset_off_a_present_gpu(
        kh_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """KERNELHOUSE_GPU_DISABLE=1 wins over a GPU that is there: nothing is planned or
    measured (a batch would need torch), the dataset is still rebuilt and exported."""
    monkeypatch.setattr(measured, "cuda_available", lambda: True)
    monkeypatch.setenv("KERNELHOUSE_GPU_DISABLE", "1")
    kh_home.mkdir(parents=True, exist_ok=True)
    make_lake(kh_home)
    result = dg.materialize([measured_configs],
                            resources={"lake": LakeResource(home=str(kh_home))})
    assert result.success
    md = result.asset_materializations_for_node("measured_configs")[0].metadata
    assert md["gpu_batch"].value == "disabled by KERNELHOUSE_GPU_DISABLE"
    assert not (kh_home / "gpu").exists()
