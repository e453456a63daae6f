"""The batch wrappers, called exactly the way TRL's GRPOTrainer calls reward functions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dagster_project.rewards import (
    completion_text,
    config_reward,
    config_reward_fn,
    oracle_edit,
    patch_reward,
    patch_reward_fn,
)

BEFORE = "int f() {\n  return 1;\n}\n"
AFTER = "int f() {\n  return 2;\n}\n"
BEST = {
    "BLOCK_SIZE_M": 16,
    "BLOCK_SIZE_N": 64,
    "BLOCK_SIZE_K": 128,
    "GROUP_SIZE_M": 1,
    "num_warps": 4,
    "num_stages": 3,
}
SSU_BEST = {"BLOCK_SIZE_M": 8, "num_warps": 2}


def grpo_call(reward_func: Any, rows: list[dict[str, Any]], completions: list[Any]) -> Any:
    """What GRPOTrainer's ``_calculate_rewards`` does: every column but prompt / completion /
    completion_ids becomes a keyword list with one entry per completion, next to prompts,
    completions, completion_ids, trainer_state and (recent TRL) two logging callbacks."""
    keys = [key for key in rows[0] if key not in ("prompt", "completion", "completion_ids")]
    reward_kwargs: dict[str, Any] = {key: [row[key] for row in rows] for key in keys}
    reward_kwargs["trainer_state"] = object()
    reward_kwargs["log_extra"] = lambda *args, **kw: None
    reward_kwargs["log_metric"] = lambda *args, **kw: None
    return reward_func(
        prompts=[row["prompt"] for row in rows],
        completions=completions,
        completion_ids=[[1, 2, 3] for _ in rows],
        **reward_kwargs,
    )


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def test_patch_reward_fn_through_the_trainer_convention() -> None:
    row = {
        "prompt": "Optimise f",
        "before_code": BEFORE,
        "after_code": AFTER,
        "pr_url": "https://example.invalid/1",
        "kernel_speedup": 1.4,
        "license": "Apache-2.0",
    }
    oracle = oracle_edit(BEFORE, AFTER)
    completions = [oracle, "no edits here", oracle.replace("return 2", "return 3")]
    plain = grpo_call(patch_reward_fn, [row] * 3, completions)
    as_chat = grpo_call(patch_reward_fn, [row] * 3, [chat(c) for c in completions])
    expected = [patch_reward(c, BEFORE, AFTER) for c in completions]
    assert plain == as_chat == expected
    assert plain[0] == 1.0 and plain[1] == -1.0 and 0 <= plain[2] < 1
    assert all(isinstance(x, float) for x in plain)


def test_config_reward_fn_through_the_trainer_convention() -> None:
    rows: list[dict[str, Any]] = [
        {
            "prompt": "p1",
            "best_config": json.dumps(BEST),
            "speedup_vs_default": 1.9,
            "kernel": "fused_moe_kernel",
            "M": 64,
            "gpu": "H100",
        },
        {
            "prompt": "p2",
            "best_config": json.dumps(BEST),
            "speedup_vs_default": None,
            "kernel": "fused_moe_kernel",
            "M": 128,
            "gpu": "H100",
        },
        {
            "prompt": "p3",
            "best_config": json.dumps(SSU_BEST),
            "speedup_vs_default": None,
            "kernel": "_selective_scan_update_kernel",
            "M": 1,
            "gpu": "H100",
        },
    ]
    texts = [
        "```json\n" + json.dumps({**BEST, "BLOCK_SIZE_M": 32}) + "\n```",
        json.dumps(BEST),
        json.dumps({**SSU_BEST, "num_stages": 2}),  # key not allowed for SSU
    ]
    out = grpo_call(config_reward_fn, rows, [chat(t) for t in texts])
    expected = [
        config_reward(t, r["best_config"], r["speedup_vs_default"], kernel=r["kernel"])
        for t, r in zip(texts, rows, strict=True)
    ]
    assert out == expected
    assert 1 / 1.9 < out[0] < 1.0 and out[1] == 1.0 and out[2] == -1.0


def test_speedup_column_may_be_absent() -> None:
    rows = [{"prompt": "p", "best_config": BEST}]
    assert grpo_call(config_reward_fn, rows, [json.dumps(BEST)]) == [1.0]


def test_completion_text_variants() -> None:
    assert completion_text("plain") == "plain"
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a1"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image"},
                {"type": "text", "text": "2"},
            ],
        },
    ]
    assert completion_text(messages) == "a2"
    assert completion_text([{"role": "user", "content": "only"}]) == "only"
    assert completion_text({"role": "assistant", "content": "x"}) == "x"
    assert completion_text([]) == "" and completion_text(None) == ""


def test_misaligned_columns_are_rejected() -> None:
    with pytest.raises(ValueError, match="before_code"):
        patch_reward_fn(["a", "b"], before_code=[BEFORE], after_code=[AFTER, AFTER])
    with pytest.raises(ValueError, match="best_config"):
        config_reward_fn(["{}"], best_config=json.dumps(BEST))
