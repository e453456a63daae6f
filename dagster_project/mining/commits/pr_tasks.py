"""``datasets.pr_tasks``: kernel_commits seen one pull request at a time (issue 41).

Why: a kernel_commits row is one file of a commit, and many rows are fragments of a
multi-file change (a binding declaration, a prototype removed from a header, a helper added
beside the kernel) with nothing to learn alone. Here one row is one commit (in these
repositories a squash-merged PR: no PR number spans two kept commits), with every kept file
of it: its ``before_code``/``after_code`` per file and one prompt that shows them all and
asks for SEARCH/REPLACE blocks naming their files, so a fragment is learnt in the context of
the change it belongs to. The reward is ``rewards.pr_patch`` (the single-file reward's
format and score, extended to several files).

The rows are built from ``datasets.kernel_commits`` itself, never re-mined: the same kept
files (same licence, size and language filters), the same mentions, and the same temporal
split, which is assigned per PR there (``split.assign_temporal_split``), so a task is in the
split of all its rows; a commit whose rows disagree is refused rather than split. No dagster
import.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import polars as pl

from dagster_project.mining.commits.perf_filter import pr_title
from dagster_project.mining.commits.prompt import (
    _FENCE_LANG,
    DIVIDER,
    REPLACE_MARK,
    SEARCH_MARK,
    _fence,
    _listing,
)

#: Version of the PR-task view (grouping, columns, prompt). Bump it whenever its output
#: changes: it is the ``pr_tasks`` asset's code version (``mining/versions.py``).
RULES_VERSION = "1"

#: One file of a task, as stored in the ``files`` column (a list of these structs).
FILE_FIELDS: tuple[str, ...] = (
    "row_id",
    "path",
    "language",
    "license",
    "before_code",
    "after_code",
    "lines_changed",
    "touches_kernel_body",
    "touches_cpu_kernel",
    "is_binding_file",
)

#: Per-commit columns of kernel_commits, equal on every row of a commit (first one taken).
_COMMIT_COLUMNS = (
    "repo",
    "sha",
    "pr_number",
    "pr_url",
    "title",
    "rule",
    "authored_at",
    "split",
    "pr_body",
    "gains",
    "kernel_speedup",
    "e2e_speedup",
    "reverted_by",
)

#: Per-file mention lists, merged over the files in first-seen order.
_MERGED_LISTS = ("models_mentioned", "hardware_mentioned", "speedup_claims", "hardware_from_code")


class SplitStraddle(ValueError):
    """A commit's kernel_commits rows are in both splits (the split rule was broken)."""


def task_id(repo: str, sha: str) -> str:
    """A task's id: the repository and the full commit sha (one task per commit)."""
    return f"{repo}@{sha}"


def _merged(lists: Iterable[Sequence[str] | None]) -> list[str]:
    return list(dict.fromkeys(item for values in lists for item in (values or ())))


def build_pr_prompt(
    title: str,
    hardware: Sequence[str] | None,
    models: Sequence[str] | None,
    files: Sequence[tuple[str, str, str]],
) -> str:
    """The prompt of a PR task: the goal, the target and every file as ``(path, language,
    before_code)``, then the answer format of the single-file prompt with a required
    ``### path`` line per block (the reward needs it to know which file a block edits)."""
    goal = pr_title(title)
    listed = []
    for number, (path, language, before) in enumerate(files, start=1):
        fence = _fence(before)
        tag = _FENCE_LANG.get(language, "")
        code = before if before.endswith("\n") or not before else before + "\n"
        listed.append(
            f"## File {number} of {len(files)}: `{path}` ({language})\n"
            f"{fence}{tag}\n{code}{fence}\n\n"
        )
    first = files[0][0] if files else "path/to/file"
    kinds = _listing(sorted({language for _p, language, _b in files}), "kernel")
    return (
        f"You are optimising the {kinds} kernel code of an LLM inference engine; the change "
        f"spans {len(files)} file{'s' if len(files) != 1 else ''}.\n\n"
        f"## Goal\n{goal}\n\n"
        f"## Target\n"
        f"- Hardware: {_listing(hardware, 'not stated')}\n"
        f"- Models: {_listing(models, 'not stated')}\n\n" + "".join(listed) + "## How to answer\n"
        "Change the files so that together they achieve the goal. Answer only with one or "
        "more SEARCH/REPLACE edits in this exact format, each preceded by the path of the "
        "file it edits:\n\n"
        f"### {first}\n"
        f"{SEARCH_MARK}\n"
        "lines copied exactly from that file, including indentation\n"
        f"{DIVIDER}\n"
        "the new lines that replace them\n"
        f"{REPLACE_MARK}\n\n"
        "Every block needs its own `### path` line naming one of the files above. Each "
        "SEARCH block must match its file exactly and only once; the blocks of one file are "
        "applied in order. Leave out files that need no change. Do not repeat whole files.\n"
    )


