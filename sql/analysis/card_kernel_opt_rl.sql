-- kernel-opt-rl: our figures beside the card's (metric, card, ours, note).
-- The card was built from clones newer than ours (vLLM to 2026-10); see README.
WITH tc AS (SELECT * FROM datasets.tuned_configs),
kc AS (SELECT * FROM datasets.kernel_commits)
SELECT 'tuned_configs rows' AS metric, 19287.0::DOUBLE AS card, (SELECT count(*) FROM tc)::DOUBLE AS ours, 'one row per (config file, M)' AS note
UNION ALL SELECT 'tuned_configs train rows', 17561, (SELECT count(*) FROM tc WHERE split = 'train'), ''
UNION ALL SELECT 'tuned_configs test rows', 1726, (SELECT count(*) FROM tc WHERE split = 'test'), 'grouped by deployment'
UNION ALL SELECT 'tuned config files', 1138, (SELECT count(DISTINCT repo || config_path) FROM tc), 'card snapshot is newer'
UNION ALL SELECT 'GPUs (device names)', 48, (SELECT count(DISTINCT device_name) FROM tc WHERE device_name <> ''), ''
UNION ALL SELECT 'kernels', 6, (SELECT count(DISTINCT kernel) FROM tc), ''
UNION ALL SELECT 'min M', 1, (SELECT min(M) FROM tc), ''
UNION ALL SELECT 'max M', 262144, (SELECT max(M) FROM tc), 'SSU configs reach 262,144'
UNION ALL SELECT 'config rows with speedup_vs_default', 399, (SELECT count(*) FROM tc WHERE speedup_vs_default IS NOT NULL), 'needs PR bodies'
UNION ALL SELECT 'median speedup_vs_default', 1.30, (SELECT median(speedup_vs_default) FROM tc), ''
UNION ALL SELECT 'kernel_commits rows', 1517, (SELECT count(*) FROM kc), ''
UNION ALL SELECT 'kernel_commits train rows', 1365, (SELECT count(*) FROM kc WHERE split = 'train'), ''
UNION ALL SELECT 'kernel_commits test rows', 152, (SELECT count(*) FROM kc WHERE split = 'test'), 'temporal: newest ~10%'
UNION ALL SELECT 'kernel_commits PRs', 850, (SELECT count(DISTINCT repo || '#' || pr_number) FROM kc WHERE pr_number IS NOT NULL), ''
UNION ALL SELECT 'Apache-2.0 rows', 1481, (SELECT count(*) FROM kc WHERE license = 'Apache-2.0'), ''
UNION ALL SELECT 'BSD rows', 35, (SELECT count(*) FROM kc WHERE license IN ('BSD-3-Clause', 'BSD')), ''
UNION ALL SELECT 'MIT rows', 1, (SELECT count(*) FROM kc WHERE license = 'MIT'), ''
UNION ALL SELECT 'first year', 2023, (SELECT year(min(authored_at)) FROM kc), 'card: 2023-04'
UNION ALL SELECT 'last year', 2026, (SELECT year(max(authored_at)) FROM kc), 'card: 2026-10'
UNION ALL SELECT 'rows with kernel_speedup', 596, (SELECT count(*) FROM kc WHERE kernel_speedup IS NOT NULL), 'needs PR bodies'
UNION ALL SELECT 'median kernel_speedup', 1.33, (SELECT median(kernel_speedup) FROM kc), ''
UNION ALL SELECT 'rows with e2e_speedup', 556, (SELECT count(*) FROM kc WHERE e2e_speedup IS NOT NULL), ''
UNION ALL SELECT 'median prompt chars', 21000, (SELECT median(length(prompt)) FROM kc), 'card: median 21K'
