r"""Multi-file SEARCH/REPLACE reward for ``pr_tasks``: one pull request, all its kept files.

Only the standard library is used, because this file is also shipped inside the
published ``code/reward.py`` (see ``rewards.export``), after ``patch`` and ``trl``, whose
parser, applier and changed-line diff it reuses unchanged: the single-file reward of
``kernel_commits`` is untouched, and a one-file PR scores here exactly as its row does
there.

Edit format
-----------
The blocks are ``patch``'s, and each names the file it edits on a ``### path`` line right
before it (fences and blank lines may come between)::

    ### csrc/ops.h
    <<<<<<< SEARCH
    ...
    >>>>>>> REPLACE
    ### csrc/kernel.cu
    <<<<<<< SEARCH
    ...
    >>>>>>> REPLACE

A path applies to the one block after it, so two blocks of one file carry the path twice.
A block without a path is allowed only when the task has a single file (as in
``kernel_commits``). A path is matched to the task's files exactly, then with surrounding
backticks and a leading ``./``, ``a/`` or ``b/`` removed (how diffs and chat models write
paths); a block whose path matches no file of the task makes the completion score -1,
because an edit to a file the task does not hold cannot be scored.

Applying and scoring
--------------------
The blocks of each file are applied in their order to that file's ``before_code`` by
``patch.apply_edits``; files without a block stay as they are. ``pr_patch_reward`` is
``-1.0`` when the completion is malformed, a block names no file (several files) or an
unknown file, or a SEARCH does not match exactly once in its file. Otherwise it is::

    difflib.SequenceMatcher(None, P, R).ratio()

where ``R`` lists, file by file in the task's order, each line of
``changed_lines(before, after)`` paired with its path, and ``P`` the same for the
predicted files. The path in each element means a right line in the wrong file does not
count; the file order is the task's, so the order of the blocks does not matter. A
prediction that reproduces every ``after_code`` scores exactly 1.0, and for one file the
score equals ``patch_similarity`` (every element carries the same path).

Oracle
------
``pr_oracle_edit(files)`` is ``patch.oracle_edit`` of each file, with its path, in the
task's order: it rebuilds every ``after_code`` byte for byte and scores 1.0, except where a
file holds a line that reads exactly like a block marker (then that file, and with it the
PR, scores -1 for every rendering, as its row does in ``kernel_commits``).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from .patch import (
    MALFORMED_REWARD,
    Edit,
    EditDoesNotApply,
    MalformedEdit,
    apply_edits,
    changed_lines,
    oracle_edit,
    parse_search_replace,
)
from .trl import completion_text

__all__ = [
    "PrFile",
    "apply_pr_edits",
    "pr_files",
    "pr_oracle_edit",
    "pr_patch_reward",
    "pr_patch_reward_fn",
    "pr_patch_similarity",
    "resolve_pr_path",
]

#: Prefixes a model or a diff may put in front of a repository path.
_PATH_PREFIXES = ("./", "a/", "b/")

#: One file of a task: (path, before_code, after_code).
PrFile = tuple[str, str, str]


def pr_files(files: Any) -> tuple[PrFile, ...]:
    """The task's files as ``(path, before_code, after_code)`` tuples.

    ``files`` is the ``files`` column of one row: a list of mappings with ``path``,
    ``before_code`` and ``after_code`` (what ``datasets`` yields), or of such tuples.
    """
    out: list[PrFile] = []
    for item in files or ():
        if isinstance(item, Mapping):
            out.append((str(item["path"]), str(item["before_code"]), str(item["after_code"])))
        else:
            path, before, after = item
            out.append((str(path), str(before), str(after)))
    return tuple(out)


def resolve_pr_path(named: str | None, paths: Sequence[str]) -> str:
    """The task path a block's ``### path`` line names; ``MalformedEdit`` when none does.

    No path is accepted only for a one-file task. Matching is exact, then after removing
    backticks and one leading ``./``, ``a/`` or ``b/``; a basename alone never matches
    (it can name several files of a PR)."""
    if named is None:
        if len(paths) == 1:
            return paths[0]
        raise MalformedEdit("a block has no ### path line and the task has several files")
    if named in paths:
        return named
    bare = named.strip().strip("`").strip()
    candidates = [bare, *(bare[len(p) :] for p in _PATH_PREFIXES if bare.startswith(p))]
    for candidate in candidates:
        if candidate in paths:
            return candidate
    raise MalformedEdit(f"a block names {named!r}, which is not a file of this task")


def apply_pr_edits(files: Sequence[PrFile], edits: Sequence[Edit]) -> dict[str, str]:
    """Each file's text after its blocks (path -> text, every file of the task).

    Raises ``MalformedEdit`` for a block naming no file or an unknown one and
    ``EditDoesNotApply`` for a SEARCH that does not match exactly once in its file."""
    paths = [path for path, _before, _after in files]
    grouped: dict[str, list[Edit]] = {}
    for edit in edits:
        grouped.setdefault(resolve_pr_path(edit.path, paths), []).append(edit)
    return {
        path: apply_edits(before, grouped[path]) if path in grouped else before
        for path, before, _after in files
    }


def _tagged_changes(path: str, before: str, after: str) -> list[tuple[str, str]]:
    return [(path, line) for line in changed_lines(before, after)]


@functools.lru_cache(maxsize=128)
def _pr_reference(files: tuple[PrFile, ...]) -> tuple[tuple[str, str], ...]:
    """The real PR's changed lines with their paths, cached: GRPO scores a group per prompt."""
    out: list[tuple[str, str]] = []
    for path, before, after in files:
        out.extend(_tagged_changes(path, before, after))
    return tuple(out)


def pr_patch_similarity(files: Sequence[PrFile], predicted: Mapping[str, str]) -> float:
    """Similarity in [0, 1] of the predicted files' changed lines to the real PR's."""
    task = tuple(files)
    if all(predicted.get(path) == after for path, _before, after in task):
        return 1.0
    reference = list(_pr_reference(task))
    guess: list[tuple[str, str]] = []
    for path, before, _after in task:
        guess.extend(_tagged_changes(path, before, predicted.get(path, before)))
    return difflib.SequenceMatcher(None, guess, reference).ratio()


def pr_patch_reward(completion: str, files: Any, **kwargs: object) -> float:
    """Reward of one completion for one PR task: -1.0 if malformed, naming no or an unknown
    file, or not applying; else the similarity. Other dataset columns are ignored."""
    task = pr_files(files)
    if not task:
        return MALFORMED_REWARD
    try:
        predicted = apply_pr_edits(task, parse_search_replace(completion))
    except (MalformedEdit, EditDoesNotApply):
        return MALFORMED_REWARD
    return pr_patch_similarity(task, predicted)


def pr_oracle_edit(files: Any) -> str:
    """The reference completion of a PR task: each file's oracle blocks under its path."""
    return "".join(oracle_edit(before, after, path) for path, before, after in pr_files(files))


def pr_patch_reward_fn(
    completions: Sequence[Any], files: Sequence[Any], **kwargs: Any
) -> list[float]:
    """``pr_patch_reward`` over a TRL ``GRPOTrainer`` batch (``files`` is the dataset
    column, one entry per completion); other columns and trainer arguments are ignored."""
    if isinstance(files, str | bytes) or len(files) != len(completions):
        raise ValueError(f"column 'files' does not line up with {len(completions)} completions")
    return [pr_patch_reward(completion_text(c), f) for c, f in zip(completions, files, strict=True)]