def _file_struct(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "row_id": row["id"],
        **{name: row.get(name) for name in FILE_FIELDS if name != "row_id"},
    }


def _duplicate_task(
    files: list[dict[str, Any]], dup_of: dict[str, str | None], owner: dict[str, str]
) -> str | None:
    """The earlier task every file of this one duplicates (a reland of a whole PR), else None."""
    earlier: set[str | None] = set()
    for f in files:
        row = dup_of.get(f["row_id"])
        earlier.add(owner.get(row) if row else None)
    return next(iter(earlier)) if len(earlier) == 1 else None


def _task(
    rows: list[dict[str, Any]], dup_of: dict[str, str | None], owner: dict[str, str]
) -> dict[str, Any]:
    rows = sorted(rows, key=lambda r: r["path"])
    splits = {r["split"] for r in rows}
    if len(splits) != 1:
        first = rows[0]
        raise SplitStraddle(f"{first['repo']}@{first['sha']} has rows in splits {sorted(splits)}")
    head = rows[0]
    merged = {name: _merged(r.get(name) for r in rows) for name in _MERGED_LISTS}
    files = [_file_struct(r) for r in rows]
    return {
        "id": task_id(head["repo"], head["sha"]),
        **{name: head.get(name) for name in _COMMIT_COLUMNS},
        "n_files": len(rows),
        "paths": [r["path"] for r in rows],
        "languages": sorted({r["language"] for r in rows}),
        "licenses": sorted({r["license"] for r in rows}),
        "lines_changed": sum(int(r["lines_changed"] or 0) for r in rows),
        "touches_kernel_body": any(bool(r["touches_kernel_body"]) for r in rows),
        "touches_cpu_kernel": any(bool(r["touches_cpu_kernel"]) for r in rows),
        **merged,
        "duplicate_of": _duplicate_task(files, dup_of, owner),
        "files": files,
        "prompt": build_pr_prompt(
            head["title"],
            merged["hardware_mentioned"],
            merged["models_mentioned"],
            [(r["path"], r["language"], r["before_code"]) for r in rows],
        ),
    }


def _schema(commits: pl.DataFrame) -> dict[str, pl.DataType]:
    """The table's schema, column types taken from kernel_commits where they come from it."""
    src = commits.schema
    file_struct = pl.Struct({name: src["id" if name == "row_id" else name] for name in FILE_FIELDS})
    listed = pl.List(pl.String())
    return {
        "id": pl.String(),
        **{name: src[name] for name in _COMMIT_COLUMNS},
        "n_files": pl.Int64(),
        "paths": listed,
        "languages": listed,
        "licenses": listed,
        "lines_changed": pl.Int64(),
        "touches_kernel_body": pl.Boolean(),
        "touches_cpu_kernel": pl.Boolean(),
        **{name: listed for name in _MERGED_LISTS},
        "duplicate_of": pl.String(),
        "files": pl.List(file_struct),
        "prompt": pl.String(),
    }


def pr_tasks_frame(commits: pl.DataFrame) -> pl.DataFrame:
    """One row per (repo, sha) of ``datasets.kernel_commits``, oldest first (then by id).

    Raises ``SplitStraddle`` when a commit's rows are in both splits."""
    schema = _schema(commits)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in commits.iter_rows(named=True):
        groups.setdefault((row["repo"], row["sha"]), []).append(row)
    owner = {r["id"]: task_id(r["repo"], r["sha"]) for rs in groups.values() for r in rs}
    dup_of = dict(zip(commits["id"], commits["duplicate_of"], strict=True))
    tasks = [_task(rows, dup_of, owner) for rows in groups.values()]
    return pl.DataFrame(tasks or None, schema=schema).sort("authored_at", "id")


def files_per_task(tasks: pl.DataFrame) -> dict[str, int]:
    """How many tasks have 1, 2, … files (keys as text, for metadata and the card)."""
    counts = tasks.group_by("n_files").len().sort("n_files")
    return {str(n): int(c) for n, c in counts.iter_rows()}
