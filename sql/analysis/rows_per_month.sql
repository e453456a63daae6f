-- kernel_commits rows and PRs per repo and month.
SELECT repo, strftime(authored_at, '%Y-%m') AS month, count(*) AS rows,
       count(DISTINCT pr_number) AS prs, count(*) FILTER (WHERE split = 'test') AS test_rows
FROM datasets.kernel_commits
GROUP BY ALL
ORDER BY month, repo
