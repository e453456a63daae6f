-- Headline figures of the pr_tasks subset, one row, for the dataset card (issue 41).
SELECT
    count(*)                                                  AS rows,
    count(*) FILTER (WHERE split = 'train')                   AS train,
    count(*) FILTER (WHERE split = 'test')                    AS test,
    coalesce(sum(n_files), 0)                                 AS files,
    count(*) FILTER (WHERE n_files > 1)                       AS multi_file,
    quantile_cont(n_files, 0.5)                               AS files_median,
    max(n_files)                                              AS files_max,
    quantile_cont(length(prompt), 0.5)                        AS prompt_chars_median,
    quantile_cont(length(prompt), 0.9)                        AS prompt_chars_p90
FROM datasets.pr_tasks
