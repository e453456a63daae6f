"""The task prompt of a kernel_commits row (SWE-RL style).

The PR title plays the role of the issue: it states the goal ("Vectorize static INT8
quant kernels") without giving the solution. The target hardware and models narrow the
deployment. The full before_code is included, because the edit format below must quote
lines of it exactly. The PR body is never included: it usually describes the fix itself.

The answer format is SEARCH/REPLACE blocks, which is what the reward parses::

    ### path/to/file.cu
    <<<<<<< SEARCH
    lines copied exactly from the file
    =======
    the lines that replace them
    >>>>>>> REPLACE

The ``### path`` line is optional (there is one file per task).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dagster_project.mining.commits.perf_filter import pr_title

#: Version of the commit prompt. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "1"

SEARCH_MARK = "<<<<<<< SEARCH"
DIVIDER = "======="
REPLACE_MARK = ">>>>>>> REPLACE"

_FENCE_LANG = {"CUDA": "cuda", "C++": "cpp", "Triton": "python", "CuTe DSL": "python"}


def _fence(code: str) -> str:
    """A backtick fence longer than any backtick run inside the code (never closes early)."""
    if "```" not in code:
        return "```"
    longest = max(len(m) for m in re.findall(r"`{3,}", code))
    return "`" * (longest + 1)


def _listing(items: Sequence[str] | None, fallback: str) -> str:
    return ", ".join(items) if items else fallback


def build_prompt(
    title: str,
    hardware: Sequence[str] | None,
    models: Sequence[str] | None,
    path: str,
    language: str,
    before_code: str,
) -> str:
    """The prompt for optimising ``before_code`` toward the goal stated by ``title``."""
    goal = pr_title(title)
    fence = _fence(before_code)
    tag = _FENCE_LANG.get(language, "")
    code = before_code if before_code.endswith("\n") or not before_code else before_code + "\n"
    return (
        f"You are optimising a {language} kernel file of an LLM inference engine.\n\n"
        f"## Goal\n{goal}\n\n"
        f"## Target\n"
        f"- Hardware: {_listing(hardware, 'not stated')}\n"
        f"- Models: {_listing(models, 'not stated')}\n\n"
        f"## File `{path}`\n"
        f"{fence}{tag}\n{code}{fence}\n\n"
        "## How to answer\n"
        "Change the file so that it achieves the goal. Answer only with one or more "
        "SEARCH/REPLACE edits in this exact format:\n\n"
        f"### {path}\n"
        f"{SEARCH_MARK}\n"
        "lines copied exactly from the current file, including indentation\n"
        f"{DIVIDER}\n"
        "the new lines that replace them\n"
        f"{REPLACE_MARK}\n\n"
        "Each SEARCH block must match the current file exactly and only once; blocks are "
        "applied in order. The `### path` line is optional. Do not repeat the whole file.\n"
    )
