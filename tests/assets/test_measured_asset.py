"""The measured_configs asset on a machine without a GPU: it says it skipped measuring
and still rebuilds and exports datasets.measured_configs from ingested device results."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from assets.measured import NO_GPU, measured_configs
from dagster_project.rewards import measured
from dagster_project.rewards.gpu import run_batch as rb
from dagster_project.rewards.gpu.spec import CONFIG_FAILURES
from dagster_project.wiring.resources import LakeResource
from tests.unit.test_execution_reward import make_lake, runner_measure


def test_asset_rebuilds_from_ingested_results_without_a_gpu(
    kh_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(measured, "cuda_available", lambda: False)
    kh_home.mkdir(parents=True, exist_ok=True)
    lake = make_lake(kh_home)  # lake.duckdb under KERNELHOUSE_HOME
    batch, _ = measured.plan_batch(lake, 2, m_per_file=1)
    path = kh_home / "batch.jsonl"
    measured.write_batch(batch, path)
    out = kh_home / "out.jsonl"
    rb.run_batch(path, out, measure=runner_measure({"tuned": 8.0, "default": 10.0}), env={})
    measured.ingest_results(lake, [out])

    result = dg.materialize([measured_configs], resources={"lake": LakeResource(home=str(kh_home))})
    assert result.success
    md = result.asset_materializations_for_node("measured_configs")[0].metadata
    shipped = measured.read_shipped(measured.shipped_batches())["row_id"].n_unique()
    assert md["dagster/row_count"].value == 2 + shipped
    assert md["shipped_batches"].value == len(measured.shipped_batches())
    assert md["gpu_batch"].value == NO_GPU
    exported = pl.read_parquet(
        kh_home / "exports" / "measured_configs" / "measured_configs.parquet"
    )
    assert exported.height == 2 + shipped
    local = exported.filter(pl.col("id").is_in([r.id for r in batch]))
    assert local.height == 2 and set(local["best_label"]) == {"tuned"}
    assert local["measured_speedup_vs_default"].to_list() == [1.25, 1.25]


def test_every_shipped_batch_is_in_a_fresh_build(
    kh_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh machine without a GPU (empty lake, no measurement): the asset's dataset
    and export hold every row of every batch shipped in dagster_project/data/measured,
    with its tuned time, versions and noise; removing a batch from ingestion fails."""
    monkeypatch.setattr(measured, "cuda_available", lambda: False)
    kh_home.mkdir(parents=True, exist_ok=True)
    make_lake(kh_home)
    files = measured.shipped_batches()
    assert files, "no shipped batches found in the package"
    result = dg.materialize([measured_configs], resources={"lake": LakeResource(home=str(kh_home))})
    assert result.success
    exported = pl.read_parquet(
        kh_home / "exports" / "measured_configs" / "measured_configs.parquet"
    )
    got = set(exported["id"])
    for f in files:
        ids = set(pl.read_parquet(f, columns=["row_id"])["row_id"])
        assert ids and ids <= got, f"{f.name}: {len(ids - got)} rows not ingested"
    rows = exported.filter(pl.col("id").is_in(list(got)))
    # a tuned config that fails on the card measured (stop 39: 4 H100 fp8 block-scaled MoE
    # rows whose upstream H100 config has a K tile of 256 over 128-wide scale groups) has
    # no tuned time and says why; every other row has one
    failed = rows.filter(pl.col("tuned_status") != "ok")
    assert failed["t_tuned_us"].null_count() == failed.height
    assert set(failed["tuned_status"]) <= CONFIG_FAILURES
    rows = rows.filter(pl.col("tuned_status") == "ok")
    assert rows["t_tuned_us"].null_count() == 0
    for col in (
        "device",
        "driver_version",
        "cuda_version",
        "torch_version",
        "triton_version",
        "harness_version",
        "spread_tuned",
        "measured_on",
    ):
        assert rows[col].null_count() == 0, col
    # issue 38: tables launched on a grid the engine would not use give no labels; the
    # others name a single best config only when it is alone beyond noise
    live = rows.filter(pl.col("superseded_reason").is_null())
    gone = rows.filter(pl.col("superseded_reason").is_not_null())
    assert gone.height and gone["measured_best_configs"].null_count() == gone.height
    assert live["measured_best_configs"].null_count() == 0
    tie = live["best_is_tie"]
    assert (live["measured_best_config"].is_null() == tie).all()
    assert (live["measured_best_configs"].list.len() == live["n_best_tied"]).all()
    # a config timed twice (a tuned config equal to the default) is one member, not a tie
    assert (live["measured_best_configs"].list.n_unique() == live["n_best_tied"]).all()
    assert ((live["n_best_tied"] > 1) == tie).all() and tie.any() and (~tie).any()
    # issue 34: the export has a dataset card declaring the file and its schema
    from dagster_project.publish.cards import parse_front_matter

    card = (kh_home / "exports" / "measured_configs" / "README.md").read_text()
    meta = parse_front_matter(card)
    assert meta["configs"][0]["data_files"] == [
        {"split": "train", "path": "measured_configs.parquet"}
    ]
    declared = [f["name"] for f in meta["dataset_info"][0]["features"]]
    assert declared == exported.columns
    assert f"| rows | {exported.height:,} |" in card and "load_dataset(" in card
    # issue 37: the card says how the config reward is defended, from the suite's record
    assert "## The config reward's defences" in card
    assert "| dropped split-K partial sums | claims SPLIT_K=8" in card
    assert "Open for configs:" in card


def test_gpu_disable_keeps_the_asset_off_a_present_gpu(
    kh_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KERNELHOUSE_GPU_DISABLE=1 wins over a GPU that is there: nothing is planned or
    measured (a batch would need torch), the dataset is still rebuilt and exported."""
    monkeypatch.setattr(measured, "cuda_available", lambda: True)
    monkeypatch.setenv("KERNELHOUSE_GPU_DISABLE", "1")
    kh_home.mkdir(parents=True, exist_ok=True)
    make_lake(kh_home)
    result = dg.materialize([measured_configs], resources={"lake": LakeResource(home=str(kh_home))})
    assert result.success
    md = result.asset_materializations_for_node("measured_configs")[0].metadata
    assert md["gpu_batch"].value == "disabled by KERNELHOUSE_GPU_DISABLE"
    assert not (kh_home / "gpu").exists()
