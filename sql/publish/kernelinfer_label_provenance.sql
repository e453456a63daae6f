-- Sessions per speedup-label provenance (issue 36, 36p): `measured`, `modelled` or `unknown`,
-- split by the kind of the policy's reason (`no evidence`, `too wide`, ... for unknown
-- labels; `by definition` for a modelled label of 1 with error scale 0: nothing beat the
-- baseline; `timed` for a measured one), for stats.json and the card.
SELECT
    split_part(speedup_provenance, ':', 1)                     AS provenance,
    CASE
        WHEN speedup_unknown_reason IS NOT NULL THEN split_part(speedup_unknown_reason, ':', 1)
        WHEN speedup_error_scale = 0 THEN 'by definition'
        WHEN speedup_error_scale IS NOT NULL THEN 'reliable'
        ELSE 'timed'
    END                                                        AS kind,
    count(*)                                                   AS sessions,
    count(DISTINCT gpu)                                        AS gpus,
    string_agg(DISTINCT gpu, ', ' ORDER BY gpu)                AS gpu_names
FROM sim.kernelinfer_sessions
WHERE speedup_provenance IS NOT NULL
GROUP BY ALL
ORDER BY provenance, sessions DESC, kind
