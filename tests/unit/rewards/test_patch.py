"""patch_reward / oracle_edit: block grammar, exact application, scoring and the oracle."""

from __future__ import annotations

import difflib
import io
import random

import pytest

from dagster_project.rewards import (
    Edit,
    EditDoesNotApply,
    MalformedEdit,
    apply_edits,
    changed_lines,
    oracle_edit,
    oracle_edits,
    parse_search_replace,
    patch_reward,
    render_edits,
    split_lines,
)
from tests.unit.rewards.generators import random_pair

BEFORE = """\
#include <cuda.h>

__global__ void add(float* x, int n) {
  int i = threadIdx.x;
  if (i < n) {
    x[i] += 1.0f;
  }
}

__global__ void mul(float* x, int n) {
  int i = threadIdx.x;
  if (i < n) {
    x[i] *= 2.0f;
  }
}
"""
AFTER = BEFORE.replace(
    "  int i = threadIdx.x;\n  if (i < n) {\n    x[i] *= 2.0f;",
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) {\n    x[i] *= 2.0f;",
)


def block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


# --------------------------------------------------------------------------- parsing


def test_parses_blocks_inside_prose_fences_and_path_lines() -> None:
    completion = (
        "I will index by the global thread id.\n\n"
        "```cpp\n### csrc/kernels/add.cu\n"
        + block("a\n", "b\n")
        + "```\n\nAnd a second one:\n```\n"
        + block("c\nd\n", "")
        + "```\nDone."
    )
    edits = parse_search_replace(completion)
    assert edits == [Edit("a\n", "b\n", "csrc/kernels/add.cu"), Edit("c\nd\n", "", None)]


def test_path_line_is_forgotten_after_prose() -> None:
    edits = parse_search_replace("### x.cu\nsome prose\n" + block("a\n", "b\n"))
    assert edits[0].path is None


def test_drafts_inside_think_are_ignored() -> None:
    completion = "<think>\n" + block("draft\n", "x\n") + "</think>\n" + block("a\n", "b\n")
    assert parse_search_replace(completion) == [Edit("a\n", "b\n")]


def test_content_is_literal_including_fences_and_crlf() -> None:
    edits = parse_search_replace(block("```\n", "x\r\n"))
    assert edits == [Edit("```\n", "x\r\n")]


def test_no_newline_marker_drops_the_final_newline() -> None:
    edits = parse_search_replace(
        "<<<<<<< SEARCH\nb\n=======\nb\n\\ No newline at end of file\n>>>>>>> REPLACE"
    )
    assert edits == [Edit("b\n", "b")]


@pytest.mark.parametrize(
    ("completion", "reason"),
    [
        ("just prose, no edits", "no SEARCH/REPLACE block"),
        ("", "no SEARCH/REPLACE block"),
        ("<<<<<<< SEARCH\na\n=======\nb\n", "not terminated"),
        ("<<<<<<< SEARCH\na\n>>>>>>> REPLACE\n", "before the ======= divider"),
        ("<<<<<<< SEARCH\na\n<<<<<<< SEARCH\n", "before the ======= divider"),
        ("<<<<<<< SEARCH\na\n=======\nb\n=======\nc\n>>>>>>> REPLACE\n", "inside the REPLACE"),
        ("=======\n", "outside a SEARCH/REPLACE block"),
        (block("a\n", "b\n") + ">>>>>>> REPLACE\n", "outside a SEARCH/REPLACE block"),
        ("<<<<<<< SEARCH\n\\ No newline at end of file\n=======\n>>>>>>> REPLACE\n", "only"),
    ],
)
def test_malformed_completions_name_the_reason(completion: str, reason: str) -> None:
    with pytest.raises(MalformedEdit) as info:
        parse_search_replace(completion)
    assert reason in info.value.reason
    assert patch_reward(completion, "a\n", "b\n") == -1.0


def test_indented_markers_are_prose() -> None:
    with pytest.raises(MalformedEdit):
        parse_search_replace("  <<<<<<< SEARCH\n  a\n  =======\n  b\n  >>>>>>> REPLACE\n")


def test_markers_allow_trailing_whitespace() -> None:
    assert parse_search_replace("<<<<<<< SEARCH  \na\n=======\t\nb\n>>>>>>> REPLACE \n") == [
        Edit("a\n", "b\n")
    ]


def test_non_text_completion_is_malformed() -> None:
    assert patch_reward(None, "a\n", "b\n") == -1.0  # type: ignore[arg-type]


# --------------------------------------------------------------------------- applying


