"""Issue 38's second-session check, as data: do re-measured latency-table rows agree with
the shipped first measurement, candidate by candidate, within their spread?

A re-measure batch (``data/measured/<gpu>/remeasure-NNN.parquet``, packed by ``kernelhouse
gpu pack`` from a ``gpu_exhaustive_plan.py remeasure`` plan: rows drawn uniformly at random
from the shipped tables, measured in a later device session) is never merged into the
tables (``shipped_batches`` reads ``batch-*`` only), so the first session's times stay the
tables' and the two can be compared here. Per (row, candidate) measured ok in both: t2/t1
and whether |ln(t2/t1)| lies within the two results' spreads (each ``spread`` is its
replays' p10–p90 width over the median), also with a ``FLOOR`` for timer resolution; per
row: whether the first session's winner is still the winner or within the spread of it.
``benchmarks/gpu_remeasure_report.py`` prints the table; the measured_configs card renders
``summaries()``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl

from .measured import SHIPPED_DIR, merge_results, read_shipped, shipped_batches

#: A ratio inside this band counts as agreeing even where both spreads are tiny (timer
#: resolution and clock steps on a warm card are of this order; reported with and without).
FLOOR = 0.03


def _f(x: Any) -> float:
    """A polars scalar aggregate as a float (its stubs type it as any scalar)."""
    return float(x)


def shipped_remeasures(root: Path | None = None) -> list[Path]:
    """Every shipped re-measure batch, in name order."""
    return sorted((root or SHIPPED_DIR).glob("*/remeasure-*.parquet"))


def _ok(df: pl.DataFrame) -> pl.DataFrame:
    return df.filter((pl.col("status") == "ok") & pl.col("t_us").is_not_null()).select(
        "row_id", "label", "cand_index", "t_us", "spread", "kernel", "M"
    )


def compare(first: pl.DataFrame, second: pl.DataFrame) -> pl.DataFrame:
    """One line per (row, label) measured ok in both sessions."""
    a = _ok(first).rename({"t_us": "t1", "spread": "s1", "cand_index": "c1"})
    b = _ok(second).select(
        "row_id", "label", pl.col("t_us").alias("t2"), pl.col("spread").alias("s2")
    )
    j = a.join(b, on=["row_id", "label"], how="inner")
    return j.with_columns(
        (pl.col("t2") / pl.col("t1")).alias("ratio"),
        (pl.col("t2") / pl.col("t1")).log().abs().alias("abs_log"),
        (pl.col("s1").fill_null(0.0) + pl.col("s2").fill_null(0.0)).alias("reach"),
    ).with_columns(
        (pl.col("abs_log") <= pl.col("reach")).alias("agree"),
        (pl.col("abs_log") <= pl.max_horizontal(pl.col("reach"), pl.lit(FLOOR))).alias(
            "agree_floor"
        ),
    )


def per_row(j: pl.DataFrame) -> pl.DataFrame:
    """Winner stability per row: the first session's fastest candidate, its time in the
    second session over the second session's fastest (regret), and whether that gap is
    within the two spreads."""
    out = []
    for (rid,), g in j.group_by(["row_id"], maintain_order=True):
        w1 = g.sort("t1").row(0, named=True)
        w2 = g.sort("t2").row(0, named=True)
        regret = w1["t2"] / w2["t2"] - 1.0
        reach = (w1["s2"] or 0.0) + (w2["s2"] or 0.0)
        out.append(
            {
                "row_id": rid,
                "kernel": w1["kernel"],
                "M": w1["M"],
                "candidates": g.height,
                "same_winner": w1["label"] == w2["label"],
                "winner_regret": regret,
                "within_spread": math.log1p(regret) <= max(reach, FLOOR),
                "agree_share": _f(g["agree"].mean()),
                "median_ratio": _f(g["ratio"].median()),
            }
        )
    return pl.DataFrame(out)


def first_session(exclude: set[str] | None = None) -> pl.DataFrame:
    """The shipped tables (uniform routing), optionally without some batch files."""
    paths = [p for p in shipped_batches() if p.name not in (exclude or set())]
    return merge_results(read_shipped(paths)).filter(pl.col("routing") == "uniform")


def summary(first: pl.DataFrame, second: pl.DataFrame) -> dict[str, Any] | None:
    """The figures of one re-measure against the first session (None: nothing in common)."""
    ids = second["row_id"].unique().to_list()
    j = compare(first.filter(pl.col("row_id").is_in(ids)), second)
    if j.is_empty():
        return None
    rows = per_row(j)
    return {
        "rows": rows.height,
        "candidates": j.height,
        "agree": int(j["agree"].sum()),
        "agree_floor": int(j["agree_floor"].sum()),
        "median_ratio": _f(j["ratio"].median()),
        "median_abs_log": _f(j["abs_log"].median()),
        "same_winner": int(rows["same_winner"].sum()),
        "winner_within_spread": int(rows["within_spread"].sum()),
        "max_winner_regret": _f(rows["winner_regret"].max()),
    }


def summaries() -> list[dict[str, Any]]:
    """One summary per shipped re-measure batch (its GPU folder and file name)."""
    paths = shipped_remeasures()
    if not paths:
        return []
    first = first_session()
    out = []
    for p in paths:
        s = summary(first, pl.read_parquet(p))
        if s is not None:
            out.append({"gpu": p.parent.name, "batch": p.stem, **s})
    return out
