"""Per-PR scoring and the scoring log (issue 40): what a user receives per PR and scope, and
a blind set scored once. Real files in a temporary folder; the eval script's own scoring
function runs on a small devset built here (never on the committed held-out set)."""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from dagster_project.gains.evaluation import (
    ScoringLog,
    ScoringRefused,
    pr_slots,
    slot_summary,
)
from dagster_project.gains.schema import Measurement

ROOT = Path(__file__).resolve().parents[3]


def _label(scope: str, speedup: float | None = None, stated: float | None = None) -> object:
    return SimpleNamespace(scope=scope, speedup=speedup, stated_speedup=stated)


def _pub(scope: str, speedup: float) -> Measurement:
    return Measurement(scope=scope, metric="t", speedup=speedup, audit_pass=True, published=True)


def test_slot_outcomes_right_wrong_missing_invented() -> None:
    labels = [_label("kernel", 2.0), _label("kernel", 1.0), _label("e2e", stated=1.1)]
    # kernel true median 1.5; published 1.55 is within 5%
    slots = {s.scope: s for s in pr_slots("o/r#1", labels, [_pub("kernel", 1.55)])}
    assert slots["kernel"].outcome == "right" and slots["kernel"].true_median == 1.5
    assert slots["e2e"].outcome == "missing"
    wrong = pr_slots("o/r#1", labels, [_pub("kernel", 1.6), _pub("e2e", 1.1)])
    assert [s.outcome for s in wrong] == ["wrong", "right"]  # 1.6 is 6.7% off 1.5
    invented = pr_slots("o/r#2", [], [_pub("e2e", 3.0)])
    assert [(s.scope, s.outcome) for s in invented] == [("e2e", "invented")]
    assert pr_slots("o/r#3", [], []) == []  # a negative with nothing published is no slot


def test_slot_summary_headline_counts_wrong_and_invented() -> None:
    slots = pr_slots("a#1", [_label("kernel", 2.0)], [_pub("kernel", 2.0)])
    slots += pr_slots("a#2", [_label("kernel", 2.0)], [_pub("kernel", 3.0)])
    slots += pr_slots("a#3", [], [_pub("e2e", 1.2)])
    slots += pr_slots("a#4", [_label("e2e", 1.2)], [])
    s = slot_summary(slots)
    assert (s["right"], s["wrong"], s["invented"], s["missing"]) == (1, 1, 1, 1)
    assert s["wrong_or_invented_share"] == 0.5
    assert s["right_share_of_true_slots"] == round(1 / 3, 4)


def test_scoring_log_refuses_a_second_scoring_without_a_reason(tmp_path: Path) -> None:
    log = ScoringLog(tmp_path / "scorings.jsonl")
    v = {"extractor": "2.12", "policy": "1"}
    log.check("fresh11", v, None)  # never scored: allowed
    log.record("fresh11", v, None, {"slots": {"slots": 3}})
    with pytest.raises(ScoringRefused, match="already scored"):
        log.check("fresh11", v, None)
    with pytest.raises(ScoringRefused):
        log.check("fresh11", v, "   ")  # a blank reason is no reason
    log.check("fresh11", v, "the labels of vllm#1 were corrected")
    log.check("fresh11", {**v, "policy": "2"}, None)  # another policy: a new scoring
    log.check("fresh12", v, None)
    (entry,) = log.entries()
    assert entry["why"] == "first scoring" and entry["versions"] == v


def _eval_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "eval_extractors_t", ROOT / "benchmarks" / "eval_extractors.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _tiny_devset(root: Path) -> None:
    """One PR with a role-headed table, labelled: a devset in the committed format."""
    text = (
        "| batch | main (us) | this PR (us) |\n|---|---|---|\n| 1 | 20.0 | 10.0 |\n"
        "| 8 | 40.0 | 30.0 |\n"
    )
    (root / "texts").mkdir(parents=True)
    (root / "texts" / "vllm-1.md").write_text(text)
    sha = hashlib.sha256(text.encode()).hexdigest()
    with (root / "prs.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            ["repo", "number", "url", "kind", "layouts", "fold", "split", "truncated"]
            + ["n_chars", "sha256", "n_chars_loose", "sha256_loose"]
        )
        w.writerow(
            [
                "vllm-project/vllm",
                1,
                "https://github.com/vllm-project/vllm/pull/1",
                "kernel",
                "md_table",
                0,
                "tiny",
                "false",
                len(text),
                sha,
                "",
                "",
            ]
        )
    lab = {
        "repo": "vllm-project/vllm",
        "number": 1,
        "kind": "pair",
        "metric": "latency",
        "unit": "us",
        "higher_is_better": False,
        "baseline_raw": "20.0",
        "optimized_raw": "10.0",
        "stated_speedup": None,
        "stated_raw": None,
        "scope": "kernel",
        "batch_size": 1,
        "shape": None,
        "hardware": None,
        "model": None,
        "baseline_label": "main",
        "optimized_label": "this PR",
    }
    rows = [
        {**lab, "baseline": 20.0, "optimized": 10.0, "speedup": 2.0},
        {
            **lab,
            "baseline": 40.0,
            "optimized": 30.0,
            "speedup": 1.3333,
            "batch_size": 8,
            "baseline_raw": "40.0",
            "optimized_raw": "30.0",
        },
    ]
    (root / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_held_scoring_scores_once_and_records_it(tmp_path: Path) -> None:
    ev = _eval_module()
    held = tmp_path / "tiny"
    _tiny_devset(held)
    log = ScoringLog(tmp_path / "scorings.jsonl")
    res = ev.held_scoring(None, log, held)
    assert res["slots"]["right"] == 1 and res["slots"]["slots"] == 1
    assert res["published"]["precision"] == 1.0 and res["published"]["recall"] == 1.0
    (entry,) = log.entries()
    assert entry["set"] == "tiny" and entry["versions"] == ev.versions()
    assert entry["figures"]["published_precision"] == 1.0
    with pytest.raises(ScoringRefused):
        ev.held_scoring(None, log, held)
    ev.held_scoring("rescored after a label fix", log, held)
    assert [e["why"] for e in log.entries()] == ["first scoring", "rescored after a label fix"]
