-- Messages per kind (plan, dispatch, candidate, result, …) over every episode.
SELECT msg.kind AS kind, count(*) AS messages
FROM (SELECT unnest(messages) AS msg FROM sim.kernelswarm_episodes)
GROUP BY msg.kind
ORDER BY messages DESC, kind
