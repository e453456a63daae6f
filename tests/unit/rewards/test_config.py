"""config_reward: tolerant parsing, strict keys and values, partial credit and row weighting."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from dagster_project.rewards import (
    ConfigParseError,
    config_match,
    config_reward,
    config_reward_distribution,
    parse_config,
    row_speedup,
)

BEST = {
    "BLOCK_SIZE_M": 64,
    "BLOCK_SIZE_N": 128,
    "BLOCK_SIZE_K": 64,
    "GROUP_SIZE_M": 16,
    "num_warps": 4,
    "num_stages": 3,
}
ROCM_BEST = {**BEST, "waves_per_eu": 0, "matrix_instr_nonkdim": 16, "kpack": 2}
SSU_ROW: dict[str, Any] = {"kernel": "_selective_scan_update_kernel"}


def with_(**changes: int) -> str:
    return json.dumps({**BEST, **changes})


@pytest.mark.parametrize(
    "completion",
    [
        json.dumps(BEST),
        "```json\n" + json.dumps(BEST, indent=2) + "\n```",
        "For M=64 on H100 I would pick:\n" + json.dumps(BEST) + "\nbecause the tile fits.",
        '<think>maybe {"BLOCK_SIZE_M": 16}</think>\n' + json.dumps(BEST),
        'first guess {"BLOCK_SIZE_M": 16, "num_warps": 2}, final: ' + json.dumps(BEST),
        str(BEST),  # a Python dict literal
        str(BEST)[:-1] + ",}",  # trailing comma
    ],
)
def test_tolerant_parsing_takes_the_last_object(completion: str) -> None:
    assert parse_config(completion) == BEST
    assert config_reward(completion, BEST) == 1.0


def test_best_config_may_be_a_json_string() -> None:
    assert config_reward(with_(BLOCK_SIZE_M=32), json.dumps(BEST)) == config_reward(
        with_(BLOCK_SIZE_M=32), BEST
    )


@pytest.mark.parametrize(
    "completion",
    [
        "no config here",
        "{not json at all",
        '{"BLOCK_SIZE_M": 64, "BLOCK_M": 64}',  # unknown key
        '{"config": ' + json.dumps(BEST) + "}",  # wrapped
        '{"64": ' + json.dumps(BEST) + "}",  # an M -> config map
        "{}",
        with_(BLOCK_SIZE_M=48),  # not a power of two: Triton cannot compile it
        with_(num_warps=3),
        with_(num_stages=-1),
        json.dumps({**BEST, "num_stages": "3"}),
        json.dumps({**BEST, "num_stages": 2.5}),
        json.dumps({**BEST, "num_warps": True}),
        json.dumps({**BEST, "USE_TMA": "yes"}),
    ],
)
def test_unparseable_or_invalid_configs_score_minus_one(completion: str) -> None:
    assert config_reward(completion, BEST) == -1.0
    assert config_reward(completion, BEST, 2.0) == -1.0
    with pytest.raises(ConfigParseError):
        parse_config(completion, BEST)


def test_value_normalisation() -> None:
    assert parse_config(json.dumps({**BEST, "num_warps": 4.0}))["num_warps"] == 4
    assert parse_config(json.dumps({**BEST, "USE_TMA": 1}))["USE_TMA"] is True
    assert config_reward(json.dumps({**BEST, "USE_TMA": True}), {**BEST, "USE_TMA": 1}) == 1.0


def test_ssu_rows_only_allow_their_two_keys() -> None:
    best = {"BLOCK_SIZE_M": 16, "num_warps": 4}
    assert config_reward(json.dumps(best), best, **SSU_ROW) == 1.0
    assert config_reward(json.dumps({**best, "num_stages": 2}), best, **SSU_ROW) == -1.0
    assert config_reward(json.dumps({**best, "num_stages": 2}), best, family="ssu") == -1.0
    # Outside SSU rows the same extra key is allowed but earns nothing.
    assert 0 < config_reward(json.dumps({**best, "num_stages": 2}), best) < 1.0


def test_backend_only_keys_of_the_tuned_config_are_allowed() -> None:
    """Intel XPU configs carry a string knob; echoing the tuned config must score 1.0."""
    best = {
        "BLOCK_SIZE_M": 256,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 32,
        "num_warps": 16,
        "num_stages": 4,
        "grf_mode": "256",
    }
    assert config_reward(json.dumps(best), json.dumps(best)) == 1.0
    assert config_reward(json.dumps({**best, "grf_mode": "128"}), best) < 1.0
    assert config_reward(json.dumps({**best, "grf_mode": ["256"]}), best) == -1.0
    assert config_reward(json.dumps({**BEST, "grf_mode": "256"}), BEST) == -1.0  # not its key


def test_rocm_keys_are_allowed_and_scored_exactly() -> None:
    assert config_reward(json.dumps(ROCM_BEST), ROCM_BEST) == 1.0
    assert config_reward(json.dumps({**ROCM_BEST, "kpack": 1}), ROCM_BEST) < 1.0


def test_log2_partial_credit_is_monotone_and_capped() -> None:
    scores = [config_match({**BEST, "BLOCK_SIZE_N": 128 * 2**d}, BEST) for d in range(5)]
    assert scores[0] == 1.0
    assert scores == sorted(scores, reverse=True)
    assert scores[3] == scores[4]  # 3 octaves and more earn nothing for that key
    # Symmetric in log space: 2x too big == 2x too small.
    assert config_match({**BEST, "BLOCK_SIZE_N": 64}, BEST) == scores[1]


def test_exact_match_keys_get_no_partial_credit() -> None:
    assert config_match({**BEST, "num_stages": 4}, BEST) == config_match(
        {**BEST, "num_stages": 1}, BEST
    )


def test_missing_and_extra_keys_cost_credit() -> None:
    missing = {k: v for k, v in BEST.items() if k != "GROUP_SIZE_M"}
    assert config_match(missing, BEST) < 1.0
    assert config_match({**BEST, "SPLIT_K": 1}, BEST) < 1.0


def test_tile_sizes_weigh_more_than_group_size() -> None:
    tile = config_match({**BEST, "BLOCK_SIZE_K": 8}, BEST)
    group = config_match({**BEST, "GROUP_SIZE_M": 2}, BEST)
    assert tile < group


def test_rows_where_tuning_matters_little_spread_less() -> None:
    guess = with_(BLOCK_SIZE_M=16, BLOCK_SIZE_N=32, num_warps=8)
    small = config_reward(guess, BEST, speedup_vs_default=1.05)
    large = config_reward(guess, BEST, speedup_vs_default=2.5)
    assert 1 / 1.05 <= small < 1.0
    assert 1 / 2.5 <= large < small
    s = config_match(parse_config(guess), BEST)
    assert large == pytest.approx(2.5 ** (s - 1))


def test_undocumented_speedup_uses_the_prior_and_clamps() -> None:
    guess = with_(BLOCK_SIZE_M=16)
    assert config_reward(guess, BEST) == config_reward(guess, BEST, float("nan"))
    assert config_reward(guess, BEST, None) == config_reward(guess, BEST, 1.30)
    assert row_speedup(0.9) == 1.05 and row_speedup(50.0) == 4.0
    assert config_reward(guess, BEST, 50.0) == config_reward(guess, BEST, 4.0)


def test_broken_best_config_is_a_data_error() -> None:
    with pytest.raises(ValueError):
        config_reward(json.dumps(BEST), "not json")


def test_distribution_over_rows() -> None:
    rows: list[dict[str, Any]] = []
    for i, m in enumerate([1, 16, 64, 256, 1024, 4096]):  # M grows, so does BLOCK_SIZE_M
        best = {**BEST, "BLOCK_SIZE_M": min(16 * 2 ** (i // 2), 128)}
        rows.append({"best_config": json.dumps(best), "speedup_vs_default": None, "M": m})
    rows[0]["speedup_vs_default"] = 1.8
    rows.append(
        {
            "best_config": json.dumps({"BLOCK_SIZE_M": 8, "num_warps": 2}),
            "speedup_vs_default": None,
            **SSU_ROW,
        }
    )
    report = config_reward_distribution(rows, completions=["nope"] * len(rows))
    assert report["rows"] == 7 and report["documented_speedup_rows"] == 1
    strategies = report["strategies"]
    assert strategies["best"]["share_full"] == 1.0 and strategies["best"]["min"] == 1.0
    assert strategies["completions"]["share_invalid"] == 1.0
    for name in ("fixed_default", "modal", "random"):
        summary = strategies[name]
        assert summary["count"] == 7 and summary["share_invalid"] == 0.0
        assert 0 < summary["min"] <= summary["mean"] <= 1.0
    assert math.isclose(report["spread"]["max"], 1 - 1 / 1.8, abs_tol=1e-4)
    assert config_reward_distribution(rows, seed=3) == config_reward_distribution(rows, seed=3)
