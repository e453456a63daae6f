"""Draw perf-filter round 8 (issue 41, 41e): a fresh blind round, disjoint from rounds 1-7.

Population: the non-merge commits of the three mirrors that touch kernel paths (as
``find_perf_commits`` sees them, title rule bypassed; ``perf_filter_sample.candidates``).
Three strata, drawn per repo in proportion to its size in a round-8 hash order, skipping
every commit of rounds 1-5 (``perf_filter_sample.csv``), round 6 (``title_round6/labels.csv``)
and round 7 (``title_round7/labels.csv``), as round 7 was drawn:

* ``selected``: title rule v8 (the rule at drawing time) passes it;
* ``rejected``: v8 turns it down but the title has a perf-ish word (``PERFISH``), as in
  rounds 1-6;
* ``other``: neither (no perf-ish word at all), so recall is read over every
  kernel-touching commit, not only over perf-ish titles.

Round 8 is the held-out round of the diff-reading filter (v9, ``perf_diffmodel``): it is
drawn and labelled before that model is fitted (on rounds 1-7 only) and scored once.

Labels are added by hand afterwards, from the title, message and diff in the hash order of
``label-order|sha`` (never seeing the stratum or a rule's verdict). Titles and messages are
never stored (third-party text): ``score.py`` reads the titles and diffs from the clones again.

    .venv/bin/python benchmarks/title_round8/sample.py --selected 55 --rejected 40 --other 30
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

import perf_filter_sample as pfs  # noqa: E402
import title_rounds  # noqa: E402

OUT = HERE / "labels.csv"
META = HERE / "sample.json"
ROUND = 8
EARLIER = (
    pfs.OUT,
    HERE.parent / "title_round6" / "labels.csv",
    HERE.parent / "title_round7" / "labels.csv",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--selected", type=int, default=55)
    ap.add_argument("--rejected", type=int, default=40)
    ap.add_argument("--other", type=int, default=30)
    args = ap.parse_args()
    sizes = {"selected": args.selected, "rejected": args.rejected, "other": args.other}
    title_rounds.write_round(ROUND, EARLIER, sizes, OUT, META)


if __name__ == "__main__":
    main()
