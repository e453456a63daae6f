"""Draw title-rule round 6 (issue 41): a fresh blind round, disjoint from rounds 1-5.

Same population and strata as ``benchmarks/perf_filter_sample.py`` (non-merge commits that
touch kernel paths; ``selected`` = the title rule at drawing time passes it, ``rejected`` =
it does not but the title has a perf-ish word), drawn per repo in proportion to size in a
round-6 hash order, skipping every commit of ``perf_filter_sample.csv``. Written to its own
folder so the earlier rounds' file is untouched. Labels are added by hand afterwards, from
the title, message and diff stat in a hash order, never seeing the stratum or verdict; titles
are not stored (third-party text): ``score.py`` reads them from the clones again.

    .venv/bin/python benchmarks/title_round6/sample.py --per-stratum 36
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

import perf_filter_sample as pfs  # noqa: E402

from dagster_project.mining.commits import perf_filter  # noqa: E402

OUT = HERE / "labels.csv"
META = HERE / "sample.json"
ROUND = 6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-stratum", type=int, default=36)
    args = ap.parse_args()
    taken = {r["sha"] for r in csv.DictReader(pfs.OUT.open())}
    strata, population = pfs._strata()
    rows = pfs._draw(strata, taken, args.per_stratum, ROUND)
    with OUT.open("w", newline="") as fh:
        w = csv.DictWriter(
            fh, fieldnames=["repo", "sha", "round", "stratum", "split", "label", "reason"]
        )
        w.writeheader()
        w.writerows(rows)
    META.write_text(
        json.dumps(
            {
                "drawn_with_title_rule": perf_filter.RULES_VERSION,
                "population": population,
                "per_stratum": args.per_stratum,
                "excluded_earlier_rounds": len(taken),
            },
            indent=2,
        )
        + "\n"
    )
    print(f"{len(rows)} rows -> {OUT}; population {population}")


if __name__ == "__main__":
    main()
