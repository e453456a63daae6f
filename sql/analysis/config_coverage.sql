-- tuned_configs coverage matrix: GPU x dtype x kernel.
SELECT gpu, dtype, kernel, count(DISTINCT config_path) AS files, count(*) AS rows,
       min(M) AS min_m, max(M) AS max_m
FROM datasets.tuned_configs
GROUP BY ALL
ORDER BY files DESC
