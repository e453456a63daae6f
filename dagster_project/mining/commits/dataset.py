"""``datasets.kernel_commits`` from the mined tables: rows, build properties, the asset's
metadata and its two blocking checks (diff round trip, oracle patch reward). No dagster
import: metadata are plain values and ``frames`` markers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from dagster_project.frames import CheckOutcome, ColumnSchema, Json, Markdown, md_table


@dataclass(frozen=True)
class KernelCommits:
    """``rows`` in assembly order (metadata and checks read them in that order); ``table``
    is what is written (sorted by authored_at, id); ``properties`` the build_properties rows."""

    rows: pl.DataFrame
    cutoff: datetime | None
    metadata: dict[str, Any]

    @property
    def table(self) -> pl.DataFrame:
        return self.rows.sort("authored_at", "id")

    @property
    def properties(self) -> pl.DataFrame:
        cutoff = self.cutoff.isoformat() if self.cutoff else None
        return pl.DataFrame({"key": [PROPERTY_KEY], "value": [cutoff]})


#: The build_properties key of the temporal split's cut-off.
PROPERTY_KEY = "kernel_commits.split_cutoff"


def kernel_commits_dataset(
    files: pl.DataFrame,
    pr_gains: pl.DataFrame | None,
    pr_bodies: pl.DataFrame | None,
    perf_commits: pl.DataFrame,
    excluded: pl.DataFrame | None,
    exec_runs: pl.DataFrame | None = None,
) -> KernelCommits:
    """Union the repos' files, attach PR bodies and gains, mentions and prompt, temporal
    split, the execution census and the label runs of executed rows
    (``derived.commit_exec_runs``; None: no row was run); the metadata the UI shows
    (plots, counts, exclusions, preview)."""
    from dagster_project.commit_exec.columns import attach_execution, empty_runs
    from dagster_project.gains.pipeline import attach_commit_gains
    from dagster_project.mining.commits.lake_sync import assemble_kernel_commits
    from dagster_project.mining.commits.mine import EXCLUDED_SCHEMA, exclusion_counts
    from dagster_project.mining.commits.task_kind import attach_task_kind
    from dagster_project.report import plots_markdown

    rows = attach_commit_gains(files, pr_gains, pr_bodies)
    rows, cutoff = assemble_kernel_commits(rows, perf_commits)
    rows = attach_task_kind(rows)  # issue 41: what the row is worth as a task alone
    rows = attach_execution(rows, exec_runs if exec_runs is not None else empty_runs())
    excl = exclusion_counts(
        excluded if excluded is not None else pl.DataFrame(schema=EXCLUDED_SCHEMA)
    )
    split = dict(rows.group_by("split").len().iter_rows())
    monthly = (
        rows.with_columns(month=pl.col("authored_at").dt.strftime("%Y-%m"))
        .group_by("repo", "month")
        .agg(pl.len().alias("rows"))
    )
    plots = plots_markdown(
        monthly, "line", x="month", y="rows", series="repo", title="rows per month"
    )
    for col in ("kernel_speedup", "e2e_speedup"):
        if rows[col].is_not_null().any():
            plots += "\n\n" + plots_markdown(
                rows.filter(pl.col(col).is_not_null()), "histogram", x=col, log_x=True, title=col
            )
    metadata: dict[str, Any] = {
        "plots": Markdown(plots),
        "dagster/row_count": rows.height,
        "dagster/column_schema": ColumnSchema("datasets.kernel_commits"),
        "prs": rows.filter(pl.col("pr_number").is_not_null())
        .select("repo", "pr_number")
        .unique()
        .height,
        "train": split.get("train", 0),
        "test": split.get("test", 0),
        "split_cutoff": cutoff.isoformat() if cutoff else "none",
        "excluded_non_oss": excl.get("license_tensorrt", 0) + excl.get("license_proprietary", 0),
        "excluded": Json(excl),
        "languages": Json(dict(rows.group_by("language").len().iter_rows())),
        "with_kernel_speedup": int(rows["kernel_speedup"].is_not_null().sum()),
        "executed": int(rows["executed"].sum()),
        "exec_status": Json(dict(rows.group_by("exec_status").len().iter_rows())),
        "task_kind": Json(dict(rows.group_by("task_kind").len().iter_rows())),
        "preview": Markdown(
            md_table(rows.select("repo", "pr_number", "title", "path", "language", "split"))
        ),
    }
    return KernelCommits(rows, cutoff, metadata)


def diff_roundtrip(rows: pl.DataFrame) -> CheckOutcome:
    """Every row's diff applied to before_code gives after_code exactly."""
    from dagster_project.mining.commits.diffs import apply_patch

    bad = []
    for r in rows.select("id", "before_code", "after_code", "diff").iter_rows(named=True):
        try:
            ok = apply_patch(r["before_code"], r["diff"]) == r["after_code"]
        except Exception:  # noqa: BLE001 - a malformed diff is a failed row
            ok = False
        if not ok:
            bad.append(r["id"])
    return CheckOutcome(
        "diff_roundtrip",
        not bad,
        {"rows": rows.height, "failing": len(bad), "failing_ids": Json(bad[:20])},
    )
