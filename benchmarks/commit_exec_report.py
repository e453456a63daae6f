"""Issue 35's figures from the shipped execution batches (no GPU, no lake).

``python benchmarks/commit_exec_report.py`` reads every ``commit_exec/data/*.runs.parquet``
(and the ``.shapes`` beside it) and prints, per batch and over all batches:

* rows run, rows executed with equivalence verified, distinct commits, failures by status;
* significant speedups per timing scope (graph replay, host-inclusive);
* controls: how many A/A (or unchanged-path) controls have a CI that contains 1.0, and how
  many sit within the 2 % effect floor;
* agreement between sessions: every row executed in two batches, paired — on the same GPU
  (the acceptance's "a second session re-measures") and across GPUs (a different question:
  does the speedup transfer) — agreeing when the two graph-replay CIs overlap;
* the runner's seconds per row (the GPU work itself; the lease, with the machine's start,
  is recorded in RESULTS per call).

Why a script and not a view: these are facts about the shipped measurements themselves,
and a reviewer should get them on a fresh clone without building anything.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import statistics
import sys
from pathlib import Path

import polars as pl

from dagster_project.commit_exec.device.stats import MIN_EFFECT as FLOOR
from dagster_project.commit_exec.ingest import shipped
from dagster_project.commit_exec.reward_checks import summary

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "dagster_project" / "commit_exec" / "data"


def load(data: Path = DATA) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(runs, shapes) of every shipped batch, significance under today's floor."""
    runs, shapes = shipped(data)
    if runs.is_empty():
        raise SystemExit(f"no batches under {data}")
    return runs, shapes


def _executed(runs: pl.DataFrame) -> pl.DataFrame:
    return runs.filter((pl.col("status") == "executed") & pl.col("equivalent"))


def batch_table(runs: pl.DataFrame) -> None:
    print("batch          gpu                     run  exec  commits  g-sig  h-sig  s/row")
    for (batch,), grp in runs.group_by(["batch"], maintain_order=True):
        ex = _executed(grp)
        gpu = str(grp["gpu"].drop_nulls().first() or "?")[:22]
        print(
            f"{batch:<14} {gpu:<22} {grp.height:>4} {ex.height:>5} {ex['sha'].n_unique():>8} "
            f"{int(ex['graph_significant'].sum()):>6} {int(ex['host_significant'].sum()):>6} "
            f"{grp['seconds'].mean():>6.1f}"
        )
        fails = grp.filter(pl.col("status") != "executed")["status"].value_counts(sort=True)
        if fails.height:
            print("   not executed: " + ", ".join(f"{s} {n}" for s, n in fails.iter_rows()))
    ex = _executed(runs)
    print(
        f"ALL: {ex['id'].n_unique()} distinct rows executed with equivalence verified, "
        f"from {ex['sha'].n_unique()} commits"
    )


def controls(runs: pl.DataFrame) -> None:
    ex = _executed(runs).filter(pl.col("control_graph_speedup").is_not_null())
    if not ex.height:
        print("controls: none")
        return
    inside = ex.filter(
        (pl.col("control_graph_ci_lo") <= 1.0) & (pl.col("control_graph_ci_hi") >= 1.0)
    )
    floor = ex.filter((pl.col("control_graph_speedup") - 1.0).abs() <= FLOOR)
    worst = (ex["control_graph_speedup"] - 1.0).abs().max()
    print(
        f"controls: {inside.height}/{ex.height} CIs contain 1.0; {floor.height}/{ex.height} "
        f"within the {FLOOR:.0%} floor; worst |control - 1| {worst:.3f}"
    )


def _overlap(a: dict, b: dict) -> bool:
    return bool(a["graph_ci_lo"] <= b["graph_ci_hi"] and b["graph_ci_lo"] <= a["graph_ci_hi"])


def agreement(runs: pl.DataFrame) -> None:
    ex = _executed(runs).filter(pl.col("graph_speedup").is_not_null())
    by_id: dict[str, list[dict]] = {}
    for r in ex.iter_rows(named=True):
        by_id.setdefault(r["id"], []).append(r)
    for label, same in (("same GPU", True), ("across GPUs", False)):
        pairs = [
            (a, b)
            for rs in by_id.values()
            for a, b in itertools.combinations(rs, 2)
            if (a["gpu"] == b["gpu"]) == same
        ]
        if not pairs:
            print(f"sessions agreeing ({label}): no row executed in two such batches")
            continue
        ok = sum(_overlap(a, b) for a, b in pairs)
        logs = [abs(math.log(a["graph_speedup"] / b["graph_speedup"])) for a, b in pairs]
        print(
            f"sessions agreeing ({label}): {ok}/{len(pairs)} rows' graph CIs overlap; "
            f"median |log ratio| {statistics.median(logs):.4f}, max {max(logs):.3f}"
        )
        for a, b in sorted(
            pairs, key=lambda p: -abs(math.log(p[0]["graph_speedup"] / p[1]["graph_speedup"]))
        )[:5]:
            print(
                f"   {a['sha'][:8]} {a['spec']:<34} {a['batch']} {a['graph_speedup']:.3f} "
                f"[{a['graph_ci_lo']:.3f},{a['graph_ci_hi']:.3f}]  {b['batch']} "
                f"{b['graph_speedup']:.3f} [{b['graph_ci_lo']:.3f},{b['graph_ci_hi']:.3f}]"
            )


