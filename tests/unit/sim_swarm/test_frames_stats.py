"""Lake tables and aggregate figures of a build."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from dagster_project.sim import kernelswarm as ks

Episode = dict[str, Any]
CARD_FIELDS = [
    "episode_id",
    "scenario",
    "n_agents",
    "op",
    "impl",
    "gpu",
    "arch",
    "dtype",
    "shape",
    "baseline_ms",
    "best_ms",
    "speedup",
    "elapsed_s",
    "agents",
    "num_messages",
    "messages",
]


def test_rows_have_the_card_fields(small_build: list[Episode]) -> None:
    for ep in small_build:
        assert list(ep) == CARD_FIELDS
        assert ep["speedup"] == round(ep["baseline_ms"] / ep["best_ms"], 2)
        json.loads(ks.episode_json(ep))


def test_episode_frames(small_build: list[Episode]) -> None:
    eps = small_build[:10]
    edf, adf, mdf = ks.episode_frames(eps, shard=3)
    assert edf.columns == [*CARD_FIELDS, "shard"]
    assert edf.height == 10 and edf["shard"].to_list() == [3] * 10
    assert json.loads(edf["shape"][0]) == eps[0]["shape"]
    assert adf.columns == ["episode_id", "agent_id", "role", "skill", "tries", "kept", "best_ms"]
    assert adf.height == sum(e["n_agents"] for e in eps)
    assert mdf.columns == [
        "episode_id",
        "idx",
        "kind",
        "role",
        "sender",
        "recipient",
        "t_elapsed_s",
        "content",
        "params",
        "status",
        "time_ms",
        "reward",
    ]
    assert mdf.height == sum(e["num_messages"] for e in eps)
    first = mdf.filter(pl.col("episode_id") == eps[0]["episode_id"]).sort("idx")
    assert [json.loads(p) for p in first["params"]] == [m["params"] for m in eps[0]["messages"]]
    nested = edf["messages"][0].to_list()
    assert json.loads(nested[0]["params"]) == eps[0]["messages"][0]["params"]
    # rewards are queryable: the sum per episode matches the rows
    total = mdf.group_by("episode_id").agg(pl.col("reward").sum()).sort("episode_id")
    want = sorted((e["episode_id"], sum(m["reward"] or 0.0 for m in e["messages"])) for e in eps)
    assert [round(x, 6) for x in total["reward"]] == [round(r, 6) for _, r in want]
    empty = ks.episode_frames([], shard=0)
    assert [f.height for f in empty] == [0, 0, 0]


def test_stats(small_build: list[Episode]) -> None:
    st = ks.swarm_stats(iter(small_build), check=True)
    assert st["episodes"] == len(small_build)
    assert st["messages"] == sum(e["num_messages"] for e in small_build)
    assert st["violations"] == 0
    assert sum(st["message_kinds"].values()) == st["messages"]
    assert sum(st["result_statuses"].values()) == st["rewards"]["results"]
    assert sum(s["episodes"] for s in st["scenarios"].values()) == st["episodes"]
    assert st["ops"] == 17 and st["cuda_ops"] == 14 and st["triton_ops"] == 3 and st["gpus"] == 6
    assert st["card"]["mean_messages"]["card"] == 71.0
    # merging per-shard accumulators gives the same figures as one pass
    a, b = ks.SwarmStats(), ks.SwarmStats()
    for i, ep in enumerate(small_build):
        (a if i % 2 else b).add(ep)
    merged = a.merge(b).result()
    assert merged["messages"] == st["messages"] and merged["message_kinds"] == st["message_kinds"]
    assert merged["rewards"]["histogram"] == st["rewards"]["histogram"]


def test_build_is_close_to_the_card(small_build: list[Episode]) -> None:
    # the small build is a sample; the full build is measured by benchmarks/bench_swarm.py
    st = ks.swarm_stats(small_build)
    assert 55 <= st["mean_messages"] <= 90
    assert st["min_hours"] >= 1.0 and st["max_hours"] <= 5.0
