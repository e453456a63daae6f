"""Fit the diff-reading perf filter (v9, ``mining/commits/perf_diffmodel.py``) on rounds 1-7.

The labelled development rounds (``labelled/data/perf_filter_sample.csv`` rounds 1-5,
``title_round6/``, ``title_round7/``; 1,054 commits) are read with their subjects and diffs
from the clones (nothing stored). Each commit becomes the module's feature set; an L2
logistic regression (``scipy.optimize`` L-BFGS over a sparse 0/1 matrix: scikit-learn is
not in the venv, and the model is small enough that a hand-written loss is clearer than a
new dependency) is cross-validated **leave one round out** (group = round, 7 folds; the
vocabulary, min document frequency ``MIN_DF``, is built on the training folds only).

Chosen by CV, precision first: over the configurations ``CONFIGS`` (feature groups,
regularisation, down-weighting of the diff tokens), the pooled out-of-fold scores give, per
configuration, the lowest threshold whose out-of-fold precision reaches ``TARGET_P``; the
configuration with the most recall there wins (ties: higher precision). Title rule v8 is
printed on the same rows (in sample: v8 was written on rounds 1-6). The winner is re-fitted
on all seven rounds and written to ``perf_diffmodel.json`` (weights rounded, near-zero ones
dropped) with its CV figures. Round 8 (``title_round8/``) is never read here.

    .venv/bin/python benchmarks/perf_filter_diffmodel.py            # CV + write the JSON
    .venv/bin/python benchmarks/perf_filter_diffmodel.py --cv-only  # CV table only
    .venv/bin/python benchmarks/perf_filter_diffmodel.py --cost 300  # ms per commit
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from scipy import optimize, sparse

from dagster_project.mining.commits import perf_diffmodel as pdm
from dagster_project.mining.commits import perf_filter
from dagster_project.mining.git import GitRepo

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from bench_perf_filter import subjects, wilson  # noqa: E402
from perf_filter_sample import OUT as ROUNDS_1_5  # noqa: E402
from perf_filter_sample import SOURCES, source  # noqa: E402

DEV_FILES = (ROUNDS_1_5, HERE / "title_round6" / "labels.csv", HERE / "title_round7" / "labels.csv")
#: (feature groups, C, scale of the ``diff`` group's 0/1 values): a scale below 1 is a
#: stronger L2 penalty on the diff tokens alone (thousands of them against a few title and
#: rule features; at scale 1 they swamp the rest, first grid in RESULTS).
CONFIGS: tuple[tuple[tuple[str, ...], float, float], ...] = (
    (("rule", "title"), 0.1, 1.0),
    (("rule", "title", "sizes"), 0.3, 1.0),
    (("rule", "title", "paths", "sizes"), 0.1, 1.0),
    (("rule", "title", "diff", "paths", "sizes"), 0.1, 0.1),
    (("rule", "title", "diff", "paths", "sizes"), 0.1, 0.3),
    (("title", "diff", "paths", "sizes"), 0.1, 0.3),
)
MIN_DF = 3
TARGET_P = 0.95
ROUND_DIGITS = 4


def dev_rows() -> list[dict[str, Any]]:
    """Labelled rows of rounds 1-7 with subject, diff features and the v8 verdict."""
    rows = [r for p in DEV_FILES for r in csv.DictReader(p.open()) if r["label"]]
    titles = subjects(rows, {r: source(r) for r in SOURCES})
    t0 = time.perf_counter()
    for repo in SOURCES:
        mine = [r for r in rows if r["repo"] == repo]
        diffs = pdm.read_diffs(GitRepo(Path(source(repo))), [r["sha"] for r in mine])
        for r in mine:
            r["subject"] = titles[r["sha"]]
            r["features"] = pdm.features(r["subject"], diffs[r["sha"]])
            r["v8"] = perf_filter.match_title(r["subject"]) is not None
    dt = time.perf_counter() - t0
    each = 1000 * dt / len(rows)
    print(f"{len(rows)} commits read and featurised in {dt:.1f} s ({each:.1f} ms each)")
    return rows


def _scale(f: str, diff_scale: float) -> float:
    return diff_scale if f.startswith(pdm.GROUPS["diff"]) else 1.0


def _matrix(feats: list[set[str]], vocab: dict[str, int], diff_scale: float) -> sparse.csr_matrix:
    ri, ci, data = [], [], []
    for i, fs in enumerate(feats):
        cols = [(vocab[f], _scale(f, diff_scale)) for f in fs if f in vocab]
        ri += [i] * len(cols)
        ci += [c for c, _ in cols]
        data += [v for _, v in cols]
    return sparse.csr_matrix((data, (ri, ci)), shape=(len(feats), len(vocab)))


def fit(
    feats: list[set[str]], y: np.ndarray, c: float, diff_scale: float = 1.0
) -> tuple[dict[str, float], float]:
    """L2 logistic regression (bias unpenalised): ``{feature: effective weight}`` (weight x
    the feature's scale, so a 0/1 feature set scores as a plain sum), bias."""
    df = Counter(f for fs in feats for f in fs)
    vocab = {f: i for i, f in enumerate(sorted(f for f, n in df.items() if n >= MIN_DF))}
    x = _matrix(feats, vocab, diff_scale)
    s = 2 * y - 1

    def loss(wb: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = wb[:-1], wb[-1]
        z = s * (x @ w + b)
        lz = np.logaddexp(0, -z)
        g = -s * (1 / (1 + np.exp(z)))
        grad_w = x.T @ g + w / c
        return float(lz.sum() + 0.5 * w @ w / c), np.append(grad_w, g.sum())

    res = optimize.minimize(loss, np.zeros(len(vocab) + 1), jac=True, method="L-BFGS-B")
    w, b = res.x[:-1], res.x[-1]
    return {f: float(w[i]) * _scale(f, diff_scale) for f, i in vocab.items()}, float(b)


def _scores(feats: list[set[str]], weights: dict[str, float], bias: float) -> np.ndarray:
    return np.array([bias + sum(weights.get(f, 0.0) for f in fs) for fs in feats])


def oof_scores(
    rows: list[dict], groups: tuple[str, ...], c: float, diff_scale: float
) -> np.ndarray:
    """Out-of-fold log-odds of every row, leaving one round out at a time."""
    feats = [pdm.in_groups(r["features"], groups) for r in rows]
    y = np.array([r["label"] == "perf" for r in rows], dtype=float)
    out = np.zeros(len(rows))
    for rnd in sorted({r["round"] for r in rows}):
        test = np.array([r["round"] == rnd for r in rows])
        train = [f for f, t in zip(feats, test, strict=True) if not t]
        w, b = fit(train, y[~test], c, diff_scale)
        out[test] = _scores([f for f, t in zip(feats, test, strict=True) if t], w, b)
    return out


def counts(pred: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    tp = int((pred & y).sum())
    fp = int((pred & ~y).sum())
    fn = int((~pred & y).sum())
    return {"tp": tp, "fp": fp, "fn": fn, "p": wilson(tp, tp + fp), "r": wilson(tp, tp + fn)}


def pick_threshold(s: np.ndarray, y: np.ndarray) -> float:
    """The lowest score threshold whose precision reaches ``TARGET_P`` (else the best one)."""
    best_t, best_p = float(s.max()), -1.0
    for t in sorted(set(np.round(s, 3))):
        pred = s >= t
        p = (pred & y).sum() / max(1, pred.sum())
        if p >= TARGET_P:
            return float(t)
        if p > best_p:
            best_t, best_p = float(t), p
    return best_t


def _fmt(c: dict[str, Any]) -> str:
    p, r = c["p"], c["r"]
    return (
        f"tp {c['tp']:3} fp {c['fp']:3} fn {c['fn']:3}  P {p[0]:.3f} [{p[1]:.3f}, {p[2]:.3f}]"
        f"  R {r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}]"
    )


def cross_validate(rows: list[dict]) -> dict[str, Any]:
    """Every configuration's out-of-fold figures; returns the chosen one."""
    y = np.array([r["label"] == "perf" for r in rows])
    v8 = np.array([r["v8"] for r in rows])
    print(f"title rule v8 (in sample on rounds 1-6): {_fmt(counts(v8, y))}")
    best: dict[str, Any] = {}
    for groups, c, diff_scale in CONFIGS:
        s = oof_scores(rows, groups, c, diff_scale)
        t = pick_threshold(s, y)
        res = counts(s >= t, y)
        at0 = counts(s >= 0, y)
        name = f"{'+'.join(groups)} C={c} diff x{diff_scale}"
        print(f"{name:48} t={t:+.3f} {_fmt(res)} | t=0: {_fmt(at0)}", flush=True)
        key = (res["p"][0] >= TARGET_P, res["r"][0], res["p"][0])
        if not best or key > best["key"]:
            best = {"key": key, "groups": groups, "c": c, "scale": diff_scale, "t": t, "s": s}
            best["res"] = res
    return best


def per_round(rows: list[dict], s: np.ndarray, t: float) -> None:
    """The chosen configuration and v8, fold by fold (round 7 is out of sample for both)."""
    for rnd in sorted({r["round"] for r in rows}):
        m = np.array([r["round"] == rnd for r in rows])
        y = np.array([r["label"] == "perf" for r in rows])[m]
        v8 = np.array([r["v8"] for r in rows])[m]
        print(f"  round {rnd}: model {_fmt(counts(s[m] >= t, y))}")
        print(f"  round {rnd}: v8    {_fmt(counts(v8, y))}")


def write_model(rows: list[dict], best: dict[str, Any], path: Path) -> None:
    feats = [pdm.in_groups(r["features"], best["groups"]) for r in rows]
    y = np.array([r["label"] == "perf" for r in rows], dtype=float)
    w, b = fit(feats, y, best["c"], best["scale"])
    kept = {f: round(v, ROUND_DIGITS) for f, v in sorted(w.items()) if abs(v) >= 5e-4}
    res = best["res"]
    data = {
        "version": pdm.DIFFMODEL_VERSION,
        "fitted_by": "benchmarks/perf_filter_diffmodel.py",
        "trained_on": "rounds 1-7 (benchmarks/labelled, title_round6, title_round7)",
        "n_train": len(rows),
        "groups": list(best["groups"]),
        "c": best["c"],
        "diff_scale": best["scale"],
        "min_df": MIN_DF,
        "bias": round(b, ROUND_DIGITS),
        "threshold": round(best["t"], 3),
        "cv_leave_one_round_out": {
            "tp": res["tp"],
            "fp": res["fp"],
            "fn": res["fn"],
            "precision": round(res["p"][0], 4),
            "recall": round(res["r"][0], 4),
        },
        "weights": kept,
    }
    path.write_text(json.dumps(data, indent=0, sort_keys=False) + "\n")
    print(f"wrote {path} ({len(kept)} weights, {path.stat().st_size // 1024} KiB)")


def cost(per_repo: int) -> None:
    """Milliseconds per commit of reading the diff, featurising and scoring, on ``per_repo``
    kernel-touching commits of each mirror (a hash order of all of them; unlabelled)."""
    from perf_filter_sample import _order, candidates

    model = pdm.shipped()
    for repo in SOURCES:
        cs = sorted(candidates(repo), key=lambda c: _order(c["sha"], 99))[:per_repo]
        t0 = time.perf_counter()
        diffs = pdm.read_diffs(GitRepo(Path(source(repo))), [c["sha"] for c in cs])
        t1 = time.perf_counter()
        v9 = {c["sha"] for c in cs if pdm.is_perf(c["subject"], diffs[c["sha"]], model)}
        t2 = time.perf_counter()
        v8 = {c["sha"] for c in cs if perf_filter.match_title(c["subject"]) is not None}
        ms_read, ms_model = 1000 * (t1 - t0) / len(cs), 1000 * (t2 - t1) / len(cs)
        print(f"{repo}: {len(cs)} commits, git show {ms_read:.1f} ms + features/score")
        print(f"  {ms_model:.1f} ms per commit; kept: v8 {len(v8)}, v9 {len(v9)}")
        print(f"  v9 adds {len(v9 - v8)}, drops {len(v8 - v9)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cv-only", action="store_true")
    ap.add_argument("--cost", type=int, default=0, help="only time N commits per mirror")
    args = ap.parse_args()
    if args.cost:
        cost(args.cost)
        return
    rows = dev_rows()
    rounds = sorted({r["round"] for r in rows})
    print(f"labels: {Counter(r['label'] for r in rows)}; rounds {rounds}")
    best = cross_validate(rows)
    print(f"chosen: {'+'.join(best['groups'])} C={best['c']} threshold {best['t']:+.3f}")
    per_round(rows, best["s"], best["t"])
    if not args.cv_only:
        write_model(rows, best, pdm.WEIGHTS_PATH)


if __name__ == "__main__":
    main()
