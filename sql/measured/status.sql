-- Progress and headline figures of datasets.measured_configs for one GPU ($gpu).
SELECT
    kernel,
    quant,
    repo,
    count(*) AS rows_measured,
    count(t_tuned_us) AS rows_with_tuned_time,
    median(measured_speedup_vs_default) AS median_speedup_vs_default,
    min(measured_speedup_vs_default) AS min_speedup_vs_default,
    max(measured_speedup_vs_default) AS max_speedup_vs_default,
    avg(CASE WHEN t_tuned_us IS NOT NULL THEN tuned_is_best::INTEGER END) AS tuned_best_share,
    avg(tuned_within_noise_of_best::INTEGER) AS tuned_within_noise_share,
    avg(default_faster_beyond_noise::INTEGER) AS default_faster_beyond_noise_share,
    median(tuned_gap) AS median_tuned_gap,
    sum(n_candidates) AS candidates,
    sum(n_wrong_result) AS wrong_results,
    sum(n_out_of_resources + n_compile_failed + n_launch_failed) AS resource_or_launch_failures
FROM datasets.measured_configs
WHERE gpu = $gpu AND measured_on = $gpu
GROUP BY ALL
ORDER BY kernel, quant, repo