def shape_agreement(runs: pl.DataFrame, shapes: pl.DataFrame) -> None:
    """Same-GPU agreement on the named shapes only: a row's random (held-out) shape is drawn
    afresh in every session, so its row-level geomean is not the same quantity twice."""
    ex = _executed(runs).select("batch", "id", "gpu")
    named = (
        shapes.filter((pl.col("role") == "named") & (pl.col("scope") == "graph"))
        .filter(pl.col("speedup").is_not_null())
        .join(ex, on=["batch", "id"])
    )
    pairs = named.join(named, on=["id", "shape", "gpu"], suffix="_b").filter(
        pl.col("batch") < pl.col("batch_b")
    )
    if pairs.is_empty():
        print("named shapes measured in two sessions on one GPU: none")
        return
    overlap = (pl.col("ci_lo") <= pl.col("ci_hi_b")) & (pl.col("ci_lo_b") <= pl.col("ci_hi"))
    within = (pl.col("speedup") / pl.col("speedup_b")).log().abs() <= math.log(1 + FLOOR)
    got = pairs.with_columns(overlap=overlap, within=within)
    by_row = got.group_by("id").agg(pl.col("overlap").all(), pl.col("within").all())
    print(
        f"named shapes in two sessions (same GPU): {got.height} shapes of {by_row.height} rows; "
        f"CIs overlap on {int(got['overlap'].sum())}; within the {FLOOR:.0%} floor on "
        f"{int(got['within'].sum())}; rows agreeing on every shape: CI "
        f"{int(by_row['overlap'].sum())}, floor {int(by_row['within'].sum())}"
    )


def significant(runs: pl.DataFrame) -> None:
    ex = _executed(runs).sort("graph_speedup", descending=True)
    sig = ex.filter(pl.col("graph_significant"))
    print(f"significant graph-replay effects: {sig.height} of {ex.height} executed runs")
    for r in sig.head(12).iter_rows(named=True):
        print(
            f"   {r['batch']:<10} {r['sha'][:8]} {r['spec']:<34} graph {r['graph_speedup']:.3f} "
            f"[{r['graph_ci_lo']:.3f},{r['graph_ci_hi']:.3f}] host {r['host_speedup']:.3f}"
        )


def reward_consistency(runs: pl.DataFrame, checks_csv: Path) -> None:
    """The GPU reward test against each row's label (``commit_exec.reward_checks``: the
    rule and its population live there, and the card reads the same figures)."""
    if not checks_csv.exists():
        return
    with checks_csv.open() as fh:
        s = summary(runs, csv.DictReader(fh))
    for b in s["batches"]:
        med = b["median_log_ratio"]
        print(
            f"reward test {b['batch']} ({b['side_by_side']} row(s) at a time): {b['rows']} rows; "
            f"direction consistent with a significant label on {b['consistent']}/"
            f"{b['significant']}; reward speedup vs label median |log ratio| "
            f"{float('nan') if med is None else med:.3f}"
        )
    print(
        f"reward {s['reward_version']} test, one row at a time: {s['consistent_alone']} of "
        f"{s['tested_alone']} tested "
        f"of the {s['significant_rows']} significant rows consistent (target 95 % of all "
        f"{s['significant_rows']}); unchanged no gain {s['unchanged_no_gain']}/{s['checks']}, "
        f"broken = error {s['broken_error']}/{s['checks']}"
    )
    for v, e in s["earlier_rewards"].items():
        print(f"   superseded reward {v}: {e['consistent']} of {e['tested']} tested consistent")
    for i in s["inconsistent"]:
        print(f"   inconsistent: {i}")
    if s["untested"]:
        print(f"   not tested one at a time: {','.join(s['untested'])}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args(argv)
    runs, shapes = load(args.data)
    batch_table(runs)
    controls(runs)
    agreement(runs)
    shape_agreement(runs, shapes)
    significant(runs)
    reward_consistency(runs, args.data / "reward_checks.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
