"""How often the best fused-MoE config changes with skewed routing (issue 38).

    python benchmarks/device/gpu_skew_report.py                    # the shipped batches
    python benchmarks/device/gpu_skew_report.py OUT.jsonl [...]    # device result files

Pairs every (row, GPU) latency table timed under uniform routing with the same row's
table under a skewed routing (``routing.SKEWED`` unless ``--routing``), and per pair
reports whether the best config changed: ``raw`` (the single fastest config differs)
and ``beyond noise`` (no config is in both best sets; a best set is every ok config
within noise of the fastest, the dataset's rule: t <= t_fastest x (1 + the larger of
the two replay spreads)); and the regret of keeping the uniform winner under skew
(its skewed time over the skewed fastest, minus 1). Pairs are compared config by
config, so only configs timed under both routings count.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dagster_project.rewards.gpu.routing import SKEWED  # noqa: E402
from dagster_project.rewards.measured import (  # noqa: E402
    merge_results,
    read_result_files,
    read_shipped,
    shipped_batches,
)


@dataclass(frozen=True)
class Pair:
    row_id: str
    measured_on: str
    family: str
    M: int
    changed_raw: bool
    changed_beyond_noise: bool
    regret_uniform_best: float | None  # None: the uniform winner did not run under skew


def _table(g: pl.DataFrame) -> dict[str, tuple[float, float]]:
    """config -> (fastest ok time, its spread)."""
    out: dict[str, tuple[float, float]] = {}
    for r in g.filter(pl.col("status") == "ok").iter_rows(named=True):
        t, spread = float(r["t_us"]), float(r["spread"] or 0.0)
        if r["config"] not in out or t < out[r["config"]][0]:
            out[r["config"]] = (t, spread)
    return out


def best_set(table: dict[str, tuple[float, float]]) -> set[str]:
    """Every config within noise of the fastest (the dataset's tie rule)."""
    fastest = min(table, key=lambda c: table[c][0])
    t0, s0 = table[fastest]
    return {c for c, (t, s) in table.items() if t <= t0 * (1 + max(s, s0))}


def pairs(raw: pl.DataFrame, skewed: str = SKEWED) -> list[Pair]:
    """Uniform/skewed table pairs of the merged results (``measured.merge_results``),
    each restricted to the configs timed ok under both routings (at least two)."""
    live = raw.filter(pl.col("superseded_reason").is_null())
    out: list[Pair] = []
    for (row_id, gpu), g in live.group_by(["row_id", "measured_on"], maintain_order=True):
        uni = _table(g.filter(pl.col("routing") == "uniform"))
        skw = _table(g.filter(pl.col("routing") == skewed))
        common = set(uni) & set(skw)
        if len(common) < 2:
            continue
        uni = {c: uni[c] for c in common}
        skw = {c: skw[c] for c in common}
        win_u = min(uni, key=lambda c: uni[c][0])
        win_s = min(skw, key=lambda c: skw[c][0])
        first: dict[str, Any] = g.row(0, named=True)
        out.append(
            Pair(
                str(row_id),
                str(gpu),
                f"{first['repo']}/{first['quant']}",
                int(first["M"] or 0),
                win_u != win_s,
                not (best_set(uni) & best_set(skw)),
                skw[win_u][0] / skw[win_s][0] - 1,
            )
        )
    return out


def summary(ps: Sequence[Pair]) -> str:
    def line(name: str, group: Sequence[Pair]) -> str:
        reg = sorted(p.regret_uniform_best or 0.0 for p in group)
        p90 = reg[min(len(reg) - 1, int(0.9 * len(reg)))]
        return (
            f"{name:<24} {len(group):>5} {sum(p.changed_raw for p in group) / len(group):>8.1%} "
            f"{sum(p.changed_beyond_noise for p in group) / len(group):>12.1%} "
            f"{statistics.mean(reg):>9.2%} {p90:>9.2%}"
        )

    cols = ("pairs", 5), ("raw chg", 8), ("beyond noise", 12), ("mean reg", 9), ("p90 reg", 9)
    lines = [f"{'family':<24} " + " ".join(f"{c:>{w}}" for c, w in cols)]
    for fam in sorted({p.family for p in ps}):
        lines.append(line(fam, [p for p in ps if p.family == fam]))
    if ps:
        lines.append(line("all", ps))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, nargs="*", help="result JSONL files (default: shipped)")
    ap.add_argument("--routing", default=SKEWED)
    args = ap.parse_args(argv)
    raw = read_result_files(args.results) if args.results else read_shipped(shipped_batches())
    ps = pairs(merge_results(raw), args.routing)
    print(f"{len(ps)} uniform/{args.routing} table pairs")
    print(summary(ps) if ps else "no pairs: no row is timed under both routings yet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
