"""The executed_commits asset's work: the shipped batches into ``derived.commit_exec_runs``
(one row per kernel_commits row and device session) and ``derived.commit_exec_shapes``
(one row per shape and timing scope), plus the asset's metadata. No dagster import."""

from __future__ import annotations

from typing import Any

import polars as pl

from dagster_project.frames import Json, Markdown, md_table

from .ingest import shipped

RUNS_TABLE = ("derived", "commit_exec_runs")
SHAPES_TABLE = ("derived", "commit_exec_shapes")


def refresh_executed(lake: Any) -> dict[str, Any]:
    """Replace both tables with every shipped batch; return the metadata to show."""
    runs, shapes = shipped()
    lake.replace_table(*RUNS_TABLE, runs)
    lake.replace_table(*SHAPES_TABLE, shapes)
    return metadata(runs, shapes)


def metadata(runs: pl.DataFrame, shapes: pl.DataFrame) -> dict[str, Any]:
    executed = runs.filter(pl.col("status") == "executed")
    return {
        "dagster/row_count": runs.height,
        "batches": Json(sorted(runs["batch"].unique().to_list())),
        "executed_rows": executed["id"].n_unique(),
        "executed_commits": executed["sha"].n_unique(),
        "status": Json(dict(runs.group_by("status").len().iter_rows())),
        "shapes": shapes.height,
        "preview": Markdown(
            md_table(
                runs.select(
                    "batch", "repo", "sha", "spec", "status", "graph_speedup", "host_speedup"
                ).head(20)
            )
        ),
    }
