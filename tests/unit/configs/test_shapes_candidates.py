"""Model shapes (snapshot + refresh) and shape matching for candidate_models."""

from __future__ import annotations

import polars as pl
import pytest

from dagster_project.mining.configs.candidates import candidate_models, match_models
from dagster_project.mining.configs.shapes import (
    SHAPES_SCHEMA,
    load_model_shapes_snapshot,
    refresh_model_shapes,
    shape_from_config,
)


@pytest.fixture(scope="module")
def shapes() -> pl.DataFrame:
    return load_model_shapes_snapshot()


def test_snapshot_is_complete(shapes: pl.DataFrame) -> None:
    assert dict(shapes.schema) == SHAPES_SCHEMA
    assert shapes.height >= 32
    assert shapes["model"].is_unique().all()
    for col in ("experts", "moe_intermediate_size", "hidden_size", "top_k", "shared_experts"):
        assert shapes[col].null_count() == 0
    assert (shapes["experts"] > 1).all() and (shapes["top_k"] >= 1).all()
    # Evidence is recorded for every row; unverified (from-memory) rows say so.
    assert shapes["source"].null_count() == 0
    assert shapes.filter(pl.col("source").str.starts_with("K"))["verified"].not_().all()


@pytest.mark.parametrize(
    ("E", "N", "dtype", "repo", "expected"),
    [
        # collisions the card warns about
        (160, 192, None, "vllm", {"DeepSeek-V2", "GLM-4.5"}),
        (8, 4096, None, "vllm", {"Mixtral-8x22B", "Grok-1"}),
        (64, 1408, None, "vllm", {"DeepSeek-V2-Lite", "GLM-4.5-Air", "dots.llm1"}),
        (128, 704, None, "vllm", {"GLM-4.5-Air", "dots.llm1"}),
        # DeepSeek-V3 TP8 shape shared with MiMo-V2-Flash TP8 and Qwen3.5-35B TP2
        (256, 256, "fp8_w8a8", "vllm", {"DeepSeek-V3", "MiMo-V2-Flash", "Qwen3.5-35B-A3B"}),
        # SGLang fused shared expert: 256 + 1
        (257, 256, "fp8_w8a8", "sglang", {"DeepSeek-V3", "Qwen3.5-35B-A3B"}),
        (513, 512, None, "sglang", {"Qwen3-Next-80B-A3B", "Qwen3.5-397B-A17B"}),
        (161, 384, "int8_w8a16", "sglang", {"GLM-4.5"}),
        # replicated shared experts (old SGLang): 256 + 8 at TP8
        (264, 256, None, "sglang", {"DeepSeek-V3"}),
        # expert parallelism: E = experts / EP, N unsharded
        (20, 1536, None, "vllm", {"GLM-4.5", "DeepSeek-V2"}),
        (40, 2560, None, "vllm", {"Qwen3-Coder-480B-A35B"}),
        # int4: vLLM names the logical N, SGLang the packed half
        (384, 256, "int4_w4a16", "vllm", {"Kimi-K2"}),
        (384, 128, "int4_w4a16", "sglang", {"Kimi-K2"}),
        (
            128,
            768,
            "int4_w4a16",
            "vllm",
            {"Qwen3-30B-A3B", "Qwen3-Omni-30B-A3B", "Qwen3-235B-A22B"},
        ),
        # nothing known
        (62, 256, None, "vllm", set()),
        # one local expert is not an EP deployment (Hunyuan-A13B: 64 experts, N=3072)
        (1, 3072, None, "vllm", set()),
    ],
)
def test_candidate_models(shapes, E, N, dtype, repo, expected) -> None:
    assert set(candidate_models(E, N, dtype, repo, shapes)) == expected


def test_match_details_say_how(shapes) -> None:
    how = {(m.model, m.how) for m in match_models(384, 128, "int4_w4a16", "sglang", shapes)}
    assert ("Kimi-K2", "TP16") in how and ("Kimi-K2", "TP8, int4 packed") in how
    assert ("DeepSeek-V3", "TP8 + fused shared") in {
        (m.model, m.how) for m in match_models(257, 256, None, "sglang", shapes)
    }
    assert candidate_models(None, None, None, "vllm", shapes) == []


def test_candidates_are_distinct_and_ordered(shapes) -> None:
    got = candidate_models(8, 4096, None, "vllm", shapes)
    assert len(got) == len(set(got))
    order = shapes["model"].to_list()
    assert got == sorted(got, key=order.index)


