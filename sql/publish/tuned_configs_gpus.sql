-- tuned_configs rows and config files per GPU, most covered first.
SELECT
    gpu,
    count(*)                            AS rows,
    count(DISTINCT (repo, config_path)) AS config_files
FROM datasets.tuned_configs
GROUP BY gpu
ORDER BY rows DESC, gpu
