"""Precision, recall and F1 of the gains extractors on real PR descriptions.

    .venv/bin/python benchmarks/eval_extractors.py [--json] [--show [--show-folds 0,1,2,3]]
    .venv/bin/python benchmarks/eval_extractors.py --held [--json]   # once per round

Data: ``benchmarks/labelled/pr_devset`` (real vLLM / SGLang / FlashInfer PR descriptions,
labelled by hand; the texts are a git-ignored cache refilled by ``fetch_texts.py``).

**Development** (read and tuned on): the 80 PRs of ``pr_devset/prs.csv``, the 31 of
``pr_devset/fresh/``, the 62 of ``pr_devset/fresh2/``, the 52 of ``pr_devset/fresh3/``, the
50 of ``pr_devset/fresh4/``, the 45 of ``pr_devset/fresh5/``, the 41 of
``pr_devset/fresh6/``, the 36 of ``pr_devset/fresh7/``, the 40 of ``pr_devset/fresh8/``, the
15 of ``pr_devset/fresh9/``, the 22 of ``pr_devset/fresh10/`` and the 40 of
``pr_devset/fresh11/``: the held-out sets of extractors 2.1 to 2.12, each scored once at the end
of its round and then
retired into development (``pr_devset/LABELLING.md``), as folds 3-4 of ``prs.csv`` were before
them; ``--show-set`` limits ``--show`` to one of them. Each PR sits in one of five folds
(sha256 of ``owner/name#number`` mod 5); the default run prints the development score, each
set's and each fold's score (cross-validation: ``--show --show-folds`` lists per-PR misses of
the folds named only, so a change can be driven by some folds and checked on the others).

The **headline** is ``--held``: ``benchmarks/labelled/pr_devset/fresh12`` is a separate set of
real PRs,
labelled blind (before any extractor ran on them, by a reader who did not see the extractor)
and scored once per round, at its end. That run prints the aggregate and, because it is the
last look, the misses and false positives grouped by the layout families of their PRs
(``prs.csv`` ``layouts``). ``--fresh`` is kept as an alias of ``--held``.

What is scored, per PR:

* **measurement pairs** (labels of kind ``pair``) and **ratio-only claims** (kind
  ``ratio_only``) together: precision = matched / predicted, recall = matched / labelled;
* matching rule: a predicted pair matches a labelled pair of the same PR when baseline and
  optimized are equal as numbers (relative 1e-6; values are copied as written, separators
  dropped). A predicted ratio-only claim (no pair, a ``stated_speedup``) matches a labelled
  ratio-only claim of the same PR when the stated speedups agree within 1% (relative),
  since percentages go through one conversion convention. Each label is matched at most
  once, greedily in the predicted order, so a duplicate prediction is a false positive;
* a text that ``prs.csv`` marks ``truncated`` (a prefix of the body) is read without its
  last line when the cut fell inside it (:func:`input_text`);
* field agreement over matched pairs: ``speedup`` within 1% (both known), ``scope``,
  ``batch_size``, ``unit`` (canonical spelling), and ``stated_speedup`` kept (labelled
  pairs that carry a stated ratio whose prediction carries it within 1%).

Our own 38 fixtures (``tests/fixtures/prs``) are unit tests of the block kinds, not a score.
The LLM extractor is scored only when ``KERNELHOUSE_LLM_BASE_URL`` points at a real
endpoint; a local fake would only measure the fake.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dagster_project.gains.evaluation import (  # noqa: E402
    ScoringLog,
    ScoringRefused,
    Slot,
    pr_slots,
    slot_summary,
)
from dagster_project.gains.extract import extract_pr_gains  # noqa: E402
from dagster_project.gains.normalise import normalise_unit  # noqa: E402
from dagster_project.gains.schema import Measurement  # noqa: E402

DEVSET = ROOT / "benchmarks" / "labelled" / "pr_devset"
#: development sets (all folds): the first set and the retired held-out sets of extractors
#: 2.1 (``fresh``) … 2.10 (``fresh10``) and of issue 40's policy (``fresh11``, extractor 2.12)
DEV_ROOTS = (
    DEVSET,
    *(DEVSET / f"fresh{n}" for n in ("", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11")),
)
#: the held-out set of the current round (issue 40d; scored once, at its end)
HELD = DEVSET / "fresh12"
#: every held-out scoring, committed: a set is not scored twice by one extractor and policy
SCORINGS = DEVSET / "scorings.jsonl"
#: retired sets, by their ``split`` value in ``prs.csv``
RETIRED_SPLITS = (
    "fresh",
    "fresh2",
    "fresh3",
    "fresh4",
    "fresh5",
    "fresh6",
    "fresh7",
    "fresh8",
    "fresh9",
    "fresh10",
    "fresh11",
)
DEV_FOLDS = (0, 1, 2, 3, 4)


def _loader() -> Any:
    spec = importlib.util.spec_from_file_location("pr_devset", DEVSET / "fetch_texts.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["pr_devset"] = mod
    spec.loader.exec_module(mod)
    return mod


def _close(a: float | None, b: float | None, rel: float) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


@dataclass
class Tally:
    """Counts over a set of PRs."""

    prs: int = 0
    labelled: int = 0
    predicted: int = 0
    matched: int = 0
    labelled_pairs: int = 0
    matched_pairs: int = 0
    labelled_ratio: int = 0
    matched_ratio: int = 0
    speedup_checked: int = 0
    speedup_ok: int = 0
    scope_ok: int = 0
    batch_checked: int = 0
    batch_ok: int = 0
    unit_checked: int = 0
    unit_ok: int = 0
    stated_labelled: int = 0
    stated_kept: int = 0
    audit_failed: int = 0
    misses: list[str] = field(default_factory=list)
    false: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        for k, v in vars(other).items():
            if isinstance(v, int):
                setattr(self, k, getattr(self, k) + v)
            else:
                getattr(self, k).extend(v)

    @staticmethod
    def _r(a: int, b: int) -> float | None:
        return round(a / b, 4) if b else None

    def summary(self) -> dict[str, Any]:
        p, r = self._r(self.matched, self.predicted), self._r(self.matched, self.labelled)
        f1 = round(2 * p * r / (p + r), 4) if p and r else None
        return {
            "prs": self.prs,
            "labelled": self.labelled,
            "predicted": self.predicted,
            "matched": self.matched,
            "precision": p,
            "recall": r,
            "f1": f1,
            "pair_recall": self._r(self.matched_pairs, self.labelled_pairs),
            "ratio_only_recall": self._r(self.matched_ratio, self.labelled_ratio),
            "speedup_within_1pct": self._r(self.speedup_ok, self.speedup_checked),
            "scope_agreement": self._r(self.scope_ok, self.matched_pairs),
            "batch_size_agreement": self._r(self.batch_ok, self.batch_checked),
            "unit_agreement": self._r(self.unit_ok, self.unit_checked),
            "stated_speedup_kept": self._r(self.stated_kept, self.stated_labelled),
            "audit_failed_predictions": self.audit_failed,
        }


def score_pr(pr: Any, predicted: list[Measurement], *, detail: bool) -> Tally:
    """Match one PR's predictions against its labels (rule in the module docstring)."""
    t = Tally(prs=1)
    pairs_l = [lab for lab in pr.labels if lab.kind == "pair"]
    ratio_l = [lab for lab in pr.labels if lab.kind == "ratio_only"]
    t.labelled, t.labelled_pairs, t.labelled_ratio = len(pr.labels), len(pairs_l), len(ratio_l)
    pairs_p = [m for m in predicted if m.is_pair]
    ratio_p = [m for m in predicted if not m.is_pair and m.stated_speedup is not None]
    t.predicted = len(pairs_p) + len(ratio_p)
    t.audit_failed = sum(m.audit_pass is False for m in predicted)
    _score_pairs(t, pr, pairs_p, pairs_l, detail=detail)
    _score_ratios(t, pr, ratio_p, ratio_l, detail=detail)
    return t


