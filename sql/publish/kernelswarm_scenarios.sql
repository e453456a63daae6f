-- kernelswarm episodes per scenario: team sizes, message volume and outcome.
SELECT
    scenario,
    count(*)          AS episodes,
    min(n_agents)     AS min_agents,
    max(n_agents)     AS max_agents,
    avg(num_messages) AS mean_messages,
    avg(speedup)      AS mean_speedup
FROM sim.kernelswarm_episodes
GROUP BY scenario
ORDER BY episodes DESC, scenario
