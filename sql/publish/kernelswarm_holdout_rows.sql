-- Held-out kernelswarm task specs (op, gpu, shape, …; no solutions), in a stable order.
SELECT * FROM sim.kernelswarm_tasks_holdout ORDER BY ALL
