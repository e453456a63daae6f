-- Card-format kernelinfer sessions for one batch ($ids), in the card's field order.
-- `shape` and the trace `params` are JSON text in the lake and are decoded by the writer.
-- The speedup_* columns are the label with its evidence (issue 36, sim/label_columns.py).
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
    speedup_label,
    speedup_provenance,
    speedup_unknown_reason,
    speedup_error_scale,
    attempts,
    elapsed_s,
    elapsed_hms,
    num_steps,
    trace,
    messages
FROM sim.kernelinfer_sessions
WHERE session_id IN (SELECT unnest($ids))
ORDER BY session_id
