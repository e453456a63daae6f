-- Every engine repository whose code appears in kernel-opt-rl (its LICENSE must ship too).
SELECT DISTINCT repo FROM datasets.tuned_configs
UNION
SELECT DISTINCT repo FROM datasets.kernel_commits
ORDER BY repo
