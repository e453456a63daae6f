"""The card's reward rule, and ``check_episode`` catching every kind of planted violation."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import pytest

from dagster_project.sim import kernelswarm as ks
from dagster_project.sim.swarm.reward_rule import (
    NO_IMPROVEMENT,
    PENALTY,
    UNSUPPORTED_ARCH,
    result_reward,
    verdict_reward,
)

Episode = dict[str, Any]


def test_result_reward_formula() -> None:
    assert result_reward("ok", 0.5, 1.0) == (1.0, True)
    assert result_reward("ok", 0.8, 1.0) == (round(math.log2(1.25), 6), True)
    assert result_reward("ok", 0.1, 1.0) == (1.0, True)  # capped at 1
    assert result_reward("ok", 1.0, 1.0) == (NO_IMPROVEMENT, False)  # a tie is no improvement
    assert result_reward("ok", 1.2, 1.0) == (-0.05, False)
    assert result_reward("compile_error", None, 1.0) == (-0.1, False)
    assert result_reward("wrong_result", None, 1.0) == (-0.3, False)
    assert result_reward(UNSUPPORTED_ARCH, None, 1.0) == (-0.05, False)
    assert PENALTY == {"compile_error": -0.1, "wrong_result": -0.3, UNSUPPORTED_ARCH: -0.05}
    with pytest.raises(ValueError):
        result_reward("ok", None, 1.0)
    with pytest.raises(ValueError):
        result_reward("timeout", None, 1.0)


def test_verdict_reward_formula() -> None:
    assert verdict_reward(16.0) == 1.0
    assert verdict_reward(1.0) == 0.0
    assert verdict_reward(66.4) == round(math.log2(66.4) / 4, 6)


def test_built_episodes_are_clean(small_build: list[Episode]) -> None:
    problems = [v for ep in small_build for v in ks.check_episode(ep)]
    assert problems == []


def test_rewards_replay_by_hand(small_build: list[Episode]) -> None:
    # independent of check_episode: recompute every reward from the message history
    # an unstable verification withdraws its result: the gain is taken back and the
    # shared best falls back to the fastest result still trusted
    unstable = 0
    for ep in small_build:
        best = ep["baseline_ms"]
        trusted: dict[int, float] = {}
        for i, m in enumerate(ep["messages"]):
            if m["kind"] == "verify" and m["status"] == "unstable":
                unstable += 1
                ref = ep["messages"][m["params"]["ref"]]
                trusted.pop(m["params"]["ref"], None)
                assert m["reward"] == (-ref["reward"] if ref["reward"] > 0 else None)
                best = min([ep["baseline_ms"], *trusted.values()])
            elif m["kind"] == "verify":
                assert m["reward"] is None
            if m["kind"] == "result":
                if m["status"] == "ok":
                    trusted[i] = m["time_ms"]
                if m["status"] == "ok" and m["time_ms"] < best:
                    assert m["reward"] == pytest.approx(
                        min(1.0, math.log2(best / m["time_ms"])), abs=1e-6
                    )
                    best = m["time_ms"]
                else:
                    want = {
                        "ok": -0.05,
                        "unverified": -0.05,
                        "compile_error": -0.1,
                        "wrong_result": -0.3,
                        "unsupported_arch": -0.05,
                    }
                    assert m["reward"] == want[m["status"]]
            elif m["kind"] == "verdict":
                assert m["reward"] == pytest.approx(math.log2(ep["speedup"]) / 4, abs=1e-6)
        assert ep["best_ms"] == best
    assert unstable > 0, "the small build should exercise an unstable verification"


def _first(ep: Episode, pred: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    return next(m for m in ep["messages"] if pred(m))


def _find(episodes: list[Episode], pred: Callable[[dict[str, Any]], bool]) -> Episode:
    ep = next(e for e in episodes if any(pred(m) for m in e["messages"]))
    return copy.deepcopy(ep)


def _plant_result_reward(eps: list[Episode]) -> Episode:
    ep = _find(eps, lambda m: m["kind"] == "result" and m["status"] == "ok" and m["reward"] > 0)
    _first(ep, lambda m: m["kind"] == "result" and m["reward"] > 0)["reward"] += 0.01
    return ep


def _plant_penalty(eps: list[Episode]) -> Episode:
    ep = _find(eps, lambda m: m["kind"] == "result" and m["status"] == "wrong_result")
    _first(ep, lambda m: m["kind"] == "result" and m["status"] == "wrong_result")["reward"] = -0.1
    return ep


def _plant_verdict(eps: list[Episode]) -> Episode:
    ep = copy.deepcopy(eps[0])
    ep["messages"][-1]["reward"] = round(ep["messages"][-1]["reward"] + 0.05, 6)
    return ep


def _plant_best(eps: list[Episode]) -> Episode:
    ep = copy.deepcopy(eps[1])
    ep["best_ms"] = ep["best_ms"] * 0.9
    return ep


def _plant_dispatch(eps: list[Episode]) -> Episode:
    ep = _find(eps, lambda m: m["kind"] == "dispatch")
    m = _first(ep, lambda m: m["kind"] == "dispatch")
    m["params"]["to"] = m["recipient"] = "a99"
    return ep


def _plant_handoff(eps: list[Episode]) -> Episode:
    ep = _find(eps, lambda m: m["kind"] == "handoff")
    m = _first(ep, lambda m: m["kind"] == "handoff")
    m["params"]["to"] = "a77"
    return ep


def _plant_leaderboard_order(eps: list[Episode]) -> Episode:
    ep = _find(eps, lambda m: m["kind"] == "leaderboard" and len(m["params"]["ranking"]) >= 2)
    m = _first(ep, lambda m: m["kind"] == "leaderboard" and len(m["params"]["ranking"]) >= 2)
    r = m["params"]["ranking"]
    r[0], r[1] = r[1], r[0]
    if r[0]["best_ms"] == r[1]["best_ms"]:  # a tie stays sorted; make the swap visible
        r[1]["best_ms"] = r[0]["best_ms"] / 2
    return ep


def _plant_leaderboard_value(eps: list[Episode]) -> Episode:
    ep = _find(eps, lambda m: m["kind"] == "leaderboard" and m["params"]["ranking"])
    m = _first(ep, lambda m: m["kind"] == "leaderboard" and m["params"]["ranking"])
    m["params"]["ranking"][-1]["best_ms"] *= 3  # still sorted, but not what the results say
    return ep


def _plant_gating(eps: list[Episode]) -> Episode:
    # a kernel the GPU cannot build reported as having run (wrong result, reward -0.3): the
    # reward replay is satisfied, the gating check is not
    ep = _find(eps, lambda m: m["kind"] == "result" and m["status"] == UNSUPPORTED_ARCH)
    m = _first(ep, lambda m: m["kind"] == "result" and m["status"] == UNSUPPORTED_ARCH)
    m["status"], m["reward"] = "wrong_result", -0.3
    return ep


def _plant_gating_false_alarm(eps: list[Episode]) -> Episode:
    # a portable kernel reported as unsupported on this arch
    ep = _find(eps, lambda m: m["kind"] == "result" and m["status"] == "wrong_result")
    m = _first(ep, lambda m: m["kind"] == "result" and m["status"] == "wrong_result")
    m["status"], m["reward"] = UNSUPPORTED_ARCH, -0.05
    return ep


def _plant_time(eps: list[Episode]) -> Episode:
    ep = copy.deepcopy(eps[2])
    ep["messages"][5]["t_elapsed_s"] = ep["messages"][4]["t_elapsed_s"] - 10
    return ep


def _plant_merge(eps: list[Episode]) -> Episode:
    ep = _find(eps, lambda m: m["kind"] == "merge")
    _first(ep, lambda m: m["kind"] == "merge")["time_ms"] = 1e-9
    return ep


def _plant_agent(eps: list[Episode]) -> Episode:
    ep = copy.deepcopy(eps[3])
    ep["agents"][0]["kept"] += 1
    return ep


PLANTS: dict[str, tuple[Callable[[list[Episode]], Episode], str]] = {
    "result reward": (_plant_result_reward, "from the history"),
    "penalty": (_plant_penalty, "from the history"),
    "verdict": (_plant_verdict, "verdict reward"),
    "best_ms": (_plant_best, "minimum verified time"),
    "dispatch to nobody": (_plant_dispatch, "not an agent of the episode"),
    "handoff to nobody": (_plant_handoff, "not an agent of the episode"),
    "leaderboard order": (_plant_leaderboard_order, "not sorted"),
    "leaderboard value": (_plant_leaderboard_value, "disagrees with results"),
    "arch gating": (_plant_gating, "but is wrong_result"),
    "arch gating false alarm": (_plant_gating_false_alarm, "has every feature"),
    "time goes back": (_plant_time, "goes back"),
    "merge": (_plant_merge, "shared best"),
    "agent stats": (_plant_agent, "tries/kept"),
}


@pytest.mark.parametrize("name", sorted(PLANTS))
def test_planted_violation_is_caught(small_build: list[Episode], name: str) -> None:
    plant, needle = PLANTS[name]
    ep = plant(small_build)
    problems = ks.check_episode(ep)
    assert any(needle in p for p in problems), problems
