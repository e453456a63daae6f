"""Mentions, the prompt, and the temporal split."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from dagster_project.mining.commits import assign_temporal_split, build_prompt
from dagster_project.mining.commits.mentions import (
    extract_mentions,
    hardware_mentioned,
    models_mentioned,
    speedup_claims,
)
from dagster_project.mining.commits.prompt import DIVIDER, REPLACE_MARK, SEARCH_MARK


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Tuned for H100 and h200", ["H100", "H200"]),
        ("8xH100 nodes", ["H100"]),
        ("RTX PRO 6000 and rtx-4090", ["RTXPRO6000", "RTX4090"]),
        ("MI300X / MI355X", ["MI300X", "MI355X"]),
        ("DGX Spark and GB10", ["DGXSPARK", "GB10"]),
        ("sm_90a, SM100 and Hopper", ["sm90a", "sm100", "hopper"]),
        ("Ada Lovelace and gfx942", ["ada", "gfx942"]),
        ("use L4 and T4", ["L4", "T4"]),
        ("bf16x2 and 16x16 tiles", []),
        ("the l4 cache and a t4 value", []),
        ("xH100y", []),
    ],
)
def test_hardware(text: str, expected: list[str]) -> None:
    assert hardware_mentioned(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Llama 3.1 and LLaMA-2", ["llama3.1", "llama2"]),
        ("DeepSeek-V3, DSv3 and deepseek r1", ["deepseek-v3", "deepseek-r1"]),
        ("Qwen3-Next and qwen2.5 and Qwen3.5", ["qwen3-next", "qwen2.5", "qwen3.5"]),
        ("Kimi-K2 / GLM-4.5 / gpt-oss", ["kimi-k2", "glm4.5", "gpt-oss"]),
        ("Mamba2 SSD kernel", ["mamba2"]),
        ("an opt flag and yi", []),
    ],
)
def test_models(text: str, expected: list[str]) -> None:
    assert models_mentioned(text) == expected


def test_speedup_claims() -> None:
    text = (
        "[Perf] Optimize batch invariant BMM, 18.1% Throughput improvement, "
        "10.7% TTFT improvement. Up to 2.66x higher throughput; 3x faster; 1.00x 1.00x; "
        "8x H100, bf16x2, 16x16 tiles."
    )
    claims = speedup_claims(text)
    assert "18.1% Throughput improvement"[:16] in claims[0]
    assert any("10.7% TTFT" in c for c in claims)
    assert any("2.66x" in c for c in claims)
    assert "3x faster" in claims
    assert claims.count("1.00x") == 1
    assert not any(c.startswith(("8x", "2x", "16x")) for c in claims)


def test_trailers_are_ignored() -> None:
    m = extract_mentions("Faster decode", "Body.\n\nSigned-off-by: Thor Llama <t@x.com>\n")
    assert m.hardware == [] and m.models == []


def test_prompt_contents() -> None:
    code = "```python\n# a docstring example\n````\n__global__ void k() {}\n"
    prompt = build_prompt("[Perf] Faster k (#12)", ["H100"], ["llama3"], "csrc/k.cu", "CUDA", code)
    assert "## Goal\n[Perf] Faster k\n" in prompt and "(#12)" not in prompt
    assert "H100" in prompt and "llama3" in prompt
    assert "`````cuda\n" + code + "`````\n" in prompt  # the fence outgrows the code's
    for marker in (SEARCH_MARK, DIVIDER, REPLACE_MARK, "### csrc/k.cu"):
        assert marker in prompt
    empty = build_prompt("Faster", [], None, "a.py", "Triton", "x = 1")
    assert "Hardware: not stated" in empty and "Models: not stated" in empty
    assert "```python\nx = 1\n```" in empty


def _rows(spec: list[tuple[str, int | None, str, int]]) -> pl.DataFrame:
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    return pl.DataFrame(
        {
            "repo": [r for r, _, _, _ in spec],
            "pr_number": [p for _, p, _, _ in spec],
            "sha": [s for _, _, s, _ in spec],
            "authored_at": [t0 + timedelta(days=d) for _, _, _, d in spec],
        },
        schema={
            "repo": pl.Utf8,
            "pr_number": pl.Int64,
            "sha": pl.Utf8,
            "authored_at": pl.Datetime("us", "UTC"),
        },
    )


def _check(out: pl.DataFrame, cutoff: datetime) -> None:
    test, train = out.filter(pl.col("split") == "test"), out.filter(pl.col("split") == "train")
    assert test["authored_at"].min() >= cutoff > train["authored_at"].max()
    key = pl.concat_str(
        [pl.col("repo"), pl.col("pr_number").cast(pl.Utf8).fill_null(pl.col("sha"))]
    )
    both = set(out.filter(pl.col("split") == "test").select(key)["repo"]) & set(
        out.filter(pl.col("split") == "train").select(key)["repo"]
    )
    assert not both


def test_split_takes_the_newest_tenth() -> None:
    rows = _rows([("sglang", i, f"s{i}", i) for i in range(100)])
    out, cutoff = assign_temporal_split(rows)
    assert out.filter(pl.col("split") == "test").height == 10
    assert cutoff == rows["authored_at"].sort()[90]
    _check(out, cutoff)


def test_split_keeps_a_pr_together_and_moves_the_cutoff_back() -> None:
    # PR 7 has commits on days 85 and 95: the natural cut (day 90) would split it.
    spec = [("vllm", 1000 + i, f"s{i}", i) for i in range(100) if i not in (85, 95)]
    spec += [("vllm", 7, "a", 85), ("vllm", 7, "b", 95)]
    out, cutoff = assign_temporal_split(_rows(spec))
    _check(out, cutoff)
    assert set(out.filter(pl.col("pr_number") == 7)["split"]) == {"test"}
    assert cutoff == datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=85)


def test_split_without_pr_numbers_and_ties() -> None:
    spec = [("flashinfer", None, f"c{i}", i // 3) for i in range(30)]  # 3 rows per commit day
    spec = [(r, p, f"day{d}", d) for r, p, _, d in spec]
    out, cutoff = assign_temporal_split(_rows(spec))
    _check(out, cutoff)
    assert out.filter(pl.col("split") == "test").height == 3


def test_a_repo_ending_before_the_cutoff_has_no_test_rows() -> None:
    spec = [("vllm", i, f"v{i}", i) for i in range(50)]
    spec += [("sglang", 100 + i, f"s{i}", 60 + i) for i in range(50)]
    out, cutoff = assign_temporal_split(_rows(spec))
    assert out.filter((pl.col("repo") == "vllm") & (pl.col("split") == "test")).height == 0
    assert out.filter(pl.col("split") == "test").height == 10
    _check(out, cutoff)


def test_split_edge_cases() -> None:
    out, cutoff = assign_temporal_split(_rows([]))
    assert out.height == 0 and cutoff is None and "split" in out.columns
    out, cutoff = assign_temporal_split(_rows([("vllm", 1, "a", 0)]))
    assert out["split"].to_list() == ["train"] and cutoff is None
    with pytest.raises(ValueError):
        assign_temporal_split(_rows([]), test_fraction=1.0)
