"""Scoring an extractor against hand-labelled PR descriptions.

Labels (``tests/fixtures/prs/labels.json``) list, per fixture, the baseline/optimized
pairs a careful reader would record and the stated ratios for PRs that only give ratios.
A predicted pair matches a labelled pair when both values are equal (values are compared
as numbers, to 1e-9 relative); each label can be matched once, so duplicates count as
false positives. Stated ratios match within 0.005 absolute, since they come out of the
percent conventions in :func:`dagster_project.gains.normalise.parse_stated_speedup`.

Precision and recall on pairs are the headline numbers; direction (``higher_is_better``),
scope and batch size are reported as agreement rates over the matched pairs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagster_project.gains.schema import Measurement

Extractor = Callable[[str], list[Measurement]]


@dataclass
class FixtureScore:
    """Counts for one fixture."""

    name: str
    predicted_pairs: int = 0
    labelled_pairs: int = 0
    matched_pairs: int = 0
    predicted_stated: int = 0
    labelled_stated: int = 0
    matched_stated: int = 0
    direction_ok: int = 0
    scope_ok: int = 0
    batch_checked: int = 0
    batch_ok: int = 0
    audit_flagged: int = 0
    false_pairs: list[tuple[float | None, float | None]] = field(default_factory=list)
    missed_pairs: list[tuple[float, float]] = field(default_factory=list)


@dataclass
class Score:
    """Totals over a labelled set."""

    fixtures: list[FixtureScore]

    def _sum(self, attr: str) -> int:
        return sum(getattr(f, attr) for f in self.fixtures)

    @staticmethod
    def _ratio(a: int, b: int) -> float | None:
        return a / b if b else None

    @property
    def pair_precision(self) -> float | None:
        return self._ratio(self._sum("matched_pairs"), self._sum("predicted_pairs"))

    @property
    def pair_recall(self) -> float | None:
        return self._ratio(self._sum("matched_pairs"), self._sum("labelled_pairs"))

    @property
    def stated_precision(self) -> float | None:
        return self._ratio(self._sum("matched_stated"), self._sum("predicted_stated"))

    @property
    def stated_recall(self) -> float | None:
        return self._ratio(self._sum("matched_stated"), self._sum("labelled_stated"))

    def summary(self) -> dict[str, Any]:
        """Headline figures as a plain dict (what the benchmark script prints)."""
        matched = self._sum("matched_pairs")
        return {
            "fixtures": len(self.fixtures),
            "labelled_pairs": self._sum("labelled_pairs"),
            "predicted_pairs": self._sum("predicted_pairs"),
            "matched_pairs": matched,
            "pair_precision": self.pair_precision,
            "pair_recall": self.pair_recall,
            "labelled_stated": self._sum("labelled_stated"),
            "predicted_stated": self._sum("predicted_stated"),
            "stated_precision": self.stated_precision,
            "stated_recall": self.stated_recall,
            "direction_agreement": self._ratio(self._sum("direction_ok"), matched),
            "scope_agreement": self._ratio(self._sum("scope_ok"), matched),
            "batch_size_agreement": self._ratio(self._sum("batch_ok"), self._sum("batch_checked")),
            "pairs_flagged_by_audit": self._sum("audit_flagged"),
        }


def load_labels(path: Path) -> dict[str, dict[str, Any]]:
    """The ``fixtures`` mapping of a labels file."""
    data: dict[str, Any] = json.loads(path.read_text())
    fixtures: dict[str, dict[str, Any]] = data["fixtures"]
    return fixtures


def _close(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def score_fixture(name: str, predicted: list[Measurement], label: dict[str, Any]) -> FixtureScore:
    """Match one fixture's predictions against its label."""
    fs = FixtureScore(name)
    pairs = [m for m in predicted if m.is_pair]
    stated = [m for m in predicted if not m.is_pair and m.stated_speedup is not None]
    lp = list(label.get("pairs", []))
    ls = list(label.get("stated", []))
    fs.predicted_pairs, fs.labelled_pairs = len(pairs), len(lp)
    fs.predicted_stated, fs.labelled_stated = len(stated), len(ls)
    fs.audit_flagged = sum(1 for m in pairs if m.audit_pass is False)
    used: set[int] = set()
    for m in pairs:
        hit = next(
            (
                i
                for i, lab in enumerate(lp)
                if i not in used
                and _close(m.baseline, lab["baseline"])
                and _close(m.optimized, lab["optimized"])
            ),
            None,
        )
        if hit is None:
            fs.false_pairs.append((m.baseline, m.optimized))
            continue
        used.add(hit)
        lab = lp[hit]
        fs.matched_pairs += 1
        fs.direction_ok += m.higher_is_better == lab.get("higher_is_better")
        fs.scope_ok += m.scope == lab.get("scope")
        if "batch_size" in lab:
            fs.batch_checked += 1
            fs.batch_ok += m.batch_size == lab["batch_size"]
    fs.missed_pairs = [
        (lab["baseline"], lab["optimized"]) for i, lab in enumerate(lp) if i not in used
    ]
    used_s: set[int] = set()
    for m in stated:
        hit = next(
            (
                i
                for i, lab in enumerate(ls)
                if i not in used_s and abs((m.stated_speedup or 0) - lab["stated_speedup"]) <= 0.005
            ),
            None,
        )
        if hit is not None:
            used_s.add(hit)
            fs.matched_stated += 1
    return fs


