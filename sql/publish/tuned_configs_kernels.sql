-- tuned_configs rows per kernel, with the repos that ship tuned configs for it.
SELECT
    kernel,
    string_agg(DISTINCT repo, ', ' ORDER BY repo) AS repos,
    count(*)                                      AS rows,
    count(DISTINCT (repo, config_path))           AS config_files
FROM datasets.tuned_configs
GROUP BY kernel
ORDER BY rows DESC, kernel
