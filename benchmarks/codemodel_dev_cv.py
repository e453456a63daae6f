"""The code model's development figures (issue 36, item 3): 10 group folds of the evidence
answers (``h100_answers.csv``; never the online tier's), by session and by op. CPU, ~1 min.

    .venv/bin/python benchmarks/codemodel_dev_cv.py [--before SHA] [--per-op]

Leaving one session component out at a time (``measured.cross_validate``, the card's
figures) fits the model ~380 times; 10 folds of whole session components (or whole ops),
assigned by a fixed shuffle, fit it 10 times, so versions can be compared in a minute.
``--before SHA`` runs the same folds on the model of commit SHA (its tree exported to a
temporary folder), for a side-by-side with the working tree's model. Every figure here is
in sample for the version chosen on them.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FOLDS = 10
SEED = 0


def group_folds(points: list[Any], by: str, measured: Any) -> list[tuple[list[int], list[int]]]:
    """(train, test) index lists of ``FOLDS`` folds of whole session components or ops."""
    keys = measured._components(points) if by == "session" else [p.op for p in points]
    names = sorted(set(keys))
    random.Random(SEED).shuffle(names)
    fold_of = {n: i % FOLDS for i, n in enumerate(names)}
    out = []
    for j in range(FOLDS):
        test = [i for i, k in enumerate(keys) if fold_of[k] == j]
        out.append(([i for i, k in enumerate(keys) if fold_of[k] != j], test))
    return out


def run(per_op: bool) -> None:
    """The figures of the code model of this process's tree."""
    from dagster_project.sim import codemodel, measured

    pts = measured.all_points()
    print(f"code model {codemodel.CODEMODEL_VERSION}: {len(pts)} timed kernels")
    for by in ("session", "op"):
        held: list[Any] = []
        pairs: list[Any] = []
        for tr, te in group_folds(pts, by, measured):
            train, test = [pts[i] for i in tr], [pts[i] for i in te]
            fix = measured._code_fix(train, test, by, "code")
            fixed = [measured._moved(p, c) for p, c in zip(test, fix, strict=True)]
            held += fixed
            pairs += measured.speedup_pairs(fixed)
        e, p = measured.error_summary(held), measured.pair_summary(pairs)
        a = e["all"]
        print(
            f"  by {by:7s} step median |log err| {a['median_abs_log_err']:.3f}, within 2x "
            f"{a['within_2x']:.1%}; speedups within 2x {p['within_2x']:.1%} of {p['n']}"
        )
        if per_op:
            ops = sorted(e["per_op"].items(), key=lambda kv: -kv[1]["median_abs_log_err"])
            for op, f in ops:
                med, w2 = f["median_abs_log_err"], f["within_2x"]
                print(f"    {op:22s} n={f['n']:3d} {med:.3f} {w2:.0%}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", help="also run the model of this commit, first")
    ap.add_argument("--per-op", action="store_true")
    ap.add_argument("--tree", default=str(ROOT), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.before:
        with tempfile.TemporaryDirectory() as tmp:
            tar = subprocess.run(
                ["git", "-C", str(ROOT), "archive", a.before], check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)
            here = Path(tmp) / "benchmarks" / "codemodel_dev_cv.py"
            here.write_bytes(Path(__file__).read_bytes())
            cmd = [sys.executable, str(here), "--tree", tmp] + (["--per-op"] if a.per_op else [])
            subprocess.run(cmd, check=True, cwd=tmp)
    sys.path.insert(0, a.tree)
    run(a.per_op)
    return 0


if __name__ == "__main__":
    sys.exit(main())
