"""The execution reward of a kernel_commits row (issue 35; here with the other rewards, the
harness it runs in stays in ``commit_exec``): apply the policy's SEARCH/REPLACE edits to
``before_code``, run the patched file through the row's harness in its own process
(``sandbox.run_candidate``: fresh random shapes, outputs checked against ``before``, timed
against ``before``) and score:

* ``MALFORMED_REWARD`` (-1) when the edits do not parse or do not apply (``rewards.patch``'s
  parser and applier, the same ones the text reward uses);
* ``ERROR_REWARD`` (-0.5) when the candidate does not import, raises, crashes or times out;
* ``WRONG_REWARD`` (0) when any output or mutated tensor differs beyond the spec's tolerance;
* else ``speedup_reward(e)`` where ``e`` is the measured speedup when its 95% CI excludes 1
  and 1.0 otherwise: ``min(1, CORRECT_REWARD + max(-0.25, log2(e) / 2))``, so a correct
  candidate with no significant change (the unchanged ``before_code`` among them) scores
  ``CORRECT_REWARD`` (0.1), 2x scores 0.6, >= ~3x scores 1, a significant 2x slowdown -0.15.
  Monotone in the significant speedup.

Where no CUDA GPU is present, ``time_it`` is off and a correct candidate scores
``CORRECT_REWARD``. ``REWARD_VERSION`` is stored with any reward that reaches a table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dagster_project.commit_exec.sandbox import CandidateResult, run_candidate
from dagster_project.rewards.patch import (
    EditDoesNotApply,
    MalformedEdit,
    apply_edits,
    parse_search_replace,
    strip_reasoning,
)

#: 2 (stop 42): the speedup is read in the label's scope (host wall time where the graph
#: captured nothing, ``stats.label_scope``), and a row's spec siblings run as real modules.
REWARD_VERSION = "2"
MALFORMED_REWARD = -1.0
ERROR_REWARD = -0.5
WRONG_REWARD = 0.0
CORRECT_REWARD = 0.1

_ERRORS = frozenset({"import_error", "run_error", "timeout", "crashed", "no_spec"})


def speedup_reward(effective_speedup: float) -> float:
    """The reward of a correct candidate whose significant speedup is ``effective_speedup``."""
    return min(1.0, CORRECT_REWARD + max(-0.25, math.log2(effective_speedup) / 2))


def reward_from(result: CandidateResult) -> float:
    """Score one sandbox result (see the module docstring)."""
    if result.status in _ERRORS:
        return ERROR_REWARD
    if result.status == "wrong_output":
        return WRONG_REWARD
    if result.status != "ok":
        return ERROR_REWARD
    if result.significant and result.speedup:
        return speedup_reward(result.speedup)
    return CORRECT_REWARD


def patched(completion: str, before_code: str) -> str | None:
    """before_code with the completion's edits applied, or None (malformed/non-applying)."""
    try:
        edits = parse_search_replace(strip_reasoning(completion))
        if not edits:
            return None
        return apply_edits(before_code, edits)
    except (MalformedEdit, EditDoesNotApply):
        return None


def execution_reward(
    completion: str,
    row: dict[str, Any],
    *,
    runner: Callable[..., CandidateResult] = run_candidate,
    **run_kwargs: Any,
) -> float:
    """The reward of one completion for one executed kernel_commits row (``row`` holds
    ``id``, ``repo``, ``sha``, ``path``, ``before_code``)."""
    code = patched(completion, row["before_code"])
    if code is None:
        return MALFORMED_REWARD
    return reward_from(runner(row, row["before_code"], code, **run_kwargs))


def execution_reward_fn(
    completions: Sequence[Any],
    before_code: Sequence[str],
    id: Sequence[str],  # noqa: A002 - the dataset column's name
    repo: Sequence[str],
    sha: Sequence[str],
    path: Sequence[str],
    repos: Path | None = None,
    **kwargs: Any,
) -> list[float]:
    """TRL ``GRPOTrainer`` reward over a batch of kernel_commits rows (needs a CUDA GPU for
    timing; other columns and trainer arguments are ignored). ``repos`` is the folder of
    ``<repo>.git`` clones the rows' sibling modules are read from (default: the lake's,
    ``KERNELHOUSE_HOME/repos``; bind another with ``functools.partial``); a row whose spec
    imports siblings runs only with them, and without its clone raises FileNotFoundError
    naming it."""
    from dagster_project.commit_exec.materialise import sibling_texts
    from dagster_project.rewards.trl import completion_text

    if repos is None:
        from dagster_project.settings import load_settings

        repos = load_settings().repos_dir
    return [
        execution_reward(
            completion_text(c),
            {"id": i, "repo": r, "sha": s, "path": p, "before_code": b},
            siblings=sibling_texts(repos, r, s, p),
        )
        for c, b, i, r, s, p in zip(completions, before_code, id, repo, sha, path, strict=True)
    ]
