-- Steps per `timing` (issue 36, 36p): `measured` (its exact source timed on the session's
-- GPU), `modelled` (the simulator's time alone) or null (the step has no time).
SELECT coalesce(step.timing, 'none') AS timing, count(*) AS steps
FROM (SELECT unnest(trace) AS step FROM sim.kernelinfer_sessions)
GROUP BY ALL
ORDER BY steps DESC, timing
