-- The build snapshot: the head commit each engine repository was mined at.
-- `source` is left out on purpose: it can be a local path, which is nobody's business.
SELECT
    repo,
    head_sha,
    CAST(head_date AS VARCHAR) AS head_date,
    commit_count
FROM raw.repo_heads
ORDER BY repo
