"""Sync the PR-body cache in the lake with GitHub (no dagster import).

Rows are flushed to the lake every ``flush_every`` PRs, so a run interrupted half-way
keeps what it fetched and the next run asks only for the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import polars as pl
import requests

from dagster_project.frames import ColumnSchema
from dagster_project.github.prs import PR_ROW_FIELDS, fetch_pull_requests
from dagster_project.storage.lake import Lake
from dagster_project.storage.versions import table_version

BODIES_SCHEMA: dict[str, pl.DataType] = {
    "pr_key": pl.String(),
    "repo": pl.String(),
    "number": pl.Int64(),
    "title": pl.String(),
    "body": pl.String(),
    "state": pl.String(),
    "merged_at": pl.String(),
    "url": pl.String(),
    "fetched_at": pl.String(),
    "etag": pl.String(),
    "status": pl.String(),
    "error": pl.String(),
}


def api_reachable(base_url: str | None, timeout_s: float = 3.0) -> bool:
    """One cheap request: is the REST API there at all? (Offline builds skip fetching.)"""
    url = (base_url or "https://api.github.com").rstrip("/") + "/rate_limit"
    try:
        # Any HTTP answer (even 401/403/5xx) means the API is there; requests raises only
        # when nothing answered (DNS, refused, TLS, timeout).
        requests.get(url, timeout=timeout_s, stream=True).close()
    except requests.RequestException:
        return False
    return True


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                **{k: r.get(k) for k in PR_ROW_FIELDS},
                "pr_key": f"{r['repo']}#{r['number']}",
                "merged_at": None if r.get("merged_at") is None else str(r["merged_at"]),
                "fetched_at": None if r.get("fetched_at") is None else str(r["fetched_at"]),
            }
            for r in rows
        ],
        schema=BODIES_SCHEMA,
    )


def _flush(lake: Lake, buffer: list[dict[str, Any]]) -> int:
    """Write buffered rows (one transaction) and empty the buffer; returns rows written."""
    n = len(buffer)
    if n:
        df = _frame(buffer)
        lake.replace_rows("raw", "pr_bodies", df, "pr_key", df["pr_key"].to_list())
        buffer.clear()
    return n


def sync_pr_bodies(
    lake: Lake,
    needed: pl.DataFrame,
    slugs: dict[str, str],
    *,
    token: str | None,
    base_url: str | None,
    offline: bool,
    stale_after: timedelta | None = timedelta(days=30),
    flush_every: int = 25,
    on_progress: Callable[[Any], None] | None = None,
) -> dict[str, int]:
    """Fetch missing/stale PR bodies into ``raw.pr_bodies``; returns counters."""
    cached_df = lake.read_table_or_none("raw", "pr_bodies")
    counters = {"needed": needed.height, "fetched": 0, "missing": 0, "error": 0, "flushed": 0}
    for repo, slug in slugs.items():
        numbers = needed.filter(pl.col("repo") == repo)["number"].to_list()
        if not numbers:
            continue
        cached = {}
        if cached_df is not None and cached_df.height:
            cached = {
                int(r["number"]): r
                for r in cached_df.filter(pl.col("repo") == repo).iter_rows(named=True)
            }
        buffer: list[dict[str, Any]] = []
        try:
            for row in fetch_pull_requests(
                slug,
                numbers,
                cached,
                token=token,
                base_url=base_url,
                stale_after=stale_after,
                on_progress=on_progress,
                offline=offline,
                repo=repo,
            ):
                status = row.get("status") or "error"
                counters[
                    "fetched" if status == "ok" else status if status in counters else "error"
                ] += 1
                buffer.append(row)
                if len(buffer) >= flush_every:
                    counters["flushed"] += _flush(lake, buffer)
        finally:
            counters["flushed"] += _flush(lake, buffer)  # keep what we have, even on error
    bodies = lake.read_table_or_none("raw", "pr_bodies")
    have = (
        set()
        if bodies is None
        else {
            (r[0], r[1])
            for r in bodies.filter(pl.col("status") == "ok").select("repo", "number").iter_rows()
        }
    )
    counters["cached_ok"] = len(have)
    counters["still_missing"] = sum(1 for r in needed.iter_rows() if (r[0], r[1]) not in have)
    return counters


#: raw.pr_bodies columns that are content: fetch times and ETags are bookkeeping, so a
#: re-fetch that changed only those is not new data (the data version ignores them).
CONTENT_COLUMNS = ("pr_key", "title", "body", "state", "merged_at", "status")

#: The tables whose (repo, pr_number) pairs are the PRs the datasets need.
NEEDED_FROM = ("derived.config_attribution", "raw.kernel_commit_files")


def refresh_pr_bodies(
    lake: Lake,
    *,
    token: str | None,
    base_url: str | None,
    log: Callable[[str], None],
    warn: Callable[[str], None],
) -> tuple[str, dict[str, Any]]:
    """Fetch the missing or stale bodies of every PR the built tables reference (without
    network, keep the cache); the table's content fingerprint and the asset's metadata."""
    from dagster_project.gains.pipeline import pr_numbers_needed
    from dagster_project.settings import GITHUB_SLUGS

    # Only the PR columns: kernel_commit_files also holds every file's code and diff.
    needed = pr_numbers_needed(
        *(
            lake.query(f"SELECT DISTINCT repo, pr_number FROM {table}")
            if lake.table_exists(*table.split("."))
            else None
            for table in NEEDED_FROM
        )
    )
    offline = not api_reachable(base_url)
    if offline:
        warn("GitHub API unreachable: materialising from the cached PR bodies only")

    def progress(ev: Any) -> None:
        if ev.event in ("rate_limited", "retrying"):
            log(f"PR #{ev.number}: {ev.event}, waiting {ev.wait_s:.0f}s ({ev.done}/{ev.total})")
        elif ev.done and ev.done % 50 == 0:
            log(f"PR bodies: {ev.done}/{ev.total}")

    counters = sync_pr_bodies(
        lake,
        needed,
        GITHUB_SLUGS,
        token=token,
        base_url=base_url,
        offline=offline,
        on_progress=progress,
    )
    if lake.table_exists("raw", "pr_bodies"):
        n = lake.query("SELECT count(*) AS n FROM raw.pr_bodies")["n"][0]
    else:
        lake.replace_table("raw", "pr_bodies", pl.DataFrame(schema=BODIES_SCHEMA))
        n = 0
    version = table_version(lake, "raw.pr_bodies", columns=CONTENT_COLUMNS)
    return version, {
        "dagster/row_count": int(n),
        "dagster/column_schema": ColumnSchema("raw.pr_bodies"),
        "offline": offline,
        **{k: int(v) for k, v in counters.items()},
    }
