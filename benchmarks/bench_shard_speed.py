"""One kernelinfer shard's generate + check: a git revision's code against the working tree.

Why this shape: the machines are noisy (two cores, other work on them), so absolute
seconds from one timed test say little. Each round runs both trees, in alternating
order, in fresh subprocesses (cold caches, as a build's shard worker is), and the report
is the ratio of the medians from one run; the output hashes say whether the speed-up
kept the bytes (sessions and ``check_session`` violations) identical.

    python benchmarks/bench_shard_speed.py [--base HEAD] [--shard 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: run in a tree's root: time generate_shard + check_session, hash what they return
_WORKER = """
import hashlib, json, sys, time
from dagster_project.sim.kernelinfer import check_session, generate_shard
t = time.process_time()
xs = generate_shard(int(sys.argv[1]), seed=20260, n_sessions=1899)
cs = [check_session(x) for x in xs]
s = time.process_time() - t
h = hashlib.sha256(json.dumps([xs, cs], sort_keys=True, default=str).encode()).hexdigest()
print(json.dumps({"s": s, "hash": h}))
"""


def _run(tree: Path, shard: int) -> tuple[float, str]:
    out = subprocess.run(
        [sys.executable, "-c", _WORKER, str(shard)],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return float(got["s"]), str(got["hash"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="HEAD", help="git revision timed as 'before'")
    ap.add_argument("--shard", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_shard_") as tmp:
        base = Path(tmp) / "base"
        git = ["git", "-C", str(ROOT), "worktree"]
        subprocess.run(
            [*git, "add", "--detach", str(base), a.base], check=True, capture_output=True
        )
        try:
            before: list[float] = []
            after: list[float] = []
            hashes: set[tuple[str, str]] = set()
            for r in range(a.rounds):
                order = [(base, before), (ROOT, after)]
                for tree, times in order if r % 2 == 0 else order[::-1]:
                    s, h = _run(tree, a.shard)
                    times.append(s)
                    hashes.add(("base" if tree == base else "tree", h))
                print(f"round {r + 1}: before {before[-1]:.2f} s, after {after[-1]:.2f} s")
        finally:
            subprocess.run([*git, "remove", "--force", str(base)], check=False)
    b, w = statistics.median(before), statistics.median(after)
    paired = statistics.median(x / y for x, y in zip(after, before, strict=True))
    same = len({h for _, h in hashes}) == 1
    print(
        f"shard {a.shard} generate+check median: before {b:.2f} s, after {w:.2f} s, "
        f"after/before {w / b:.3f} (median of the rounds' ratios {paired:.3f}); "
        f"output hashes equal: {same}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
