-- kernelinfer sessions per op, impl, gpu and dtype (one row per dimension value).
SELECT
    CASE
        WHEN grouping(op) = 0 THEN 'op'
        WHEN grouping(impl) = 0 THEN 'impl'
        WHEN grouping(gpu) = 0 THEN 'gpu'
        ELSE 'dtype'
    END                             AS dimension,
    coalesce(op, impl, gpu, dtype)  AS value,
    count(*)                        AS sessions,
    avg(best.speedup)               AS mean_speedup
FROM sim.kernelinfer_sessions
GROUP BY GROUPING SETS ((op), (impl), (gpu), (dtype))
ORDER BY dimension, sessions DESC, value
