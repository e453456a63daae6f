"""GitHub access for kernelhouse (domain code; never imports dagster)."""

from dagster_project.github.prs import (
    PR_ROW_FIELDS,
    FetchProgress,
    GitHubFetchError,
    fetch_pull_requests,
    redact,
    select_pending,
)

__all__ = [
    "PR_ROW_FIELDS",
    "FetchProgress",
    "GitHubFetchError",
    "fetch_pull_requests",
    "redact",
    "select_pending",
]