def _score_pairs(
    t: Tally, pr: Any, pairs_p: list[Measurement], pairs_l: list[Any], *, detail: bool
) -> None:
    """Each predicted pair takes the first unused label with the same two values."""
    used: set[int] = set()
    for m in pairs_p:
        hit = next(
            (
                i
                for i, lab in enumerate(pairs_l)
                if i not in used
                and _close(m.baseline, lab.baseline, 1e-6)
                and _close(m.optimized, lab.optimized, 1e-6)
            ),
            None,
        )
        if hit is None:
            if detail:
                t.false.append(
                    f"{pr.repo}#{pr.number}: pair {m.baseline} -> {m.optimized} "
                    f"({m.metric}, {m.source})"
                )
            continue
        used.add(hit)
        t.matched += 1
        t.matched_pairs += 1
        _score_pair_fields(t, m, pairs_l[hit])
    if detail:
        t.misses += [
            f"{pr.repo}#{pr.number}: pair {lab.baseline} -> {lab.optimized} ({lab.metric})"
            for i, lab in enumerate(pairs_l)
            if i not in used
        ]


def _score_pair_fields(t: Tally, m: Measurement, lab: Any) -> None:
    """A matched pair's other fields against its label, each only where it is labelled."""
    if lab.speedup is not None:
        t.speedup_checked += 1
        t.speedup_ok += _close(m.speedup, lab.speedup, 0.01)
    t.scope_ok += m.scope == lab.scope
    if lab.batch_size is not None:
        t.batch_checked += 1
        t.batch_ok += m.batch_size == lab.batch_size
    if lab.unit:
        t.unit_checked += 1
        t.unit_ok += normalise_unit(m.unit) == normalise_unit(lab.unit)
    if lab.stated_speedup is not None:
        t.stated_labelled += 1
        t.stated_kept += _close(m.stated_speedup, lab.stated_speedup, 0.01)


