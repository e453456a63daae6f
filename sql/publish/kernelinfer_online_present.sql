-- Whether the lake holds the online measured tier (issue 36, 36w): a lake built before the
-- tier existed, or without it, exports kernelinfer without the measured_online config.
SELECT count(*) AS present
FROM duckdb_tables()
WHERE schema_name = 'sim' AND table_name = 'kernelinfer_online_sessions'
