"""Shards per minute: in process, and on the Dask executor with 1 and 2 workers.

Builds the same simulated shards three (or more) ways, each into a fresh
``KERNELHOUSE_HOME`` through the code path ``kernelhouse build`` uses
(``execution.planner.run_build``): in process (``dg.materialize``), then ``--distributed``
on a local Dask cluster of W single-threaded worker processes (``definitions.dask_cluster``
+ ``DaskRuns``). Reports wall time, shards/min and the ratio to the in-process run, and,
from the Dagster event log of each run, where the time went:

* ``warm-up``: from the build's start to the first step starting (cluster start, run
  processes spawning, workers importing Dagster and building the definitions);
* ``step``: mean time a shard's step ran (the simulator plus writing Parquet);
* ``run overhead``: mean run duration minus its step (run creation, events, Dask round
  trips), the per-shard cost a distributed run adds.

Then checks that every mode wrote byte-identical partition files, and prints a linear
projection for a cluster of ``--project-workers`` workers on ``--project-scale`` × the
default data (19 kernelinfer + 24 kernelswarm shards of 100), from the measured per-shard
times. The projection assumes per-shard times stay as measured (one core per worker) and
no shared bottleneck; the numbers it rests on are printed with it.

Usage: ``python benchmarks/bench_scale.py [--sessions N] [--episodes N] [--workers 1,2]
[--project-workers 64] [--project-scale 100] [--json PATH]``. Shard size is fixed at 100
by the simulator; ``--sessions``/``--episodes`` choose how many shards (default 400 and
400: 4 + 4 shards, about 5 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

TABLES = (
    "kernelinfer_sessions",
    "kernelinfer_steps",
    "kernelswarm_episodes",
    "kernelswarm_agents",
    "kernelswarm_messages",
)
SELECTION = "kernelinfer_sessions,kernelswarm_episodes"
DEFAULT_SHARDS = {"kernelinfer_sessions": 19, "kernelswarm_episodes": 24}
SHARD_SIZE = 100


@dataclass
class Mode:
    name: str
    workers: int  # 0: in process
    wall_s: float = 0.0
    shards: int = 0
    warmup_s: float = 0.0
    step_s: dict[str, float] = field(default_factory=dict)  # asset -> mean step seconds
    overhead_s: float = 0.0
    ok: bool = True
    files: dict[str, bytes] = field(default_factory=dict, repr=False)

    @property
    def per_min(self) -> float:
        return 60.0 * self.shards / self.wall_s if self.wall_s else 0.0


def _timings(instance: Any, started: float) -> tuple[float, dict[str, list[float]], list[float]]:
    """(warm-up, step seconds per asset, run overhead seconds) from the event log."""
    first_step = math.inf
    steps: dict[str, list[float]] = {}
    overhead: list[float] = []
    for run in instance.get_runs():
        events = [e for e in instance.all_logs(run.run_id) if e.dagster_event]
        by_type: dict[str, list[Any]] = {}
        for e in events:
            by_type.setdefault(e.dagster_event.event_type_value, []).append(e)
        start = by_type.get("STEP_START", [])
        done = by_type.get("STEP_SUCCESS", [])
        if not start or not done:
            continue
        first_step = min(first_step, start[0].timestamp)
        step = done[0].timestamp - start[0].timestamp
        asset = start[0].dagster_event.step_key
        steps.setdefault(asset, []).append(step)
        run_start = by_type.get("PIPELINE_START", start)[0].timestamp
        run_end = by_type.get("PIPELINE_SUCCESS", done)[-1].timestamp
        overhead.append(max(0.0, (run_end - run_start) - step))
    return first_step - started, steps, overhead


def _run_mode(mode: Mode, root: Path, partitions: list[str]) -> None:
    import dagster as dg

    from dagster_project.cli.app import DEFINITIONS
    from dagster_project.definitions import build_definitions
    from dagster_project.execution.distributed import DaskRuns, dask_cluster
    from dagster_project.execution.planner import QUIET_RUN_CONFIG, run_build
    from dagster_project.settings import ensure_home, load_settings

    home = root / mode.name
    os.environ["KERNELHOUSE_HOME"] = str(home)
    os.environ["DAGSTER_HOME"] = str(home / "dagster")
    settings = load_settings()
    ensure_home(settings)
    defs = build_definitions()
    with dg.DagsterInstance.from_config(str(settings.dagster_home)) as instance:
        instance.get_runs()  # create the storage before any run process touches it
        started = time.time()
        if mode.workers == 0:
            outcome = run_build(defs, instance, SELECTION, partitions=partitions)
        else:
            with (
                dask_cluster(None, mode.workers, definitions=DEFINITIONS) as cluster,
                DaskRuns(
                    instance,
                    cluster.address,
                    cluster.threads,
                    definitions=DEFINITIONS,
                    run_config=QUIET_RUN_CONFIG,
                    tags={"kernelhouse/bench": "scale"},
                ) as launch,
            ):
                outcome = run_build(defs, instance, SELECTION, partitions=partitions, launch=launch)
        mode.wall_s = time.time() - started
        warm, steps, overhead = _timings(instance, started)
    mode.ok = outcome.ok
    mode.shards = sum(len(v) for v in steps.values())
    mode.warmup_s = warm
    mode.step_s = {k: statistics.fmean(v) for k, v in steps.items()}
    mode.overhead_s = statistics.fmean(overhead) if overhead else 0.0
    for table in TABLES:
        for path in sorted((home / "lake" / table).glob("*.parquet")):
            mode.files[f"{table}/{path.name}"] = path.read_bytes()
    if not mode.ok:
        print(f"  {mode.name}: FAILED {outcome.failed}", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--sessions", type=int, default=400, help="kernelinfer sessions (100 per shard)"
    )
    ap.add_argument(
        "--episodes", type=int, default=400, help="kernelswarm episodes (100 per shard)"
    )
    ap.add_argument("--workers", default="1,2", help="Dask worker counts to measure")
    ap.add_argument("--project-workers", type=int, default=64)
    ap.add_argument("--project-scale", type=int, default=100)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    os.environ["KERNELHOUSE_SIM_SESSIONS"] = str(args.sessions)
    os.environ["KERNELHOUSE_SIM_EPISODES"] = str(args.episodes)
    os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")
    os.environ.pop("KERNELHOUSE_LAKE_URI", None)
    os.environ.pop("KERNELHOUSE_EXECUTOR", None)
    n = max(math.ceil(args.sessions / SHARD_SIZE), math.ceil(args.episodes / SHARD_SIZE))
    partitions = [f"{i:03d}" for i in range(n)]
    modes = [Mode("in_process", 0)] + [
        Mode(f"dask_{w}w", int(w)) for w in args.workers.split(",") if w.strip()
    ]
    print(
        f"cores: {os.cpu_count()}  kernelinfer {args.sessions} sessions + kernelswarm "
        f"{args.episodes} episodes, shards of {SHARD_SIZE}, "
        f"partitions {partitions[0]}..{partitions[-1]}"
    )
    root = Path(tempfile.mkdtemp(prefix="kh-bench-scale-"))
    try:
        for mode in modes:
            _run_mode(mode, root, partitions)
            print(f"  {mode.name}: {mode.wall_s:.1f}s", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    base = modes[0]
    print()
    print(
        f"{'mode':<12}{'workers':>8}{'shards':>8}{'wall s':>9}{'shards/min':>12}"
        f"{'vs in-proc':>12}{'warm-up s':>11}{'run ovh s':>11}   mean step s"
    )
    for m in modes:
        steps = "  ".join(f"{k.split('_')[0]} {v:.2f}" for k, v in sorted(m.step_s.items()))
        print(
            f"{m.name:<12}{m.workers:>8}{m.shards:>8}{m.wall_s:>9.1f}{m.per_min:>12.1f}"
            f"{m.per_min / base.per_min:>11.2f}x{m.warmup_s:>11.1f}{m.overhead_s:>11.2f}   {steps}"
        )
    same = all(m.files == base.files for m in modes[1:])
    print(
        f"partition files identical across modes: {same} ({len(base.files)} files, "
        f"{sum(len(b) for b in base.files.values()) / 1e6:.1f} MB)"
    )
    for m in modes[1:]:
        differ = sorted(
            k for k in base.files.keys() | m.files.keys() if base.files.get(k) != m.files.get(k)
        )
        if differ:  # e.g. the simulator's code changed while the benchmark ran
            print(
                f"  {m.name} differs from in_process in {len(differ)} file(s): "
                f"{', '.join(differ[:4])}"
            )
    # Projection: every shard of scale x the default build, spread over W workers.
    dist = [m for m in modes if m.workers]
    top = max(dist, key=lambda m: m.workers) if dist else None
    per_shard_mb = sum(len(b) for b in base.files.values()) / 1e6 / max(1, base.shards)
    if top and base.step_s:
        w, scale = args.project_workers, args.project_scale
        shards = {a: c * scale for a, c in DEFAULT_SHARDS.items()}
        # Per-shard cost on a worker: the in-process step time (one core each) plus the
        # measured distributed run overhead; warm-up paid once.
        work = sum(shards[a] * (base.step_s.get(a, 0.0) + top.overhead_s) for a in shards)
        waves = {a: math.ceil(c / w) for a, c in shards.items()}
        eff = (top.per_min / base.per_min) / top.workers
        t = top.warmup_s + work / w
        print(
            f"projection: {scale}x default = {sum(shards.values()):,} shards "
            f"({', '.join(f'{a} {c:,}' for a, c in shards.items())}) on {w} workers: "
            f"{work / 3600:.1f} worker-hours -> {t / 60:.1f} min at ideal packing "
            f"({sum(waves.values())} waves), {t / 60 / max(eff, 1e-9):.1f} min at this machine's "
            f"{eff:.0%} per-worker efficiency; "
            f"Parquet ~{per_shard_mb * sum(shards.values()) / 1e3:.1f} GB"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {k: v for k, v in asdict(m).items() if k != "files"}
                    | {"shards_per_min": m.per_min}
                    for m in modes
                ],
                indent=1,
            )
        )
    return 0 if all(m.ok for m in modes) and same else 1


if __name__ == "__main__":
    raise SystemExit(main())
