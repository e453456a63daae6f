-- Card-format kernelswarm episodes for one batch ($ids), in the card's field order.
-- `shape` is JSON text in the lake and is decoded by the writer.
SELECT
    episode_id,
    scenario,
    n_agents,
    op,
    impl,
    gpu,
    arch,
    dtype,
    shape,
    baseline_ms,
    best_ms,
    speedup,
    elapsed_s,
    agents,
    num_messages,
    messages
FROM sim.kernelswarm_episodes
WHERE episode_id IN (SELECT unnest($ids))
ORDER BY episode_id
