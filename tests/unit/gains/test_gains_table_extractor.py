"""Deterministic extractor: precision/recall on the labelled fixtures, and its traps."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagster_project.gains.evaluation import evaluate, load_labels
from dagster_project.gains.extract import extract_text
from dagster_project.gains.extract.choose import EXTRACTOR_VERSION, extract_table

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "prs"


def test_labelled_set_is_large_enough() -> None:
    labels = load_labels(FIXTURES / "labels.json")
    assert len(labels) >= 20
    assert all((FIXTURES / name).exists() for name in labels)


def test_precision_on_labelled_fixtures() -> None:
    score = evaluate(extract_text, FIXTURES)
    summary = score.summary()
    assert summary["pair_precision"] >= 0.9, summary
    assert summary["pair_recall"] >= 0.8, summary
    assert summary["stated_precision"] >= 0.8, summary


def test_every_extracted_pair_passes_the_audit_or_is_flagged() -> None:
    for path in sorted(FIXTURES.glob("*.md")):
        for m in extract_text(path.read_text()):
            if m.is_pair:
                assert m.audit_pass is not None, (path.name, m)
                assert m.audit_pass, (path.name, m)  # the table extractor only copies


@pytest.mark.parametrize(
    "name",
    ["13_sglang_accuracy_only.md"],
)
def test_accuracy_only_pr_has_no_measurements(name: str) -> None:
    assert extract_text((FIXTURES / name).read_text()) == []


def test_shapes_batch_sizes_and_gpu_counts_never_become_values() -> None:
    text = (FIXTURES / "05_flashinfer_decode_splitk_table.md").read_text()
    values = {v for m in extract_table(text) for v in (m.baseline, m.optimized)}
    assert not values & {1.0, 4.0, 16.0, 64.0, 4096.0, 32768.0, 32.0, 8.0, 128.0}
    text = (FIXTURES / "07_sglang_prose_arrows.md").read_text()
    pairs = {(m.baseline, m.optimized) for m in extract_table(text)}
    assert pairs == {(58.4, 51.9), (11842.0, 13307.0)}


def test_fields_are_filled_from_context() -> None:
    ms = extract_table((FIXTURES / "01_vllm_moe_tuned_h200.md").read_text())
    assert {m.batch_size for m in ms} == {1, 8, 32, 128, 512, 2048}
    m = ms[0]
    assert m.scope == "kernel" and m.unit == "us" and m.higher_is_better is False
    assert m.hardware and "H200" in m.hardware and m.shape and "E=64" in m.shape
    assert m.speedup == round(41.8 / 40.2, 4)
    assert m.extractor == "table" and m.extractor_version == EXTRACTOR_VERSION


def test_first_line_is_the_title() -> None:
    ms = extract_text("[Perf] Fused kernel is 1.5x faster\nNo numbers in the body.")
    assert [(m.stated_speedup, m.speedup) for m in ms] == [(1.5, None)]
    assert extract_text("") == [] and extract_text("title only") == []


def test_stated_ratio_is_dropped_when_a_pair_exists() -> None:
    text = (
        "Faster sampler\n| bs | main (ms) | PR (ms) |\n|---|---|---|\n| 1 | 2.0 | 1.0 |\n"
        "\nOverall 1.8x faster."
    )
    ms = extract_text(text)
    assert [(m.baseline, m.optimized, m.stated_speedup) for m in ms] == [(2.0, 1.0, None)]


def test_lm_eval_table_with_roles_is_ignored() -> None:
    text = (
        "t\n| Task | main | PR |\n|---|---|---|\n| gsm8k exact_match | 0.76 | 0.77 |\n"
        "| mmlu | 0.70 | 0.71 |"
    )
    assert extract_text(text) == []


def test_extract_pr_gains_stamps_lineage() -> None:
    from dagster_project.gains.extract import body_sha256, extract_pr_gains, pr_text

    text = pr_text(
        "[Perf] x", "| bs | before (ms) | after (ms) |\n|---|---|---|\n| 4 | 3.0 | 2.0 |"
    )
    res = extract_pr_gains(text, repo="sglang", pr_number=7)
    assert res.ok and res.extractor == "table" and res.extractor_version == EXTRACTOR_VERSION
    (m,) = res.measurements
    assert (m.repo, m.pr_number, m.extractor, m.speedup, m.batch_size) == (
        "sglang",
        7,
        "table",
        1.5,
        4,
    )
    assert res.gains()[0]["speedup"] == 1.5
    assert body_sha256(None) == body_sha256("") != body_sha256("x")
    with pytest.raises(ValueError):
        extract_pr_gains(text, extractor="regex")  # type: ignore[arg-type]
