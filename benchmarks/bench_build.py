"""Cold `kernelhouse build` over the real clones: wall time, peak memory, per-asset seconds.

Usage::

    KERNELHOUSE_VLLM_SOURCE=/work/.mirror/local-inference-lab+vllm/repo \\
    KERNELHOUSE_SGLANG_SOURCE=/work/.mirror/nokiaMS+sglang/repo \\
    KERNELHOUSE_FLASHINFER_SOURCE=/work/.mirror/flashinfer-ai+flashinfer/repo \\
    python benchmarks/bench_build.py --home /tmp/kh/bench-build [--keep] [-- build args]

The home is deleted first (a cold build: clones, lake, exports, Dagster runs all new).
While the build runs, the resident memory of its whole process tree (the CLI and every
process it starts: multiprocess workers, nvcc, git) is sampled every 0.2 s; the peak is
the largest sum seen. Afterwards the Dagster event log of the build's runs gives each
step's seconds (STEP_START to STEP_SUCCESS/FAILURE), summed per asset over partitions.

"One run against the sum of its parts": ``wall / sum(step seconds)`` below 1 means the
build overlapped steps (parallel shards); above 1 is orchestration overhead (process
starts, planning, event-log writes) on top of the assets' own work.

Goals (issue 24, on 2 cores): wall <= 240 s, peak <= 2 GB. Absolute seconds move with
the machine's load: compare runs made back to back.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

GOAL_WALL_S = 240.0
GOAL_PEAK_B = 2 * 1024**3


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants (from /proc)."""
    children: dict[int, list[int]] = defaultdict(list)
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        children[int(fields[1])].append(pid)
        rss[pid] = int(fields[21]) * page
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total


def _sample_peak(proc: subprocess.Popen, out: dict[str, float]) -> None:
    """Peak tree RSS, when it happened (seconds after start) and the largest process then."""
    start = time.monotonic()
    while proc.poll() is None:
        rss = _tree_rss(proc.pid)
        if rss > out.get("peak", 0):
            out["peak"], out["peak_at_s"] = rss, time.monotonic() - start
        time.sleep(0.2)


def _step_seconds(dagster_home: Path) -> tuple[dict[str, float], dict[str, int], float]:
    """Seconds per asset (summed over partitions), runs per asset, and the sum of all."""
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    import dagster as dg

    instance = dg.DagsterInstance.get()
    seconds: dict[str, float] = defaultdict(float)
    runs: dict[str, int] = defaultdict(int)
    for run in instance.get_runs():
        starts: dict[str, float] = {}
        for rec in instance.all_logs(run.run_id):
            ev = rec.dagster_event
            if ev is None or ev.step_key is None:
                continue
            if ev.event_type_value == "STEP_START":
                starts[ev.step_key] = rec.timestamp
            elif ev.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE") and ev.step_key in starts:
                seconds[ev.step_key] += rec.timestamp - starts.pop(ev.step_key)
                runs[ev.step_key] += 1
    return dict(seconds), dict(runs), sum(seconds.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--home", type=Path, default=Path("/tmp/kh/bench-build"))
    ap.add_argument(
        "--keep",
        action="store_true",
        help="keep the home (default: keep; --clean removes it after)",
    )
    ap.add_argument("--clean", action="store_true", help="remove the home after the run")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("build_args", nargs="*", help="extra arguments for `kernelhouse build`")
    args = ap.parse_args()

    home = args.home.resolve()
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    env = {**os.environ, "KERNELHOUSE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    env.setdefault("HF_HUB_OFFLINE", "1")
    exe = str(Path(sys.executable).with_name("kernelhouse"))
    log = home / "build.log"
    started = time.monotonic()
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [exe, "build", *args.build_args], stdout=fh, stderr=subprocess.STDOUT, env=env
        )
        peak: dict[str, float] = {}
        sampler = threading.Thread(target=_sample_peak, args=(proc, peak), daemon=True)
        sampler.start()
        rc = proc.wait()
        sampler.join()
    wall = time.monotonic() - started
    seconds, runs, parts = _step_seconds(home / "dagster")

    print(f"cold kernelhouse build {' '.join(args.build_args)} (home {home}): rc={rc}")
    print(f"{'asset (step)':40s} {'runs':>5s} {'seconds':>9s} {'share':>6s}")
    for step, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"{step:40s} {runs[step]:5d} {s:9.1f} {s / parts:6.1%}")
    print(f"{'sum of steps':40s} {sum(runs.values()):5d} {parts:9.1f}")
    print(
        f"wall {wall:.1f} s; wall / sum of steps = {wall / parts:.2f}"
        if parts
        else f"wall {wall:.1f} s"
    )
    print(
        f"peak memory of the process tree {peak.get('peak', 0) / 1024**3:.2f} GiB "
        f"at {peak.get('peak_at_s', 0):.0f} s (match it to the stage lines of {log})"
    )
    ok_wall, ok_peak = wall <= GOAL_WALL_S, peak.get("peak", 0) <= GOAL_PEAK_B
    print(
        f"goal wall <= {GOAL_WALL_S:.0f} s: {'OK' if ok_wall else 'MISSED'}; "
        f"goal peak <= 2 GiB: {'OK' if ok_peak else 'MISSED'}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rc": rc,
                    "wall_s": wall,
                    "peak_bytes": peak.get("peak", 0),
                    "sum_steps_s": parts,
                    "steps": seconds,
                    "runs": runs,
                    "cpus": os.cpu_count(),
                },
                indent=1,
            )
        )
    if rc != 0:
        print(f"build failed: see {log}")
    if args.clean:
        shutil.rmtree(home, ignore_errors=True)
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