def test_search_must_match_exactly_once() -> None:
    with pytest.raises(EditDoesNotApply, match="does not occur"):
        apply_edits("a\nb\n", [Edit("c\n", "d\n")])
    with pytest.raises(EditDoesNotApply, match="more than once"):
        apply_edits("a\nb\na\n", [Edit("a\n", "d\n")])


def test_overlapping_occurrences_are_ambiguous() -> None:
    with pytest.raises(EditDoesNotApply, match="more than once"):
        apply_edits("a\na\na\n", [Edit("a\na\n", "x\n")])


def test_blocks_apply_sequentially() -> None:
    out = apply_edits("a\nb\n", [Edit("a\n", "c\n"), Edit("c\nb\n", "d\n")])
    assert out == "d\n"
    with pytest.raises(EditDoesNotApply) as info:
        apply_edits("a\nb\n", [Edit("a\n", "c\n"), Edit("a\n", "e\n")])
    assert info.value.index == 1


def test_empty_search_only_matches_an_empty_file() -> None:
    assert apply_edits("", [Edit("", "new\n")]) == "new\n"
    with pytest.raises(EditDoesNotApply):
        apply_edits("x\n", [Edit("", "new\n")])


def test_matching_is_exact_no_whitespace_or_eol_normalisation() -> None:
    with pytest.raises(EditDoesNotApply):
        apply_edits("\tx\n", [Edit("    x\n", "y\n")])
    with pytest.raises(EditDoesNotApply):
        apply_edits("x\r\ny\r\n", [Edit("x\n", "z\n")])


def test_file_without_final_newline_keeps_lacking_it() -> None:
    assert apply_edits("a\nb", [Edit("b\n", "c\n")]) == "a\nc"
    assert apply_edits("a\nb", [Edit("b\n", "")]) == "a"
    # Appending an empty line is how a missing final newline gets added.
    assert apply_edits("a\nb", [Edit("b\n", "b\n\n")]) == "a\nb\n"


# --------------------------------------------------------------------------- scoring


def _reference_changed(old: str, new: str) -> list[str]:
    diff = difflib.unified_diff(io.StringIO(old).readlines(), io.StringIO(new).readlines(), n=0)
    return [line for i, line in enumerate(diff) if i >= 2 and not line.startswith("@@")]


def test_changed_lines_equal_unified_diff_lines() -> None:
    rng = random.Random(7)
    for _ in range(300):
        before, after = random_pair(rng)
        assert changed_lines(before, after) == _reference_changed(before, after)


def test_split_lines_splits_on_newline_only() -> None:
    assert split_lines("a\x0cb\nc\u2028d") == ["a\x0cb\n", "c\u2028d"]
    assert split_lines("") == []
    assert split_lines("\n\n") == ["\n", "\n"]


def test_exact_answer_scores_one_and_partial_answers_score_between() -> None:
    exact = block(
        "  int i = threadIdx.x;\n  if (i < n) {\n    x[i] *= 2.0f;\n",
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) {\n    x[i] *= 2.0f;\n",
    )
    assert patch_reward(exact, BEFORE, AFTER) == 1.0
    close = exact.replace("blockIdx.x * blockDim.x", "blockDim.x * blockIdx.x")
    assert 0.0 < patch_reward(close, BEFORE, AFTER) < 1.0
    no_op = block("#include <cuda.h>\n", "#include <cuda.h>\n")
    assert patch_reward(no_op, BEFORE, AFTER) == 0.0
    ambiguous = block("  int i = threadIdx.x;\n", "  int i = 0;\n")
    assert patch_reward(ambiguous, BEFORE, AFTER) == -1.0


def test_extra_columns_are_ignored() -> None:
    assert patch_reward(oracle_edit(BEFORE, AFTER), BEFORE, AFTER, prompt="p", repo="vllm") == 1.0


# --------------------------------------------------------------------------- oracle


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("a\nb\nc\n", "x\na\nb\nc\n"),  # insertion at the start
        ("a\nb\nc\n", "a\nb\nc\nx\n"),  # insertion at the end
        ("a\nb\nc\n", "a\nc\n"),  # deletion
        ("a\nb\nc\n", ""),  # everything deleted
        ("", "a\nb\n"),  # new content in an empty file
        ("", "a"),  # ... without final newline
        ("a\nb", "a\nc"),  # no final newline on both sides
        ("a\nb", "a\nb\n"),  # final newline added
        ("a\nb\n", "a\nb"),  # final newline removed
        ("a", ""),  # last line without newline deleted
        ("a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n"),  # CRLF
        ("a\r\nb", "a\r\nb\r\n"),  # CRLF gaining a final newline
        ("\tx = 1;\n\ty = 2;\n", "\tx = 1;\n\t\ty = 3;\n"),  # tabs
        ("}\n}\n}\n}\n", "}\n}\n}\n"),  # repeated lines
        ("a\na\na\n", "a\nb\na\na\n"),  # insertion among repeats
        ("x\n" * 50 + "y\n" + "x\n" * 50, "x\n" * 50 + "x\n" * 50),  # anchored deletion
        ("a\nb\n", "a\nb\n"),  # no change at all
        ("", ""),
    ],
)
def test_oracle_edge_cases(before: str, after: str) -> None:
    completion = oracle_edit(before, after)
    assert apply_edits(before, parse_search_replace(completion)) == after
    assert patch_reward(completion, before, after) == 1.0


