"""The known harmful classes of issue 40, each held by the deterministic extractor (2.12).

Scored on real PR text, every harmful value passed the audit: a reference implementation's
run taken as a side (a speedup on the wrong side of 1), a benchmark header's shape read as a
measurement, a comparison against a third implementation taken as the PR's own gain. For a
reward a missing number is cheap and a wrong one expensive, so each class here must give
nothing rather than a guess. The texts are our own, written for these tests.
"""

from __future__ import annotations

import pytest

from dagster_project.gains.extract import extract_pr_gains, extract_text
from dagster_project.gains.schema import Measurement

#: implementations a PR compares against without their being its before or after
PRODUCTS = ("FlashInfer", "cuBLAS", "torch", "Triton", "TensorRT-LLM", "vLLM", "SGLang", "cuDNN")
#: the products the vocabulary does not already call a reference (``TensorRT-LLM`` and
#: ``cuDNN`` are references: never the PR's side, whatever "time" would give)
NAMES = tuple(p for p in PRODUCTS if p not in ("TensorRT-LLM", "cuDNN"))
NAMES_AND_REFERENCES = ("torch", "cuBLAS", "FlashInfer", "Triton", "reference", "TensorRT-LLM")
REPOS = (None, "vllm-project/vllm", "sgl-project/sglang", "flashinfer-ai/flashinfer")


def _pairs(text: str, repo: str | None = None) -> list[tuple[float | None, float | None]]:
    return [(m.baseline, m.optimized) for m in extract_pr_gains(text, repo=repo).measurements]


def _ratios(ms: list[Measurement]) -> list[float | None]:
    return [m.stated_speedup for m in ms]


# --------------------------------------------------- third implementations and references

#: tables where the named implementation is a third one: the 9.0 / 30.0 it holds is never a
#: side, and where the text names no baseline of the PR nothing is read
THIRD = {
    "beside the PR's column": (
        "| M | {X} (us) | this PR (us) |\n|---|---|---|\n"
        "| 1 | 30.0 | 8.0 |\n| 16 | 31.0 | 15.0 |\n",
        [],
    ),
    "beside main and the PR": (
        "| M | main (us) | this PR (us) | {X} (us) |\n|---|---|---|---|\n"
        "| 1 | 10.0 | 8.0 | 9.0 |\n",
        [(10.0, 8.0)],
    ),
    "first of three columns": (
        "| M | {X} (us) | main (us) | this PR (us) |\n|---|---|---|---|\n"
        "| 1 | 9.0 | 10.0 | 8.0 |\n",
        [(10.0, 8.0)],
    ),
    "a row beside the PR's row": (
        "| impl | latency (us) |\n|---|---|\n| {X} | 30.0 |\n| this PR | 8.0 |\n",
        [],
    ),
    "a row beside main and the PR": (
        "| impl | latency (us) |\n|---|---|\n| main | 10.0 |\n| this PR | 8.0 |\n| {X} | 9.0 |\n",
        [(10.0, 8.0)],
    ),
    "a speedup column over it": (
        "| M | {X} (us) | this PR (us) | speedup |\n|---|---|---|---|\n"
        "| 1 | 30.0 | 8.0 | 3.75x |\n",
        [],
    ),
}


@pytest.mark.parametrize("layout", list(THIRD))
@pytest.mark.parametrize("name", PRODUCTS)
@pytest.mark.parametrize("repo", REPOS)
def test_a_third_implementation_is_never_a_side(layout: str, name: str, repo: str | None) -> None:
    table, want = THIRD[layout]
    text = "[Kernel] faster topk\n" + table.format(X=name)
    assert _pairs(text, repo) == want
    # no ratio-only claim against it either
    assert all(m.is_pair for m in extract_pr_gains(text, repo=repo).measurements)


@pytest.mark.parametrize("name", NAMES_AND_REFERENCES)
def test_a_third_implementations_line_is_never_a_side(name: str) -> None:
    """Role lines: ``main`` / ``X`` / ``this PR`` pair main with the PR (2.11 paired main
    with torch: a speedup of 0.33, the wrong side of 1), and ``X`` / ``this PR`` alone is
    no pair, as with a line called ``time``."""
    three = f"[Kernel] faster norm\nmain: 10.0 ms\n{name}: 30.0 ms\nthis PR: 8.0 ms\n"
    assert _pairs(three) == [(10.0, 8.0)]
    two = f"[Kernel] faster norm\n{name}: 30.0 ms\nthis PR: 8.0 ms\n"
    assert _pairs(two) == _pairs(two.replace(f"{name}:", "time:")) == []


