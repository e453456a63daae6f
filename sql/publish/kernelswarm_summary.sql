-- Headline figures of the kernelswarm episodes, one row, for stats.json and the card.
SELECT
    count(*)                                             AS episodes,
    count(DISTINCT scenario)                             AS scenarios,
    count(DISTINCT (op, impl))                           AS op_impls,
    count(DISTINCT op) FILTER (WHERE impl = 'cuda')      AS cuda_ops,
    count(DISTINCT op) FILTER (WHERE impl = 'triton')    AS triton_ops,
    count(DISTINCT gpu)                                  AS gpus,
    sum(num_messages)                                    AS messages,
    avg(num_messages)                                    AS mean_messages,
    avg(n_agents)                                        AS mean_agents,
    min(n_agents)                                        AS min_agents,
    max(n_agents)                                        AS max_agents,
    avg(elapsed_s) / 3600.0                              AS mean_hours,
    min(elapsed_s) / 3600.0                              AS min_hours,
    max(elapsed_s) / 3600.0                              AS max_hours,
    avg(speedup)                                         AS mean_speedup,
    quantile_cont(speedup, 0.5)                          AS median_speedup,
    quantile_cont(speedup, 0.1)                          AS p10_speedup,
    quantile_cont(speedup, 0.9)                          AS p90_speedup,
    count(*) FILTER (WHERE speedup = 1.0)                AS baseline_best_episodes,
    (SELECT count(*) FROM sim.kernelswarm_tasks_holdout) AS holdout_tasks
FROM sim.kernelswarm_episodes
