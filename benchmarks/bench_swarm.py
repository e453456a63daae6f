"""Time the full kernelswarm build and set its figures beside the card's.

Builds every shard of the default build (2,400 episodes in 24 shards of 100) the way the
Dagster asset does, streamed: a pool of worker processes each generates one shard, turns
it into the three lake tables (``episode_frames``) and writes them as Parquet into a
temporary folder, then drops it. Only a small per-shard statistics accumulator travels
back to the parent, so memory stays at about one shard per worker.

Reports wall time, episodes/s, peak resident memory (parent and each worker, and their
sum as an upper bound of what was resident at once), Parquet bytes, invariant violations
(``check_episode`` over every episode) and the dataset figures next to the card's.

The issue's budget: ≤ 5 minutes on 2 cores, ≤ 2 GB peak.

Usage: ``python benchmarks/bench_swarm.py [--episodes N] [--seed S] [--procs P]
[--keep DIR] [--no-check] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from dagster_project.sim import kernelswarm as ks

BUDGET_S = 300.0
BUDGET_RSS_MB = 2048.0


def _rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0  # Linux reports KiB


def _shard(job: tuple[int, int, int, str, bool]) -> dict[str, Any]:
    shard, seed, n_episodes, out, check = job
    t0 = time.perf_counter()
    episodes = ks.generate_swarm_shard(shard, seed=seed, n_episodes=n_episodes)
    t_gen = time.perf_counter() - t0
    frames = ks.episode_frames(episodes, shard)
    size = 0
    for name, frame in zip(("episodes", "agents", "messages"), frames, strict=True):
        path = Path(out) / f"kernelswarm_{name}_{shard:03d}.parquet"
        frame.write_parquet(path)
        size += path.stat().st_size
    acc = ks.SwarmStats()
    for ep in episodes:
        acc.add(ep, check=check)
    return {
        "shard": shard,
        "episodes": len(episodes),
        "gen_s": t_gen,
        "total_s": time.perf_counter() - t0,
        "bytes": size,
        "pid": os.getpid(),
        "rss_mb": _rss_mb(),
        "stats": acc,
    }


def run(n_episodes: int, seed: int, procs: int, out: Path, check: bool) -> dict[str, Any]:
    jobs = [(s, seed, n_episodes, str(out), check) for s in range(ks.n_shards(n_episodes))]
    t0 = time.perf_counter()
    _, holdout = ks.build_swarm_tasks(seed, n_episodes)
    ks.swarm_holdout_frame(holdout).write_parquet(out / "kernelswarm_tasks_holdout.parquet")
    acc = ks.SwarmStats()
    shards: list[dict[str, Any]] = []
    worker_rss: dict[int, float] = {}
    # spawn, not fork: the parent has already used polars, whose thread pool does not survive
    # a fork (children deadlock on their first DataFrame)
    with get_context("spawn").Pool(procs) as pool:
        for res in pool.imap_unordered(_shard, jobs):
            acc.merge(res.pop("stats"))
            worker_rss[res["pid"]] = max(worker_rss.get(res["pid"], 0.0), res["rss_mb"])
            shards.append(res)
            print(
                f"  shard {res['shard']:3d}: {res['episodes']} episodes in {res['total_s']:.1f}s "
                f"(generate {res['gen_s']:.1f}s), {res['bytes'] / 1e6:.1f} MB parquet",
                flush=True,
            )
    wall = time.perf_counter() - t0
    parent = _rss_mb()
    return {
        "wall_s": wall,
        "episodes": acc.episodes,
        "episodes_per_s": acc.episodes / wall if wall else 0.0,
        "procs": procs,
        "cpu_count": os.cpu_count(),
        "parent_rss_mb": parent,
        "worker_rss_mb": sorted(worker_rss.values()),
        "sum_rss_mb": parent + sum(worker_rss.values()),
        "parquet_mb": sum(s["bytes"] for s in shards) / 1e6,
        "mean_shard_s": sum(s["total_s"] for s in shards) / max(1, len(shards)),
        "stats": acc.result(),
    }


def report(r: dict[str, Any]) -> None:
    st = r["stats"]
    peak = max([r["parent_rss_mb"], *r["worker_rss_mb"]])
    print(
        f"\nbuild: {r['episodes']} episodes in {r['wall_s']:.1f}s with {r['procs']} processes on "
        f"{r['cpu_count']} CPUs -> {r['episodes_per_s']:.1f} episodes/s "
        f"(budget {BUDGET_S:.0f}s: {'ok' if r['wall_s'] <= BUDGET_S else 'OVER'})"
    )
    print(
        f"peak RSS: parent {r['parent_rss_mb']:.0f} MB, workers "
        f"{', '.join(f'{x:.0f}' for x in r['worker_rss_mb'])} MB; largest {peak:.0f} MB, "
        "all together "
        f"<= {r['sum_rss_mb']:.0f} MB (budget {BUDGET_RSS_MB:.0f} MB: "
        f"{'ok' if r['sum_rss_mb'] <= BUDGET_RSS_MB else 'OVER'})"
    )
    print(
        f"parquet written: {r['parquet_mb']:.0f} MB; mean {r['mean_shard_s']:.1f}s per shard; "
        f"check_episode violations: {st['violations']}"
    )
    print("\n| metric | card | ours | ours/card |\n|---|---:|---:|---:|")
    for k, row in st["card"].items():
        ours = row["ours"]
        cell = f"{ours:,.2f}" if isinstance(ours, float) else f"{ours:,}"
        print(f"| {k} | {row['card']:,} | {cell} | {row['ratio']:.3f} |")
    print(
        f"\nmessages per episode: min {st['min_messages']}, max {st['max_messages']}; "
        f"agents: min {st['min_agents']}, max {st['max_agents']}; "
        f"hours: mean {st['mean_hours']:.2f}"
    )
    print(
        f"speedup: mean {st['mean_speedup']:.2f}x, median {st['median_speedup']:.2f}x, "
        f"p10 {st['p10_speedup']:.2f}x, p90 {st['p90_speedup']:.2f}x"
    )
    print(
        "\n| scenario | episodes | share | agents (mean, range) | mean messages | mean speedup |\n"
        "|---|---:|---:|---|---:|---:|"
    )
    for name, s in st["scenarios"].items():
        print(
            f"| {name} | {s['episodes']} | {s['share']:.1%} | {s['mean_agents']:.2f} "
            f"({s['min_agents']}-{s['max_agents']}) "
            f"| {s['mean_messages']:.1f} | {s['mean_speedup']:.2f}x |"
        )
    print(f"\nmessage kinds: {st['message_kinds']}")
    print(f"result statuses: {st['result_statuses']}")
    rw = st["rewards"]
    print(
        f"rewards: {rw['results']} results, {rw['kept_improvements']} kept improvements, mean "
        f"{rw['mean_result_reward']:+.4f}; "
        f"by status { ({k: round(v, 4) for k, v in rw['mean_by_status'].items()}) }"
    )
    print(f"reward histogram: {rw['histogram']}")
    print(
        f"verdict reward: mean {rw['mean_verdict_reward']:.3f}, max {rw['max_verdict_reward']:.3f}"
    )
    print(
        "\n| skill band | agents | results | error rate | kept rate | mean reward |\n"
        "|---|---:|---:|---:|---:|---:|"
    )
    for b in st["skill"]:
        print(
            f"| {b['band']} | {b['agents']} | {b['results']} | {b['error_rate']:.3f} "
            f"| {b['kept_rate']:.3f} "
            f"| {b['mean_reward']:+.4f} |"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=ks.DEFAULT_EPISODES)
    ap.add_argument("--seed", type=int, default=ks.DEFAULT_SEED)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--keep", type=Path, help="write the Parquet files here and keep them")
    ap.add_argument("--no-check", action="store_true", help="skip check_episode on every episode")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = ap.parse_args(argv)
    out = args.keep or Path(tempfile.mkdtemp(prefix="bench_swarm_"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        r = run(args.episodes, args.seed, args.procs, out, not args.no_check)
    finally:
        if args.keep is None:
            shutil.rmtree(out, ignore_errors=True)
    report(r)
    if args.json:
        args.json.write_text(json.dumps(r, indent=1, default=str))
    ok = (
        r["wall_s"] <= BUDGET_S
        and r["sum_rss_mb"] <= BUDGET_RSS_MB
        and r["stats"]["violations"] == 0
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