@pytest.mark.parametrize(
    "sentence",
    [
        "The new kernel is 3.75x faster than the PyTorch reference.",
        "Compared with TensorRT-LLM, this PR achieves a 1.5x speedup.",
        "This PR is 2.1x faster than cuBLAS on H100.",
        "Our kernel runs 2.1x faster than FlashInfer.",
    ],
)
def test_a_ratio_said_against_a_third_implementation_is_no_claim(sentence: str) -> None:
    assert extract_text("[Kernel] faster norm\n" + sentence) == []


def test_a_ratio_said_against_main_stays_a_claim() -> None:
    text = (
        "[Kernel] faster norm\n"
        "It is 3.75x faster than the PyTorch reference and 1.2x faster than main."
    )
    assert [m.stated_speedup for m in extract_text(text)] == [1.2]


@pytest.mark.parametrize(
    "table",
    [
        "| M | baseline (us) | reference (us) |\n|---|---|---|\n| 1 | 10.0 | 30.0 |\n",
        "| M | main (us) | torch ref (us) |\n|---|---|---|\n| 1 | 10.0 | 30.0 |\n",
        "| impl | latency (us) |\n|---|---|\n| main | 10.0 |\n| reference | 30.0 |\n",
    ],
)
def test_a_reference_is_never_the_prs_side(table: str) -> None:
    assert extract_text("[Kernel] faster topk\n" + table) == []


# ----------------------------------------------------- shapes and parameters in headers


@pytest.mark.parametrize(
    ("table", "batches"),
    [
        (
            "| | M=16 | M=64 |\n|---|---|---|\n| baseline (us) | 10.5 | 20.5 |\n"
            "| this PR (us) | 8.5 | 15.5 |\n",
            [16, 64],
        ),
        (
            "| (M, N, K) | (1, 4096, 4096) | (16, 4096, 4096) |\n|---|---|---|\n"
            "| main (us) | 10.5 | 20.5 |\n| PR (us) | 8.5 | 15.5 |\n",
            [1, 16],
        ),
        (
            "| batch_size | 1 | 8 |\n|---|---|---|\n| before (ms) | 10.5 | 20.5 |\n"
            "| after (ms) | 8.5 | 15.5 |\n",
            [1, 8],
        ),
    ],
)
def test_a_shape_in_a_header_is_a_key_never_the_measurement(table: str, batches: list[int]) -> None:
    ms = extract_text("[Kernel] faster gemm\n" + table)
    assert [(m.baseline, m.optimized) for m in ms] == [(10.5, 8.5), (20.5, 15.5)]
    assert [m.batch_size for m in ms] == batches
    # the metric is what was timed (from the unit), never the shape that keyed it
    assert all(m.metric == "latency" and "=" not in m.metric for m in ms)
    assert all(m.speedup is not None and m.speedup > 1 for m in ms)


@pytest.mark.parametrize(
    "text",
    [
        "| param | before | after |\n|---|---|---|\n| BLOCK_SIZE_M | 64 | 128 |\n"
        "| num_warps | 4 | 8 |\n| latency (us) | 10.5 | 8.5 |\n",
        "Changed block size 64 -> 128 and num_stages 2 -> 4; latency 10.5 us -> 8.5 us.\n",
        "## Results (M=64, N=4096, K=7168, 128 experts)\n- before: 10.5 us\n- after: 8.5 us\n",
        "Before this PR:\nbatch_size=64 input_len=1024\nlatency: 10.5 us\n\n"
        "After this PR:\nbatch_size=64 input_len=1024\nlatency: 8.5 us\n",
    ],
)
def test_parameters_are_never_measurements(text: str) -> None:
    ms = extract_text("[Kernel] faster gemm\n" + text)
    assert [(m.baseline, m.optimized) for m in ms] == [(10.5, 8.5)]


# ------------------------------------------------- ratios between two variants of no side


