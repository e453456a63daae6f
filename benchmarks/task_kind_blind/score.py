"""Score ``task_kind`` against the blind labels (issue 41): agreement per half.

Rows are read from a built lake (``KERNELHOUSE_HOME``, default ``/tmp/kh-exec``) and
classified by ``mining/commits/task_kind.py`` as it is now, with each commit's kept-file
count taken from the same table. Printed per half (``heldout`` is the headline; the rule
may have been tuned on ``dev``): agreement for ``kernel_edit`` vs the rest, five-label
agreement, and the disagreements; then the kind counts of the whole table by repo.

    KERNELHOUSE_HOME=/tmp/kh-exec .venv/bin/python benchmarks/task_kind_blind/score.py
"""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path

import duckdb
import polars as pl

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

from bench_perf_filter import _fmt, wilson  # noqa: E402

from dagster_project.mining.commits.task_kind import attach_task_kind  # noqa: E402

COLS = (
    "id, repo, sha, path, language, title, before_code, after_code, diff, "
    "touches_cpu_kernel, is_binding_file, lines_changed"
)


def main() -> None:
    home = os.environ.get("KERNELHOUSE_HOME", "/tmp/kh-exec")
    con = duckdb.connect(str(Path(home) / "lake.duckdb"), read_only=True)
    table = pl.from_arrow(con.sql(f"SELECT {COLS} FROM datasets.kernel_commits").to_arrow_table())
    con.close()
    kinds = attach_task_kind(table)
    pred = dict(kinds.select("id", "task_kind").iter_rows())
    why = dict(kinds.select("id", "task_kind_reason").iter_rows())
    labels = list(csv.DictReader((HERE / "labels.csv").open()))
    for half in ("dev", "heldout"):
        part = [r for r in labels if r["split"] == half]
        binary = sum(
            (pred[r["id"]] == "kernel_edit") == (r["label"] == "kernel_edit") for r in part
        )
        five = sum(pred[r["id"]] == r["label"] for r in part)
        print(f"{half}: {len(part)} rows")
        print(f"  kernel_edit vs rest agreement {_fmt(wilson(binary, len(part)))} ({binary})")
        print(f"  five-label agreement {_fmt(wilson(five, len(part)))} ({five})")
        for r in part:
            if pred[r["id"]] != r["label"]:
                print(f"    {r['id']} label {r['label']:11} rule {pred[r['id']]:11} {why[r['id']]}")
    counts = kinds.group_by("repo", "task_kind").len().sort("repo", "task_kind")
    share = kinds.group_by("repo").agg(
        rows=pl.len(), kernel_edit=(pl.col("task_kind") == "kernel_edit").sum()
    )
    print(counts)
    print(share.with_columns(share=pl.col("kernel_edit") / pl.col("rows")).sort("repo"))
    total = kinds.height
    ke = int((kinds["task_kind"] == "kernel_edit").sum())
    print(f"all: {ke} of {total} rows kernel_edit ({ke / total:.1%})")


if __name__ == "__main__":
    main()
