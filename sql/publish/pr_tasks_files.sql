-- How many pr_tasks rows have 1, 2, ... files, per split (issue 41).
SELECT
    n_files,
    count(*)                                                  AS tasks,
    count(*) FILTER (WHERE split = 'train')                   AS train,
    count(*) FILTER (WHERE split = 'test')                    AS test
FROM datasets.pr_tasks
GROUP BY n_files
ORDER BY n_files
