"""Incremental kernel_commits mining against the lake (no dagster import).

Per repo, ``raw.mining_watermarks`` holds the last mined (effective) head. A refresh
mines only ``watermark..head``; a head equal to the watermark does no git work at all;
a watermark that is no longer an ancestor of the head (history rewritten upstream) wipes
that repo's rows and re-mines it from scratch rather than mixing two histories.

Tables: ``raw.perf_commits`` (one row per perf commit), ``raw.kernel_commit_files`` (one
row per kept kernel file), ``raw.kernel_commit_excluded`` (every dropped file, with the
reason) and ``raw.kernel_commit_mined`` (commits whose files were mined), all keyed by
repo and replaced per repo in one transaction each.

Rules: the watermark also stores the version of the rules ``perf_commits`` applies
(``mining.versions``), and every mined commit the version of the file rules it was mined
under. A stored version unlike the current one re-mines (mode ``rules_changed``, with the
rules that changed in ``changed_rules``); rows of an older rule never stay behind.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import polars as pl

from dagster_project.mining.commits.mentions import extract_mentions
from dagster_project.mining.commits.mine import (
    EXCLUDED_SCHEMA,
    PERF_COMMITS_SCHEMA,
    ROWS_SCHEMA,
    attach_reverts,
    effective_head,
    find_perf_commits,
    mine_commit_files,
    needs_full_remine,
)
from dagster_project.mining.commits.prompt import build_prompt
from dagster_project.mining.commits.reverts import duplicate_ids, reland_roots
from dagster_project.mining.commits.specs import RepoSpec
from dagster_project.mining.commits.split import TEST_FRACTION, assign_temporal_split
from dagster_project.mining.git import GitRepo
from dagster_project.mining.rule_versions import changed_rules
from dagster_project.storage.lake import Lake

#: Version of the kernel_commits row assembly (reverts, duplicates, mentions). Bump it
#: whenever mined output changes: it is part of the miner version (``mining/versions.py``);
#: a bump re-mines.
RULES_VERSION = "3"

MINED_SCHEMA = {"repo": pl.String(), "sha": pl.String(), "rules_version": pl.String()}
WATERMARK_SCHEMA = {
    "repo": pl.String(),
    "head": pl.String(),
    "mined_at": pl.String(),
    "mode": pl.String(),
    "rules_version": pl.String(),
}


def _repo_rows(lake: Lake, table: str, repo: str, schema: dict) -> pl.DataFrame:
    df = lake.read_table_or_none("raw", table)
    if df is None or not df.height:
        return pl.DataFrame(schema=schema)
    return df.filter(pl.col("repo") == repo)


def watermark(lake: Lake, repo: str) -> str | None:
    return watermark_row(lake, repo)[0]


def watermark_row(lake: Lake, repo: str) -> tuple[str | None, str | None]:
    """(head, rules version) stored for ``repo``; (None, None) before the first run."""
    df = _repo_rows(lake, "mining_watermarks", repo, WATERMARK_SCHEMA)
    if not df.height:
        return None, None
    version = df["rules_version"][0] if "rules_version" in df.columns else None
    return str(df["head"][0]), None if version is None else str(version)


def refresh_perf_commits(
    lake: Lake, git: GitRepo, spec: RepoSpec, repo: str, head: str, *, rules: str
) -> dict[str, Any]:
    """Mine new perf commits of ``repo`` up to ``head`` under ``rules`` (the asset's code
    version, ``versions.asset_code_version("perf_commits")``: the caller passes it, since
    ``versions`` imports this module); returns counters for metadata."""
    started = time.monotonic()
    target = effective_head(git, spec, head)
    old, old_rules = watermark_row(lake, repo)
    changed = changed_rules(old_rules, rules) if old is not None else []
    if old == target and not changed:
        total = _repo_rows(lake, "perf_commits", repo, PERF_COMMITS_SCHEMA).height
        return {
            "mode": "noop",
            "head": target,
            "new_commits": 0,
            "total_commits": total,
            "seconds": 0.0,
            "rules_version": rules,
        }
    full = old is None or bool(changed) or needs_full_remine(git, old, target)
    mode = (
        "full"
        if old is None
        else ("rules_changed" if changed else ("remine" if full else "incremental"))
    )
    new = find_perf_commits(git, spec, head=target, since=None if full else old)
    if full:
        merged = new
    else:
        prev = _repo_rows(lake, "perf_commits", repo, PERF_COMMITS_SCHEMA)
        merged = pl.concat(
            [prev.filter(~pl.col("sha").is_in(new["sha"].implode())), new], how="diagonal_relaxed"
        )
    # A revert can land long after its target: on an increment, re-derive every row's
    # reverted_by (one message-only git log); a full mine resolved them in its own log.
    if not full:
        merged = attach_reverts(
            git,
            target,
            merged.drop("reverted_by", strict=False).with_columns(
                reverted_by=pl.lit(None, dtype=pl.Utf8)
            ),
        )
    lake.replace_rows(
        "raw",
        "perf_commits",
        merged if merged.height else pl.DataFrame(schema=PERF_COMMITS_SCHEMA),
        "repo",
        [repo],
    )
    # The watermark moves last: a crash before this line re-does the same range.
    lake.replace_rows(
        "raw",
        "mining_watermarks",
        pl.DataFrame(
            [
                {
                    "repo": repo,
                    "head": target,
                    "mined_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "mode": mode,
                    "rules_version": rules,
                }
            ],
            schema=WATERMARK_SCHEMA,
        ),
        "repo",
        [repo],
    )
    out = {
        "mode": mode,
        "head": target,
        "previous_head": old or "",
        "new_commits": new.height,
        "total_commits": merged.height,
        "seconds": round(time.monotonic() - started, 2),
        "rules_version": rules,
    }
    if changed:
        out["changed_rules"] = "; ".join(changed)
    return out


def refresh_commit_files(
    lake: Lake, git: GitRepo, spec: RepoSpec, repo: str, *, rules: str
) -> dict[str, Any]:
    """Mine the files of perf commits not mined yet under ``rules`` (the asset's code
    version, passed by the caller); drop rows whose commit vanished."""
    started = time.monotonic()
    commits = _repo_rows(lake, "perf_commits", repo, PERF_COMMITS_SCHEMA)
    done = _repo_rows(lake, "kernel_commit_mined", repo, MINED_SCHEMA)
    if "rules_version" not in done.columns:  # a lake mined before versions were recorded
        done = done.with_columns(rules_version=pl.lit(None, dtype=pl.String()))
    # Commits mined under other file rules count as not mined: re-mined, never kept.
    older = done.filter(pl.col("rules_version").is_null() | (pl.col("rules_version") != rules))
    changed = sorted(
        {c for v in older["rules_version"].unique().to_list() for c in changed_rules(v, rules)}
    )
    done = done.filter(pl.col("rules_version") == rules)
    live = commits["sha"].implode()
    todo = commits.filter(~pl.col("sha").is_in(done["sha"].implode()))
    old_rows = _repo_rows(lake, "kernel_commit_files", repo, ROWS_SCHEMA).filter(
        pl.col("sha").is_in(live)
    )
    old_exc = _repo_rows(lake, "kernel_commit_excluded", repo, EXCLUDED_SCHEMA).filter(
        pl.col("sha").is_in(live)
    )
    vanished = done.height - done.filter(pl.col("sha").is_in(live)).height
    if todo.height == 0 and vanished == 0:
        return {
            "mined_commits": 0,
            "new_rows": 0,
            "rows": old_rows.height,
            "seconds": 0.0,
            "rules_version": rules,
        }
    rows, excluded = (
        mine_commit_files(git, spec, todo)
        if todo.height
        else (pl.DataFrame(schema=ROWS_SCHEMA), pl.DataFrame(schema=EXCLUDED_SCHEMA))
    )
    all_rows = pl.concat(
        [old_rows.filter(~pl.col("sha").is_in(todo["sha"].implode())), rows], how="vertical_relaxed"
    )
    all_exc = pl.concat(
        [old_exc.filter(~pl.col("sha").is_in(todo["sha"].implode())), excluded],
        how="vertical_relaxed",
    )
    lake.replace_rows("raw", "kernel_commit_files", all_rows, "repo", [repo])
    lake.replace_rows("raw", "kernel_commit_excluded", all_exc, "repo", [repo])
    lake.replace_rows(
        "raw",
        "kernel_commit_mined",
        commits.select("repo", "sha").with_columns(rules_version=pl.lit(rules)),
        "repo",
        [repo],
    )
    out = {
        "mined_commits": todo.height,
        "new_rows": rows.height,
        "rows": all_rows.height,
        "excluded": all_exc.height,
        "vanished_commits": vanished,
        "seconds": round(time.monotonic() - started, 2),
        "rules_version": rules,
    }
    if changed:
        out["changed_rules"] = "; ".join(changed)
    return out


def assemble_kernel_commits(
    rows: pl.DataFrame, commits: pl.DataFrame, test_fraction: float = TEST_FRACTION
) -> tuple[pl.DataFrame, datetime | None]:
    """Recompute mentions with the PR body (when fetched), rebuild the prompt with them,
    and assign the temporal split. ``rows`` already carries pr_body and gains."""
    messages = dict(commits.select("sha", "message").iter_rows()) if commits.height else {}
    subjects = dict(commits.select("sha", "subject").iter_rows()) if commits.height else {}
    reverts = (
        dict(commits.select("sha", "reverted_by").iter_rows())
        if commits.height and "reverted_by" in commits.columns
        else {}
    )
    models, hardware, claims, prompts = [], [], [], []
    for r in rows.iter_rows(named=True):
        m = extract_mentions(r["title"], messages.get(r["sha"]), r.get("pr_body"))
        # Text first, then what the file's path and guards say (kept by mine_commit_files).
        hw = list(dict.fromkeys([*m.hardware, *(r.get("hardware_from_code") or [])]))
        mo = list(dict.fromkeys([*m.models, *(r.get("models_from_code") or [])]))
        models.append(mo)
        hardware.append(hw)
        claims.append(m.speedup_claims)
        prompts.append(build_prompt(r["title"], hw, mo, r["path"], r["language"], r["before_code"]))
    out = rows.with_columns(
        models_mentioned=pl.Series(models, dtype=pl.List(pl.String)),
        hardware_mentioned=pl.Series(hardware, dtype=pl.List(pl.String)),
        speedup_claims=pl.Series(claims, dtype=pl.List(pl.String)),
        prompt=pl.Series(prompts, dtype=pl.String),
        reverted_by=pl.Series([reverts.get(s) for s in rows["sha"].to_list()], dtype=pl.String),
        duplicate_of=duplicate_ids(rows, reland_roots(subjects)),
    )
    return assign_temporal_split(out, test_fraction)
