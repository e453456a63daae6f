"""The miner version: every mining rule module's ``RULES_VERSION``, composed per asset.

Why: a mined table is a function of the upstream history *and* of our rules. The heads
alone cannot tell whether the rows in the lake are still what the current rules give, so
each rule module carries a version, each mined asset uses the versions of the rules it
applies as its Dagster ``code_version`` (a bump makes it stale, so ``kernelhouse refresh``
runs it and says "has a new code version"), and the incremental miners store the same
string next to their watermark: a stored version unlike the current one re-mines that
repo instead of keeping rows an older rule selected. An unchanged version stays a no-op.

``tests/unit/test_miner_golden.py`` fingerprints the mined output of the fixture repos
per version: output that changes while these strings stay the same fails it.
"""

from __future__ import annotations

from types import ModuleType

from dagster_project import gpus
from dagster_project.commit_exec import census as exec_census
from dagster_project.mining.commits import (
    kernel_body,
    lake_sync,
    languages,
    license,
    mentions,
    mine,
    perf_filter,
    pr_tasks,
    reverts,
    specs,
    task_kind,
)
from dagster_project.mining.commits import prompt as commit_prompt
from dagster_project.mining.commits import split as commit_split
from dagster_project.mining.configs import (
    attribution,
    candidates,
    copies,
    defaults,
    discover,
    entries,
    kernels,
    lookup,
    names,
    shapes,
)
from dagster_project.mining.configs import dataset as config_dataset
from dagster_project.mining.configs import prompt as config_prompt
from dagster_project.mining.configs import split as config_split
from dagster_project.mining.rule_versions import changed_rules, format_versions, parse_versions

__all__ = [
    "ASSET_RULES",
    "RULE_MODULES",
    "asset_code_version",
    "changed_rules",
    "format_versions",
    "miner_version",
    "parse_versions",
    "rule_versions",
]

#: rule name -> module, for every module whose rules decide mined rows.
RULE_MODULES: dict[str, ModuleType] = {
    "title_filter": perf_filter,
    "kernel_paths": specs,
    "file_limits": mine,
    "reverts": reverts,
    "languages": languages,
    "licences": license,
    "kernel_body": kernel_body,
    "commit_split": commit_split,
    "mentions": mentions,
    "commit_prompt": commit_prompt,
    "commit_rows": lake_sync,
    "task_kind": task_kind,
    "pr_tasks": pr_tasks,
    "exec_census": exec_census,
    "gpu_names": gpus,
    "config_layout": discover,
    "config_names": names,
    "parsing": entries,
    "attribution": attribution,
    "kernel_sources": kernels,
    "model_shapes": shapes,
    "candidates": candidates,
    "defaults": defaults,
    "config_split": config_split,
    "config_prompt": config_prompt,
    "config_lookup": lookup,
    "config_rows": config_dataset,
    "config_copies": copies,
}

#: asset -> the rules it applies itself (inputs' changes reach it through data versions).
ASSET_RULES: dict[str, tuple[str, ...]] = {
    "perf_commits": ("title_filter", "kernel_paths", "file_limits", "reverts"),
    "kernel_commit_files": (
        "kernel_paths",
        "file_limits",
        "languages",
        "licences",
        "kernel_body",
        "mentions",
        "commit_prompt",
        "gpu_names",
    ),
    "kernel_commits": (
        "commit_split",
        "mentions",
        "commit_prompt",
        "commit_rows",
        "reverts",
        "exec_census",
        "gpu_names",
        "task_kind",
        "title_filter",
    ),
    # Issue 41: grouping, columns and multi-file prompt of the PR-task view.
    "pr_tasks": ("pr_tasks",),
    "config_files": ("config_layout", "config_names", "parsing", "config_lookup", "gpu_names"),
    "config_entries": ("parsing",),
    "config_attribution": ("attribution", "parsing"),
    "kernel_sources": ("kernel_sources",),
    "moe_model_shapes": ("model_shapes",),
    # lookup and names: loaded_at_runtime comes with raw.config_files, and the row
    # assembly applies the GPU-name rules (shared-memory and Blackwell classes) itself.
    "tuned_configs": (
        "config_lookup",
        "config_names",
        "gpu_names",
        "candidates",
        "defaults",
        "config_split",
        "config_prompt",
        "parsing",
        "config_rows",
        "config_copies",
    ),
}


def rule_versions(rules: tuple[str, ...] | None = None) -> dict[str, str]:
    """{rule: version} of ``rules`` (all rules when None), read from the modules now."""
    names_ = tuple(RULE_MODULES) if rules is None else rules
    return {r: str(RULE_MODULES[r].RULES_VERSION) for r in names_}


def asset_code_version(asset: str) -> str:
    """The ``code_version`` of a mined asset: the versions of the rules it applies."""
    return format_versions(rule_versions(ASSET_RULES[asset]))


def miner_version() -> str:
    """Every rule's version: what the whole mined output is a function of."""
    return format_versions(rule_versions())
