-- The online tier's sessions and the modelled sessions of the SAME task ids, side by side
-- (issue 36, 36w): what `tier_stats` (dagster_project/sim/online.py) summarises for the
-- card, per tier. A build at another seed or size than the default may hold fewer of those
-- ids as modelled sessions.
SELECT
    'measured_online' AS tier,
    session_id,
    op,
    num_steps,
    best,
    list_transform(trace, lambda t: t.status) AS statuses,
    speedup_label
FROM sim.kernelinfer_online_sessions
UNION ALL
SELECT
    'modelled' AS tier,
    m.session_id,
    m.op,
    m.num_steps,
    m.best,
    list_transform(m.trace, lambda t: t.status) AS statuses,
    m.speedup_label
FROM sim.kernelinfer_sessions AS m
WHERE m.session_id IN (SELECT session_id FROM sim.kernelinfer_online_sessions)
ORDER BY tier, session_id
