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
