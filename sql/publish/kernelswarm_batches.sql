-- Which batch file each kernelswarm episode goes to: consecutive runs of $batch_size
-- episodes in episode_id order. Only ids are read here, so this stays small.
SELECT
    episode_id AS id,
    (row_number() OVER (ORDER BY episode_id) - 1) // $batch_size AS batch
FROM sim.kernelswarm_episodes
ORDER BY episode_id
