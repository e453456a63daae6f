-- Measured on a real GPU (datasets.measured_configs): per GPU, kernel and quantisation, how
-- much the tuned config beats the engine's default, and how often it is the fastest
-- measured within noise. Superseded tables (a launch grid the engine would not use) are
-- left out. The only speedups a lake built offline has: they ship with the package.
SELECT
    measured_on AS gpu,
    kernel,
    quant,
    count(*) AS rows,
    median(measured_speedup_vs_default) AS median_speedup_vs_default,
    quantile_cont(measured_speedup_vs_default, 0.1) AS p10_speedup_vs_default,
    quantile_cont(measured_speedup_vs_default, 0.9) AS p90_speedup_vs_default,
    avg(tuned_within_noise_of_best::INTEGER) AS share_tuned_within_noise_of_best,
    avg(default_faster_beyond_noise::INTEGER) AS share_default_faster_beyond_noise
FROM datasets.measured_configs
WHERE superseded_reason IS NULL
GROUP BY measured_on, kernel, quant
ORDER BY gpu, rows DESC, kernel, quant
