"""The guard around the commit execution reward (issue 35, ``rewards.commit_reward``).

That reward applies a SEARCH/REPLACE completion to a kernel_commits row's before_code and
runs the patched file through the row's harness in its own process
(``commit_exec.sandbox.run_candidate``), which loads ``before`` and the candidate side by
side and takes the verdict from a pipe, tagged with a token the candidate cannot know (a
file the candidate writes, such as a forged ``result.json``, is never read). Wrapped here
from outside (its files are not ours):

* the same ``static`` checks as every guarded patch reward, on what the patch introduces
  (a candidate that writes files, exits early, or reaches the ``before`` module through
  ``sys.modules``, is refused before it runs);
* a ``FAILED_REWARD`` (-1.0) for those, below the reward's own floor (-0.5 for errors);
* everything else is the commit reward's own verdict, unchanged.

What stays open at run time, without static checks, is listed in the exploit suite's
results (``runtime alone``) and on the card.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .static import introduced

FAILED_REWARD = -1.0


@dataclass(frozen=True)
class GuardedCommitResult:
    reward: float
    defence: str
    reason: str
    status: str = ""


def guarded_commit_reward(
    completion: str,
    row: dict[str, Any],
    *,
    runner: Callable[..., Any] | None = None,
    static: bool = True,
    **run_kwargs: Any,
) -> GuardedCommitResult:
    """``rewards.commit_reward`` behind the static checks (``static=False``: the commit
    reward alone, to show what its runtime catches)."""
    from dagster_project.commit_exec.sandbox import run_candidate
    from dagster_project.rewards.commit_reward import (
        MALFORMED_REWARD,
        patched_files,
        reward_from,
    )

    before = str(row["before_code"])
    siblings = dict(run_kwargs.get("siblings") or {})
    got = patched_files(completion, before, str(row.get("path", "")), siblings)
    if got is None:
        return GuardedCommitResult(MALFORMED_REWARD, "patch", "edits do not parse or apply")
    code, edited = got
    if static:
        # every file the completion changed: an edited sibling runs in the candidate's
        # process as much as the row's own file does
        found = introduced(before, code) + [
            f
            for rel, text in edited.items()
            if text != siblings[rel]
            for f in introduced(siblings[rel], text)
        ]
        if found:
            return GuardedCommitResult(FAILED_REWARD, "static", "; ".join(map(str, found[:3])))
    if edited != siblings:
        run_kwargs["candidate_siblings"] = edited
    result = (runner or run_candidate)(row, before, code, **run_kwargs)
    reward = reward_from(result)
    defence = "" if result.status == "ok" else str(result.status)
    return GuardedCommitResult(reward, defence, str(result.detail)[:300], str(result.status))
