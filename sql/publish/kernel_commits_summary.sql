-- Headline figures of the kernel_commits subset, one row, for the dataset card.
-- A PR is identified by its URL (rows from direct pushes have none); "with gains" means
-- the extracted gains list is non-empty. Percentiles are continuous (interpolated).
SELECT
    count(*)                                                  AS rows,
    count(*) FILTER (WHERE split = 'train')                   AS train,
    count(*) FILTER (WHERE split = 'test')                    AS test,
    count(DISTINCT pr_url)                                    AS prs,
    count(DISTINCT (repo, sha))                               AS commits,
    strftime(min(authored_at), '%Y-%m')                       AS first_month,
    strftime(max(authored_at), '%Y-%m')                       AS last_month,
    strftime(min(authored_at) FILTER (WHERE split = 'test'), '%Y-%m-%d') AS test_from,
    count(DISTINCT pr_url) FILTER (
        WHERE coalesce(json_array_length(TRY_CAST(gains AS JSON)), 0) > 0
    )                                                         AS prs_with_gains,
    count(*) FILTER (
        WHERE coalesce(json_array_length(TRY_CAST(gains AS JSON)), 0) > 0
    )                                                         AS rows_with_gains,
    count(kernel_speedup)                                     AS kernel_speedup_rows,
    quantile_cont(kernel_speedup, 0.5)                        AS kernel_speedup_median,
    quantile_cont(kernel_speedup, 0.1)                        AS kernel_speedup_p10,
    quantile_cont(kernel_speedup, 0.9)                        AS kernel_speedup_p90,
    count(e2e_speedup)                                        AS e2e_speedup_rows,
    quantile_cont(e2e_speedup, 0.5)                           AS e2e_speedup_median,
    quantile_cont(e2e_speedup, 0.1)                           AS e2e_speedup_p10,
    quantile_cont(e2e_speedup, 0.9)                           AS e2e_speedup_p90,
    quantile_cont(length(prompt), 0.5)                        AS prompt_chars_median,
    quantile_cont(length(prompt), 0.9)                        AS prompt_chars_p90
FROM datasets.kernel_commits
