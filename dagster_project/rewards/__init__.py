"""Reward functions for the RL datasets, as plain typed Python (no Dagster, stdlib only).

* ``patch_reward`` / ``oracle_edit`` (``patch``): SWE-RL style reward for
  ``kernel_commits`` — SEARCH/REPLACE edits, -1 when malformed or not applying, otherwise
  the similarity of the resulting file's changed lines to the real commit's.
* ``config_reward`` (``config``): offline proxy for ``tuned_configs`` — partial credit
  against the tuned launch config, scaled by how much tuning matters for the row.
* ``pr_patch_reward`` / ``pr_oracle_edit`` / ``pr_patch_reward_fn`` (``pr_patch``): the same
  reward over the multi-file edits of ``pr_tasks`` (one pull request, all its files).
* ``patch_reward_fn`` / ``config_reward_fn`` (``trl``): TRL ``GRPOTrainer`` batch wrappers.
* ``render_reward_module`` (``export``): the same code as one standalone ``reward.py``,
  which the publish step writes as ``code/reward.py``.

The modules import nothing outside the standard library so they can be shipped as that
single file; keep it that way. Two parts are deliberately outside that set and are not
imported here: ``gpu`` (the on-hardware execution reward, numpy/torch/triton, which runs
on a GPU machine) and ``measured`` (planning GPU batches and ingesting their results into
the lake, polars).
"""

from __future__ import annotations

from .config import (
    ALLOWED_KEYS,
    SSU_KEYS,
    ConfigParseError,
    config_match,
    config_reward,
    config_reward_distribution,
    parse_config,
    row_speedup,
)
from .export import render_reward_module
from .patch import (
    MALFORMED_REWARD,
    Edit,
    EditDoesNotApply,
    MalformedEdit,
    apply_edits,
    changed_lines,
    oracle_edit,
    oracle_edits,
    parse_search_replace,
    patch_reward,
    patch_similarity,
    render_edits,
    split_lines,
    strip_reasoning,
)
from .pr_patch import (
    apply_pr_edits,
    pr_files,
    pr_oracle_edit,
    pr_patch_reward,
    pr_patch_reward_fn,
    pr_patch_similarity,
)
from .trl import completion_text, config_reward_fn, patch_reward_fn

__all__ = [
    "ALLOWED_KEYS",
    "MALFORMED_REWARD",
    "SSU_KEYS",
    "ConfigParseError",
    "Edit",
    "EditDoesNotApply",
    "MalformedEdit",
    "apply_edits",
    "apply_pr_edits",
    "changed_lines",
    "completion_text",
    "config_match",
    "config_reward",
    "config_reward_distribution",
    "config_reward_fn",
    "oracle_edit",
    "oracle_edits",
    "parse_config",
    "parse_search_replace",
    "patch_reward",
    "patch_reward_fn",
    "patch_similarity",
    "pr_files",
    "pr_oracle_edit",
    "pr_patch_reward",
    "pr_patch_reward_fn",
    "pr_patch_similarity",
    "render_edits",
    "render_reward_module",
    "row_speedup",
    "split_lines",
    "strip_reasoning",
]
