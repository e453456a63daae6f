-- Rows of one GPU ($gpu) with what the execution-harness planner needs.
-- dagster_project/rewards/measured.py completes them (hidden size, top_k, GEMMs).
SELECT
    id, kernel, kernel_source, repo, dtype, config_path, gpu,
    "E", "N", "K", "M", block_shape, candidate_models,
    best_config, default_config, is_down, speedup_vs_default, split
FROM datasets.tuned_configs
WHERE gpu = $gpu
  AND kernel_source IS NOT NULL
ORDER BY repo, config_path, "M"
