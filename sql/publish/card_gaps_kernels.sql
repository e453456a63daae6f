-- kernel-opt-rl gaps: for each kernel the card lists ($kernels), our rows, files and
-- whether its source was found at the snapshot.
SELECT
    k.kernel,
    (SELECT count(*) FROM datasets.tuned_configs t WHERE t.kernel = k.kernel) AS rows,
    (SELECT count(*) FROM raw.config_files f WHERE f.kernel = k.kernel) AS files,
    (SELECT count(*) FROM raw.config_files f WHERE f.kernel = k.kernel AND f.parse_status <> 'ok') AS unparsed_files,
    (SELECT count(*) FROM raw.kernel_sources s WHERE s.kernel = k.kernel) AS sources
FROM (SELECT unnest($kernels::VARCHAR[]) AS kernel) k
ORDER BY k.kernel
