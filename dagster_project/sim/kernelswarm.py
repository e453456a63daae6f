"""kernelswarm: multi-agent kernel-optimisation episodes in the card's row format.

Public API (used by the Dagster assets; no dagster import here):

* ``build_swarm_tasks`` → (episode specs, held-out task specs), deterministic in the seed;
* ``generate_swarm_shard`` → card-format episode dicts, ``SHARD_SIZE`` per shard. Each
  episode is a pure function of (its spec, seed, ``SWARM_VERSION``, the simulator's
  ``GENERATOR_VERSION``), so shards come out byte-identical in any order or process
  (its random streams are labelled ``STREAM_EPOCH``, see ``swarm.spec``);
* ``episode_frames`` / ``swarm_holdout_frame`` → polars tables for the lake;
* ``check_episode`` → the invariants (rewards from history, verdict, best time, named
  agents, leaderboards, arch gating, monotone time, the timeline: no message quotes a
  result before it exists, no review passes an overflow, unstable gains withdrawn);
* ``swarm_stats`` → the aggregate figures, with the card's figures beside ours.

Episodes run on the shared simulator (``KernelEnv`` and friends); the team logic lives in
``dagster_project.sim.swarm``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import polars as pl

from ..settings import KERNELSWARM_DEFAULT_SEED
from . import GENERATOR_VERSION
from .ops import KERNELSWARM_OPS
from .rng import stream
from .swarm.checks import MESSAGE_KINDS, check_episode
from .swarm.reward_rule import BUCKET_ORDER, RESULT_STATUSES, reward_bucket
from .swarm.runtime import Runtime
from .swarm.scenarios import PROTOCOLS
from .swarm.spec import (
    CARD_OPS,
    NAMESPACE,
    SCENARIOS,
    STREAM_EPOCH,
    SWARM_VERSION,
    TEAM_SIZES,
    SwarmSpec,
    card_op_name,
)
from .tasks import TaskSpec, draw_split

DEFAULT_SEED = KERNELSWARM_DEFAULT_SEED
DEFAULT_EPISODES = 2400
SHARD_SIZE = 100
#: Held-out task specs per (op, impl) pair: 17 × 10 = 170 by default.
HOLDOUT_PER_OP = 10
DEFAULT_HOLDOUT = HOLDOUT_PER_OP * len(KERNELSWARM_OPS)

#: Share of episodes per protocol. Chosen so the mean team size lands on the card's 8.6
#: given the team-size distributions below (dispatch ≈5, sweep ≈12, pipeline 4.5,
#: campaign 12.5 specialists on average).
SCENARIO_WEIGHTS: dict[str, float] = {
    "dispatch": 0.27,
    "parallel_sweep": 0.25,
    "pipeline": 0.21,
    "campaign": 0.27,
}
_TEAM_WEIGHTS: dict[str, tuple[int, ...]] = {
    "dispatch": (1, 2, 3, 3, 3, 2, 1),  # 2..8, mode in the middle
    "pipeline": (2, 3, 3, 2),  # 3..6
}

#: The card's published figures, for side-by-side reporting.
CARD_STATS: dict[str, float] = {
    "episodes": 2400,
    "shards": 24,
    "messages": 170_000,
    "mean_messages": 71.0,
    "mean_agents": 8.6,
    "ops": 17,
    "cuda_ops": 14,
    "triton_ops": 3,
    "gpus": 6,
    "min_hours": 1.0,
    "max_hours": 5.0,
}


# ----------------------------------------------------------------------------------------------
# tasks and shards
# ----------------------------------------------------------------------------------------------
def _exact_counts(total: int, weights: dict[str, float]) -> dict[str, int]:
    """Largest-remainder split of ``total`` by weights (deterministic, sums exactly)."""
    raw = {k: total * w / sum(weights.values()) for k, w in weights.items()}
    counts = {k: int(math.floor(x)) for k, x in raw.items()}
    for k in sorted(raw, key=lambda k: (-(raw[k] - counts[k]), k))[: total - sum(counts.values())]:
        counts[k] += 1
    return counts


def _team_size(scenario: str, rng: Any) -> int:
    lo, hi = TEAM_SIZES[scenario]
    weights = _TEAM_WEIGHTS.get(scenario)
    if weights is None:
        return rng.randint(lo, hi)
    return rng.choices(range(lo, hi + 1), weights=weights)[0]


@lru_cache(maxsize=8)
def _build(seed: int, n_episodes: int) -> tuple[tuple[SwarmSpec, ...], tuple[TaskSpec, ...]]:
    if n_episodes < 0:
        raise ValueError("n_episodes must be >= 0")
    pairs = list(KERNELSWARM_OPS)
    order = pairs[:]
    stream(NAMESPACE, "quota", STREAM_EPOCH, seed).shuffle(order)
    quota = {
        pair: n_episodes // len(pairs) + (1 if i < n_episodes % len(pairs) else 0)
        for i, pair in enumerate(order)
    }
    holdout: list[TaskSpec] = []
    tasks: list[TaskSpec] = []
    for op, impl in pairs:
        # the one holdout rule (``tasks.held_out``): held-out (op, gpu, shape) triples are
        # never an episode here nor a kernelinfer session, whatever the dtype or impl
        kept, held = draw_split(
            seed,
            quota[(op, impl)],
            HOLDOUT_PER_OP,
            ops=(op,),
            impls={op: impl},
            namespace=f"{NAMESPACE}/{op}/{impl}",
        )
        tasks.extend(kept)
        holdout.extend(held)
    stream(NAMESPACE, "order", STREAM_EPOCH, seed).shuffle(tasks)
    scenarios = [
        s for s, c in _exact_counts(n_episodes, SCENARIO_WEIGHTS).items() for _ in range(c)
    ]
    stream(NAMESPACE, "scenarios", STREAM_EPOCH, seed).shuffle(scenarios)
    specs = []
    for i, (task, scenario) in enumerate(zip(tasks, scenarios, strict=True)):
        rng = stream(NAMESPACE, "team", STREAM_EPOCH, seed, i, task.task_id, scenario)
        specs.append(SwarmSpec(i, task, scenario, _team_size(scenario, rng)))
    return tuple(specs), tuple(holdout)


def build_swarm_tasks(
    seed: int = DEFAULT_SEED, n_episodes: int = DEFAULT_EPISODES
) -> tuple[list[SwarmSpec], list[TaskSpec]]:
    """(episode specs in shard order, held-out task specs).

    Episodes are spread evenly over the 17 (op, impl) pairs and, within a pair, over the
    six GPUs (``tasks.build_pool``); every (op, impl, gpu, shape, dtype) is used at most
    once, and no held-out (op, gpu, shape) appears in any episode.
    """
    specs, holdout = _build(seed, n_episodes)
    return list(specs), list(holdout)


def n_shards(n_episodes: int = DEFAULT_EPISODES) -> int:
    return max(1, math.ceil(n_episodes / SHARD_SIZE))


def simulate_episode(spec: SwarmSpec, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Run one episode's protocol and return its card-format dict."""
    rt = Runtime(spec, seed)
    PROTOCOLS[spec.scenario](rt)
    rt.verdict()
    return rt.finish()