CONFIGS = {
    # Mixtral-style
    "mistralai/Mixtral-8x7B-Instruct-v0.1": {
        "num_local_experts": 8,
        "intermediate_size": 14336,
        "hidden_size": 4096,
        "num_experts_per_tok": 2,
    },
    # DeepSeek-style: dense intermediate_size must not win over moe_intermediate_size
    "deepseek-ai/DeepSeek-V3": {
        "n_routed_experts": 256,
        "moe_intermediate_size": 2048,
        "intermediate_size": 18432,
        "hidden_size": 7168,
        "num_experts_per_tok": 8,
        "n_shared_experts": 1,
    },
    # DBRX: nested ffn_config and d_model
    "databricks/dbrx-instruct": {
        "d_model": 6144,
        "ffn_config": {"moe_num_experts": 16, "ffn_hidden_size": 10752, "moe_top_k": 4},
    },
    # Qwen-style shared expert wider than a routed one: not fusable
    "Qwen/Qwen1.5-MoE-A2.7B": {
        "num_experts": 60,
        "moe_intermediate_size": 1408,
        "hidden_size": 2048,
        "num_experts_per_tok": 4,
        "shared_expert_intermediate_size": 5632,
    },
    # ...and as wide: fusable
    "Qwen/Qwen3-Next-80B-A3B-Instruct": {
        "num_experts": 512,
        "moe_intermediate_size": 512,
        "hidden_size": 2048,
        "num_experts_per_tok": 10,
        "shared_expert_intermediate_size": 512,
    },
    # multimodal wrapper
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": {
        "text_config": {
            "model_type": "llama4_text",
            "num_local_experts": 16,
            "intermediate_size": 8192,
            "hidden_size": 5120,
            "num_experts_per_tok": 1,
        },
        "vision_config": {"hidden_size": 1408},
    },
    # LongCat: expert size under its own key, top-k as moe_topk
    "meituan-longcat/LongCat-Flash-Chat": {
        "n_routed_experts": 512,
        "expert_ffn_hidden_size": 2048,
        "ffn_hidden_size": 12288,
        "hidden_size": 6144,
        "moe_topk": 12,
    },
    # per-layer lists (Hunyuan)
    "tencent/Hunyuan-A13B-Instruct": {
        "num_experts": 64,
        "moe_intermediate_size": [3072, 3072],
        "hidden_size": 4096,
        "moe_topk": [8, 8],
        "num_shared_expert": [1, 1],
    },
}


@pytest.mark.parametrize("repo_id", sorted(CONFIGS))
def test_shape_from_config_key_variants(shapes, repo_id: str) -> None:
    row = shapes.filter(pl.col("hf_repo_id") == repo_id).row(0, named=True)
    got = shape_from_config(CONFIGS[repo_id])
    for key, value in got.items():
        assert value == row[key], (repo_id, key)


def test_refresh_falls_back_per_model(shapes) -> None:
    calls: list[str] = []

    def fetch(repo_id: str) -> dict:
        calls.append(repo_id)
        if repo_id in CONFIGS:
            cfg = dict(CONFIGS[repo_id])
            if repo_id.startswith("mistralai/Mixtral-8x7B"):
                cfg["hidden_size"] = 4100  # a changed upstream value wins over the snapshot
            return cfg
        if repo_id.startswith("openai/"):
            return {"model_type": "dense", "hidden_size": 2880}  # not an MoE config
        raise OSError("offline")

    out = refresh_model_shapes(fetch, shapes)
    assert dict(out.schema) == SHAPES_SCHEMA and out.height == shapes.height
    assert "" not in calls and None not in calls  # rows without a Hub id are not fetched
    rows = {r["model"]: r for r in out.iter_rows(named=True)}
    mixtral = rows["Mixtral-8x7B"]
    assert mixtral["hidden_size"] == 4100 and mixtral["verified"]
    assert mixtral["source"] == "hf:mistralai/Mixtral-8x7B-Instruct-v0.1/config.json"
    gpt = rows["gpt-oss-120b"]
    assert gpt["experts"] == 128 and "refresh failed: config.json lacks" in gpt["source"]
    kimi = rows["Kimi-K2"]
    assert kimi["experts"] == 384 and "refresh failed: offline" in kimi["source"]
    assert not kimi["verified"]


def test_every_shape_is_verified_or_says_where_its_numbers_come_from(shapes) -> None:
    unsourced = shapes.filter(
        ~pl.col("verified") & (pl.col("source").fill_null("").str.strip_chars() == "")
    )
    assert unsourced.is_empty(), unsourced["model"].to_list()
