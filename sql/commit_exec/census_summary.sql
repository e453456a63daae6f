-- Issue 35: the execution census of datasets.kernel_commits: rows per repo, language and
-- exec_status (with the census reason), and how many of them executed.
SELECT repo, language, exec_status, any_value(exec_reason) AS reason,
       count(*) AS rows, count(DISTINCT sha) AS commits,
       count(*) FILTER (WHERE executed) AS executed
FROM datasets.kernel_commits
GROUP BY ALL
ORDER BY repo, language, rows DESC
