-- kernel_commits rows, commits, PRs and kernel_edit rows (issue 41) per engine repository.
SELECT
    repo,
    count(*)               AS rows,
    count(DISTINCT sha)    AS commits,
    count(DISTINCT pr_url) AS prs,
    count(*) FILTER (WHERE task_kind = 'kernel_edit') AS kernel_edit
FROM datasets.kernel_commits
GROUP BY repo
ORDER BY repo
