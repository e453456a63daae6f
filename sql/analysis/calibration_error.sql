-- Simulator vs an H200: how far predicted kernel times are from measured ones, per op and
-- source (the simulator's CUDA / Triton templates, PyTorch library references).
-- ratio = predicted / measured (above 1: the simulator is too pessimistic); `_before` uses
-- the efficiency table from before calibration. Written by the sim_calibration asset.
SELECT
    op,
    source,
    count(*) AS points,
    median(ratio) AS median_ratio,
    median(abs(ln(ratio))) AS median_abs_log_err,
    avg(CASE WHEN abs(ln(ratio)) <= ln(1.5) THEN 1.0 ELSE 0.0 END) AS share_within_1_5x,
    median(abs(ln(ratio_before))) AS median_abs_log_err_before,
    avg(CASE WHEN abs(ln(ratio_before)) <= ln(1.5) THEN 1.0 ELSE 0.0 END) AS share_within_1_5x_before
FROM sim.calibration
WHERE status = 'ok' AND ratio IS NOT NULL
GROUP BY op, source
ORDER BY op, source
