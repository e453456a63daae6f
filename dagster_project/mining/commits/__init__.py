"""kernel_commits domain code: perf commits of vLLM, SGLang and FlashInfer as
optimise-this-file tasks (no dagster import; see ``mine.py`` for the pipeline)."""

from dagster_project.mining.commits.mine import (
    DEFAULT_LIMITS,
    EXCLUDED_SCHEMA,
    PERF_COMMITS_SCHEMA,
    ROWS_SCHEMA,
    Limits,
    effective_head,
    exclusion_counts,
    find_perf_commits,
    merge_increment,
    mine_commit_files,
    mine_repo,
    needs_full_remine,
    row_id,
    summarize,
)
from dagster_project.mining.commits.prompt import build_prompt
from dagster_project.mining.commits.specs import DEFAULT_SPECS, RepoSpec
from dagster_project.mining.commits.split import assign_temporal_split

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_SPECS",
    "EXCLUDED_SCHEMA",
    "PERF_COMMITS_SCHEMA",
    "ROWS_SCHEMA",
    "Limits",
    "RepoSpec",
    "assign_temporal_split",
    "build_prompt",
    "effective_head",
    "exclusion_counts",
    "find_perf_commits",
    "merge_increment",
    "mine_commit_files",
    "mine_repo",
    "needs_full_remine",
    "row_id",
    "summarize",
]
