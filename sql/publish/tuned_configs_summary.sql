-- Headline figures of the tuned_configs subset, one row, for the dataset card.
-- A config file is identified by (repo, config_path); a "PR with benchmark numbers" is one
-- whose extracted gains list is non-empty. Percentiles are continuous (interpolated).
SELECT
    count(*)                                                         AS rows,
    count(*) FILTER (WHERE split = 'train')                          AS train,
    count(*) FILTER (WHERE split = 'test')                           AS test,
    count(DISTINCT (repo, config_path))                              AS config_files,
    count(DISTINCT (repo, config_path)) FILTER (
        WHERE copied_from IS NOT NULL
    )                                                                AS copied_files,
    count(*) FILTER (WHERE copied_from IS NOT NULL)                  AS copied_rows,
    count(*) FILTER (WHERE copied_from IS NOT NULL AND split = 'test') AS copied_test_rows,
    count(DISTINCT gpu)                                              AS gpus,
    count(DISTINCT device_name)                                      AS device_names,
    count(DISTINCT kernel)                                           AS kernels,
    count(DISTINCT dtype)                                            AS dtypes,
    count(DISTINCT triton_version)                                   AS triton_versions,
    min(M)                                                           AS m_min,
    max(M)                                                           AS m_max,
    count(DISTINCT config_pr_url)                                    AS config_prs,
    count(DISTINCT config_pr_url) FILTER (
        WHERE coalesce(json_array_length(TRY_CAST(config_pr_gains AS JSON)), 0) > 0
    )                                                                AS config_prs_with_gains,
    count(speedup_vs_default)                                        AS speedup_rows,
    count(DISTINCT (repo, config_path)) FILTER (
        WHERE speedup_vs_default IS NOT NULL
    )                                                                AS speedup_files,
    quantile_cont(speedup_vs_default, 0.5)                           AS speedup_median,
    quantile_cont(speedup_vs_default, 0.1)                           AS speedup_p10,
    quantile_cont(speedup_vs_default, 0.9)                           AS speedup_p90,
    (
        SELECT count(DISTINCT model)
        FROM (SELECT unnest(candidate_models) AS model FROM datasets.tuned_configs)
    )                                                                AS candidate_models
FROM datasets.tuned_configs