def evaluate(
    extract: Extractor,
    fixtures_dir: Path,
    labels_file: Path | None = None,
    *,
    split: str | None = None,
) -> Score:
    """Run ``extract`` on every labelled fixture (optionally one ``split``) and score it."""
    labels = load_labels(labels_file or fixtures_dir / "labels.json")
    scores = []
    for name, label in sorted(labels.items()):
        if split is not None and label.get("split", "dev") != split:
            continue
        text = (fixtures_dir / name).read_text()
        scores.append(score_fixture(name, extract(text), label))
    return Score(scores)


# --------------------------------------------------------------- per-PR scoring (issue 40)

#: a published per-PR median within this share of the true one is right
MEDIAN_TOLERANCE = 0.05
SCOPES: tuple[str, ...] = ("kernel", "e2e")


@dataclass(frozen=True)
class Slot:
    """One PR and scope: the median a user receives beside the one the labels give.

    ``outcome``: ``right`` (within :data:`MEDIAN_TOLERANCE`), ``wrong``, ``missing`` (a true
    value, nothing published) or ``invented`` (published where the PR has no value)."""

    pr: str
    scope: str
    true_median: float | None
    published_median: float | None
    outcome: str


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def label_speedup(label: Any) -> float | None:
    """A label's true speedup: the pair's (direction known), else the stated ratio."""
    sp = getattr(label, "speedup", None)
    return sp if sp is not None else getattr(label, "stated_speedup", None)


def pr_slots(pr: str, labels: list[Any], published: list[Measurement]) -> list[Slot]:
    """The PR's slots: one per scope where the labels or the published measurements have a
    value (a scope with neither is no slot). ``published`` are the measurements that reach
    the datasets (the policy's ``published``); their median is what ``kernel_speedup`` /
    ``e2e_speedup`` carry."""
    out = []
    for scope in SCOPES:
        true = _median(
            [v for lab in labels if lab.scope == scope if (v := label_speedup(lab)) is not None]
        )
        got = _median(
            [v for m in published if m.scope == scope and (v := m.documented_speedup) is not None]
        )
        if true is None and got is None:
            continue
        if got is None:
            outcome = "missing"
        elif true is None:
            outcome = "invented"
        else:
            outcome = "right" if abs(got / true - 1) <= MEDIAN_TOLERANCE else "wrong"
        out.append(Slot(pr, scope, true, got, outcome))
    return out


def slot_summary(slots: list[Slot]) -> dict[str, Any]:
    """Counts per outcome and the headline: the share of slots whose published median is
    wrong or invented (what a user would be misled by)."""
    counts = {
        k: sum(s.outcome == k for s in slots) for k in ("right", "wrong", "missing", "invented")
    }
    n = len(slots)
    bad = counts["wrong"] + counts["invented"]
    with_truth = n - counts["invented"]
    return {
        "slots": n,
        **counts,
        "wrong_or_invented_share": round(bad / n, 4) if n else None,
        "right_share_of_true_slots": round(counts["right"] / with_truth, 4) if with_truth else None,
    }


# ------------------------------------------------------------------- the scoring log


class ScoringRefused(RuntimeError):
    """A held-out set was already scored by this extractor and policy version."""


@dataclass(frozen=True)
class ScoringLog:
    """The committed record of every held-out scoring (one JSON object per line).

    Why: a blind set is only blind for its first scoring; a second look at its misses tunes
    the extractor to it. :meth:`check` refuses to score a set again with the same extractor
    and policy versions unless a reason is given, and :meth:`record` keeps that reason."""

    path: Path

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        return [json.loads(ln) for ln in self.path.read_text().splitlines() if ln.strip()]

    def previous(self, set_name: str, versions: dict[str, str]) -> list[dict[str, Any]]:
        return [
            e for e in self.entries() if e.get("set") == set_name and e.get("versions") == versions
        ]

    def check(self, set_name: str, versions: dict[str, str], why: str | None) -> None:
        """Raise :class:`ScoringRefused` when the set was scored with these versions and no
        reason for another scoring is given."""
        before = self.previous(set_name, versions)
        if before and not (why and why.strip()):
            last = before[-1]
            raise ScoringRefused(
                f"{set_name} was already scored with {versions} on {last.get('when')} "
                f"({last.get('why')!r}); a blind set is scored once: pass --why to say why "
                "it must be scored again"
            )

    def record(
        self, set_name: str, versions: dict[str, str], why: str | None, figures: dict[str, Any]
    ) -> dict[str, Any]:
        """Append one scoring (set, versions, reason, UTC time, headline figures)."""
        import datetime

        entry = {
            "set": set_name,
            "versions": versions,
            "when": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "why": (why or "first scoring").strip(),
            "figures": figures,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, sort_keys=True) + "\n")
        return entry
