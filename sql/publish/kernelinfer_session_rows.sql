-- Card-format kernelinfer sessions for one batch ($ids), in the card's field order.
-- `shape` and the trace `params` are JSON text in the lake and are decoded by the writer.
SELECT
    session_id,
    op,
    impl,
    gpu,
    arch,
    dtype,
    shape,
    signature,
    "desc",
    objective,
    baseline_ms,
    best,
    attempts,
    elapsed_s,
    elapsed_hms,
    num_steps,
    trace,
    messages
FROM sim.kernelinfer_sessions
WHERE session_id IN (SELECT unnest($ids))
ORDER BY session_id
