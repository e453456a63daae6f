-- How often the tuned config differs from the repo's default heuristic, and in which keys.
WITH pairs AS (
    SELECT repo, kernel, gpu, M, best_config, default_config,
           unnest(['BLOCK_SIZE_M', 'BLOCK_SIZE_N', 'BLOCK_SIZE_K', 'GROUP_SIZE_M', 'num_warps', 'num_stages']) AS k
    FROM datasets.tuned_configs
    WHERE default_config IS NOT NULL
)
SELECT repo, kernel, k AS key, count(*) AS rows,
       avg(CASE WHEN json_extract_string(best_config, '$.' || k) IS DISTINCT FROM json_extract_string(default_config, '$.' || k) THEN 1 ELSE 0 END) AS share_different,
       avg(abs(log2(try_cast(json_extract_string(best_config, '$.' || k) AS DOUBLE)
                   / nullif(try_cast(json_extract_string(default_config, '$.' || k) AS DOUBLE), 0)))) AS mean_abs_log2_ratio
FROM pairs
GROUP BY ALL
ORDER BY repo, kernel, key
