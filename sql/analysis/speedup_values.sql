-- Every documented speedup, one row per value, in one long table: the input of the
-- report's histograms and per-GPU / per-kernel plots, and of ad-hoc "show me all the
-- speedups for H100" questions. Sources:
--   derived.pr_gains             primary published measurements (published: audited and above
--                                the publication policy's threshold, gains/policy.py);
--                                scope kernel | e2e, gpu = stated hardware
--   datasets.tuned_configs       speedup_vs_default per (config file, M); scope 'config'
--   datasets.kernel_commits      kernel_speedup (scope kernel) and e2e_speedup (scope e2e) per file
-- kernel is only known for tuned configs; gpu only where the source states one.
SELECT 'derived.pr_gains' AS source, repo, pr_number, scope, hardware AS gpu,
       NULL::VARCHAR AS kernel, speedup
FROM derived.pr_gains
WHERE "primary" AND published AND speedup IS NOT NULL
UNION ALL
SELECT 'datasets.tuned_configs', repo, config_pr_number, 'config', gpu, kernel, speedup_vs_default
FROM datasets.tuned_configs
WHERE speedup_vs_default IS NOT NULL
UNION ALL
SELECT 'datasets.kernel_commits', repo, pr_number, 'kernel', NULL, NULL, kernel_speedup
FROM datasets.kernel_commits
WHERE kernel_speedup IS NOT NULL
UNION ALL
SELECT 'datasets.kernel_commits', repo, pr_number, 'e2e', NULL, NULL, e2e_speedup
FROM datasets.kernel_commits
WHERE e2e_speedup IS NOT NULL
