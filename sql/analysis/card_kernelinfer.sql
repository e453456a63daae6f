-- kernelinfer: our figures beside the card's (metric, card, ours, note).
-- Same columns as card_kernel_opt_rl; `kernelhouse stats kernelinfer` prints this view.
-- Steps are counted in sim.kernelinfer_steps (one row per step), not from num_steps, so a
-- session whose trace and step rows disagree shows up as a mismatch with the card.
WITH s AS (SELECT * FROM sim.kernelinfer_sessions),
st AS (SELECT status FROM sim.kernelinfer_steps)
SELECT 'sessions' AS metric, 1899::DOUBLE AS card, (SELECT count(*) FROM s)::DOUBLE AS ours, 'unique (op, gpu, shape, dtype) combos' AS note
UNION ALL SELECT 'total steps', 179500, (SELECT count(*) FROM st), 'card: ~180K (151.8K + 22.4K + 5.3K)'
UNION ALL SELECT 'mean steps per session', 94.6, (SELECT avg(num_steps) FROM s), ''
UNION ALL SELECT 'mean hours', 2.18, (SELECT avg(elapsed_s) / 3600.0 FROM s), 'simulated wall time'
UNION ALL SELECT 'min hours', 1.03, (SELECT min(elapsed_s) / 3600.0 FROM s), ''
UNION ALL SELECT 'max hours', 4.93, (SELECT max(elapsed_s) / 3600.0 FROM s), ''
UNION ALL SELECT 'mean speedup', 13.4, (SELECT avg(best.speedup) FROM s), 'baseline_ms / best.time_ms'
UNION ALL SELECT 'ok steps', 151800, (SELECT count(*) FROM st WHERE status = 'ok'), ''
UNION ALL SELECT 'compile_error steps', 22400, (SELECT count(*) FROM st WHERE status = 'compile_error'), ''
UNION ALL SELECT 'wrong_result steps', 5300, (SELECT count(*) FROM st WHERE status = 'wrong_result'), ''
UNION ALL SELECT 'holdout tasks', 195, (SELECT count(*) FROM sim.kernelinfer_tasks_holdout), 'task specs, no solutions'
