"""Score title rule v8 and the diff model v9 on round 8 (issue 41, 41e): HELD OUT, once each.

Round 8 (``labels.csv``, 125 commits) was drawn and labelled, and committed, before the diff
model was fitted (on rounds 1-7 only, ``benchmarks/perf_filter_diffmodel.py``) and before any
rule was scored on it. Subjects and diffs are read from the clones (nothing stored).
Printed per filter: tp/fp/fn/tn and precision/recall with 95% Wilson intervals over the
whole round (recall over every kernel-touching stratum, ``other`` included), recall over the
perf-ish strata only (``selected`` + ``rejected``, comparable with rounds 1-6), a population
estimate weighting each (repo, stratum) cell back to its size when drawn, and the commits
the filter gets wrong (sha and our own label reason; no titles). Each run appends its
figures to ``scorings.jsonl`` so repeated scoring of the round is visible.

    .venv/bin/python benchmarks/title_round8/score.py
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))

from bench_perf_filter import _fmt, score, subjects  # noqa: E402
from perf_filter_sample import SOURCES, source  # noqa: E402
from title_rounds import weighted  # noqa: E402

from dagster_project.mining.commits import perf_diffmodel, perf_filter  # noqa: E402
from dagster_project.mining.git import GitRepo  # noqa: E402

LOG = HERE / "scorings.jsonl"


def filters() -> dict[str, Callable[[dict], bool]]:
    """``v8``: the package's title rule; ``v9``: the shipped diff model."""
    assert perf_filter.RULES_VERSION == "8", perf_filter.RULES_VERSION
    model = perf_diffmodel.shipped()
    return {
        "v8": lambda r: perf_filter.match_title(r["subject"]) is not None,
        f"v{model.version}-diffmodel": lambda r: perf_diffmodel.is_perf(
            r["subject"], r["diff"], model
        ),
    }


def _report(name: str, rows: list[dict], population: dict[str, dict[str, int]], head: str) -> None:
    s = score(rows)
    perfish = score([r for r in rows if r["stratum"] != "other"])
    wp, wr = weighted(rows, population)
    print(f"{name} on round 8 ({s['n']} commits, held out)")
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
        **{k: s[k] for k in ("tp", "fp", "fn", "tn", "precision", "recall")},
        "recall_perfish": perfish["recall"],
        "population_precision": wp,
        "population_recall": wr,
    }
    with LOG.open("a") as fh:
        fh.write(json.dumps(entry) + "\n")


def main() -> None:
    rows = list(csv.DictReader((HERE / "labels.csv").open()))
    population = json.loads((HERE / "sample.json").read_text())["population"]
    titles = subjects(rows, {r: source(r) for r in SOURCES})
    for repo in SOURCES:
        mine = [r for r in rows if r["repo"] == repo]
        diffs = perf_diffmodel.read_diffs(GitRepo(Path(source(repo))), [r["sha"] for r in mine])
        for r in mine:
            r["subject"], r["diff"] = titles[r["sha"]], diffs[r["sha"]]
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    for name, fn in filters().items():
        for r in rows:
            r["pred"] = fn(r)
        _report(name, rows, population, head)


if __name__ == "__main__":
    main()
