"""``kernelhouse stats kernel-opt-rl`` gap explanations, on a real DuckDB lake."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from dagster_project.publish.kernel_opt_rl import CARD_KERNELS, card_gap_lines
from dagster_project.storage.lake import Lake


def _lake(tmp_path: Path) -> Lake:
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))
    t = lambda s: datetime.fromisoformat(s).replace(tzinfo=UTC)  # noqa: E731
    lake.replace_table(
        "datasets",
        "tuned_configs",
        pl.DataFrame({"kernel": ["fused_moe_kernel"] * 3, "license": ["Apache-2.0"] * 3}),
    )
    lake.replace_table(
        "raw",
        "config_files",
        pl.DataFrame(
            {
                "repo": ["vllm", "vllm", "vllm", "sglang"],
                "kernel": [
                    "fused_moe_kernel",
                    "_w8a8_block_int8_matmul",
                    "_w8a8_block_int8_matmul",
                    None,
                ],
                "parse_status": ["ok", "ok", "bad_json", "too_large"],
                "n_entries": [3, 18, None, None],
                "loaded_at_runtime": [True, False, None, None],
            }
        ),
    )
    lake.replace_table("raw", "kernel_sources", pl.DataFrame({"kernel": ["fused_moe_kernel"]}))
    lake.replace_table(
        "derived",
        "build_properties",
        pl.DataFrame(
            {"key": ["kernel_commits.split_cutoff"], "value": ["2026-03-01T00:00:00+00:00"]}
        ),
    )
    lake.replace_table(
        "raw",
        "repo_heads",
        pl.DataFrame(
            {
                "repo": ["flashinfer", "vllm"],
                "head_date": ["2026-02-01T00:00:00Z", "2026-05-19T00:00:00Z"],
            }
        ),
    )
    lake.replace_table(
        "raw", "perf_commits", pl.DataFrame({"repo": ["vllm", "vllm", "flashinfer"]})
    )
    lake.replace_table(
        "datasets",
        "kernel_commits",
        pl.DataFrame(
            {
                "repo": ["vllm", "vllm", "flashinfer"],
                "split": ["train", "test", "train"],
                "authored_at": [t("2025-01-01"), t("2026-04-01"), t("2026-01-15")],
                "license": ["Apache-2.0", "BSD-3-Clause", "Apache-2.0"],
            }
        ),
    )
    lake.replace_table(
        "raw",
        "kernel_commit_excluded",
        pl.DataFrame(
            {
                "repo": ["vllm", "vllm"],
                "sha": ["a", "b"],
                "reason": ["too_large", "license_tensorrt"],
            }
        ),
    )
    return lake


def test_every_gap_has_a_cause(tmp_path: Path) -> None:
    card = {
        "tuned_configs rows": 19287.0,
        "kernel_commits rows": 1517.0,
        "Apache-2.0 rows": 1481.0,
        "BSD rows": 35.0,
        "MIT rows": 1.0,
    }
    lines = card_gap_lines(_lake(tmp_path), card)
    text = "\n".join(lines)
    for k in CARD_KERNELS:
        if k != "fused_moe_kernel":
            assert f"missing kernel {k}" in text, k
    assert "missing kernel _w8a8_block_int8_matmul: its files are present but gave no rows" in text
    assert "sglang 1 too_large" in text and "vllm 1 bad_json" in text
    assert "vllm 1 files / 18 rows are never loaded" in text
    assert "2026-10" in text and "vllm 2026-05-19" in text
    assert "cut-off 2026-03-01" in text
    assert "flashinfer has an empty test split: its newest row (2026-01-15)" in text
    assert "Apache-2.0 2 (card 1,481)" in text and "BSD 1 (card 35)" in text
    assert "license_tensorrt 1" in text


def test_stats_cli_prints_years_as_years_and_the_gaps(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from dagster_project.cli.app import app

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("KERNELHOUSE_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    lake = _lake(home)
    tc = pl.DataFrame(
        {
            "kernel": ["fused_moe_kernel"] * 2,
            "license": ["Apache-2.0"] * 2,
            "split": ["train", "test"],
            "repo": ["vllm"] * 2,
            "config_path": ["a", "b"],
            "device_name": ["NVIDIA_H100"] * 2,
            "M": [1, 16],
            "speedup_vs_default": [None, 1.2],
        },
        schema_overrides={"speedup_vs_default": pl.Float64},
    )
    lake.replace_table("datasets", "tuned_configs", tc)
    kc = lake.read_table("datasets", "kernel_commits").with_columns(
        pr_number=pl.lit(1),
        kernel_speedup=pl.lit(None, dtype=pl.Float64),
        e2e_speedup=pl.lit(None, dtype=pl.Float64),
        prompt=pl.lit("x"),
    )
    lake.replace_table("datasets", "kernel_commits", kc)
    result = CliRunner().invoke(app, ["stats", "kernel-opt-rl"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    first_year = next(line for line in result.output.splitlines() if "first year" in line)
    assert "2023" in first_year and "2,023" not in first_year and "2025" in first_year
    assert "gaps to the card:" in result.output
    assert "flashinfer has an empty test split" in result.output
