"""Cold build and no-op refresh of the mined layers on real clones, timed as a user runs
them (`kernelhouse build`, then `kernelhouse refresh`; wall clock including Python and
Dagster start-up).

    KERNELHOUSE_VLLM_SOURCE=… KERNELHOUSE_SGLANG_SOURCE=… KERNELHOUSE_FLASHINFER_SOURCE=… \\
        python benchmarks/bench_refresh.py

Prints both walls, their ratio, and whether any table changed on the no-op refresh
(row-level equality of every lake table). Goal (issue 10): no-op refresh < 15 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

MIRRORS = {
    "VLLM": "/work/.mirror/local-inference-lab+vllm/repo",
    "SGLANG": "/work/.mirror/nokiaMS+sglang/repo",
    "FLASHINFER": "/work/.mirror/flashinfer-ai+flashinfer/repo",
}
SELECTION = (
    "repo_clone,config_files,config_entries,kernel_sources,moe_model_shapes,config_attribution,"
    "perf_commits,kernel_commit_files,pr_bodies,pr_gains,kernel_commits,tuned_configs"
)


def tables(db: Path) -> dict[str, int]:
    """Hash of every table's rows (order-independent), per table."""
    out = {}
    with duckdb.connect(str(db), read_only=True) as con:
        for schema, name in con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE'"
        ).fetchall():
            if (schema, name) in (
                ("derived", "quality_results"),
                ("raw", "repo_heads"),
                ("raw", "mining_watermarks"),
            ):
                continue  # timestamps of the run itself
            h = con.execute(f'SELECT sum(hash(t)) FROM "{schema}"."{name}" AS t').fetchone()
            out[f"{schema}.{name}"] = int(h[0] or 0)
    return out


def main() -> None:
    exe = str(Path(sys.executable).with_name("kernelhouse"))
    home = Path(tempfile.mkdtemp(prefix="kh-refresh-"))
    env = {**os.environ, "KERNELHOUSE_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    for repo, path in MIRRORS.items():
        env.setdefault(f"KERNELHOUSE_{repo}_SOURCE", path)
    walls = []
    for label, verb in (("cold build", "build"), ("no-op refresh", "refresh")):
        t = time.monotonic()
        proc = subprocess.run(
            [exe, verb, "--select", SELECTION], env=env, capture_output=True, text=True
        )
        walls.append(time.monotonic() - t)
        print(f"{label:14s} {walls[-1]:7.1f} s  rc={proc.returncode}")
        if verb == "refresh":
            print("  " + proc.stderr.strip().splitlines()[-1])  # "N ran, M up to date"
        if label == "cold build":
            before = tables(home / "lake.duckdb")
    changed = [k for k, v in tables(home / "lake.duckdb").items() if before.get(k) != v]
    print(f"no-op / cold = {walls[1] / walls[0]:.2f}; tables changed on no-op: {changed or 'none'}")
    print(f"goal no-op < 15 s: {'OK' if walls[1] < 15 else 'NOT MET'}")


if __name__ == "__main__":
    main()