def generate_swarm_shard(
    shard: int, seed: int = DEFAULT_SEED, n_episodes: int = DEFAULT_EPISODES
) -> list[dict[str, Any]]:
    """Card-format episodes of one shard (episodes ``shard*100 … shard*100+99``).

    A shard past the end of the build is empty rather than an error, so a partitioned
    asset can ask for any shard of its static partition set.
    """
    if shard < 0:
        raise ValueError(f"shard must be >= 0, got {shard}")
    specs, _ = build_swarm_tasks(seed, n_episodes)
    return [simulate_episode(s, seed) for s in specs[shard * SHARD_SIZE : (shard + 1) * SHARD_SIZE]]


def episode_json(ep: dict[str, Any]) -> str:
    """The canonical JSON line of an episode (what "byte-identical" refers to)."""
    return json.dumps(ep, ensure_ascii=False, separators=(",", ":"))


# ----------------------------------------------------------------------------------------------
# frames
# ----------------------------------------------------------------------------------------------
_AGENT = pl.Struct(
    {
        "id": pl.String,
        "role": pl.String,
        "skill": pl.Float64,
        "tries": pl.Int64,
        "kept": pl.Int64,
        "best_ms": pl.Float64,
    }
)
_MESSAGE = pl.Struct(
    {
        "kind": pl.String,
        "role": pl.String,
        "sender": pl.String,
        "recipient": pl.String,
        "t_elapsed_s": pl.Int64,
        "content": pl.String,
        "params": pl.String,
        "status": pl.String,
        "time_ms": pl.Float64,
        "reward": pl.Float64,
    }
)
EPISODE_SCHEMA: dict[str, pl.DataType] = {
    "episode_id": pl.String(),
    "scenario": pl.String(),
    "n_agents": pl.Int64(),
    "op": pl.String(),
    "impl": pl.String(),
    "gpu": pl.String(),
    "arch": pl.String(),
    "dtype": pl.String(),
    "shape": pl.String(),
    "baseline_ms": pl.Float64(),
    "best_ms": pl.Float64(),
    "speedup": pl.Float64(),
    "elapsed_s": pl.Int64(),
    "agents": pl.List(_AGENT),
    "num_messages": pl.Int64(),
    "messages": pl.List(_MESSAGE),
    "shard": pl.Int64(),
}
AGENT_SCHEMA: dict[str, pl.DataType] = {
    "episode_id": pl.String(),
    "agent_id": pl.String(),
    "role": pl.String(),
    "skill": pl.Float64(),
    "tries": pl.Int64(),
    "kept": pl.Int64(),
    "best_ms": pl.Float64(),
}
MESSAGE_SCHEMA: dict[str, pl.DataType] = {
    "episode_id": pl.String(),
    "idx": pl.Int64(),
    "kind": pl.String(),
    "role": pl.String(),
    "sender": pl.String(),
    "recipient": pl.String(),
    "t_elapsed_s": pl.Int64(),
    "content": pl.String(),
    "params": pl.String(),
    "status": pl.String(),
    "time_ms": pl.Float64(),
    "reward": pl.Float64(),
}
HOLDOUT_SCHEMA: dict[str, pl.DataType] = {
    "op": pl.String(),
    "impl": pl.String(),
    "gpu": pl.String(),
    "arch": pl.String(),
    "dtype": pl.String(),
    "shape": pl.String(),
}


