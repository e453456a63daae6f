"""The execution columns of ``datasets.kernel_commits``: census + shipped measurements.

Every row gets its census (``exec_status``, ``exec_reason``, ``exec_import_tier``,
``exec_claim_hardware``, ``exec_census_version``, ``exec_sibling_paths``: the modules the
row's harness imports as real files, which the execution reward lets a completion edit
beside the row's own file; null where no spec covers the row). Rows a shipped batch ran get the
result of their label run (``first_runs``: the first executed session, else the latest;
every session lives in ``derived.commit_exec_runs``): ``exec_status`` becomes the run's
status (``executed`` when every shape matched the oracle), ``executed``, ``equivalent``,
``measured_kernel_speedup`` (CUDA-graph replay over the spec's named shapes; the random
held-out shape, drawn anew by every run, is checked but not pooled: ``stats.LABEL_ROLES``,
version ``exec_label_version``) with ``_ci_lo``/``_ci_hi``, ``measured_host_speedup`` (host-
inclusive per call) with its CI, ``measured_*_significant`` (the CI clears the 5% effect
floor of ``device.stats.significant``), ``exec_toolchain`` (GPU, driver, CUDA, torch, Triton,
harness version). A speedup is evidence only where ``equivalent`` is true; elsewhere it is
null. Rows never run keep nulls: no evidence, no label.
"""

from __future__ import annotations

import polars as pl

from .census import CENSUS_VERSION, census_row
from .ingest import RUN_SCHEMA, shipped
from .specs import spec_for

EXEC_COLUMNS: dict[str, type[pl.DataType] | pl.DataType] = {
    "exec_status": pl.String,
    "exec_reason": pl.String,
    "exec_import_tier": pl.String,
    "exec_claim_hardware": pl.String,
    "exec_census_version": pl.String,
    "exec_sibling_paths": pl.List(pl.String),
    "executed": pl.Boolean,
    "equivalent": pl.Boolean,
    "measured_kernel_speedup": pl.Float64,
    "measured_kernel_speedup_ci_lo": pl.Float64,
    "measured_kernel_speedup_ci_hi": pl.Float64,
    "measured_host_speedup": pl.Float64,
    "measured_host_speedup_ci_lo": pl.Float64,
    "measured_host_speedup_ci_hi": pl.Float64,
    "measured_kernel_significant": pl.Boolean,
    "measured_host_significant": pl.Boolean,
    "exec_toolchain": pl.String,
    "exec_label_version": pl.String,
}


def census_frame(rows: pl.DataFrame) -> pl.DataFrame:
    """id + the census columns of every row."""
    out = []
    cols = ("id", "repo", "sha", "path", "language", "title", "before_code", "after_code")
    for r in rows.select(cols).iter_rows(named=True):
        c = census_row(
            r["repo"],
            r["sha"],
            r["path"],
            r["language"],
            r["title"] or "",
            r["before_code"] or "",
            r["after_code"] or "",
        )
        spec = spec_for(r["repo"], r["sha"], r["path"])
        out.append(
            {
                "id": r["id"],
                "exec_sibling_paths": None if spec is None else list(spec.siblings_for(r["sha"])),
                "census_status": c.status,
                "exec_reason": c.reason,
                "exec_import_tier": c.import_tier,
                "exec_claim_hardware": c.claim_hardware,
            }
        )
    schema: dict[str, type[pl.DataType] | pl.DataType] = {
        "id": pl.String,
        "exec_sibling_paths": pl.List(pl.String),
        "census_status": pl.String,
        "exec_reason": pl.String,
        "exec_import_tier": pl.String,
        "exec_claim_hardware": pl.String,
    }
    return pl.DataFrame(out, schema=schema).with_columns(exec_census_version=pl.lit(CENSUS_VERSION))


def first_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """Each row's label run: its first executed and timed run (batches sort by name; later
    sessions re-measure, they do not relabel), else its first executed run that was checked
    but not timed (a warm-up's check: equivalence known, speedup unknown), else its latest
    run (a re-run after a harness fix replaces an older failure)."""
    executed = (
        runs.filter(pl.col("status") == "executed")
        .with_columns(_untimed=pl.col("graph_speedup").is_null())
        .sort("_untimed", "batch")
        .drop("_untimed")
    )
    first = executed.unique("id", keep="first", maintain_order=True)
    rest = (
        runs.filter(~pl.col("id").is_in(first["id"].implode()))
        .sort("batch")
        .unique("id", keep="last", maintain_order=True)
    )
    return pl.concat([first, rest], how="vertical_relaxed")


def _toolchain() -> pl.Expr:
    return pl.concat_str(
        [
            pl.col("gpu"),
            pl.lit("driver ") + pl.col("driver"),
            pl.lit("CUDA ") + pl.col("cuda"),
            pl.lit("torch ") + pl.col("torch"),
            pl.lit("Triton ") + pl.col("triton"),
            pl.lit("harness ") + pl.col("harness_version"),
        ],
        separator="; ",
        ignore_nulls=True,
    )


def empty_runs() -> pl.DataFrame:
    """No run at all: every row keeps its census and null measurements."""
    return pl.DataFrame(schema=RUN_SCHEMA)


def attach_execution(rows: pl.DataFrame, runs: pl.DataFrame | None = None) -> pl.DataFrame:
    """``rows`` with the execution columns. ``runs`` is ``derived.commit_exec_runs`` in a
    build (the kernel_commits asset declares that read, so a new shipped batch reaches the
    dataset through the executed_commits asset); it defaults to the shipped batches for
    callers outside a build (tests, scripts)."""
    if runs is None:
        runs = shipped()[0]
    census = census_frame(rows)
    first = first_runs(runs)
    ok = pl.col("equivalent").fill_null(False)
    measured = first.select(
        "id",
        pl.col("status").alias("run_status"),
        (pl.col("status") == "executed").alias("executed"),
        pl.col("equivalent"),
        pl.when(ok).then(pl.col("graph_speedup")).alias("measured_kernel_speedup"),
        pl.when(ok).then(pl.col("graph_ci_lo")).alias("measured_kernel_speedup_ci_lo"),
        pl.when(ok).then(pl.col("graph_ci_hi")).alias("measured_kernel_speedup_ci_hi"),
        pl.when(ok).then(pl.col("host_speedup")).alias("measured_host_speedup"),
        pl.when(ok).then(pl.col("host_ci_lo")).alias("measured_host_speedup_ci_lo"),
        pl.when(ok).then(pl.col("host_ci_hi")).alias("measured_host_speedup_ci_hi"),
        pl.when(ok).then(pl.col("graph_significant")).alias("measured_kernel_significant"),
        pl.when(ok).then(pl.col("host_significant")).alias("measured_host_significant"),
        _toolchain().alias("exec_toolchain"),
        pl.when(ok).then(pl.col("label_version")).alias("exec_label_version"),
    )
    drop = [c for c in EXEC_COLUMNS if c in rows.columns]
    out = (
        rows.drop(drop)
        .join(census, on="id", how="left")
        .join(measured, on="id", how="left")
        .with_columns(
            exec_status=pl.coalesce("run_status", "census_status"),
            executed=pl.col("executed").fill_null(False),
        )
        .drop("run_status", "census_status")
    )
    return out.with_columns([pl.col(c).cast(t) for c, t in EXEC_COLUMNS.items()])
