-- Held-out kernelinfer task specs (no solutions), in a stable order.
SELECT * FROM sim.kernelinfer_tasks_holdout ORDER BY task_id