def _score_ratios(
    t: Tally, pr: Any, ratio_p: list[Measurement], ratio_l: list[Any], *, detail: bool
) -> None:
    """Each predicted ratio-only claim takes the first unused label within 1%."""
    used_r: set[int] = set()
    for m in ratio_p:
        hit = next(
            (
                i
                for i, lab in enumerate(ratio_l)
                if i not in used_r and _close(m.stated_speedup, lab.stated_speedup, 0.01)
            ),
            None,
        )
        if hit is None:
            if detail:
                t.false.append(
                    f"{pr.repo}#{pr.number}: ratio {m.stated_speedup} "
                    f"({m.stated_text!r}, {m.source})"
                )
            continue
        used_r.add(hit)
        t.matched += 1
        t.matched_ratio += 1
    if detail:
        t.misses += [
            f"{pr.repo}#{pr.number}: ratio {lab.stated_speedup} ({lab.stated_raw!r})"
            for i, lab in enumerate(ratio_l)
            if i not in used_r
        ]


def input_text(pr: Any) -> str:
    """What the extractor reads: the labelled text, minus its last line when ``prs.csv`` says
    the text is a prefix cut at ``n_chars`` and the cut fell inside that line (the labelling
    rules skip a row cut off by the truncation; in the pipeline a body is never cut, so the
    extractor is told rather than left to guess)."""
    text = pr.text or ""
    if getattr(pr, "truncated", False) and not text.endswith("\n"):
        text = text.rsplit("\n", 1)[0]  # the cut fell inside this line
    return text


