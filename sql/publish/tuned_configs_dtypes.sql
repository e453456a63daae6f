-- tuned_configs rows per dtype, most common first.
SELECT
    dtype,
    count(*)                            AS rows,
    count(DISTINCT (repo, config_path)) AS config_files
FROM datasets.tuned_configs
GROUP BY dtype
ORDER BY rows DESC, dtype