def _pjson(params: dict[str, Any] | None) -> str:
    # insertion order is deterministic (``variant`` first, then the rung's own parameter
    # order), so it is kept: the exported JSONL then reads like the episode dict
    return json.dumps(params if params is not None else {}, separators=(",", ":"))


def episode_frames(
    episodes: Sequence[dict[str, Any]], shard: int
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(episodes, agents, messages) tables of a shard's episodes.

    Nested values Parquet cannot type uniformly are JSON text: ``shape`` and every
    message's ``params`` (a dispatch, a result and a leaderboard carry different keys).
    """
    erows: list[dict[str, Any]] = []
    acols: dict[str, list[Any]] = {k: [] for k in AGENT_SCHEMA}
    mcols: dict[str, list[Any]] = {k: [] for k in MESSAGE_SCHEMA}
    for ep in episodes:
        eid = ep["episode_id"]
        msgs = [{**m, "params": _pjson(m["params"])} for m in ep["messages"]]
        erows.append(
            {
                **{k: ep[k] for k in EPISODE_SCHEMA if k not in ("shape", "messages", "shard")},
                "shape": json.dumps(ep["shape"]),
                "messages": msgs,
                "shard": shard,
            }
        )
        for a in ep["agents"]:
            acols["episode_id"].append(eid)
            acols["agent_id"].append(a["id"])
            for k in ("role", "skill", "tries", "kept", "best_ms"):
                acols[k].append(a[k])
        for i, m in enumerate(msgs):
            mcols["episode_id"].append(eid)
            mcols["idx"].append(i)
            for k in MESSAGE_SCHEMA:
                if k not in ("episode_id", "idx"):
                    mcols[k].append(m[k])
    edf = (
        pl.DataFrame(erows, schema=EPISODE_SCHEMA, orient="row")
        if erows
        else pl.DataFrame(schema=EPISODE_SCHEMA)
    )
    return edf, pl.DataFrame(acols, schema=AGENT_SCHEMA), pl.DataFrame(mcols, schema=MESSAGE_SCHEMA)


def holdout_record(t: TaskSpec) -> dict[str, Any]:
    """One line of ``tasks_holdout.jsonl``: the task, never a solution."""
    return {
        "op": card_op_name(t.op, t.impl),
        "impl": t.impl,
        "gpu": t.gpu,
        "arch": t.arch,
        "dtype": t.dtype,
        "shape": t.shape,
    }


def swarm_holdout_frame(tasks: Iterable[TaskSpec]) -> pl.DataFrame:
    """Held-out (op, impl, gpu, arch, dtype, shape) specs; ``shape`` as JSON text."""
    rows = [{**holdout_record(t), "shape": json.dumps(t.shape)} for t in tasks]
    return (
        pl.DataFrame(rows, schema=HOLDOUT_SCHEMA, orient="row")
        if rows
        else pl.DataFrame(schema=HOLDOUT_SCHEMA)
    )


# ----------------------------------------------------------------------------------------------
# statistics
# ----------------------------------------------------------------------------------------------
#: Skill bands for the "skill changes outcomes" table.
SKILL_BANDS: tuple[tuple[float, float], ...] = ((0.0, 0.6), (0.6, 0.8), (0.8, 1.01))


def _q(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass
class SwarmStats:
    """Streaming accumulator behind ``swarm_stats`` (mergeable across processes)."""

    episodes: int = 0
    messages: list[int] = field(default_factory=list)
    agents: list[int] = field(default_factory=list)
    speedups: list[float] = field(default_factory=list)
    hours: list[float] = field(default_factory=list)
    verdicts: list[float] = field(default_factory=list)
    scenario: dict[str, list[tuple[int, int, float]]] = field(default_factory=dict)
    kinds: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    reward_sum: Counter[str] = field(default_factory=Counter)
    kept: int = 0
    reward_hist: Counter[str] = field(default_factory=Counter)
    ops: Counter[str] = field(default_factory=Counter)
    gpus: Counter[str] = field(default_factory=Counter)
    impls: Counter[str] = field(default_factory=Counter)
    roles: Counter[str] = field(default_factory=Counter)
    band: dict[int, list[float]] = field(
        default_factory=dict
    )  # tries, errors, kept, reward sum, agents
    violations: int = 0

    def add(self, ep: dict[str, Any], check: bool = False) -> None:
        self.episodes += 1
        self.messages.append(ep["num_messages"])
        self.agents.append(ep["n_agents"])
        self.speedups.append(ep["speedup"])
        self.hours.append(ep["elapsed_s"] / 3600.0)
        self.scenario.setdefault(ep["scenario"], []).append(
            (ep["n_agents"], ep["num_messages"], ep["speedup"])
        )
        self.ops[ep["op"]] += 1
        self.gpus[ep["gpu"]] += 1
        self.impls[ep["impl"]] += 1
        skill = {a["id"]: a["skill"] for a in ep["agents"]}
        for a in ep["agents"]:
            self.roles[a["role"]] += 1
            b = self._band(a["skill"])
            self.band[b][4] += 1
        for m in ep["messages"]:
            self.kinds[m["kind"]] += 1
            if m["kind"] == "result":
                st = m["status"]
                self.statuses[st] += 1
                self.reward_sum[st] += m["reward"]
                positive = m["reward"] > 0
                self.kept += positive
                self.reward_hist[reward_bucket(m["reward"])] += 1
                row = self.band[self._band(skill.get(m["recipient"], 0.0))]
                row[0] += 1
                row[1] += st not in ("ok", "unverified")  # an unverified kernel ran
                row[2] += positive
                row[3] += m["reward"]
            elif m["kind"] == "verdict":
                self.verdicts.append(m["reward"])
        if check:
            self.violations += len(check_episode(ep))

    def _band(self, skill: float) -> int:
        for i, (lo, hi) in enumerate(SKILL_BANDS):
            if lo <= skill < hi:
                self.band.setdefault(i, [0.0, 0.0, 0.0, 0.0, 0.0])
                return i
        raise ValueError(f"skill {skill} outside [0, 1]")

    def merge(self, other: SwarmStats) -> SwarmStats:
        """Fold another accumulator (e.g. one shard's) into this one."""
        self.episodes += other.episodes
        for name in ("messages", "agents", "speedups", "hours", "verdicts"):
            getattr(self, name).extend(getattr(other, name))
        for name, rows in other.scenario.items():
            self.scenario.setdefault(name, []).extend(rows)
        for name in (
            "kinds",
            "statuses",
            "reward_sum",
            "reward_hist",
            "ops",
            "gpus",
            "impls",
            "roles",
        ):
            getattr(self, name).update(getattr(other, name))
        self.kept += other.kept
        for band, row in other.band.items():
            mine = self.band.setdefault(band, [0.0, 0.0, 0.0, 0.0, 0.0])
            for i, x in enumerate(row):
                mine[i] += x
        self.violations += other.violations
        return self

    def result(self) -> dict[str, Any]:
        n = max(1, self.episodes)
        results = sum(self.statuses.values())
        mean_speedup = sum(self.speedups) / n if self.speedups else None
        ours = {
            "episodes": self.episodes,
            "shards": math.ceil(self.episodes / SHARD_SIZE),
            "messages": sum(self.messages),
            "mean_messages": sum(self.messages) / n,
            "mean_agents": sum(self.agents) / n,
            "ops": len(self.ops),
            "cuda_ops": sum(1 for o in self.ops if CARD_OPS[o][1] == "cuda"),
            "triton_ops": sum(1 for o in self.ops if CARD_OPS[o][1] == "triton"),
            "gpus": len(self.gpus),
            "min_hours": min(self.hours, default=0.0),
            "max_hours": max(self.hours, default=0.0),
        }
        return {
            "dataset": "kernelswarm",
            "swarm_version": SWARM_VERSION,
            "sim_version": GENERATOR_VERSION,
            **ours,
            "min_messages": min(self.messages, default=0),
            "max_messages": max(self.messages, default=0),
            "min_agents": min(self.agents, default=0),
            "max_agents": max(self.agents, default=0),
            "mean_hours": sum(self.hours) / n,
            "mean_speedup": mean_speedup,
            "median_speedup": _q(self.speedups, 0.5),
            "p10_speedup": _q(self.speedups, 0.1),
            "p90_speedup": _q(self.speedups, 0.9),
            "scenarios": {
                s: {
                    "episodes": len(rows),
                    "share": len(rows) / n,
                    "mean_agents": sum(r[0] for r in rows) / len(rows),
                    "min_agents": min(r[0] for r in rows),
                    "max_agents": max(r[0] for r in rows),
                    "mean_messages": sum(r[1] for r in rows) / len(rows),
                    "mean_speedup": sum(r[2] for r in rows) / len(rows),
                }
                for s, rows in sorted(self.scenario.items())
            },
            "message_kinds": {k: self.kinds.get(k, 0) for k in MESSAGE_KINDS},
            "result_statuses": {k: self.statuses.get(k, 0) for k in RESULT_STATUSES},
            "rewards": {
                "results": results,
                "kept_improvements": self.kept,
                "mean_result_reward": sum(self.reward_sum.values()) / max(1, results),
                "mean_by_status": {
                    k: self.reward_sum[k] / self.statuses[k]
                    for k in RESULT_STATUSES
                    if self.statuses[k]
                },
                "histogram": dict(
                    sorted(self.reward_hist.items(), key=lambda kv: BUCKET_ORDER.index(kv[0]))
                ),
                "mean_verdict_reward": sum(self.verdicts) / max(1, len(self.verdicts)),
                "max_verdict_reward": max(self.verdicts, default=0.0),
            },
            "coverage": {
                "op": dict(sorted(self.ops.items())),
                "gpu": dict(sorted(self.gpus.items())),
                "impl": dict(sorted(self.impls.items())),
                "role": dict(sorted(self.roles.items())),
            },
            "skill": [
                {
                    "band": f"[{lo:.1f}, {min(hi, 1.0):.1f})",
                    "agents": int(row[4]),
                    "results": int(row[0]),
                    "error_rate": row[1] / row[0] if row[0] else None,
                    "kept_rate": row[2] / row[0] if row[0] else None,
                    "mean_reward": row[3] / row[0] if row[0] else None,
                }
                for i, (lo, hi) in enumerate(SKILL_BANDS)
                for row in [self.band.get(i, [0.0, 0.0, 0.0, 0.0, 0.0])]
            ],
            "violations": self.violations,
            "card": {
                k: {"card": v, "ours": ours[k], "ratio": (ours[k] / v) if v else None}
                for k, v in CARD_STATS.items()
            },
        }


def swarm_stats(episodes_iter: Iterable[dict[str, Any]], check: bool = False) -> dict[str, Any]:
    """Aggregate figures of any stream of episodes (one pass, constant per-episode memory).

    With ``check=True`` every episode is also run through ``check_episode`` and the total
    number of violations is reported.
    """
    acc = SwarmStats()
    for ep in episodes_iter:
        acc.add(ep, check=check)
    return acc.result()


__all__ = [
    "CARD_STATS",
    "DEFAULT_EPISODES",
    "DEFAULT_HOLDOUT",
    "DEFAULT_SEED",
    "HOLDOUT_PER_OP",
    "SCENARIOS",
    "SHARD_SIZE",
    "SWARM_VERSION",
    "SwarmSpec",
    "SwarmStats",
    "build_swarm_tasks",
    "card_op_name",
    "check_episode",
    "episode_frames",
    "episode_json",
    "generate_swarm_shard",
    "holdout_record",
    "n_shards",
    "simulate_episode",
    "swarm_holdout_frame",
    "swarm_stats",
]
