"""Draw the blind task_kind sample (issue 41): seeded random kernel_commits rows.

Rows come from a built lake's ``datasets.kernel_commits`` (``KERNELHOUSE_HOME``, default
``/tmp/kh-exec``, the lake built from the mirrors), ordered by sha256 of a fixed salt and
the row id, so the draw is reproducible and independent of the labeller and of any rule.
Each row's half (``dev`` may be tuned on, ``heldout`` is scored once) comes from another
hash of its id. Labels and one-line reasons are written by hand afterwards from the diff
(``show.py``), before ``mining/commits/task_kind.py`` exists; no code or PR text is stored.

    KERNELHOUSE_HOME=/tmp/kh-exec .venv/bin/python benchmarks/task_kind_blind/sample.py -n 90
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
from pathlib import Path

import duckdb

HERE = Path(__file__).parent
OUT = HERE / "labels.csv"
SALT = "task-kind-blind-1"
LABELS = ("kernel_edit", "host_side", "fragment", "cosmetic", "not_perf")


def _key(salt: str, row_id: str) -> str:
    return hashlib.sha256(f"{salt}|{row_id}".encode()).hexdigest()


def half(row_id: str) -> str:
    """``dev`` or ``heldout``, fixed per row before any label exists."""
    return "dev" if int(_key("task-kind-split", row_id), 16) % 2 == 0 else "heldout"


def rows(home: str) -> list[tuple[str, str, str, str]]:
    con = duckdb.connect(str(Path(home) / "lake.duckdb"), read_only=True)
    try:
        return con.execute(
            "SELECT id, repo, sha, path FROM datasets.kernel_commits ORDER BY id"
        ).fetchall()
    finally:
        con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=90)
    args = ap.parse_args()
    home = os.environ.get("KERNELHOUSE_HOME", "/tmp/kh-exec")
    drawn = sorted(rows(home), key=lambda r: _key(SALT, r[0]))[: args.n]
    with OUT.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "repo", "sha", "path", "split", "label", "reason"])
        for rid, repo, sha, path in drawn:
            w.writerow([rid, repo, sha, path, half(rid), "", ""])
    print(f"{len(drawn)} rows -> {OUT}")


if __name__ == "__main__":
    main()
