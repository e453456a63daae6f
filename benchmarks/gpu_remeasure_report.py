"""Issue 38's second-session check: do re-measured latency-table rows agree with the shipped
first measurement, candidate by candidate, within their spread?

    .venv/bin/python benchmarks/gpu_remeasure_report.py SECOND.parquet [SECOND.parquet ...]

SECOND files are ``kernelhouse gpu pack`` outputs of a re-measure plan
(``gpu_exhaustive_plan.py remeasure``: rows drawn uniformly at random from the shipped
tables). The first session is the shipped tables; once the second batch is shipped too,
pass ``--exclude`` with its file name so the first session is read without it (otherwise
the newer measurement wins the merge and the rows are compared with themselves).

Per (row, candidate) measured ok in both sessions: the ratio t2/t1 and whether it lies within
the two measurements' combined spread (each result's ``spread`` is its replays' p10–p90 width
over the median, so |ln(t2/t1)| <= spread1 + spread2 is "inside both intervals' reach"); per
row: whether the first session's winner is still the winner or within the spread of it, and
the first winner's regret under the second session's times. Prints one table and a summary.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dagster_project.rewards.remeasure import (  # noqa: E402
    FLOOR,
    compare,
    first_session,
    per_row,
)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("second", type=Path, nargs="+")
    ap.add_argument("--exclude", nargs="*", default=[], help="shipped batch names to leave out")
    args = ap.parse_args(argv)
    first = first_session(set(args.exclude))
    second = pl.concat([pl.read_parquet(p) for p in args.second], how="diagonal_relaxed")
    ids = second["row_id"].unique().to_list()
    j = compare(first.filter(pl.col("row_id").is_in(ids)), second)
    if j.is_empty():
        print("no (row, candidate) measured ok in both sessions")
        return 1
    rows = per_row(j)
    with pl.Config(tbl_rows=60, tbl_width_chars=140, fmt_str_lengths=28):
        print(rows.sort("agree_share"))
    n = j.height
    print(
        f"rows {rows.height}, candidates compared {n}: within combined spread "
        f"{int(j['agree'].sum())}/{n} ({j['agree'].mean():.1%}), with the {FLOOR:.0%} floor "
        f"{int(j['agree_floor'].sum())}/{n} ({j['agree_floor'].mean():.1%}); median t2/t1 "
        f"{j['ratio'].median():.3f}, median |ln| {j['abs_log'].median():.3f}"
    )
    print(
        f"winners: same {int(rows['same_winner'].sum())}/{rows.height}, first winner within "
        f"spread of the second's {int(rows['within_spread'].sum())}/{rows.height}; median "
        f"regret of the first winner {rows['winner_regret'].median():.2%}, max "
        f"{rows['winner_regret'].max():.2%}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
