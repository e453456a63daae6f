-- Every rewarded message kind and status over every episode, for the card's reward table:
-- how many messages, how many carry a reward, its range and mean, and (for results that
-- ran) how many were faster than their episode's baseline.
SELECT
    msg.kind                                                      AS kind,
    coalesce(msg.status, '')                                      AS status,
    count(*)                                                      AS messages,
    count(msg.reward)                                             AS rewarded,
    min(msg.reward)                                               AS min_reward,
    max(msg.reward)                                               AS max_reward,
    avg(msg.reward)                                               AS mean_reward,
    count(*) FILTER (WHERE msg.time_ms < baseline_ms)             AS faster_than_baseline
FROM (SELECT baseline_ms, unnest(messages) AS msg FROM sim.kernelswarm_episodes)
WHERE msg.kind IN ('result', 'verify', 'verdict')
GROUP BY msg.kind, coalesce(msg.status, '')
ORDER BY kind, messages DESC, status
