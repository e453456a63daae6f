-- Simulated step outcomes (ok / compile_error / wrong_result / …) over every session trace.
SELECT step.status AS status, count(*) AS steps
FROM (SELECT unnest(trace) AS step FROM sim.kernelinfer_sessions)
GROUP BY step.status
ORDER BY steps DESC, status
