"""Near-duplicate relands in kernel_commits: the threshold's check on a built lake (issue 41).

Every pair of rows of the same repo and path from different commits is scored by changed-line
similarity (``reverts.line_similarity``); the pairs in a band around the threshold are
printed with both titles (for reading), with whether the later commit is a reland of the
earlier one's chain (``reverts.reland_roots``). Then ``reverts.duplicate_ids`` is applied
and compared with the byte-equal rule it replaced, and the rows are split with the current
split to show that no flagged pair straddles it.

    KERNELHOUSE_HOME=/tmp/kh-exec python benchmarks/near_duplicates.py [--low 0.4]
"""

from __future__ import annotations

import argparse
import json
import os

import duckdb
import polars as pl

from dagster_project.mining.commits.reverts import (
    DUPLICATE_SIMILARITY,
    RELAND_SIMILARITY,
    changed_line_texts,
    duplicate_ids,
    line_similarity,
    reland_roots,
)
from dagster_project.mining.commits.split import assign_temporal_split


def _pairs(rows: pl.DataFrame, roots: dict[str, str]) -> list[dict]:
    seen: dict[tuple[str, str], list[dict]] = {}
    out = []
    for r in rows.sort("authored_at", "id").iter_rows(named=True):
        lines = changed_line_texts(r["diff"])
        for o in seen.setdefault((r["repo"], r["path"]), []):
            if o["sha"] == r["sha"]:
                continue
            chain = roots.get(r["sha"], r["sha"]) == roots.get(o["sha"], o["sha"])
            out.append(
                {
                    "sim": round(line_similarity(lines, o["lines"]), 3),
                    "chain": chain,
                    "repo": r["repo"],
                    "later": r["title"],
                    "earlier": o["title"],
                    "lines": (len(lines), len(o["lines"])),
                }
            )
        seen[(r["repo"], r["path"])].append({**r, "lines": lines})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--low", type=float, default=0.4)
    args = ap.parse_args()
    con = duckdb.connect(f"{os.environ.get('KERNELHOUSE_HOME', 'data')}/lake.duckdb", True)
    rows = con.sql(
        "SELECT id, repo, sha, path, title, pr_number, authored_at, before_code, "
        "after_code, diff, duplicate_of AS old_duplicate_of FROM datasets.kernel_commits"
    ).pl()
    subjects = dict(con.execute("SELECT sha, subject FROM raw.perf_commits").fetchall())
    roots = reland_roots(subjects)
    pairs = _pairs(rows, roots)
    band = sorted((p for p in pairs if p["sim"] >= args.low), key=lambda p: -p["sim"])
    for p in band:
        mark = (
            "DUP"
            if p["sim"] >= (RELAND_SIMILARITY if p["chain"] else DUPLICATE_SIMILARITY)
            else "   "
        )
        print(
            f"{mark} {p['sim']:.2f} chain={int(p['chain'])} {p['repo']:10} {p['lines']} "
            f"| {p['later'][:70]} <= {p['earlier'][:70]}"
        )
    rows = rows.with_columns(duplicate_of=duplicate_ids(rows, roots))
    out, cutoff = assign_temporal_split(rows)
    split = dict(out.select("id", "split").iter_rows())
    straddle = out.filter(
        pl.col("duplicate_of").is_not_null()
        & (pl.col("split") != pl.col("duplicate_of").replace_strict(split, default=None))
    )
    old_split, _ = assign_temporal_split(rows.drop("duplicate_of"))
    print(
        json.dumps(
            {
                "rows": rows.height,
                "same_path_pairs": len(pairs),
                "reland_commits": len(roots),
                "duplicate_of_new": out["duplicate_of"].drop_nulls().len(),
                "duplicate_of_byte_equal_rule": rows["old_duplicate_of"].drop_nulls().len(),
                "test_rows": out.filter(pl.col("split") == "test").height,
                "test_rows_without_grouping": old_split.filter(pl.col("split") == "test").height,
                "straddling_pairs": straddle.height,
                "cutoff": str(cutoff),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
