-- kernel_commits rows and PRs per source language, most common first.
SELECT
    language,
    count(*)               AS rows,
    count(DISTINCT pr_url) AS prs
FROM datasets.kernel_commits
GROUP BY language
ORDER BY rows DESC, language
