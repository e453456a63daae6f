"""Issue 41: the pr_tasks view of a built lake, read back through ``datasets`` and scored.

Writes each split of ``datasets.pr_tasks`` with the export's own query
(``sql/publish/pr_tasks_rows.sql``) to Parquet, loads it with ``datasets``, and scores every
task's oracle multi-file edit with the standalone ``code/reward.py`` the export ships
(rendered here from the package). Prints the share of tasks whose oracle scores 1.0, the
files-per-task distribution, prompt sizes, the kernel_commits rows whose commit is split
across train and test (must be 0), and how far a completion that edits only the file with
the most changed lines gets (partial credit of a multi-file task).

    python benchmarks/pr_tasks_oracle.py /path/to/KERNELHOUSE_HOME
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from dagster_project.publish._sql import relation
from dagster_project.rewards import changed_lines, oracle_edit, render_reward_module


def _reward() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "reward"}
    exec(compile(render_reward_module(), "reward.py", "exec"), namespace)
    return namespace


def _largest_file_only(files: list[dict[str, Any]], reward: dict[str, Any]) -> float:
    big = max(files, key=lambda f: len(changed_lines(f["before_code"], f["after_code"])))
    completion = oracle_edit(big["before_code"], big["after_code"], big["path"])
    return float(reward["pr_patch_reward"](completion, files))


def main(home: Path) -> dict[str, Any]:
    import datasets

    out = Path(tempfile.mkdtemp())
    reward = _reward()
    con = duckdb.connect(str(home / "lake.duckdb"), read_only=True)
    report: dict[str, Any] = {}
    partial: list[float] = []
    for split in ("train", "test"):
        path = out / f"{split}.parquet"
        pq.write_table(relation(con, "pr_tasks_rows", {"split": split}).arrow().read_all(), path)
        ds = datasets.load_dataset(
            "parquet", data_files=str(path), split="train", cache_dir=str(out / "hf")
        )
        scores = [
            reward["pr_patch_reward"](reward["pr_oracle_edit"](r["files"]), r["files"]) for r in ds
        ]
        partial += [_largest_file_only(r["files"], reward) for r in ds if r["n_files"] > 1]
        report[split] = {
            "tasks": ds.num_rows,
            "files": sum(ds["n_files"]),
            "oracle_1.0": sum(s == 1.0 for s in scores),
            "oracle_below_1.0": [r["id"] for r, s in zip(ds, scores, strict=True) if s != 1.0],
        }
    report["files_per_task"] = con.sql(
        "SELECT n_files, count(*) FROM datasets.pr_tasks GROUP BY 1 ORDER BY 1"
    ).fetchall()
    report["prompt_chars_p50_p90_max"] = con.sql(
        "SELECT quantile_cont(length(prompt), 0.5), quantile_cont(length(prompt), 0.9), "
        "max(length(prompt)) FROM datasets.pr_tasks"
    ).fetchall()[0]
    report["rows_split_from_their_task"] = con.sql(
        "SELECT count(*) FROM datasets.kernel_commits k JOIN datasets.pr_tasks t "
        "ON k.repo = t.repo AND k.sha = t.sha WHERE k.split <> t.split"
    ).fetchall()[0][0]
    if partial:
        report["largest_file_only"] = {
            "tasks": len(partial),
            "median": round(statistics.median(partial), 3),
            "max": round(max(partial), 3),
        }
    return report


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), indent=1, default=str))
