-- Rows per (kernel, quantisation) of the measured_configs card (label figures without
-- superseded tables, as in measured_summary.sql).
SELECT
    kernel,
    quant,
    count(*) AS rows,
    median(measured_speedup_vs_default) FILTER (WHERE superseded_reason IS NULL)
        AS median_speedup_vs_default,
    avg(tuned_within_noise_of_best::INTEGER) FILTER (WHERE superseded_reason IS NULL)
        AS share_tuned_within_noise
FROM datasets.measured_configs
GROUP BY kernel, quant
ORDER BY rows DESC, kernel, quant
