"""The three promised gates (verbatim audit, split disjointness, licence filter) and the
schema rules, with the real suites in expectations/: each planted violation fails the
matching expectation with the offending rows in the result; clean tables pass."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from dagster_project.quality.suites import SUITES_DIR, load_suite, run_suite
from dagster_project.storage.lake import Lake
from dagster_project.wiring.checks import gx_checks
from dagster_project.wiring.resources import LakeResource

CFG = {
    "BLOCK_SIZE_M": 16,
    "BLOCK_SIZE_N": 64,
    "BLOCK_SIZE_K": 128,
    "GROUP_SIZE_M": 1,
    "num_warps": 4,
    "num_stages": 3,
}


def tuned_configs() -> pl.DataFrame:
    rows = []
    for i in range(20):
        split = "test" if i >= 18 else "train"
        rows.append(
            {
                "id": f"t{i}",
                "prompt": "p",
                "best_config": json.dumps(CFG),
                "kernel": "fused_moe_kernel",
                "kernel_source": "@triton.jit",
                "repo": "vllm",
                "config_path": f"E=8,N={128 * (i + 1)}.json",
                "device_name": "NVIDIA_H100",
                "gpu": "NVIDIA H100",
                "dtype": "fp8_w8a8",
                "E": 8,
                "N": 128 * (i + 1),
                "K": None,
                "block_shape": None,
                "M": 1 + i,
                "split": split,
                "license": "Apache-2.0",
                "speedup_vs_default": 1.2,
                "snapshot_commit": "abc",
                "family": "moe",
                "split_group": f"g{i}",
                "loaded_at_runtime": True,
                "not_loaded_reason": None,
            }
        )
    return pl.DataFrame(
        rows,
        schema_overrides={
            "K": pl.Int64,
            "block_shape": pl.List(pl.Int64),
            "not_loaded_reason": pl.String,
        },
    )


def kernel_commits() -> pl.DataFrame:
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    rows = []
    for i in range(20):
        rows.append(
            {
                "id": f"k{i}",
                "repo": "flashinfer",
                "sha": f"s{i}",
                "pr_number": 100 + i,
                "path": "a.cu",
                "before_code": "a\n",
                "after_code": "b\n",
                "diff": "d",
                "prompt": "p",
                "language": "CUDA",
                "split": "test" if i >= 18 else "train",
                "license": "Apache-2.0",
                "license_before": "Apache-2.0",
                "license_after": "Apache-2.0",
                "lines_changed": 2,
                "kernel_speedup": 1.3,
                "e2e_speedup": None,
                "authored_at": t0 + timedelta(days=i),
                "reverted_by": None,
                "duplicate_of": None,
                "touches_cpu_kernel": False,
            }
        )
    return pl.DataFrame(
        rows,
        schema_overrides={
            "e2e_speedup": pl.Float64,
            "reverted_by": pl.String,
            "duplicate_of": pl.String,
        },
    )


def pr_gains(n: int = 1000, failing: int = 0) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "gain_id": [f"vllm#{i}:table:0" for i in range(n)],
            "repo": ["vllm"] * n,
            "pr_number": list(range(n)),
            "scope": ["kernel"] * n,
            "extractor": ["table"] * n,
            "speedup": [1.5] * n,
            "audit_pass": [True] * (n - failing) + [False] * failing,
            # the gate's column (issue 42): the audit of what is published; these fixture
            # values are all published (no PR quarantined), so it equals audit_pass
            "published_audit_pass": [True] * (n - failing) + [False] * failing,
        }
    )


def _run(tmp_path: Path, suite: str, table: str, df: pl.DataFrame):  # noqa: ANN202
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))
    schema, name = table.split(".")
    lake.replace_table(schema, name, df)
    return run_suite(load_suite(SUITES_DIR / f"{suite}.json"), lake.path)


@pytest.mark.parametrize(
    ("suite", "table", "make"),
    [
        ("tuned_configs", "datasets.tuned_configs", tuned_configs),
        ("kernel_commits", "datasets.kernel_commits", kernel_commits),
        ("pr_gains", "derived.pr_gains", pr_gains),
    ],
)
def test_clean_tables_pass(tmp_path: Path, suite: str, table: str, make) -> None:  # noqa: ANN001
    res = run_suite(
        load_suite(SUITES_DIR / f"{suite}.json"), _lake_with(tmp_path, table, make()).path
    )
    assert res.success, [o for o in res.outcomes if not o.success]


def _lake_with(tmp_path: Path, table: str, df: pl.DataFrame) -> Lake:
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))
    schema, name = table.split(".")
    lake.replace_table(schema, name, df)
    return lake


def _failed(res) -> dict[str, list]:  # noqa: ANN001
    return {(o.description or f"{o.type}:{o.column}"): o.sample for o in res.failed}


def test_leaked_config_hash(tmp_path: Path) -> None:
    df = tuned_configs().with_columns(
        pl.when(pl.col("id") == "t19")
        .then(pl.lit("g0"))
        .otherwise(pl.col("split_group"))
        .alias("split_group")
    )
    failed = _failed(_run(tmp_path, "tuned_configs", "datasets.tuned_configs", df))
    key = "split disjointness: no normalised config-file hash in both train and test"
    assert failed.get(key) == [{"split_group": "g0"}]


def test_non_power_of_two_tile(tmp_path: Path) -> None:
    bad = json.dumps({**CFG, "BLOCK_SIZE_N": 48})
    df = tuned_configs().with_columns(
        pl.when(pl.col("id") == "t3")
        .then(pl.lit(bad))
        .otherwise(pl.col("best_config"))
        .alias("best_config")
    )
    failed = _failed(_run(tmp_path, "tuned_configs", "datasets.tuned_configs", df))
    assert failed["tile sizes, group size and warps are powers of two"] == [
        {"id": "t3", "k": "BLOCK_SIZE_N", "v": 48}
    ]


def test_tensorrt_row(tmp_path: Path) -> None:
    df = kernel_commits().with_columns(
        pl.when(pl.col("id") == "k5")
        .then(pl.lit("NVIDIA-TensorRT"))
        .otherwise(pl.col("license_before"))
        .alias("license_before")
    )
    failed = _failed(_run(tmp_path, "kernel_commits", "datasets.kernel_commits", df))
    assert failed == {
        "no TensorRT / NVIDIA proprietary blob version on either side": [
            {"id": "k5", "license_before": "NVIDIA-TensorRT"}
        ]
    }


def test_test_row_older_than_train_row(tmp_path: Path) -> None:
    df = kernel_commits().with_columns(
        pl.when(pl.col("id") == "k18")
        .then(pl.lit(datetime(2024, 6, 1, tzinfo=UTC)))
        .otherwise(pl.col("authored_at"))
        .alias("authored_at")
    )
    res = _run(tmp_path, "kernel_commits", "datasets.kernel_commits", df)
    (outcome,) = res.failed
    assert outcome.description == "temporal split: every test row is newer than every train row"
    assert outcome.observed == 18  # every train row is newer than the planted test row
    assert {r["id"] for r in outcome.sample} <= {f"k{i}" for i in range(18)} and len(
        outcome.sample
    ) == 10


def test_pr_in_both_splits(tmp_path: Path) -> None:
    df = kernel_commits().with_columns(
        pl.when(pl.col("id") == "k19")
        .then(pl.lit(100))
        .otherwise(pl.col("pr_number"))
        .alias("pr_number")
    )
    failed = _failed(_run(tmp_path, "kernel_commits", "datasets.kernel_commits", df))
    assert failed["split disjointness: no PR has rows in both splits"] == [
        {"repo": "flashinfer", "pr_number": 100}
    ]


def test_null_prompt_fails_although_only_its_null_marker_is_read(tmp_path: Path) -> None:
    # prompt and kernel_source are asked only about null-ness, so run_suite reads a null
    # marker instead of their text; a real null must still fail, naming the row.
    df = tuned_configs().with_columns(
        pl.when(pl.col("id") == "t7").then(None).otherwise(pl.col("prompt")).alias("prompt"),
        pl.when(pl.col("id") == "t8")
        .then(None)
        .otherwise(pl.col("kernel_source"))
        .alias("kernel_source"),
    )
    res = _run(tmp_path, "tuned_configs", "datasets.tuned_configs", df)
    failed = {o.column: o for o in res.failed}
    assert set(failed) == {"prompt", "kernel_source"}
    assert failed["prompt"].unexpected_count == 1 and failed["kernel_source"].unexpected_count == 1
    assert "t7" in str(failed["prompt"].sample) and "t8" in str(failed["kernel_source"].sample)


def test_unloaded_config_without_reason(tmp_path: Path) -> None:
    df = tuned_configs().with_columns(
        pl.when(pl.col("id") == "t4")
        .then(pl.lit(False))
        .otherwise(pl.col("loaded_at_runtime"))
        .alias("loaded_at_runtime")
    )
    failed = _failed(_run(tmp_path, "tuned_configs", "datasets.tuned_configs", df))
    assert failed == {"a config the engine's lookup does not load says why": [{"id": "t4"}]}
    with_reason = df.with_columns(
        pl.when(pl.col("id") == "t4")
        .then(pl.lit("lookup asks for [128, 128]"))
        .otherwise(pl.col("not_loaded_reason"))
        .alias("not_loaded_reason")
    )
    assert _run(tmp_path, "tuned_configs", "datasets.tuned_configs", with_reason).success


def test_revert_and_duplicate_links(tmp_path: Path) -> None:
    df = kernel_commits().with_columns(
        pl.when(pl.col("id") == "k1")
        .then(pl.lit("not-a-sha"))
        .otherwise(pl.col("reverted_by"))
        .alias("reverted_by"),
        pl.when(pl.col("id") == "k2")
        .then(pl.lit("k99"))
        .otherwise(pl.col("duplicate_of"))
        .alias("duplicate_of"),
    )
    failed = _failed(_run(tmp_path, "kernel_commits", "datasets.kernel_commits", df))
    assert failed == {
        "reverted_by is the full sha of the upstream revert": [
            {"id": "k1", "reverted_by": "not-a-sha"}
        ],
        "duplicate_of names a row of the dataset": [{"id": "k2", "duplicate_of": "k99"}],
    }
    ok = df.with_columns(
        pl.when(pl.col("id") == "k1")
        .then(pl.lit("a" * 40))
        .otherwise(pl.col("reverted_by"))
        .alias("reverted_by"),
        pl.when(pl.col("id") == "k2")
        .then(pl.lit("k0"))
        .otherwise(pl.col("duplicate_of"))
        .alias("duplicate_of"),
    )
    assert _run(tmp_path, "kernel_commits", "datasets.kernel_commits", ok).success


def test_fabricated_numbers_fail_the_audit_gate(tmp_path: Path) -> None:
    assert _run(tmp_path, "pr_gains", "derived.pr_gains", pr_gains(1000, failing=12)).success
    res = _run(tmp_path, "pr_gains", "derived.pr_gains", pr_gains(1000, failing=13))
    assert not res.success
    (outcome,) = res.failed
    assert outcome.column == "published_audit_pass" and outcome.unexpected_count == 13
    assert all(
        r["published_audit_pass"] is False and r["gain_id"].startswith("vllm#")
        for r in outcome.sample
    )


def test_check_factory_reports_failing_rows_in_dagster(tmp_path: Path) -> None:
    bad = kernel_commits().with_columns(
        pl.when(pl.col("id") == "k2")
        .then(pl.lit("NVIDIA-proprietary"))
        .otherwise(pl.col("license"))
        .alias("license")
    )

    @dg.asset(name="kernel_commits")
    def stub(lake: LakeResource) -> None:
        lake.lake().replace_table("datasets", "kernel_commits", bad)

    checks = gx_checks([dg.AssetKey("kernel_commits")])
    res = dg.materialize(
        [stub, *checks], resources={"lake": LakeResource(home=str(tmp_path))}, raise_on_error=False
    )
    (ev,) = [e for e in res.get_asset_check_evaluations() if e.check_name == "gx_kernel_commits"]
    assert not ev.passed
    sample = ev.metadata["failing_rows_sample"].value
    assert {"id": "k2", "license": "NVIDIA-proprietary"} in sample[
        "expect_column_values_to_be_in_set:license"
    ]
    from dagster_project.quality.results import failing_gates

    gates = failing_gates(
        Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake")), ["kernel_commits"]
    )
    assert gates == ["kernel_commits: expect_column_values_to_be_in_set (license)"]
