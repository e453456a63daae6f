"""What the code model cache (``sim.model_cache``) saves a kernelinfer shard, in one run.

Each measurement is a fresh process (as a build's shard is) writing one shard of
``--sessions`` sessions into its own lake: first with an empty ``KERNELHOUSE_CACHE_DIR``
(the process fits the code model and stores it), then ``--repeats`` times with the cache
that first process filled. Prints each wall time and the ratio cold / warm (median)::

    .venv/bin/python benchmarks/codemodel_cache.py --sessions 40 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_SHARD = """
import sys
from pathlib import Path
from dagster_project.storage.lake import Lake
from dagster_project.sim.shards import kernelinfer_shard
d = Path(sys.argv[1])
kernelinfer_shard(Lake(d / "lake.duckdb", str(d / "lake")), "000", seed=20251129,
                  n_sessions=int(sys.argv[2]))
"""


def _shard(cache: Path, work: Path, sessions: int) -> float:
    work.mkdir(parents=True)
    env = {**os.environ, "KERNELHOUSE_CACHE_DIR": str(cache)}
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", _SHARD, str(work), str(sessions)], cwd=ROOT, env=env, check=True
    )
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        cold = _shard(cache, Path(tmp) / "cold", a.sessions)
        stored = sorted(p.name for p in (cache / "codemodel").glob("*.json"))
        warm = [_shard(cache, Path(tmp) / f"warm{i}", a.sessions) for i in range(a.repeats)]
    print(f"kernelinfer shard of {a.sessions} sessions, one process each")
    print(f"  empty cache (fits and stores {len(stored)} model): {cold:6.1f} s")
    print(f"  filled cache, {a.repeats} runs: " + ", ".join(f"{w:.1f} s" for w in warm))
    print(f"  cold / warm (median): {cold / statistics.median(warm):.2f}x")


if __name__ == "__main__":
    main()
