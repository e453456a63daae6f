-- kernelswarm episodes per op, impl, gpu and dtype (one row per dimension value).
SELECT
    CASE
        WHEN grouping(op) = 0 THEN 'op'
        WHEN grouping(impl) = 0 THEN 'impl'
        WHEN grouping(gpu) = 0 THEN 'gpu'
        ELSE 'dtype'
    END                             AS dimension,
    coalesce(op, impl, gpu, dtype)  AS value,
    count(*)                        AS episodes,
    avg(speedup)                    AS mean_speedup
FROM sim.kernelswarm_episodes
GROUP BY GROUPING SETS ((op), (impl), (gpu), (dtype))
ORDER BY dimension, episodes DESC, value
