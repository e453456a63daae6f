-- kernel-opt-rl gaps: config files per repo and parse status, and rows the engine's own
-- lookup never loads (kept in the dataset, flagged loaded_at_runtime = false).
SELECT
    f.repo,
    f.parse_status,
    count(*) AS files,
    coalesce(sum(f.n_entries), 0) AS entries,
    count(*) FILTER (WHERE f.loaded_at_runtime = false) AS not_loaded_files,
    coalesce(sum(f.n_entries) FILTER (WHERE f.loaded_at_runtime = false), 0) AS not_loaded_entries
FROM raw.config_files f
GROUP BY f.repo, f.parse_status
ORDER BY f.repo, f.parse_status
