"""What a kernel_commits row is worth as a task on its own: ``task_kind`` and its reason.

A row is one file of a perf commit, and read as a task fewer than half stand alone (issue
41: of 20 random rows, 9 carried a kernel optimisation, 4 were host-side perf work, 4 were
fragments of a multi-file change, 3 were unusable). Five kinds, decided in this order:

* ``cosmetic``: the file reads the same on both sides once comments and whitespace are
  dropped (a clang-format pass, comment markers removed).
* ``not_perf``: the title names a feature, fix, migration or removal (``support``, ``fix``,
  ``feat``, ``migrate``, ``delete``, ``error handling``) and no perf outcome or mechanism
  once kernel and mode names are blanked (``perf_filter.without_names``): the title passed
  the perf filter on a word the commit is not about.
* ``kernel_edit``: changed lines inside a GPU kernel (``kernel_body.kernel_body_lines``,
  formatting excluded) or a CPU kernel's function bodies, and either the commit keeps only
  this file or at least ``KERNEL_EDIT_MIN_LINES`` kernel lines change: the optimisation is
  in this file.
* ``fragment``: a small kernel change in a multi-file commit (threaded arguments, a renamed
  or moved helper), or, in a multi-file commit, a C/C++/CUDA header, binding file or host
  change of at most ``FRAGMENT_MAX_LINES`` changed lines (declarations, schema strings,
  parameter plumbing): nothing to learn without the other files.
* ``host_side``: everything else: perf work in the code around kernels (dispatch, copies,
  syncs, allocation, launch parameters).

Measured against 90 rows blind-labelled before this module existed
(``benchmarks/task_kind_blind/``, ``score.py``): the held-out half is the headline.
"""

from __future__ import annotations

import re

import polars as pl

from dagster_project.mining.commits.kernel_body import _normalised, kernel_body_lines
from dagster_project.mining.commits.languages import CPP, CUDA
from dagster_project.mining.commits.perf_filter import without_names

#: Version of the task_kind rule. Bump it whenever its output changes: it is part of the
#: kernel_commits rules version (``mining/versions.py``).
RULES_VERSION = "1"

KINDS = ("kernel_edit", "host_side", "fragment", "cosmetic", "not_perf")
#: Kernel lines that make a change in a multi-file commit carry the optimisation itself.
KERNEL_EDIT_MIN_LINES = 10
#: A C/C++/CUDA host change this small in a multi-file commit is plumbing for the others.
FRAGMENT_MAX_LINES = 30

_HEADER_RE = re.compile(r"\.(h|hpp|hh|cuh|inl)$")
_NOT_PERF_RE = re.compile(
    r"\b(support(s|ed|ing)?|fix(es|ed|ing)?|bug\s*fix\w*|hot\s*fix\w*|feat(ure)?s?"
    r"|migrat\w*|delet\w*|error[\s_-]handling)\b",
    re.IGNORECASE,
)
_PERF_SIGNAL_RE = re.compile(
    r"perf|speed|\bfast|optimi|\bopt\b|latency|throughput|efficien|overhead|accelerat"
    r"|\bfuse[sd]?\b(?!\s)|\bfuse\b|\bfusing\b|vectori|\breduc\w*|\bavoid\w*|persistent"
    r"|split[\s-]?k|boost|\btun(e|ed|ing)\b|memory (usage|footprint|traffic)|\bsync\b",
    re.IGNORECASE,
)


def is_cosmetic(language: str, before_code: str, after_code: str) -> bool:
    """Both sides read the same once comments and all whitespace are dropped."""
    if before_code == after_code:
        return False

    def flat(code: str) -> str:
        return "".join(_normalised(language, line) for line in code.split("\n"))

    return flat(before_code) == flat(after_code)


def not_perf_word(title: str) -> str | None:
    """The feature/fix word a title is about when it names no perf outcome or mechanism."""
    text = without_names(title)
    if _PERF_SIGNAL_RE.search(text):
        return None
    m = _NOT_PERF_RE.search(text)
    return m.group(0).lower() if m else None


def classify(row: dict, files_in_commit: int) -> tuple[str, str]:
    """(task_kind, reason) of one kernel_commits row; ``files_in_commit`` counts the commit's
    kept rows (this one included)."""
    language, before, after = row["language"], row["before_code"], row["after_code"]
    if is_cosmetic(language, before, after):
        return "cosmetic", "only whitespace or comments change"
    word = not_perf_word(row["title"] or "")
    if word is not None:
        return "not_perf", f"title is about '{word}' and names no perf outcome"
    kernel = kernel_body_lines(language, before, after, row["diff"])
    alone = files_in_commit <= 1
    if kernel or row.get("touches_cpu_kernel"):
        size = kernel or int(row.get("lines_changed") or 0)
        if alone or size >= KERNEL_EDIT_MIN_LINES:
            where = "the commit's only file" if alone else f"{size} kernel lines"
            return "kernel_edit", f"kernel code changes ({where})"
        return "fragment", f"{size} kernel lines in a {files_in_commit}-file commit"
    if not alone and language in (CUDA, CPP):
        lines = int(row.get("lines_changed") or 0)
        if row.get("is_binding_file"):
            return "fragment", "binding file of a multi-file commit"
        if _HEADER_RE.search(row["path"]) or lines <= FRAGMENT_MAX_LINES:
            return (
                "fragment",
                f"{lines} host lines outside kernels in a {files_in_commit}-file commit",
            )
    return "host_side", "changes code around kernels, not a kernel body"


def attach_task_kind(rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` with ``task_kind`` and ``task_kind_reason`` for every row."""
    if rows.height == 0:
        return rows.with_columns(
            task_kind=pl.lit(None, dtype=pl.String), task_kind_reason=pl.lit(None, dtype=pl.String)
        )
    per_commit = dict(
        rows.group_by("repo", "sha")
        .len()
        .select(pl.concat_str("repo", "sha", separator="/"), "len")
        .iter_rows()
    )
    cols = ["repo", "sha", "path", "language", "title", "before_code", "after_code", "diff"]
    extra = [
        c for c in ("touches_cpu_kernel", "is_binding_file", "lines_changed") if c in rows.columns
    ]
    kinds, reasons = [], []
    for r in rows.select(*cols, *extra).iter_rows(named=True):
        kind, reason = classify(r, per_commit[f"{r['repo']}/{r['sha']}"])
        kinds.append(kind)
        reasons.append(reason)
    return rows.with_columns(
        task_kind=pl.Series(kinds, dtype=pl.String),
        task_kind_reason=pl.Series(reasons, dtype=pl.String),
    )
