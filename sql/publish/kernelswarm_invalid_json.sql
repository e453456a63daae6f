-- Episodes whose JSON-text fields (`shape`, each message's `params`) are not JSON: the
-- export ships those fields as they are stored, so they are checked once, here.
SELECT count(*) AS rows, min(episode_id) AS first_id
FROM sim.kernelswarm_episodes
WHERE NOT coalesce(json_valid(shape), false)
   OR NOT coalesce(list_bool_and(list_transform(messages, lambda m: coalesce(json_valid(m.params), true))), true)
