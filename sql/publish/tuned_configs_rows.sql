-- Published rows of the tuned_configs subset for one split ($split), in a stable order.
-- The column list is the published schema: `split` is left out because the split is the
-- file a row lives in. `loaded_at_runtime` / `not_loaded_reason` (does the engine's own
-- lookup open this file?) and `copied_from` (the earlier file of another device this file's
-- content copies) are published so users can filter on them.
SELECT
    id,
    prompt,
    best_config,
    kernel,
    kernel_source,
    repo,
    config_path,
    loaded_at_runtime,
    not_loaded_reason,
    copied_from,
    device_name,
    gpu,
    dtype,
    E,
    N,
    K,
    block_shape,
    M,
    triton_version,
    candidate_models,
    default_config,
    config_pr_url,
    config_pr_gains,
    speedup_vs_default,
    license,
    snapshot_commit
FROM datasets.tuned_configs
WHERE split = $split
ORDER BY id
