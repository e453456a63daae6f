-- The card's documented-speedup statistics (median / p10 / p90) per dataset column.
SELECT 'kernel_commits.kernel_speedup' AS what, count(kernel_speedup) AS n,
       median(kernel_speedup) AS median, quantile_cont(kernel_speedup, 0.1) AS p10, quantile_cont(kernel_speedup, 0.9) AS p90
FROM datasets.kernel_commits
UNION ALL
SELECT 'kernel_commits.e2e_speedup', count(e2e_speedup), median(e2e_speedup),
       quantile_cont(e2e_speedup, 0.1), quantile_cont(e2e_speedup, 0.9)
FROM datasets.kernel_commits
UNION ALL
SELECT 'tuned_configs.speedup_vs_default', count(speedup_vs_default), median(speedup_vs_default),
       quantile_cont(speedup_vs_default, 0.1), quantile_cont(speedup_vs_default, 0.9)
FROM datasets.tuned_configs
