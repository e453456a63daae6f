"""Score the title rule on round 6 (issue 41): precision and recall with Wilson intervals.

Titles are read from the clones (``KERNELHOUSE_<REPO>_SOURCE`` or the mirrors). Printed: the
sample figures (tp/fp/fn over all 72 labelled commits: the ``rejected`` stratum holds the
perf-ish titles the rule turned down, so recall here is recall over perf-ish titles) and a
population estimate weighting each (repo, stratum) cell back to its size when drawn, plus
the commits the rule gets wrong.

    .venv/bin/python benchmarks/title_round6/score.py
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

from bench_perf_filter import _fmt, score, subjects, weighted  # noqa: E402
from perf_filter_sample import SOURCES, source  # noqa: E402

from dagster_project.mining.commits import perf_filter  # noqa: E402


def main() -> None:
    rows = list(csv.DictReader((HERE / "labels.csv").open()))
    meta = {"rounds": {"6": json.loads((HERE / "sample.json").read_text())}}
    titles = subjects(rows, {r: source(r) for r in SOURCES})
    for r in rows:
        r["subject"] = titles[r["sha"]]
        r["pred"] = perf_filter.match_title(r["subject"]) is not None
    s = score(rows)
    wp, wr = weighted(rows, meta)
    print(f"title rule v{perf_filter.RULES_VERSION} on round 6 ({s['n']} commits, held out)")
    print(f"  tp {s['tp']} fp {s['fp']} fn {s['fn']} tn {s['tn']}")
    print(f"  precision {_fmt(s['precision'])}  recall {_fmt(s['recall'])}")
    print(f"  population-weighted: precision {wp:.3f} recall {wr:.3f}")
    for r in rows:
        if r["pred"] != (r["label"] == "perf"):
            kind = "FP" if r["pred"] else "FN"
            print(f"  {kind} {r['repo']:10} {r['sha'][:10]} {r['subject'][:90]}")


if __name__ == "__main__":
    main()
