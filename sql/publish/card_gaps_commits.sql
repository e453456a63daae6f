-- kernel-opt-rl gaps, per repo: perf commits, rows, test rows, newest row and snapshot
-- date, against the temporal cut-off ($cutoff, ISO text or NULL).
SELECT
    h.repo,
    h.head_date,
    (SELECT count(*) FROM raw.perf_commits p WHERE p.repo = h.repo) AS perf_commits,
    (SELECT count(*) FROM datasets.kernel_commits k WHERE k.repo = h.repo) AS rows,
    (SELECT count(*) FROM datasets.kernel_commits k WHERE k.repo = h.repo AND k.split = 'test') AS test_rows,
    (SELECT max(authored_at) FROM datasets.kernel_commits k WHERE k.repo = h.repo) AS newest_row,
    $cutoff::TIMESTAMPTZ AS cutoff
FROM raw.repo_heads h
ORDER BY h.repo
