"""Score title rules v7 and v8 on round 7 (issue 41, 41d): HELD OUT, once each.

Round 7 (``labels.csv``, 125 commits) was drawn and labelled before v8 was written and
before any rule was scored on it. Titles are read from the clones. Printed per rule: tp/fp/
fn and precision/recall with 95% Wilson intervals over the whole round (recall over every
kernel-touching stratum, ``other`` included), recall over the perf-ish strata only
(``selected`` + ``rejected``, comparable with rounds 1-6), a population estimate weighting
each (repo, stratum) cell back to its size when drawn, and the commits the rule gets wrong
(sha and our own label reason; no titles are written anywhere). Each run appends its
figures to ``scorings.jsonl`` so repeated scoring of the round is visible.

    .venv/bin/python benchmarks/title_round7/score.py
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_perf_filter import _fmt, score, subjects  # noqa: E402
from perf_filter_sample import SOURCES, source  # noqa: E402
from rules import ROOT, rules  # noqa: E402
from title_rounds import weighted  # noqa: E402

LOG = HERE / "scorings.jsonl"


def main() -> None:
    rows = list(csv.DictReader((HERE / "labels.csv").open()))
    population = json.loads((HERE / "sample.json").read_text())["population"]
    titles = subjects(rows, {r: source(r) for r in SOURCES})
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    for name, fn in rules().items():
        for r in rows:
            r["pred"] = fn(titles[r["sha"]]) is not None
        s = score(rows)
        perfish = score([r for r in rows if r["stratum"] != "other"])
        wp, wr = weighted(rows, population)
        print(f"title rule {name} on round 7 ({s['n']} commits, held out)")
        print(f"  tp {s['tp']} fp {s['fp']} fn {s['fn']} tn {s['tn']}")
        print(f"  precision {_fmt(s['precision'])}  recall {_fmt(s['recall'])}")
        print(f"  recall over the perf-ish strata (as rounds 1-6): {_fmt(perfish['recall'])}")
        print(f"  population-weighted: precision {wp:.3f} recall {wr:.3f}")
        for r in rows:
            if r["pred"] != (r["label"] == "perf"):
                kind = "FP" if r["pred"] else "FN"
                print(f"  {kind} {r['stratum']:8} {r['repo']:10} {r['sha'][:10]} {r['reason']}")
        entry = {
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "checkout": head,
            "rule": name,
            "tp": s["tp"],
            "fp": s["fp"],
            "fn": s["fn"],
            "tn": s["tn"],
            "precision": s["precision"],
            "recall": s["recall"],
            "recall_perfish": perfish["recall"],
            "population_precision": wp,
            "population_recall": wr,
        }
        with LOG.open("a") as fh:
            fh.write(json.dumps(entry) + "\n")


if __name__ == "__main__":
    main()
