"""sim_compile_validation's nvcc work with and without the result cache, in one process.

Runs ``compile_sample`` (the asset's call, default sample 48, the default seed) three
times back to back on the same machine: without a cache (the old path), with an empty
cache (first build: every case compiled and stored) and with that cache (a rebuild with
unchanged templates). Prints seconds, nvcc runs (cache misses) and the ratios against
the old path, and checks that the three runs give the same verdicts.

    python benchmarks/bench_compile_cache.py [--sample 48] [--seed DEFAULT_SIM_SEED] [--jobs 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dagster_project.settings import DEFAULT_SIM_SEED  # noqa: E402
from dagster_project.sim.compile_check import compile_sample, nvcc_path  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sample", type=int, default=48)
    ap.add_argument("--seed", type=int, default=DEFAULT_SIM_SEED)
    ap.add_argument("--jobs", type=int, default=None)
    args = ap.parse_args()
    if nvcc_path() is None:
        print("nvcc not found: nothing to measure")
        return 1
    with tempfile.TemporaryDirectory(prefix="kh-bench-nvcc-") as tmp:
        root = Path(tmp)
        runs = []
        for name, cache in (
            ("no cache (old path)", None),
            ("empty cache", root / "c"),
            ("warm cache", root / "c"),
        ):
            t0 = time.perf_counter()
            recs = compile_sample(
                args.sample, args.seed, root / name.split()[0], jobs=args.jobs, cache_dir=cache
            )
            dt = time.perf_counter() - t0
            nvcc_runs = sum(1 for r in recs if r.get("checker") == "nvcc" and not r["cached"])
            runs.append((name, dt, recs))
            print(f"{name:22s} {dt:7.1f} s  cases {len(recs)}  nvcc runs {nvcc_runs}")
        base = runs[0][1]
        for name, dt, _ in runs[1:]:
            print(f"{name}: old / this = {base / dt:.2f}x")
        keys = ("op", "variant", "arch", "inject", "actual_ok", "agree", "message_match")
        same = all(
            [tuple(r[k] for k in keys) for r in recs]
            == [tuple(r[k] for k in keys) for r in runs[0][2]]
            for _, _, recs in runs[1:]
        )
        print(f"same verdicts in all three runs: {same}")
        return 0 if same else 2


if __name__ == "__main__":
    raise SystemExit(main())