@pytest.mark.parametrize(
    "table",
    [
        # three implementations named only weakly, one ratio column between two of them
        "| tokens | eager | triton | cuda | speedup |\n|---|---|---|---|---|\n"
        "| 128 | 0.300 ms | 0.060 ms | 0.020 ms | 3.00x |\n",
        # two quantised variants beside the unquantised run, the ratio between the two
        "| batch | bf16 (ms) | fp8 cutlass (ms) | fp8 triton (ms) | cutlass/triton |\n"
        "|---|---|---|---|---|\n| 1 | 10.0 | 8.0 | 6.0 | 1.33x |\n",
    ],
)
def test_a_ratio_between_two_non_pr_variants_is_never_the_prs_gain(table: str) -> None:
    ms = extract_text("Add fp8 path\n" + table)
    assert ms == [], [(m.baseline, m.optimized, m.stated_speedup) for m in ms]


def test_a_ratio_against_a_third_implementation_is_not_the_prs() -> None:
    """``speedup vs torch`` beside a ``main`` column: the pair is main -> this PR, and the
    torch ratio is neither its baseline nor its stated ratio (3.75 would also fail the
    audit's 5% agreement and quarantine the whole PR)."""
    table = (
        "| batch | torch (ms) | main (ms) | this PR (ms) | speedup vs torch |\n"
        "|---|---|---|---|---|\n| 1 | 30.0 | 10.0 | 8.0 | 3.75x |\n"
    )
    ms = extract_text("[Kernel] faster norm\n" + table)
    assert [(m.baseline, m.optimized, m.stated_speedup, m.audit_pass) for m in ms] == [
        (10.0, 8.0, None, True)
    ]


# ----------------------------------------------------- renaming a column changes nothing

#: layouts where a column (or line label) is called by a product's name; calling it "time"
#: instead must not flip what is read (issue 40: from all to none)
RENAMED = {
    "beside the PR's column": "| M | {X} (us) | this PR (us) |\n|---|---|---|\n"
    "| 1 | 10.0 | 8.0 |\n| 16 | 20.0 | 15.0 |\n",
    "beside ours": "| M | {X} (us) | ours (us) |\n|---|---|---|\n| 1 | 10.0 | 8.0 |\n",
    "beside a baseline": "| M | baseline (us) | {X} (us) |\n|---|---|---|\n| 1 | 10.0 | 8.0 |\n",
    "beside main": "| M | main | {X} |\n|---|---|---|\n| 1 | 10.0 | 8.0 |\n| 16 | 20.0 | 15.0 |\n",
    "a row beside the PR's row": "| impl | latency (us) |\n|---|---|\n| {X} | 10.0 |\n"
    "| this PR | 8.0 |\n",
    "a row beside main": "| impl | latency (us) |\n|---|---|\n| main | 10.0 |\n| {X} | 8.0 |\n",
    "the metric of rows-are-sides": "| run | {X} (ms) |\n|---|---|\n| before | 10.0 |\n"
    "| after | 8.0 |\n",
    "a label under Before / After": "Before:\n{X}: 10.0 ms\n\nAfter:\n{X}: 8.0 ms\n",
    "with a speedup column": "| M | {X} (us) | triton (us) | speedup |\n|---|---|---|---|\n"
    "| 1 | 10.0 | 8.0 | 1.25x |\n",
}


@pytest.mark.parametrize("layout", list(RENAMED))
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("repo", REPOS)
def test_renaming_a_product_column_to_time_changes_nothing(
    layout: str, name: str, repo: str | None
) -> None:
    text = "[Kernel] faster decode\n" + RENAMED[layout]
    as_time = _pairs(text.format(X="time"), repo)
    assert _pairs(text.format(X=name), repo) == as_time


def test_renaming_keeps_what_is_read_when_something_is() -> None:
    """The invariant above is not met by reading nothing everywhere."""
    read = [k for k, t in RENAMED.items() if _pairs("t\n" + t.format(X="time"))]
    assert len(read) >= 5, read


def test_the_prs_repository_never_changes_a_reading() -> None:
    """The lake passes the repository, the CLI may not: one text, one reading."""
    for table in list(RENAMED.values()) + [t for t, _ in THIRD.values()]:
        for name in PRODUCTS:
            text = "[Kernel] faster decode\n" + table.format(X=name)
            readings = {tuple(_pairs(text, repo)) for repo in REPOS}
            ratios = {tuple(_ratios(extract_pr_gains(text, repo=r).measurements)) for r in REPOS}
            assert len(readings) == 1 and len(ratios) == 1, (table, name)
