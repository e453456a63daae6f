"""Issue 39 (39c): a swarm agent remembers what it or a teammate already tried or fixed.

What is on the episode's log before an agent's own clock is what it knows: a bug reported
in a rung's code is not written into that rung again, a slip only its own author was shown
is not typed again by it, a configuration on the log is not tuned to again, and a rung the
log shows much slower than the team's best is not tuned further without a redirect.
"""

from __future__ import annotations

from typing import Any

import pytest

from dagster_project.sim.agent import SLOW_RUNG
from dagster_project.sim.swarm.agents import WORKER
from dagster_project.sim.swarm.runtime import Runtime, _TeamMemory
from dagster_project.sim.swarm.spec import SwarmSpec
from dagster_project.sim.tasks import TaskSpec

SEED = 5150


def test_memory_knows_only_what_was_logged_before_now() -> None:
    m = _TeamMemory()
    m.bugs.append((10.0, "v2_tiled", "missing_sync"))
    m.slips.append((12.0, "a01", "semicolon"))
    assert m.avoid("a02", "v2_tiled", 9.9) == frozenset()
    assert m.avoid("a02", "v2_tiled", 10.0) == {"missing_sync"}  # a teammate's bug
    assert m.avoid("a02", "v3_wgmma", 50.0) == frozenset()  # another rung's code
    assert m.avoid("a02", "v2_tiled", 50.0) == {"missing_sync"}  # not a01's typo
    assert m.avoid("a01", "v2_tiled", 50.0) == {"missing_sync", "semicolon"}
    m.logged("v2_tiled", {"BM": 64, "BN": 128}, 20.0)
    assert not m.was_tried("v2_tiled", {"BN": 128, "BM": 64}, 19.0)
    assert m.was_tried("v2_tiled", {"BN": 128, "BM": 64}, 20.0)
    assert not m.was_tried("v2_tiled", {"BN": 64, "BM": 64}, 99.0)


def test_a_rung_much_slower_than_the_teams_best_is_slow() -> None:
    m = _TeamMemory()
    assert not m.slow("v1", 100.0)  # nothing measured
    m.times += [(5.0, "v1", 1.0), (30.0, "v3", 1.0 / (SLOW_RUNG + 0.01))]
    assert not m.slow("v1", 29.0)  # v3's time is not on the log yet
    assert m.slow("v1", 30.0)
    assert not m.slow("v3", 30.0)
    assert not m.slow("v2", 30.0)  # never measured: no evidence against it


@pytest.fixture(scope="module")
def runtime() -> Runtime:
    """A two-worker episode's runtime on a small CUDA MoE scatter (a task of seed 5150's
    plan, spelt out: building the plan's pool takes seconds)."""
    shape = (("T", 4096), ("H", 4096), ("E", 128), ("k", 8))
    task = TaskSpec(0, "moe_scatter", "cuda", "a10", "bf16", shape, 159291)
    return Runtime(SwarmSpec(0, task, "dispatch", 2), SEED)


def _candidates(rt: Runtime, agent: str) -> list[tuple[str, tuple[tuple[str, Any], ...]]]:
    return [
        (e.params["variant"], tuple(sorted((k, v) for k, v in e.params.items() if k != "variant")))
        for e in rt.events
        if e.kind == "candidate" and e.sender == agent
    ]


def test_a_teammate_does_not_retune_a_configuration_on_the_log(runtime: Runtime) -> None:
    rt = runtime
    a, b = rt.add_agents([WORKER, WORKER])
    v = rt.menu()[0]
    rt.implement(a, v)
    rt.tune(a, v, 5)
    logged = set(rt.memory.tried)
    assert logged, "a's work is on the log"
    # b starts from a's best, after all of a's results are on the log
    b.clock = max(e.t for e in rt.events) + 1.0
    best = a.own.get(v.tag)
    if best is not None:
        b.seeds[v.tag] = dict(best[1])
    rt.tune(b, v, 5)
    mine = _candidates(rt, b.id)
    assert mine, "b tuned"
    assert not [c for c in mine if c in logged]  # nothing a already submitted
    # and without the memory the same start point would have revisited a's configurations
    nb = [q for q, _, _ in b.hands.neighbours(v, b.seeds.get(v.tag) or b.hands.defaults(v))]
    assert any((v.tag, tuple(sorted(q.items()))) in logged for q in nb)
