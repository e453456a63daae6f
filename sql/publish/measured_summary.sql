-- Figures of the measured_configs card: one row over datasets.measured_configs. Label
-- figures leave out superseded tables (timed on a launch grid the engine would not use:
-- no labels until re-measured).
SELECT
    count(*) AS rows,
    count(DISTINCT kernel) AS kernels,
    count(*) FILTER (WHERE superseded_reason IS NOT NULL) AS superseded_rows,
    count(*) FILTER (WHERE superseded_reason IS NULL) AS labelled_rows,
    count(*) FILTER (WHERE superseded_reason IS NULL AND best_is_tie) AS tie_rows,
    count(*) FILTER (WHERE superseded_reason IS NULL AND tuned_within_noise_of_best)
        AS tuned_within_noise,
    count(*) FILTER (WHERE superseded_reason IS NULL AND default_faster_beyond_noise)
        AS default_faster,
    median(measured_speedup_vs_default) FILTER (WHERE superseded_reason IS NULL)
        AS median_speedup_vs_default,
    string_agg(DISTINCT measured_on, ', ' ORDER BY measured_on) AS gpus,
    string_agg(DISTINCT driver_version, ', ' ORDER BY driver_version) AS drivers,
    string_agg(DISTINCT cuda_version, ', ' ORDER BY cuda_version) AS cuda,
    string_agg(DISTINCT torch_version, ', ' ORDER BY torch_version) AS torch,
    string_agg(DISTINCT triton_version, ', ' ORDER BY triton_version) AS triton,
    string_agg(DISTINCT harness_version, ', ' ORDER BY harness_version) AS harness
FROM datasets.measured_configs
