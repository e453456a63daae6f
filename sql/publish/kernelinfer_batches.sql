-- Which batch file each kernelinfer session goes to: its simulation shard (100 sessions),
-- so batch_NNN.jsonl is exactly shard NNN. Only ids are read here, so this stays small.
SELECT session_id AS id, shard AS batch
FROM sim.kernelinfer_sessions
ORDER BY shard, session_id
