"""The multi-file reward of pr_tasks (issue 41): oracle, paths, one-file equivalence with the
single-file reward, the TRL wrapper and the standalone reward.py."""

from __future__ import annotations

import random

import pytest

from dagster_project.rewards import (
    MALFORMED_REWARD,
    oracle_edit,
    patch_reward,
    pr_oracle_edit,
    pr_patch_reward,
    pr_patch_reward_fn,
    render_reward_module,
)
from tests.unit.rewards.generators import random_pair

HEADER = (
    "csrc/ops.h",
    "void old_op(int n);\nvoid keep(int n);\n",
    "void new_op(int n);\nvoid keep(int n);\n",
)
KERNEL = (
    "csrc/kernel.cu",
    "__global__ void k(float* x) {\n  x[0] = 1.0f;\n}\n",
    "__global__ void k(float* __restrict__ x) {\n  x[0] = 1.0f;\n}\n",
)


def _files(*triples: tuple[str, str, str]) -> list[dict[str, str]]:
    """Rows as ``datasets`` yields the files column: a list of dicts (extra keys too)."""
    return [
        {"path": p, "language": "CUDA", "before_code": b, "after_code": a} for p, b, a in triples
    ]


def _block(path: str | None, search: str, replace: str) -> str:
    head = f"### {path}\n" if path else ""
    return f"{head}<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def test_the_oracle_rebuilds_every_file_and_scores_one() -> None:
    rng = random.Random(41)
    for _ in range(200):
        n = rng.randint(1, 4)
        triples = []
        for i in range(n):
            before, after = random_pair(rng)
            if before == after:
                after = before + "added\n"
            triples.append((f"dir/f{i}.cu", before, after))
        files = _files(*triples)
        assert pr_patch_reward(pr_oracle_edit(files), files) == 1.0


def test_a_two_file_edit_needs_both_files() -> None:
    files = _files(HEADER, KERNEL)
    both = _block(HEADER[0], "void old_op(int n);\n", "void new_op(int n);\n") + _block(
        KERNEL[0], "__global__ void k(float* x) {\n", "__global__ void k(float* __restrict__ x) {\n"
    )
    only_header = _block(HEADER[0], "void old_op(int n);\n", "void new_op(int n);\n")
    assert pr_patch_reward(both, files) == 1.0
    half = pr_patch_reward(only_header, files)
    assert 0.0 < half < 1.0
    # the blocks' order does not matter: the files are scored in the task's order
    swapped = both.split("### ")
    assert pr_patch_reward("### " + swapped[2] + "### " + swapped[1], files) == 1.0


def test_the_right_lines_in_the_wrong_file_do_not_count() -> None:
    files = _files(("a.h", "x\n", "y\n"), ("b.h", "x\n", "x\n"))
    assert pr_patch_reward(_block("a.h", "x\n", "y\n"), files) == 1.0
    assert pr_patch_reward(_block("b.h", "x\n", "y\n"), files) == 0.0


def test_paths_name_files_exactly_or_with_a_diff_prefix() -> None:
    files = _files(HEADER, KERNEL)
    edit = ("void old_op(int n);\n", "void new_op(int n);\n")
    assert pr_patch_reward(_block("a/csrc/ops.h", *edit), files) > 0
    assert pr_patch_reward(_block("`./csrc/ops.h`", *edit), files) > 0
    # a basename alone, an unknown file or no path at all in a multi-file task: malformed
    assert pr_patch_reward(_block("ops.h", *edit), files) == MALFORMED_REWARD
    assert pr_patch_reward(_block("csrc/other.h", *edit), files) == MALFORMED_REWARD
    assert pr_patch_reward(_block(None, *edit), files) == MALFORMED_REWARD
    # a SEARCH that is in another file of the task, not in the one named
    assert pr_patch_reward(_block(KERNEL[0], *edit), files) == MALFORMED_REWARD


def test_one_file_scores_as_the_single_file_reward() -> None:
    rng = random.Random(7)
    for _ in range(150):
        before, after = random_pair(rng)
        _, guess = random_pair(random.Random(rng.random()))
        files = _files(("k.cu", before, after))
        completions = [
            oracle_edit(before, after, "k.cu"),
            oracle_edit(before, after),  # no ### line: allowed with one file
            oracle_edit(before, guess + "x\n" if before else "x\n"),
            "no blocks here",
        ]
        for completion in completions:
            assert pr_patch_reward(completion, files) == patch_reward(completion, before, after)


def test_the_trl_wrapper_reads_conversational_completions_and_the_files_column() -> None:
    files = _files(HEADER, KERNEL)
    oracle = pr_oracle_edit(files)
    completions = [
        [{"role": "assistant", "content": oracle}],
        [{"role": "assistant", "content": "I cannot help."}],
    ]
    scores = pr_patch_reward_fn(completions, files=[files, files], prompts=["p", "p"], split=["a"])
    assert scores == [1.0, MALFORMED_REWARD]
    with pytest.raises(ValueError, match="files"):
        pr_patch_reward_fn(completions, files=[files])


def test_the_standalone_reward_module_scores_pr_tasks_like_the_package() -> None:
    namespace: dict = {"__name__": "reward"}
    exec(compile(render_reward_module(), "reward.py", "exec"), namespace)
    rng = random.Random(3)
    for _ in range(60):
        triples = [("x/a.cu", *random_pair(rng)), ("x/b.h", *random_pair(rng))]
        files = _files(*triples)
        for completion in (pr_oracle_edit(files), oracle_edit(triples[0][1], triples[1][2])):
            assert namespace["pr_patch_reward"](completion, files) == pr_patch_reward(
                completion, files
            )
    assert "pr_patch_reward_fn" in namespace["__all__"]
