-- kernel-opt-rl gaps: kernel files dropped by the row rules, per reason.
SELECT reason, count(*) AS files, count(DISTINCT repo || sha) AS commits
FROM raw.kernel_commit_excluded
GROUP BY reason
ORDER BY files DESC, reason
