-- Sessions whose JSON-text fields (`shape`, each trace step's `params`) are not JSON: the
-- export ships those fields as they are stored, so they are checked once, here.
SELECT count(*) AS rows, min(session_id) AS first_id
FROM sim.kernelinfer_sessions
WHERE NOT coalesce(json_valid(shape), false)
   OR NOT coalesce(list_bool_and(list_transform(trace, lambda t: coalesce(json_valid(t.params), true))), true)
