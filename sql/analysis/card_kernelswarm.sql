-- kernelswarm: our figures beside the card's (metric, card, ours, note).
-- Same columns as card_kernel_opt_rl; `kernelhouse stats kernelswarm` prints this view.
-- The card gives the horizon as "1-5 h per episode", hence the round min/max hours.
WITH e AS (SELECT * FROM sim.kernelswarm_episodes)
SELECT 'episodes' AS metric, 2400::DOUBLE AS card, (SELECT count(*) FROM e)::DOUBLE AS ours, '24 shards x 100' AS note
UNION ALL SELECT 'messages', 170000, (SELECT sum(num_messages) FROM e), 'card: ~170k'
UNION ALL SELECT 'mean messages per episode', 71, (SELECT avg(num_messages) FROM e), ''
UNION ALL SELECT 'mean agents per episode', 8.6, (SELECT avg(n_agents) FROM e), 'lead + 2-20 specialists'
UNION ALL SELECT 'ops', 17, (SELECT count(DISTINCT op) FROM e), ''
UNION ALL SELECT 'CUDA ops', 14, (SELECT count(DISTINCT op) FROM e WHERE impl = 'cuda'), ''
UNION ALL SELECT 'Triton ops', 3, (SELECT count(DISTINCT op) FROM e WHERE impl = 'triton'), ''
UNION ALL SELECT 'GPUs', 6, (SELECT count(DISTINCT gpu) FROM e), 'h100, h200, a100, a10, rtx_a6000, rtx_5090'
UNION ALL SELECT 'min hours', 1, (SELECT min(elapsed_s) / 3600.0 FROM e), 'card: 1-5 h per episode'
UNION ALL SELECT 'max hours', 5, (SELECT max(elapsed_s) / 3600.0 FROM e), 'card: 1-5 h per episode'
