"""Copied tuned-config files and train/test leakage, measured on a built lake (issue 41).

Rebuilds ``datasets.tuned_configs`` in memory from the lake's mined tables with the current
code (``mining.configs.dataset.tuned_configs_dataset``; the lake is only read) and reports:

* ``copied_from`` counts (files, rows) by repo and by (original device -> copy device);
* how many copies' tuning PR changed (the copying PR replaced by the tuning one);
* leakage, for the lake's stored rows (the code that built it) and for the rebuilt ones:
  test rows whose (kernel, E, N, K, block_shape, dtype, file content) is also in train,
  test files whose whole content is a train file's, and, per row, test rows whose
  (kernel, E, N, K, M, best_config) is in train (small tables coincide without copying).

    KERNELHOUSE_HOME=/tmp/kh-i38 python benchmarks/config_copies.py
"""

from __future__ import annotations

import json
import os
from collections import Counter

import duckdb
import polars as pl

from dagster_project.mining.configs.copies import content_keys
from dagster_project.mining.configs.dataset import tuned_configs_dataset


def _leaks(rows: pl.DataFrame, keys: dict[tuple[str, str], str]) -> dict[str, int]:
    rows = rows.with_columns(
        content=pl.Series([keys.get(k) for k in rows.select("repo", "config_path").iter_rows()]),
        block=pl.col("block_shape").cast(pl.List(pl.String)).list.join("x"),
    )
    shape = ["kernel", "E", "N", "K", "block", "dtype"]
    train, test = rows.filter(pl.col("split") == "train"), rows.filter(pl.col("split") == "test")
    by_content = test.join(
        train.select([*shape, "content"]).unique(), on=[*shape, "content"], nulls_equal=True
    )
    files = test.select("repo", "config_path", "content").unique()
    file_leak = files.join(train.select("content").unique(), on="content", nulls_equal=True)
    row_key = ["kernel", "E", "N", "K", "block", "M", "best_config"]
    per_row = test.join(train.select(row_key).unique(), on=row_key, nulls_equal=True)
    return {
        "test_rows": test.height,
        "test_rows_kernel_shape_content_in_train": by_content.height,
        "test_files_content_in_train": file_leak.height,
        "test_rows_kernel_shape_M_config_in_train": per_row.height,
    }


def main() -> None:
    con = duckdb.connect(f"{os.environ.get('KERNELHOUSE_HOME', 'data')}/lake.duckdb", True)

    def table(name: str) -> pl.DataFrame:
        return con.sql(f"SELECT * FROM {name}").pl()

    files, entries = table("raw.config_files"), table("raw.config_entries")
    attr = table("derived.config_attribution")
    rows, _ = tuned_configs_dataset(
        files,
        entries,
        attr,
        table("raw.kernel_sources"),
        table("raw.moe_model_shapes"),
        table("raw.repo_heads"),
        None,
    )
    stored = table("datasets.tuned_configs")
    keys = content_keys(entries)
    copies = rows.filter(pl.col("copied_from").is_not_null())
    per_file = copies.unique(["repo", "config_path"])
    device = dict(files.select(pl.concat_str("repo", "path"), "device_name").iter_rows())
    pairs = Counter(
        f"{device[r + o]} -> {device[r + p]}"
        for r, p, o in per_file.select("repo", "config_path", "copied_from").iter_rows()
    )
    old_pr = dict(
        stored.select(pl.concat_str("repo", "config_path"), "config_pr_number").iter_rows()
    )
    moved = sum(
        old_pr.get(r + p) != n
        for r, p, n in per_file.select("repo", "config_path", "config_pr_number").iter_rows()
    )
    print(
        json.dumps(
            {
                "files": rows.select("repo", "config_path").unique().height,
                "rows": rows.height,
                "copied_files": per_file.height,
                "copied_rows": copies.height,
                "copied_files_by_repo": dict(per_file.group_by("repo").len().iter_rows()),
                "copies_whose_tuning_pr_changed": moved,
                "copy_pairs": dict(pairs.most_common()),
                "leaks_stored_lake": _leaks(stored, keys),
                "leaks_rebuilt": _leaks(rows, keys),
                "split_rebuilt": dict(rows.group_by("split").len().iter_rows()),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
