"""Swarm agents rank configurations from their own measurements, never the simulator's.

``SwarmAgent.pick`` / ``shortlist`` used to blur ``env.predicted`` (the noise-free model
time): an oracle no engineer has. Since SWARM_VERSION 1.2.0 they use ``estimate``: the
nearest configuration the agent measured on the rung, moved by the one-notch effects it
measured. These tests pin that contract on a real episode and on the estimate itself.
"""

from __future__ import annotations

import random
import sys
from typing import Any

import pytest

from dagster_project.sim import kernelswarm as ks
from dagster_project.sim.env import KernelEnv
from dagster_project.sim.swarm.agents import make_agent
from dagster_project.sim.tasks import TaskSpec
from dagster_project.sim.variants import get_variant


def test_no_agent_judgement_reads_the_model_prediction(monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole build of episodes: ``predicted`` may be called by the harness (it times
    what was submitted) but never from the agents' judgement code."""
    real = KernelEnv.predicted
    callers: list[str] = []

    def guarded(self: KernelEnv, *a: Any, **k: Any) -> Any:
        callers.append(sys._getframe(1).f_code.co_filename)
        return real(self, *a, **k)

    monkeypatch.setattr(KernelEnv, "predicted", guarded)
    episodes = ks.generate_swarm_shard(0, seed=5, n_episodes=17)
    assert len(episodes) == 17
    assert callers, "the harness still times submissions with the model"
    assert not [c for c in callers if c.endswith("swarm/agents.py")]


class _FitsOnly:
    """An environment that answers only the on-paper footprint question."""

    def __init__(self, env: KernelEnv) -> None:
        self._env = env

    def fits(self, v: Any, p: Any) -> bool:
        return self._env.fits(v, p)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"an agent's judgement asked the environment for {name!r}")


def _agent() -> tuple[Any, Any, KernelEnv]:
    task = TaskSpec(
        0, "gemm_fp16", "cuda", "h100", "fp16", (("M", 4096), ("N", 4096), ("K", 4096)), 3
    )
    env = KernelEnv(task)
    agent = make_agent(env, random.Random(1), "a01", "worker", 0.9)
    return agent, get_variant("gemm", "cuda", "v2_mma_sync"), env


def test_estimate_follows_what_the_agent_measured() -> None:
    agent, v, _ = _agent()
    p = {"BM": 64, "BN": 64, "BK": 32, "warps": 4}
    assert agent.estimate(v, p, 9.0) == 9.0  # nothing measured: the caller's fallback
    agent.observe(v, p, 2.0)
    agent.observe(v, {**p, "BM": 128}, 1.0)  # a larger BM halved the time
    # the nearest measurement moved by the measured effect of the differing parameter
    assert agent.estimate(v, {**p, "BN": 128}, 9.0) == pytest.approx(2.0)
    assert agent.estimate(v, {**p, "BM": 128, "BN": 128}, 9.0) == pytest.approx(1.0)
    assert agent.estimate(v, {**p, "BM": 256}, 9.0) == pytest.approx(0.5)
    assert agent.estimate(v, {**p, "BM": 32}, 9.0) == pytest.approx(2.0)  # never measured down


def test_pick_and_shortlist_prefer_the_measured_direction() -> None:
    agent, v, env = _agent()
    p = {"BM": 64, "BN": 64, "BK": 32, "warps": 4}
    agent.observe(v, p, 2.0)
    agent.observe(v, {**p, "BM": 128}, 1.0)
    up, down = {**p, "BM": 128, "BN": 128}, {**p, "BN": 32}
    paper = _FitsOnly(env)
    wins = sum(agent.pick(paper, v, [down, up], 3.0) == up for _ in range(50))  # type: ignore[arg-type]
    assert wins >= 40
    ranked = agent.shortlist(paper, v, [down, up], 2, 3.0)  # type: ignore[arg-type]
    assert ranked and ranked[0] == up
