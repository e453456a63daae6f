-- kernel_commits rows, commits and PRs per engine repository.
SELECT
    repo,
    count(*)               AS rows,
    count(DISTINCT sha)    AS commits,
    count(DISTINCT pr_url) AS prs
FROM datasets.kernel_commits
GROUP BY repo
ORDER BY repo
