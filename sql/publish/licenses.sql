-- Rows per (subset, licence) across both kernel-opt-rl subsets, for the licensing section.
SELECT subset, license, count(*) AS rows
FROM (
    SELECT 'tuned_configs' AS subset, license FROM datasets.tuned_configs
    UNION ALL
    SELECT 'kernel_commits' AS subset, license FROM datasets.kernel_commits
)
GROUP BY subset, license
ORDER BY subset DESC, rows DESC, license