def test_oracle_uses_minimal_unique_context() -> None:
    before = "}\nint a;\n}\nint b;\n}\n"
    after = "}\nint a;\n}\nint b;\nint c;\n}\n"
    [edit] = oracle_edits(before, after)
    assert edit == Edit("int b;\n}\n", "int b;\nint c;\n}\n")


def test_oracle_carries_the_path_line() -> None:
    completion = oracle_edit(BEFORE, AFTER, path="csrc/add.cu")
    assert completion.startswith("### csrc/add.cu\n<<<<<<< SEARCH\n")
    assert {e.path for e in parse_search_replace(completion)} == {"csrc/add.cu"}


def test_oracle_property_random_pairs() -> None:
    """Seeded random line edits: the oracle always rebuilds after_code and scores 1.0."""
    rng = random.Random(20260101)
    for _ in range(1500):
        before, after = random_pair(rng)
        completion = oracle_edit(before, after)
        assert apply_edits(before, parse_search_replace(completion)) == after, (before, after)
        assert patch_reward(completion, before, after) == 1.0


def _alternative_renderings(before: str, after: str, rng: random.Random) -> list[str]:
    """Other correct ways to write the same change."""
    virtual = bool(before) and not before.endswith("\n")
    whole = [Edit(before + "\n", after + "\n") if virtual else Edit(before, after)]
    edits = oracle_edits(before, after)
    # The oracle's blocks, each widened by up to 3 extra lines of unchanged context where
    # the neighbours are available: built as one merged block from the first to the last
    # changed line, which also covers "merged hunks".
    a = split_lines(before + "\n" if virtual else before)
    b = split_lines(after + "\n" if virtual else after)
    ops = [op for op in difflib.SequenceMatcher(None, a, b).get_opcodes() if op[0] != "equal"]
    out = [
        render_edits(whole),
        render_edits(list(reversed(edits))) if _disjoint(edits, before) else render_edits(edits),
    ]
    if ops:
        extra = rng.randint(0, 3)
        i1, j1 = max(0, ops[0][1] - extra), max(0, ops[0][3] - extra)
        i2, j2 = ops[-1][2], ops[-1][4]
        tail = min(extra, len(a) - i2)
        merged = Edit("".join(a[i1 : i2 + tail]), "".join(b[j1 : j2 + tail]))
        if merged.search and _unique(merged.search, "".join(a)):
            out.append(render_edits([merged]))
    prose = "Sure, here it is.\n```python\n### kernel.py\n" + render_edits(edits) + "```\n"
    out.append(prose)
    return out


def _unique(needle: str, text: str) -> bool:
    at = text.find(needle)
    return at >= 0 and text.find(needle, at + 1) < 0


def _disjoint(edits: list[Edit], before: str) -> bool:
    """Whether the blocks can also be applied bottom-up (each unique in the original)."""
    text = before if before.endswith("\n") or not before else before + "\n"
    return all(e.search and _unique(e.search, text) for e in edits) and len(edits) > 1


def test_other_correct_renderings_score_one() -> None:
    """The score depends on the resulting file only, not on how the edit is written."""
    rng = random.Random(99)
    checked = 0
    for _ in range(600):
        before, after = random_pair(rng)
        for completion in _alternative_renderings(before, after, rng):
            try:
                result = apply_edits(before, parse_search_replace(completion))
            except EditDoesNotApply:
                continue  # e.g. reversed blocks that overlap: not a correct rendering
            if result != after:
                continue
            assert patch_reward(completion, before, after) == 1.0
            checked += 1
    assert checked > 1500


def test_marker_lookalike_lines_fall_back_to_a_whole_file_block() -> None:
    """A file line equal to '=======' cannot be written inside a block; documented limit."""
    before, after = "title\n=======\nold\n", "title\n=======\nnew\n"
    assert patch_reward(oracle_edit(before, after), before, after) == 1.0  # not in a block
    before2, after2 = "=======\n", "=======\nx\n"
    assert patch_reward(oracle_edit(before2, after2), before2, after2) == -1.0
