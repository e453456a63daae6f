"""Does a learned filter beat the perf-title rule? (issue 21: an experiment, not shipped)

A Bernoulli naive Bayes over the title's words, bigrams and ``[tags]``, the changed paths'
tokens and coarse diff statistics (files, size, deleted share, tests only, JSON configs),
scored on the hand-labelled sample (``data/perf_filter_sample.csv``, rounds 1-4) two ways:
5-fold cross-validation by sha hash, and trained on rounds 1-3 / scored on round 4 (the
protocol of the rule's headline in ``bench_perf_filter.py``). The rule
(``perf_filter.match_title``) is printed beside it; over rounds 1-3 its figure is in sample
(it was tuned on them), on round 4 it is held out.

Written by hand rather than with scikit-learn because the project does not depend on it and
the model is twenty lines; absent features are ignored (no negative evidence terms), which
keeps it robust on a sample this small.

    .venv/bin/python benchmarks/perf_filter_learned_cv.py
"""

from __future__ import annotations

import csv
import hashlib
import math
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from perf_filter_sample import source  # noqa: E402

from dagster_project.mining.commits import perf_filter  # noqa: E402

SAMPLE = Path(__file__).parent / "labelled" / "data" / "perf_filter_sample.csv"
Model = tuple[dict[bool, Counter[str]], Counter[bool]]


def _git(repo: str, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", source(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def commit_facts(
    rows: list[dict[str, str]],
) -> tuple[dict[str, str], dict[str, list[tuple[str, str, str]]]]:
    """sha -> subject and sha -> numstat lines (added, deleted, path), from the clones."""
    subjects: dict[str, str] = {}
    stats: dict[str, list[tuple[str, str, str]]] = {}
    for repo in sorted({r["repo"] for r in rows}):
        shas = [r["sha"] for r in rows if r["repo"] == repo]
        for line in _git(
            repo, "log", "--no-walk=unsorted", "--format=%H%x1f%s", *shas
        ).splitlines():
            sha, _, subject = line.partition("\x1f")
            subjects[sha] = subject
        current = None
        for line in _git(
            repo, "show", "--no-walk=unsorted", "--format=@@%H", "--numstat", *shas
        ).splitlines():
            if line.startswith("@@"):
                current = line[2:]
                stats[current] = []
            elif line.strip() and current:
                added, deleted, path = line.split("\t", 2)
                stats[current].append((added, deleted, path))
    return subjects, stats


def features(subject: str, numstat: list[tuple[str, str, str]]) -> set[str]:
    title = re.sub(r"\(#\d+\)", " ", subject.lower())
    words = re.findall(r"[a-z][a-z0-9_+-]*", title)
    out = {f"w:{w}" for w in words} | {f"b:{a}_{b}" for a, b in zip(words, words[1:], strict=False)}
    out |= {f"tag:{t.strip()}" for t in re.findall(r"\[([^\]]+)\]", title)}
    added = deleted = 0
    for a, d, path in numstat:
        out |= {f"p:{tok}" for tok in re.split(r"[/._-]", path.lower()) if tok}
        added += int(a) if a.isdigit() else 0
        deleted += int(d) if d.isdigit() else 0
    out.add(f"nfiles:{min(len(numstat), 10) // 3}")
    out.add(f"size:{int(math.log2(1 + added + deleted)) // 2}")
    out.add(f"delfrac:{int(10 * deleted / (added + deleted + 1)) // 3}")
    out.add(f"tests_only:{bool(numstat) and all('test' in p for _, _, p in numstat)}")
    out.add(f"json:{any(p.endswith('.json') for _, _, p in numstat)}")
    return out


def train(xs: list[set[str]], ys: list[bool], idx: list[int]) -> Model:
    counts: dict[bool, Counter[str]] = {True: Counter(), False: Counter()}
    n: Counter[bool] = Counter()
    for i in idx:
        n[ys[i]] += 1
        counts[ys[i]].update(xs[i])
    return counts, n


def log_odds(model: Model, x: set[str]) -> float:
    counts, n = model
    s = math.log((n[True] + 1) / (n[False] + 1))
    for f in x:
        s += math.log((counts[True][f] + 0.5) / (n[True] + 1)) - math.log(
            (counts[False][f] + 0.5) / (n[False] + 1)
        )
    return s


def precision_recall(pred: list[bool], ys: list[bool], idx: list[int]) -> tuple[float, float]:
    tp = sum(pred[i] and ys[i] for i in idx)
    fp = sum(pred[i] and not ys[i] for i in idx)
    fn = sum(not pred[i] and ys[i] for i in idx)
    return tp / max(1, tp + fp), tp / max(1, tp + fn)


def main() -> int:
    rows = list(csv.DictReader(SAMPLE.open()))
    subjects, stats = commit_facts(rows)
    xs = [features(subjects[r["sha"]], stats.get(r["sha"], [])) for r in rows]
    ys = [r["label"] == "perf" for r in rows]
    rule = [perf_filter.match_title(subjects[r["sha"]]) is not None for r in rows]
    fold = [int(hashlib.sha256(r["sha"].encode()).hexdigest(), 16) % 5 for r in rows]
    every = list(range(len(rows)))
    scores = [0.0] * len(rows)
    for k in range(5):
        model = train(xs, ys, [i for i in every if fold[i] != k])
        for i in every:
            if fold[i] == k:
                scores[i] = log_odds(model, xs[i])
    print(f"sample: {len(rows)} commits, {sum(ys)} labelled perf")
    print(
        "rule (rounds 1-3 in sample, round 4 held out): P {:.3f} R {:.3f}".format(
            *precision_recall(rule, ys, every)
        )
    )
    for th in (-2, -1, 0, 1, 2, 3):
        pr = precision_recall([s > th for s in scores], ys, every)
        print(f"naive Bayes, 5-fold CV, log-odds > {th:+d}: P {pr[0]:.3f} R {pr[1]:.3f}")
    held = [i for i, r in enumerate(rows) if r["round"] == "4"]
    model = train(xs, ys, [i for i, r in enumerate(rows) if r["round"] != "4"])
    for th in (-1, 0, 1, 2):
        pred = [log_odds(model, xs[i]) > th if i in set(held) else False for i in every]
        pr = precision_recall(pred, ys, held)
        print(
            f"naive Bayes trained on rounds 1-3, round 4, log-odds > {th:+d}: "
            f"P {pr[0]:.3f} R {pr[1]:.3f}"
        )
    print("rule on round 4 (held out): P {:.3f} R {:.3f}".format(*precision_recall(rule, ys, held)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
