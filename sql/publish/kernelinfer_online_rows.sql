-- The measured_online config's rows (issue 36, 36w): the online tier's sessions in the
-- default config's field order plus `measured_on`, the GPU every ran step was measured on.
-- `trace[].timing` is `measured:<gpu>` here and `trace[].measured_ms` the device's time.
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
    measured_on,
    attempts,
    elapsed_s,
    elapsed_hms,
    num_steps,
    trace,
    messages
FROM sim.kernelinfer_online_sessions
ORDER BY measured_on, session_id
