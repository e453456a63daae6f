-- Held-out kernelinfer task specs (no solutions), in a stable order. The lake also keeps
-- each task's prompt (a function of the spec: `task_prompt` rebuilds it); the file does
-- not, which keeps it near the card's ~78 kB.
SELECT task_id, op, impl, gpu, arch, dtype, shape, signature, "desc", objective
FROM sim.kernelinfer_tasks_holdout
ORDER BY task_id
