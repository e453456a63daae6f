-- Headline figures of the kernelinfer sessions, one row, for stats.json and the card.
-- A task combo is (op, gpu, shape, dtype), the card's uniqueness key.
SELECT
    count(*)                                         AS sessions,
    count(DISTINCT (op, gpu, shape, dtype))          AS unique_combos,
    count(DISTINCT op)                               AS ops,
    count(DISTINCT (op, impl))                       AS op_impls,
    count(DISTINCT gpu)                              AS gpus,
    count(DISTINCT shard)                            AS shards,
    sum(num_steps)                                   AS steps,
    avg(num_steps)                                   AS mean_steps,
    min(num_steps)                                   AS min_steps,
    max(num_steps)                                   AS max_steps,
    avg(elapsed_s) / 3600.0                          AS mean_hours,
    min(elapsed_s) / 3600.0                          AS min_hours,
    max(elapsed_s) / 3600.0                          AS max_hours,
    avg(best.speedup)                                AS mean_speedup,
    quantile_cont(best.speedup, 0.5)                 AS median_speedup,
    quantile_cont(best.speedup, 0.1)                 AS p10_speedup,
    quantile_cont(best.speedup, 0.9)                 AS p90_speedup,
    max(best.speedup)                                AS max_speedup,
    count(*) FILTER (WHERE best.step IS NULL)        AS null_best_sessions,
    count(*) FILTER (WHERE best.step = 0)            AS baseline_best_sessions,
    sum(attempts.kept)                               AS kept_steps,
    sum(attempts.reverted)                           AS reverted_steps,
    sum(attempts.errors)                             AS error_steps,
    sum(attempts.rebench)                            AS rebench_steps,
    (SELECT count(*) FROM sim.kernelinfer_tasks_holdout) AS holdout_tasks
FROM sim.kernelinfer_sessions
