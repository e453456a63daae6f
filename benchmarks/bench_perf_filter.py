"""Precision and recall of the perf-title rule on the hand-labelled sample (issue 21).

The sample (``data/perf_filter_sample.csv``, drawn by ``perf_filter_sample.py`` from the
real clones and labelled before the rule was changed) has two strata: commits the rule
selected when it was drawn, and commits it rejected whose title has a perf-ish word.
Titles are read from the clones again (they are not stored). Printed per split:

* ``rN-heldout`` of the newest round (the headline: never looked at while tuning),
* older rounds' parts (the rule was tuned on them by now: in-sample figures),
* in-sample precision/recall with Wilson 95% intervals, and a population estimate that
  weights each (repo, stratum) cell back to its size at drawing time;
* how far two readers agree (``data/perf_filter_second_reader.csv``: a second, blind
  labelling of one round): Cohen's kappa and the second reader's precision/recall against
  the first. That is the ceiling the labels can support: a rule scored against one reader
  cannot be shown better than another careful reader is.

    .venv/bin/python benchmarks/bench_perf_filter.py [--errors r1-dev]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dagster_project.mining.commits import perf_filter

sys.path.insert(0, str(Path(__file__).parent))
from perf_filter_sample import SOURCES, source  # noqa: E402

HERE = Path(__file__).parent
SAMPLE = HERE / "labelled" / "data" / "perf_filter_sample.csv"
META = HERE / "labelled" / "data" / "perf_filter_sample.json"
SECOND_READER = HERE / "labelled" / "data" / "perf_filter_second_reader.csv"


def agreement(first: dict[str, str], second: dict[str, str]) -> dict[str, float]:
    """Cohen's kappa of two readers' perf labels over the commits both labelled, and the
    second reader's precision and recall taking the first reader's labels as truth."""
    shas = sorted(set(first) & set(second))
    n = len(shas)
    a = [first[s] == "perf" for s in shas]
    b = [second[s] == "perf" for s in shas]
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    tp = sum(x and y for x, y in zip(a, b, strict=True))
    return {
        "n": n,
        "observed": po,
        "kappa": (po - pe) / (1 - pe) if pe < 1 else math.nan,
        "precision": tp / sum(b) if sum(b) else math.nan,
        "recall": tp / sum(a) if sum(a) else math.nan,
    }


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float, float]:
    """Point estimate and Wilson score interval of a proportion k/n (n = 0 -> nan)."""
    if n == 0:
        return math.nan, math.nan, math.nan
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return p, max(0.0, centre - half), min(1.0, centre + half)


def subjects(rows: list[dict], sources: dict[str, str]) -> dict[str, str]:
    """sha -> subject, one ``git log --no-walk`` per repo."""
    out: dict[str, str] = {}
    for repo, src in sources.items():
        shas = [r["sha"] for r in rows if r["repo"] == repo]
        if not shas:
            continue
        text = subprocess.run(
            ["git", "-C", src, "log", "--no-walk=unsorted", "--format=%H%x1f%s", *shas],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for line in text.splitlines():
            sha, _, subject = line.partition("\x1f")
            out[sha] = subject
    return out


def score(rows: list[dict]) -> dict[str, object]:
    c = Counter((r["pred"], r["label"] == "perf") for r in rows)
    tp, fp, fn = c[(True, True)], c[(True, False)], c[(False, True)]
    return {
        "n": len(rows),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": c[(False, False)],
        "precision": wilson(tp, tp + fp),
        "recall": wilson(tp, tp + fn),
    }


def f1(s: dict) -> float:
    """F1 of a :func:`score` result (from its point estimates)."""
    p, r = s["precision"][0], s["recall"][0]
    return 2 * p * r / (p + r) if p + r else 0.0


def report_variants(part: list[dict], variants: dict) -> str:
    """Print tp/fp/fn, precision and recall with Wilson intervals and F1 of each variant of
    the title rule on ``part`` (rows with ``title``, ``signals`` and ``label``; a variant is
    ``fn(title, signals) -> bool``); return the name of the best-F1 variant. Shared by the
    second-signal experiments (``perf_filter_bodies.py``, ``perf_filter_diffs.py``)."""
    print(
        f"  {'variant':7} {'tp':>4} {'fp':>4} {'fn':>4}  precision [95%]        recall [95%]    F1"
    )
    best: list[tuple[float, str]] = []
    for name, fn in variants.items():
        for r in part:
            r["pred"] = fn(r["title"], r["signals"])
        s = score(part)
        p, r_ = s["precision"], s["recall"]
        best.append((f1(s), name))
        print(
            f"  {name:7} {s['tp']:>4} {s['fp']:>4} {s['fn']:>4}  "
            f"{p[0]:.3f} [{p[1]:.3f}, {p[2]:.3f}]  {r_[0]:.3f} [{r_[1]:.3f}, {r_[2]:.3f}]"
            f"  {f1(s):.3f}"
        )
    return max(best)[1]


def report_errors(rows: list[dict], fn: Callable[[bool, Any], bool], rnd: str = "5") -> None:
    """Print the commits of round ``rnd`` that variant ``fn`` gets wrong (FP/FN)."""
    for r in rows:
        pred = fn(r["title"], r["signals"])
        if r["round"] == rnd and pred != (r["label"] == "perf"):
            print(f"  {'FP' if pred else 'FN'} {r['repo']:10} {r['sha'][:10]} {r['subject'][:80]}")


def weighted(rows: list[dict], meta: dict) -> tuple[float, float]:
    """Population precision/recall: each (round, repo, stratum) cell weighted by N/n.

    Rounds are drawn with different rule versions, so each keeps its own population.
    """
    n_cell = Counter((r["round"], r["repo"], r["stratum"]) for r in rows)
    n_rounds = len({r["round"] for r in rows})
    tp = fp = fn = 0.0
    for r in rows:
        size = meta["rounds"][r["round"]]["population"][r["repo"]][r["stratum"]]
        w = size / n_cell[(r["round"], r["repo"], r["stratum"])] / n_rounds
        pos = r["label"] == "perf"
        tp += w * (r["pred"] and pos)
        fp += w * (r["pred"] and not pos)
        fn += w * (not r["pred"] and pos)
    return tp / (tp + fp) if tp + fp else math.nan, tp / (tp + fn) if tp + fn else math.nan


def _fmt(t: tuple[float, float, float]) -> str:
    return f"{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--errors",
        default="none",
        help="list misclassified commits of a part "
        "(r1-dev, r2-heldout, all; titles from the clones)",
    )
    args = ap.parse_args()
    meta = json.loads(META.read_text())
    rows = list(csv.DictReader(SAMPLE.open()))
    subj = subjects(rows, {r: source(r) for r in SOURCES})
    missing = [r["sha"] for r in rows if r["sha"] not in subj]
    if missing:
        raise SystemExit(f"{len(missing)} sample commits not in the clones, e.g. {missing[0]}")
    for r in rows:
        r["pred"] = perf_filter.match_title(subj[r["sha"]]) is not None
    drawn = ", ".join(
        f"round {k} with {v['drawn_with_title_rule']}" for k, v in meta["rounds"].items()
    )
    print(
        f"title rule version {perf_filter.RULES_VERSION} (sample drawn: {drawn}); {len(rows)} "
        f"labelled commits, {sum(r['label'] == 'perf' for r in rows)} perf"
    )
    print(
        f"{'part':11} {'n':>4} {'tp':>4} {'fp':>4} {'fn':>4}  {'precision [95% Wilson]':26} "
        f"{'recall [95% Wilson]':26} population P / R"
    )
    groups = sorted(
        {(r["round"], r["split"]) for r in rows}, key=lambda g: (-int(g[0]), g[1] != "heldout")
    )
    for rnd, split in [*groups, ("*", "all")]:
        part = (
            rows if rnd == "*" else [r for r in rows if r["round"] == rnd and r["split"] == split]
        )
        s = score(part)
        wp, wr = weighted(part, meta)
        name = "all" if rnd == "*" else f"r{rnd}-{split}"
        print(
            f"{name:11} {s['n']:>4} {s['tp']:>4} {s['fp']:>4} {s['fn']:>4}  "
            f"{_fmt(s['precision']):26} {_fmt(s['recall']):26} {wp:.3f} / {wr:.3f}"
        )
    if SECOND_READER.exists():
        second = {r["sha"]: r["label"] for r in csv.DictReader(SECOND_READER.open())}
        first = {r["sha"]: r["label"] for r in rows if r["sha"] in second}
        rounds = sorted({r["round"] for r in rows if r["sha"] in second})
        ag = agreement(first, second)
        print(
            f"\ntwo readers, round {'/'.join(rounds)}: {ag['n']} commits, agreement "
            f"{ag['observed']:.3f}, Cohen's kappa {ag['kappa']:.3f}; second reader vs first: "
            f"precision {ag['precision']:.3f}, recall {ag['recall']:.3f} (the labels' ceiling)"
        )
    if args.errors != "none":
        print(f"\nmisclassified ({args.errors}):")
        for r in rows:
            part = f"r{r['round']}-{r['split']}"
            if (args.errors in ("all", part)) and r["pred"] != (r["label"] == "perf"):
                kind = "FP" if r["pred"] else "FN"
                print(
                    f"  {kind} {r['repo']:10} {r['sha'][:10]} {subj[r['sha']][:90]}  "
                    f"-- {r['reason']}"
                )


if __name__ == "__main__":
    main()
