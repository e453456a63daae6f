"""What the published datasets' columns mean: the descriptions the Dagster UI shows in an
asset's Columns tab (``wiring.table_metadata.table_schema``), which were empty before
issue 34. Kept per table: every ``datasets.*`` table and every ``analysis.*`` view (the
tables users query); a test holds this list to the built lake's columns, so a new column
needs its line here. Shown by the UI (each dataset's Columns tab; the analysis_views
asset's ``columns`` table). No dagster import.
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
        "gains": "published PR-description measurements (audited, kept by the policy; JSON list)",
        "kernel_speedup": "median documented kernel-scope speedup (published gains only)",
        "e2e_speedup": "median documented end-to-end speedup (published gains only)",
        "license": _LICENSE,
        "license_before": "SPDX licence of the file before the commit",
        "license_after": "SPDX licence of the file after the commit",
        "touches_kernel_body": "the commit changes a GPU kernel body",
        "touches_cpu_kernel": "the commit changes a C++ CPU kernel inside a function",
        "is_binding_file": "a registration/binding file (declares ops, is no kernel)",
        "lines_changed": "lines added plus removed",
        "reverted_by": "the upstream commit that reverts this one, at the snapshot",
        "duplicate_of": "id of an earlier row of the same file it repeats (reland, resubmit): "
        "same before/after, or changed lines >= 60% alike (mining/commits/reverts.py)",
        "task_kind": "kernel_edit, host_side, fragment, cosmetic or not_perf: the row as a task "
        "alone (mining/commits/task_kind.py)",
        "task_kind_reason": "why the row got its task_kind",
        "split": _SPLIT + " (temporal: the newest rows are test)",
        # Execution columns (issue 35, dagster_project/commit_exec/columns.py).
        "exec_status": "execution census status; a run's status once a shipped batch ran it",
        "exec_reason": "the census's reason for exec_status",
        "exec_import_tier": "census: how the file can be imported to run",
        "exec_claim_hardware": "census: whether the title/path targets the GPU it ran on",
        "exec_census_version": "version of the execution census rules",
        "exec_sibling_paths": (
            "modules the row's harness imports as real files; the execution reward lets a "
            "completion edit them (### path blocks); null: no harness covers the row"
        ),
        "executed": "a shipped batch ran the row (status executed)",
        "equivalent": "before and after matched the oracle on every shape",
        "measured_kernel_speedup": (
            "measured speedup over the named shapes, CUDA-graph replay (equivalent rows)"
        ),
        "measured_kernel_speedup_ci_lo": "lower bound of measured_kernel_speedup's CI",
        "measured_kernel_speedup_ci_hi": "upper bound of measured_kernel_speedup's CI",
        "measured_host_speedup": "measured speedup per call, host time included",
        "measured_host_speedup_ci_lo": "lower bound of measured_host_speedup's CI",
        "measured_host_speedup_ci_hi": "upper bound of measured_host_speedup's CI",
        "measured_kernel_significant": "measured_kernel_speedup's CI clears the 5% effect floor",
        "measured_host_significant": "measured_host_speedup's CI clears the 5% effect floor",
        "exec_toolchain": "GPU, driver, CUDA, torch, Triton and harness version of the run",
        "exec_label_version": (
            "version of the rule the measured speedups follow (2: named shapes only)"
        ),
    },
    # Issue 41: kernel_commits one commit (PR) per row (mining/commits/pr_tasks.py).
    "datasets.pr_tasks": {
        "id": "task id: repo@sha (one task per commit)",
        "repo": _REPO,
        "sha": "the performance commit",
        "pr_number": "the PR the commit came from, when one is named",
        "pr_url": "URL of that PR",
        "title": "commit title (the PR title): the goal stated in the prompt",
        "rule": "title rule that selected the commit: core (strict) or mid",
        "authored_at": "commit author date (UTC)",
        "split": _SPLIT + " (the split of all the commit's kernel_commits rows)",
        "pr_body": "the PR description, when GitHub was reachable (never in the prompt)",
        "gains": "published PR-description measurements (audited, kept by the policy; JSON list)",
        "kernel_speedup": "median documented kernel-scope speedup (published gains only)",
        "e2e_speedup": "median documented end-to-end speedup (published gains only)",
        "reverted_by": "the upstream commit that reverts this one, at the snapshot",
        "n_files": "kept kernel files of the commit (entries of files)",
        "paths": "their paths, in the order of files and of the prompt",
        "languages": "languages of the files",
        "licenses": "SPDX licences of the files (open-source licences only)",
        "lines_changed": "lines added plus removed, over all files",
        "touches_kernel_body": "some file's change touches a GPU kernel body",
        "touches_cpu_kernel": "some file's change touches a C++ CPU kernel",
        "models_mentioned": "models named for any file (kernel_commits, merged)",
        "hardware_mentioned": "GPUs and platforms named for any file (merged)",
        "speedup_claims": "speedup phrases found in the commit message",
        "hardware_from_code": "GPUs named by any file's path, guards and configs",
        "duplicate_of": "id of an earlier task every file of this one duplicates (a reland)",
        "files": "per file: row_id (kernel_commits id), path, language, licence, "
        "before_code, after_code, lines_changed and the touch flags",
        "prompt": "task text: goal, target, every file's before_code, multi-file edit format",
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
        "config_pr_url": (
            "newest PR that changed a value of the file (for a copy: of the file in copied_from)"
        ),
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
        "copied_from": (
            "path of an earlier file of another device with the same parsed content: this "
            "file's values were tuned there (config_pr_url is that file's tuning PR)"
        ),
        "split_group": (
            "the deployment key the train/test split is drawn on (deployments sharing a "
            "file content are one group)"
        ),
    },
    "datasets.measured_configs": {
        "id": "the tuned_configs row measured (its id)",
        "kernel": "Triton kernel the config family drives",
        "repo": _REPO,
        "dtype": "data type / quantisation of the config family",
        "quant": "quantisation scheme of the measured launch (none for plain bf16/fp16)",
        "gpu": "the GPU the config was tuned for (normalised)",
        "measured_on": "the GPU the row was timed on",
        "cross_gpu": "timed on another GPU than the one it was tuned for (a transfer table)",
        "routing": (
            "token-to-expert distribution of the inputs: uniform, or a skewed one such as "
            "zipf:0.5 (rewards/gpu/routing.py); one table per routing"
        ),
        "config_path": "the tuned-config JSON file",
        "E": "number of experts (MoE families; null otherwise)",
        "N": "N dimension of the GEMM",
        "K": "K dimension of the GEMM",
        "M": "batch size (tokens) the entry is tuned for",
        "block_shape": "quantisation block shape [n, k] (block-quantised families)",
        "top_k": "experts per token of the model reading used to launch (MoE)",
        "n_shared": "shared experts in that model reading (MoE)",
        "moe_gemms": "which MoE GEMMs the file serves: up, down, both, or mm (plain GEMM)",
        "model_reading": "the model and parallelism whose shape explains (E, N)",
        "best_config": "the tuned config the engine ships (JSON)",
        "default_config": "the engine's default config for this shape (JSON)",
        "latency_table": "every candidate timed: label, config, status, median µs, spread",
        "t_tuned_us": "median time of the tuned config (µs)",
        "t_default_us": "median time of the default config (µs)",
        "measured_speedup_vs_default": "t_default_us / t_tuned_us",
        "documented_speedup_vs_default": "the speedup tuned_configs documents for the row",
        "t_best_us": "median time of the fastest candidate (µs)",
        "fastest_label": "label of the fastest ok candidate (noise ignored)",
        "best_label": "label of the best candidate when it is alone within noise, else null",
        "measured_best_config": "the best config when it is alone within noise (JSON), else null",
        "measured_best_configs": "every config within noise of the fastest (JSON each)",
        "best_labels": "labels of measured_best_configs, fastest first",
        "n_best_tied": "how many configs are within noise of the fastest",
        "best_is_tie": "more than one config is within noise of the fastest",
        "tuned_is_best": "the tuned config alone is fastest beyond noise (null: superseded)",
        "tuned_gap": "t_tuned_us / t_best_us (null: superseded)",
        "spread_tuned": "the tuned timing's p10-p90 range over its median (noise)",
        "spread_default": "the default timing's p10-p90 range over its median",
        "spread_best": "the fastest timing's p10-p90 range over its median",
        "noise_tuned_vs_best": "the larger of spread_tuned and spread_best",
        "tuned_within_noise_of_best": "t_tuned_us within noise of t_best_us (null: superseded)",
        "default_faster_beyond_noise": "the default beats the tuned config beyond noise",
        "superseded_reason": "why the table gives no labels (launched on a grid not used)",
        "tuned_status": "harness status of the tuned config (ok or the failure)",
        "default_status": "harness status of the default config",
        "n_candidates": "candidate configs timed",
        "n_ok": "candidates that ran correct",
        "n_neighbours": "candidates that are neighbours of the tuned config (not of a space)",
        "n_invalid_config": "candidates the kernel rejects as configs",
        "n_out_of_resources": "candidates that ran out of shared memory or registers",
        "n_compile_failed": "candidates that failed to compile",
        "n_launch_failed": "candidates that failed to launch",
        "n_wrong_result": "candidates whose output differed from the reference",
        "n_harness_error": "candidates the harness could not run",
        "device": "device name as the driver reports it",
        "driver_version": "NVIDIA driver version of the run",
        "cuda_version": "CUDA version of the run",
        "torch_version": "torch version of the run",
        "triton_version": "Triton version of the run",
        "harness_version": "version of the measuring harness",
        "timing": "how the times were taken (CUDA-graph replays, counts)",
        "batches": "the shipped batch folders the row's results came from",
        "exhaustive_space": "the upstream tuner space an exhaustive plan timed (null: none)",
        "space_size": "candidates of that plan: the usual table, then every launchable config",
        "n_space_measured": "candidates of that space with a result",
        "exhaustive": "every candidate of the space has a result (t_best_us is its optimum)",
        "tuned_regret_vs_optimum": "t_tuned_us / the space's fastest - 1 (exhaustive only)",
        "default_regret_vs_optimum": "t_default_us / the space's fastest - 1 (exhaustive only)",
        "kernel_source_sha": "hash of the kernel source that was run",
        "measured_at": "when the row was last measured (UTC)",
        "split": _SPLIT + " (the tuned_configs row's split)",
    },
    # -- the analysis views (sql/analysis/<view>.sql) -------------------------------------
    "analysis.audit_rate": {
        "extractor": "gains extractor: table (deterministic) or llm",
        "model": "LLM model (empty for the table extractor)",
        "pairs": "baseline/optimized pairs extracted",
        "passed": "pairs whose numbers appear verbatim in the PR",
        "pass_pct": "passed / pairs, in percent",
    },
    "analysis.calibration_error": {
        "op": "simulated operation",
        "source": "what was timed: a template rung or the torch library",
        "points": "measured (shape, variant) points",
        "median_ratio": "median measured / predicted time",
        "median_abs_log_err": "median |log(measured / predicted)| of the shipped fit",
        "share_within_1_5x": "share of points predicted within 1.5x",
        "median_abs_log_err_before": "the same before the efficiency fit",
        "share_within_1_5x_before": "share within 1.5x before the efficiency fit",
    },
    **{
        f"analysis.card_{name}": {
            "metric": "a figure the dataset card states",
            "card": "the card's value",
            "ours": "the same figure computed on this lake",
            "note": "how the two are comparable (or why not)",
        }
        for name in ("kernel_opt_rl", "kernelinfer", "kernelswarm")
    },
    "analysis.claims_vs_measured": {
        "id": "kernel_commits row id (equivalent rows only)",
        "repo": _REPO,
        "sha": "the performance commit",
        "path": "kernel file changed by the commit",
        "title": "commit title",
        "claim_source": "text (commit message), pr_kernel, pr_e2e or none",
        "claim_text": "the speedup phrase of a text claim",
        "claim_value": "the claimed speedup as a ratio",
        "scope": "timing scope: graph (CUDA-graph replay) or host (per call)",
        "measured": "measured speedup in that scope",
        "measured_ci_lo": "lower bound of its 95% CI",
        "measured_ci_hi": "upper bound of its 95% CI",
        "significant": "the CI clears the 5% effect floor",
        "hardware": "whether the claim targets the GPU it ran on (census)",
        "exec_toolchain": "GPU, driver, CUDA, torch, Triton and harness version of the run",
        "reproduces": "measured within 2x of claim_value (null: nothing to compare)",
    },
    "analysis.config_coverage": {
        "gpu": "normalised GPU name",
        "dtype": "data type / quantisation",
        "kernel": "Triton kernel",
        "files": "tuned-config files",
        "rows": "tuned_configs rows",
        "min_m": "smallest batch size M tuned",
        "max_m": "largest batch size M tuned",
    },
    "analysis.gains_by_kernel_gpu": {
        "repo": _REPO,
        "scope": "kernel or e2e",
        "hardware": "GPU the measurement was taken on (? when unstated)",
        "metric": "what was measured (latency, throughput …)",
        "measurements": "audited measurements",
        "prs": "PRs they come from",
        "median_speedup": "median speedup",
        "p10": "10th percentile speedup",
        "p90": "90th percentile speedup",
    },
    "analysis.measured_speedup_by_kernel": {
        "gpu": "the GPU the rows were timed on",
        "kernel": "Triton kernel",
        "quant": "quantisation scheme",
        "rows": "current (not superseded) measured rows",
        "median_speedup_vs_default": "median measured speedup of the tuned over the default config",
        "p10_speedup_vs_default": "10th percentile of that speedup",
        "p90_speedup_vs_default": "90th percentile of that speedup",
        "share_tuned_within_noise_of_best": "share of rows whose tuned config is within noise "
        "of the fastest",
        "share_default_faster_beyond_noise": "share of rows where the default wins beyond noise",
    },
    "analysis.rows_per_month": {
        "repo": _REPO,
        "month": "commit month (YYYY-MM)",
        "rows": "kernel_commits rows",
        "prs": "distinct PRs",
        "test_rows": "rows in the test split",
    },
    "analysis.speedup_distribution": {
        "what": "which column the speedups come from (table.column)",
        "n": "values",
        "median": "median speedup",
        "p10": "10th percentile",
        "p90": "90th percentile",
    },
    "analysis.speedup_values": {
        "source": "the table the speedup comes from",
        "repo": _REPO,
        "pr_number": "the PR",
        "scope": "kernel, e2e or config",
        "gpu": "GPU, where the source states one",
        "kernel": "Triton kernel (tuned configs only)",
        "speedup": "the speedup",
    },
    "analysis.tuned_speedup_by_kernel_gpu": {
        "kernel": "Triton kernel",
        "gpu": "normalised GPU name",
        "rows": "tuned_configs rows with a documented speedup",
        "files": "their config files",
        "prs": "PRs the speedups come from",
        "median_speedup": "median documented speedup over the default",
        "p10": "10th percentile",
        "p90": "90th percentile",
        "max_speedup": "largest documented speedup",
    },
    "analysis.tuned_vs_default": {
        "repo": _REPO,
        "kernel": "Triton kernel",
        "key": "config key (BLOCK_SIZE_M, num_warps …)",
        "rows": "tuned_configs rows",
        "share_different": "share of rows whose tuned value differs from the default",
        "mean_abs_log2_ratio": "mean |log2(tuned / default)| of the key",
    },
}


def description(table: str, column: str) -> str | None:
    """The description of ``table``'s ``column`` (``schema.table``), or None."""
    return COLUMNS.get(table, {}).get(column)


def columns_markdown(tables: list[str]) -> str:
    """One Markdown table per ``schema.table`` (column | what it is), for an asset that
    writes several relations and so has no single Columns tab (the analysis views)."""
    parts = []
    for table in tables:
        rows = [f"| `{c}` | {d} |" for c, d in COLUMNS.get(table, {}).items()]
        parts.append("\n".join([f"**{table}**", "", "| column | what it is |", "|---|---|", *rows]))
    return "\n\n".join(parts)
