-- Documented speedup of the tuned config over the default heuristic, by kernel and GPU:
-- where does tuning pay off? Only rows whose config PR documented a gain count.
SELECT kernel, gpu, count(*) AS rows, count(DISTINCT repo || '/' || config_path) AS files,
       count(DISTINCT repo || '#' || config_pr_number) AS prs,
       median(speedup_vs_default) AS median_speedup,
       quantile_cont(speedup_vs_default, 0.1) AS p10, quantile_cont(speedup_vs_default, 0.9) AS p90,
       max(speedup_vs_default) AS max_speedup
FROM datasets.tuned_configs
WHERE speedup_vs_default IS NOT NULL
GROUP BY ALL
ORDER BY rows DESC, kernel, gpu
