"""What the published datasets' columns mean: the descriptions the Dagster UI shows in an
asset's Columns tab (``wiring.table_metadata.table_schema``), which were empty before
issue 34. Kept per table, and only for the two mined datasets users train on; a column
without an entry shows no description (never a guessed one). No dagster import.
"""

from __future__ import annotations

_ID = "stable row id"
_REPO = "engine repository: vllm, sglang or flashinfer"
_SPLIT = "train or test"
_LICENSE = "SPDX licence of the file (open-source licences only)"

COLUMNS: dict[str, dict[str, str]] = {
    "datasets.kernel_commits": {
        "id": _ID,
        "repo": _REPO,
        "sha": "the performance commit",
        "pr_number": "the PR the commit came from (title suffix), when one is named",
        "pr_url": "URL of that PR",
        "title": "commit title (the PR title): the goal stated in the prompt",
        "rule": "title rule that selected the commit: core (strict) or mid",
        "authored_at": "commit author date (UTC)",
        "path": "kernel file changed by the commit",
        "language": "language of the file",
        "before_code": "the whole file before the commit",
        "after_code": "the whole file after the commit (the reference answer)",
        "diff": "unified diff before_code -> after_code",
        "prompt": "task text: goal, target hardware and models, before_code, edit format",
        "models_mentioned": "models named by the commit message (and PR body when fetched)",
        "hardware_mentioned": "GPUs and platforms named by the message, title tags and paths",
        "speedup_claims": "speedup phrases found in the commit message",
        "hardware_from_code": "GPUs named by the path, architecture guards and touched configs",
        "models_from_code": "models named by the file's path",
        "pr_body": "the PR description, when GitHub was reachable (never in the prompt)",
        "gains": "audited measurements from the PR description (JSON list)",
        "kernel_speedup": "median documented kernel-scope speedup (audited gains only)",
        "e2e_speedup": "median documented end-to-end speedup (audited gains only)",
        "license": _LICENSE,
        "license_before": "SPDX licence of the file before the commit",
        "license_after": "SPDX licence of the file after the commit",
        "touches_kernel_body": "the commit changes a GPU kernel body",
        "touches_cpu_kernel": "the commit changes a C++ CPU kernel inside a function",
        "is_binding_file": "a registration/binding file (declares ops, is no kernel)",
        "lines_changed": "lines added plus removed",
        "reverted_by": "the upstream commit that reverts this one, at the snapshot",
        "duplicate_of": "id of an earlier row with the same before/after (reland, resubmit)",
        "split": _SPLIT + " (temporal: the newest rows are test)",
        # Execution columns (issue 35, dagster_project/commit_exec/columns.py).
        "exec_status": "execution census status; a run's status once a shipped batch ran it",
        "exec_reason": "the census's reason for exec_status",
        "exec_import_tier": "census: how the file can be imported to run",
        "exec_claim_hardware": "census: whether the title/path targets the GPU it ran on",
        "exec_census_version": "version of the execution census rules",
        "executed": "a shipped batch ran the row (status executed)",
        "equivalent": "before and after matched the oracle on every shape",
        "measured_kernel_speedup": "measured speedup, CUDA-graph replay (equivalent rows)",
        "measured_kernel_speedup_ci_lo": "lower bound of measured_kernel_speedup's CI",
        "measured_kernel_speedup_ci_hi": "upper bound of measured_kernel_speedup's CI",
        "measured_host_speedup": "measured speedup per call, host time included",
        "measured_host_speedup_ci_lo": "lower bound of measured_host_speedup's CI",
        "measured_host_speedup_ci_hi": "upper bound of measured_host_speedup's CI",
        "measured_kernel_significant": "measured_kernel_speedup's CI clears the 2% effect floor",
        "measured_host_significant": "measured_host_speedup's CI clears the 2% effect floor",
        "exec_toolchain": "GPU, driver, CUDA, torch, Triton and harness version of the run",
    },
    "datasets.tuned_configs": {
        "id": _ID,
        "prompt": "task text: kernel, deployment (shape, GPU, dtype, M), what to answer",
        "best_config": "the tuned launch config the engine ships for this file and M (JSON)",
        "kernel": "Triton kernel the config family drives",
        "kernel_source": "source of that kernel at the snapshot",
        "repo": _REPO,
        "config_path": "the tuned-config JSON file",
        "device_name": "device name as written in the file name",
        "gpu": "normalised GPU name",
        "dtype": "data type / quantisation of the config family",
        "E": "number of experts (MoE families; null otherwise)",
        "N": "N dimension of the GEMM",
        "K": "K dimension of the GEMM (null where the file name has none)",
        "block_shape": "quantisation block shape [n, k] (block-quantised families)",
        "M": "batch size (tokens) the entry is tuned for",
        "triton_version": "Triton version the file was tuned with (its name or folder), if any",
        "candidate_models": "models whose shapes match (E, N, K)",
        "default_config": "the engine's default config for this shape (JSON)",
        "config_pr_url": "newest PR that changed a value of the file",
        "config_pr_gains": "audited measurements from that PR's description (JSON list)",
        "speedup_vs_default": "documented speedup of the tuned config over the default",
        "split": _SPLIT + " (by deployment: split_group never straddles)",
        "license": _LICENSE,
        "snapshot_commit": "the repository commit the row was mined at",
        "family": "config family (which kernel and file naming it follows)",
        "is_down": "the file is a down-projection config (file name ends in _down)",
        "config_pr_number": "number of the PR in config_pr_url",
        "loaded_at_runtime": "the engine's own lookup opens this file at the snapshot",
        "not_loaded_reason": "why the lookup never opens it (when loaded_at_runtime is false)",
        "split_group": "the deployment key the train/test split is drawn on",
    },
}


def description(table: str, column: str) -> str | None:
    """The description of ``table``'s ``column`` (``schema.table``), or None."""
    return COLUMNS.get(table, {}).get(column)
