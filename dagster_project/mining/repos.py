"""One engine repository: clone or fetch it and record its head in ``raw.repo_heads``.

The ``repo_clone`` asset is a wrapper around ``refresh_repo``; the message of an
unreachable source (which variable, its value, the git error and the offline fix) is
written here once. No dagster import.
"""

from __future__ import annotations

import time
from typing import Any

import polars as pl

from dagster_project.frames import ColumnSchema
from dagster_project.mining.git import GitError, clone_or_fetch
from dagster_project.settings import DEFAULT_SOURCES, Settings, validate_sources
from dagster_project.storage.lake import Lake


class SourceUnreachable(RuntimeError):
    """The repository source could not be cloned or fetched; the message says how to fix it."""


def refresh_repo(lake: Lake, settings: Settings, repo: str) -> tuple[str, dict[str, Any]]:
    """Clone or fetch ``KERNELHOUSE_<REPO>_SOURCE`` into the home, upsert its head row, and
    return the head sha (the asset's data version: a fetch that found the same head is
    no new data) with the asset's metadata."""
    validate_sources(settings, (repo,))
    source = settings.sources[repo]
    try:
        res = clone_or_fetch(source, settings.repo_dir(repo), ref=settings.refs[repo])
    except GitError as exc:
        name = settings.env_name(repo)
        raise SourceUnreachable(
            f"{name}={source!r} could not be reached: {exc}. "
            f"Without network, point {name} at a local clone "
            f"(a path or file:// URL); default is {DEFAULT_SOURCES[repo]}."
        ) from exc
    row = pl.DataFrame(
        {
            "repo": [repo],
            "source": [source],
            "ref": [settings.refs[repo] or "HEAD"],
            "head_sha": [res.head_sha],
            "head_date": [res.head_date],
            "commit_count": [res.commit_count],
            "partial_clone": [res.partial],
            "action": [res.action],
            "fetched_at": [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(res.fetched_at))],
        }
    )
    lake.replace_rows("raw", "repo_heads", row, "repo", [repo])
    return res.head_sha, {
        "head_sha": res.head_sha,
        "head_date": res.head_date,
        "commit_count": res.commit_count,
        "action": res.action,
        "seconds": round(res.seconds, 2),
        "dagster/row_count": 1,
        "dagster/column_schema": ColumnSchema("raw.repo_heads"),
    }
