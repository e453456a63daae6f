"""The tuned_configs split: one deployment key, stable, about 9% test, never straddled."""

from __future__ import annotations

import polars as pl

from dagster_project.mining.configs.split import (
    TEST_FRACTION,
    apply_deployment_split,
    deployment_group,
    split_of,
)


def _rows(**cols: list) -> pl.DataFrame:
    n = len(next(iter(cols.values())))
    base = {
        "family": ["moe"] * n,
        "E": [8] * n,
        "N": [128] * n,
        "K": [None] * n,
        "gpu": ["H100"] * n,
        "dtype": ["fp8_w8a8"] * n,
        "block_shape": [[128, 128]] * n,
    }
    base.update(cols)
    return pl.DataFrame(base, schema_overrides={"K": pl.Int64, "block_shape": pl.List(pl.Int64)})


def test_key_is_the_parsed_deployment() -> None:
    key = deployment_group("moe", 257, 256, 7168, "B200", "fp8_w8a8", [128, 128])
    assert key == "moe|E=257|N=256|K=7168|gpu=B200|dtype=fp8_w8a8|block=128x128"
    # no block shape and no K are spelled, not dropped: they are part of the deployment
    assert deployment_group("moe", 1, 256, None, "H20", "fp8_w8a8", None).endswith(
        "|K=None|gpu=H20|dtype=fp8_w8a8|block=-"
    )


def test_split_is_stable_and_about_nine_percent() -> None:
    # Pinned values: changing the salt, the hash or the key would silently move rows
    # between train and test across refreshes.
    def one(e: int, n: int, gpu: str) -> str:
        return split_of(deployment_group("moe", e, n, None, gpu, "fp8_w8a8", [128, 128]))

    assert one(16, 512, "H100") == "test"
    assert one(64, 1024, "H20") == "test"
    assert one(8, 128, "H100") == "train"
    sample = [
        deployment_group("moe", e, n, None, f"GPU{g}", "fp8_w8a8", None)
        for e in range(1, 41)
        for n in (64, 128, 256, 512, 1024)
        for g in range(10)
    ]
    test_share = sum(split_of(k) == "test" for k in sample) / len(sample)
    assert abs(test_share - TEST_FRACTION) < 0.02


def test_apply_sets_both_columns_in_place() -> None:
    rows = _rows(E=[16, 16, 8], N=[512, 512, 128]).with_columns(
        split=pl.lit(None, pl.String), split_group=pl.lit(None, pl.String), tail=pl.lit(1)
    )
    out = apply_deployment_split(rows)
    assert out.columns == rows.columns  # replaced where they were, nothing appended
    assert out["split"].to_list() == ["test", "test", "train"]
    assert out["split_group"][0] == out["split_group"][1] != out["split_group"][2]
    # without the columns they are appended (an ad-hoc frame)
    assert apply_deployment_split(_rows(E=[8])).columns[-2:] == ["split_group", "split"]