def evaluate(
    prs: Iterable[Any], extract: Callable[[str, str], list[Measurement]], *, detail: bool
) -> Tally:
    """Score ``extract(text, repo)`` over PRs; ``detail`` keeps per-PR misses (dev folds only)."""
    total = Tally()
    for pr in prs:
        total.add(score_pr(pr, extract(input_text(pr), pr.repo), detail=detail))
    return total


def _det(text: str, repo: str) -> list[Measurement]:
    # the labelled text is the body; the extractor reads "title\nbody" (no title stored)
    return extract_pr_gains("\n" + text, repo=repo).measurements


def by_layout(prs: list[Any], lines: list[str]) -> dict[str, int]:
    """How many of ``lines`` (``"owner/name#N: ..."``) fall on PRs of each layout family."""
    layouts = {pr.key: pr.layouts for pr in prs}
    counts: dict[str, int] = {}
    for line in lines:
        for family in layouts.get(line.split(":", 1)[0], ()):
            counts[family] = counts.get(family, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def versions() -> dict[str, str]:
    """What a held-out scoring is a scoring *of*: the extractor and the publication policy."""
    from dagster_project.gains.extract.choose import EXTRACTOR_VERSION
    from dagster_project.gains.policy import POLICY_VERSION

    return {"extractor": EXTRACTOR_VERSION, "policy": POLICY_VERSION}


def per_pr_scores(
    prs: Iterable[Any], extract: Callable[[str, str], list[Measurement]]
) -> dict[str, Any]:
    """The issue-40 headline: per PR and scope, the published median against the true one
    (:func:`~dagster_project.gains.evaluation.pr_slots`), beside measurement precision and
    recall of everything extracted and of what the policy publishes."""
    every, published, slots = Tally(), Tally(), []
    by_repo: dict[str, list[Slot]] = {}
    for pr in prs:
        ms = extract(input_text(pr), pr.repo)
        pub = [m for m in ms if m.published]
        every.add(score_pr(pr, ms, detail=True))
        published.add(score_pr(pr, pub, detail=True))
        got = pr_slots(pr.key, list(pr.labels), pub)
        slots += got
        by_repo.setdefault(pr.repo, []).extend(got)
    return {
        "slots": slot_summary(slots),
        "slots_by_repo": {r: slot_summary(v) for r, v in sorted(by_repo.items())},
        "slot_rows": [
            f"{s.pr} {s.scope}: {s.outcome} (true {s.true_median}, published {s.published_median})"
            for s in slots
            if s.outcome != "right"
        ],
        "published": published.summary(),
        "published_false": published.false,
        "all_extracted": every.summary(),
    }


def fit_policy(
    prs: Iterable[Any], extract: Callable[[str, str], list[Measurement]]
) -> dict[str, Any]:
    """Each evidence class's record on development texts and the policy threshold.

    A class's confidence is the 95% Wilson lower bound of its precision (audited
    measurements that match a hand label): the extractor was written on these texts, so
    a point estimate near 1.0 on a handful of cases says little, and the bound discounts
    small support. The threshold is the highest cut in steps of 0.05 whose kept classes
    still hold at least half of the correct development measurements (precision first,
    recall reported). Prints what ``gains/policy.py`` ``CONFIDENCE`` / ``THRESHOLD`` hold."""
    from dagster_project.gains.policy import wilson_lower

    pred: dict[str, int] = {}
    hit: dict[str, int] = {}
    for pr in prs:
        by_class: dict[str, list[Measurement]] = {}
        for m in extract(input_text(pr), pr.repo):
            if m.audit_pass:
                by_class.setdefault(m.evidence_class or "none", []).append(m)
        for cls, ms in by_class.items():
            t = score_pr(pr, ms, detail=False)
            pred[cls] = pred.get(cls, 0) + t.predicted
            hit[cls] = hit.get(cls, 0) + t.matched
    table = {
        c: {
            "predicted": pred[c],
            "matched": hit[c],
            "precision": round(hit[c] / pred[c], 4),
            "confidence": round(wilson_lower(hit[c], pred[c]), 4),
        }
        for c in sorted(pred)
        if pred[c]
    }
    right = sum(hit.values())
    threshold = None
    for cut in (0.95, 0.9, 0.85, 0.8, 0.75, 0.7):
        kept = sum(hit[c] for c in table if table[c]["confidence"] >= cut)
        if right and kept >= right / 2:
            threshold = cut
            break
    return {"classes": table, "correct_measurements": right, "threshold": threshold}


def held_scoring(why: str | None, log: ScoringLog, held: Path = HELD) -> dict[str, Any]:
    """Score the held-out set once (refused when already scored with these versions and no
    reason is given), and record the scoring with its headline figures."""
    v = versions()
    log.check(held.name, v, why)
    prs = _loader().load_devset(held)
    res = per_pr_scores(prs, _det)
    log.record(
        held.name,
        v,
        why,
        {
            "slots": res["slots"],
            "published_precision": res["published"]["precision"],
            "published_recall": res["published"]["recall"],
            "all_precision": res["all_extracted"]["precision"],
            "all_recall": res["all_extracted"]["recall"],
        },
    )
    return res


def run(
    show: bool,
    show_folds: Iterable[int] = DEV_FOLDS,
    held: bool = False,
    show_set: str | None = None,
    *,
    why: str | None = None,
    log: ScoringLog | None = None,
    fit: bool = False,
) -> dict[str, Any]:
    devset = _loader()
    out: dict[str, Any] = {"extractor": "table", "versions": versions()}
    t0 = time.perf_counter()
    if held:
        res = held_scoring(why, log or ScoringLog(SCORINGS))
        out["held"] = res["all_extracted"]
        out["held_published"] = res["published"]
        out["held_slots"], out["held_slots_by_repo"] = res["slots"], res["slots_by_repo"]
        out["held_slot_rows"], out["held_false"] = res["slot_rows"], res["published_false"]
    else:
        # a development text the cache lacks (the search excerpt could not be found again)
        # is skipped and counted, never scored as a PR with no measurements
        every = [
            pr
            for root in DEV_ROOTS
            for pr in devset.load_devset(root, folds=DEV_FOLDS, require_texts=False)
        ]
        dev = [pr for pr in every if pr.text is not None]
        out["dev_texts_missing"] = {
            root.name: sum(1 for p in every if p.text is None and _root_of(p) == root.name)
            for root in DEV_ROOTS
        }
        out["dev"] = evaluate(dev, _det, detail=False).summary()
        per_pr = per_pr_scores(dev, _det)
        out["dev_published"], out["dev_slots"] = per_pr["published"], per_pr["slots"]
        if fit:
            out["policy_fit"] = fit_policy(dev, _det)
        out["dev_by_set"] = {
            root.name: evaluate(
                [p for p in dev if _root_of(p) == root.name], _det, detail=False
            ).summary()
            for root in DEV_ROOTS
        }
        out["dev_by_fold"] = {
            str(f): evaluate([p for p in dev if p.fold == f], _det, detail=False).summary()
            for f in DEV_FOLDS
        }
        if show:
            shown = evaluate(
                [
                    p
                    for p in dev
                    if p.fold in set(show_folds) and (show_set is None or _root_of(p) == show_set)
                ],
                _det,
                detail=True,
            )
            out["dev_misses"] = shown.misses
            out["dev_false"] = shown.false
    out["seconds"] = round(time.perf_counter() - t0, 2)
    if os.environ.get("KERNELHOUSE_LLM_BASE_URL"):
        out["llm"] = (
            "configured: score with --held after a dev run (not run by default: costs tokens)"
        )
    else:
        out["llm"] = "skipped: KERNELHOUSE_LLM_BASE_URL not set"
    return out


def _root_of(pr: Any) -> str:
    """Which development set a PR comes from (``split`` names the retired sets)."""
    return pr.split if pr.split in RETIRED_SPLITS else DEVSET.name


def _print_per_pr(res: dict[str, Any]) -> None:
    """The issue-40 headline lines: per-PR slots, what is published, the policy fit."""
    for split in ("held", "dev"):
        if f"{split}_slots" in res:
            s = res[f"{split}_slots"]
            print(
                f"{split:5s} per PR and scope ({s['slots']} slots): right {s['right']}, "
                f"wrong {s['wrong']}, missing {s['missing']}, invented {s['invented']}; "
                f"wrong or invented {s['wrong_or_invented_share']}"
            )
        if f"{split}_published" in res:
            s = res[f"{split}_published"]
            print(
                f"{split:5s} published: {s['predicted']}, {s['matched']} match a label: "
                f"precision {s['precision']} recall {s['recall']}"
            )
    for repo, s in res.get("held_slots_by_repo", {}).items():
        print(f"  {repo}: {s}")
    for line in res.get("held_slot_rows", []):
        print(f"slot: {line}")
    if "policy_fit" in res:
        print(json.dumps(res["policy_fit"], indent=1))


def _print_result(res: dict[str, Any]) -> None:
    """The run's figures as text (``--json`` prints ``res`` itself)."""
    _print_per_pr(res)
    for split in ("held", "dev"):
        if split in res:
            s = res[split]
            print(
                f"{split:5s} ({s['prs']} PRs, {s['labelled']} labelled, "
                f"{s['predicted']} predicted): "
                f"precision {s['precision']}  recall {s['recall']}  F1 {s['f1']}  | speedup±1% "
                f"{s['speedup_within_1pct']}  scope {s['scope_agreement']}  "
                f"batch {s['batch_size_agreement']}  "
                f"unit {s['unit_agreement']}  stated kept {s['stated_speedup_kept']}"
            )
    for name, s in res.get("dev_by_set", {}).items():
        print(
            f"  dev set {name}: precision {s['precision']} recall {s['recall']} "
            f"({s['prs']} PRs, {s['labelled']} labels)"
        )
    if any(res.get("dev_texts_missing", {}).values()):
        print(
            "  dev texts not cached (skipped): "
            + ", ".join(f"{k} {v}" for k, v in res["dev_texts_missing"].items())
        )
    for f, s in res.get("dev_by_fold", {}).items():
        print(f"  dev fold {f}: precision {s['precision']} recall {s['recall']} ({s['prs']} PRs)")
    for k in ("dev_misses", "dev_false", "held_misses", "held_false"):
        for line in res.get(k, []):
            print(f"{k.split('_', 1)[1]}: {line}")
    for k in ("held_misses_by_layout", "held_false_by_layout"):
        if k in res:
            print(f"{k}: " + ", ".join(f"{fam} {n}" for fam, n in res[k].items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--show", action="store_true", help="list dev misses and false positives")
    ap.add_argument("--show-folds", default="0,1,2,3,4", help="folds whose misses --show lists")
    ap.add_argument(
        "--show-set",
        default=None,
        help="with --show: only this development set (pr_devset, fresh … fresh11)",
    )
    ap.add_argument(
        "--held",
        "--fresh",
        dest="held",
        action="store_true",
        help="score the held-out set of this round (once per round)",
    )
    ap.add_argument(
        "--why",
        default=None,
        help="with --held: why the set is scored again (refused without it after a scoring)",
    )
    ap.add_argument(
        "--fit-policy",
        action="store_true",
        help="print each evidence class's development precision and the policy threshold",
    )
    ap.add_argument("--log", type=Path, default=SCORINGS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        res = run(
            args.show,
            [int(f) for f in args.show_folds.split(",")],
            held=args.held,
            show_set=args.show_set,
            why=args.why,
            log=ScoringLog(args.log),
            fit=args.fit_policy,
        )
    except ScoringRefused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    _print_result(res)
    print(f"llm: {res['llm']}  ({res['seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
