-- datasets.measured_configs: one row per measured tuned_configs row.
-- latency_table is the partial latency table (every candidate measured, in candidate
-- order); times are medians in microseconds from dagster_project/rewards/gpu, spread
-- is each timing's p10-p90 range over its median (the replays' noise).
-- Built from raw.measured_configs alone (each result carries its row's fields since
-- harness 1.1.0), so the shipped batches make the dataset on a machine whose
-- tuned_configs came from other snapshots, or without tuned_configs at all.
-- One row per (tuned row, GPU measured on, routing): a row of one GPU timed on another
-- (measured_on <> gpu) is a cross-GPU transfer table of its own, and a MoE row timed
-- under skewed routing (routing <> 'uniform') a table of its own too (issue 38).
-- Ties are ties (issue 38): every ok candidate within noise of the fastest (its time
-- <= the fastest's x (1 + the larger of the two spreads)) is in measured_best_configs;
-- measured_best_config and best_label name a winner only when it is alone there
-- (a config timed under two labels, e.g. a tuned config equal to the default, is one
-- entry: best_labels then reads 'tuned=default').
-- A superseded table (superseded_reason: launched on a grid the engine would not use)
-- keeps its latency_table and times but gives no labels (they are NULL).
WITH m AS (
    -- a result stored before routing existed was routed uniformly
    SELECT * REPLACE (coalesce(routing, 'uniform') AS routing) FROM raw.measured_configs
),
fastest AS (
    SELECT
        row_id,
        measured_on,
        routing,
        min(t_us) AS t_best_us,
        arg_min(spread, t_us) AS spread_best
    FROM m
    WHERE status = 'ok'
    GROUP BY row_id, measured_on, routing
),
-- one entry per distinct config (the tuned and the default config can be the same
-- config, timed twice): its fastest time and the labels it was timed under
by_config AS (
    SELECT
        row_id,
        measured_on,
        routing,
        config,
        min(t_us) AS t_us,
        arg_min(spread, t_us) AS spread,
        string_agg(label, '=' ORDER BY cand_index) AS label,
        min(cand_index) AS cand_index
    FROM m
    WHERE status = 'ok'
    GROUP BY row_id, measured_on, routing, config
),
ties AS (
    SELECT
        c.row_id,
        c.measured_on,
        c.routing,
        list(c.config ORDER BY c.t_us, c.cand_index) AS best_configs,
        list(c.label ORDER BY c.t_us, c.cand_index) AS best_labels,
        count(*) AS n_tied
    FROM by_config c
    JOIN fastest f ON f.row_id = c.row_id AND f.measured_on IS NOT DISTINCT FROM c.measured_on
        AND f.routing = c.routing
    WHERE c.t_us <= f.t_best_us
          * (1 + greatest(coalesce(c.spread, 0), coalesce(f.spread_best, 0)))
    GROUP BY c.row_id, c.measured_on, c.routing
),
agg AS (
    SELECT
        row_id,
        measured_on,
        routing,
        list({'label': label, 'config': config, 'status': status, 't_us': t_us,
              'spread': spread, 'rel_err': rel_err, 'reason': reason}
             ORDER BY cand_index) AS latency_table,
        max(t_us) FILTER (WHERE label = 'tuned' AND status = 'ok') AS t_tuned_us,
        max(spread) FILTER (WHERE label = 'tuned' AND status = 'ok') AS spread_tuned,
        max(t_us) FILTER (WHERE label = 'default' AND status = 'ok') AS t_default_us,
        max(spread) FILTER (WHERE label = 'default' AND status = 'ok') AS spread_default,
        min(t_us) FILTER (WHERE status = 'ok') AS t_best_us,
        arg_min(label, t_us) FILTER (WHERE status = 'ok') AS fastest_label,
        arg_min(config, t_us) FILTER (WHERE status = 'ok') AS fastest_config,
        max(config) FILTER (WHERE label = 'tuned') AS tuned_config,
        any_value(superseded_reason) AS superseded_reason,
        arg_min(spread, t_us) FILTER (WHERE status = 'ok') AS spread_best,
        max(status) FILTER (WHERE label = 'tuned') AS tuned_status,
        max(status) FILTER (WHERE label = 'default') AS default_status,
        count(*) AS n_candidates,
        count(*) FILTER (WHERE status = 'ok') AS n_ok,
        -- an exhaustive plan's other configs are labelled 's:...' (rewards/gpu/space.py)
        count(*) FILTER (WHERE label NOT IN ('tuned', 'default') AND label NOT LIKE 's:%')
            AS n_neighbours,
        count(*) FILTER (WHERE status = 'invalid_config') AS n_invalid_config,
        count(*) FILTER (WHERE status = 'out_of_resources') AS n_out_of_resources,
        count(*) FILTER (WHERE status = 'compile_failed') AS n_compile_failed,
        count(*) FILTER (WHERE status = 'launch_failed') AS n_launch_failed,
        count(*) FILTER (WHERE status = 'wrong_result') AS n_wrong_result,
        count(*) FILTER (WHERE status = 'harness_error') AS n_harness_error,
        any_value(kernel) AS kernel,
        any_value(repo) AS repo,
        any_value(dtype) AS dtype,
        any_value(quant) AS quant,
        any_value(gpu) AS gpu,
        any_value(config_path) AS config_path,
        any_value("E") AS "E",
        any_value("N") AS "N",
        any_value("K") AS "K",
        any_value("M") AS "M",
        any_value(block_shape) AS block_shape,
        any_value(top_k) AS top_k,
        any_value(n_shared) AS n_shared,
        any_value(moe_gemms) AS moe_gemms,
        any_value(model) AS model_reading,
        any_value(best_config) AS best_config,
        any_value(default_config) AS default_config,
        any_value(documented_speedup_vs_default) AS documented_speedup_vs_default,
        any_value(split) AS split,
        any_value(kernel_source_sha) AS kernel_source_sha,
        any_value(device) AS device,
        any_value(driver_version) AS driver_version,
        any_value(cuda_version) AS cuda_version,
        any_value(torch_version) AS torch_version,
        any_value(triton_version) AS triton_version,
        max(harness_version) AS harness_version,
        any_value(timing) AS timing,
        string_agg(DISTINCT source, ',' ORDER BY source) AS batches,
        -- issue 38: the tuner space an exhaustive plan timed for this table, its size
        -- (tuned, default, neighbours and every other launchable config) and how
        -- many of its candidates have a result; the fastest of them is the optimum
        any_value(exhaustive_space) AS exhaustive_space,
        max(space_size) AS space_size,
        count(*) FILTER (WHERE exhaustive_space IS NOT NULL) AS n_space_measured,
        min(t_us) FILTER (WHERE exhaustive_space IS NOT NULL AND status = 'ok')
            AS t_space_best_us,
        max(measured_at) AS measured_at
    FROM m
    GROUP BY row_id, measured_on, routing
),
labelled AS (
    SELECT
        agg.*,
        CASE WHEN superseded_reason IS NULL THEN t_default_us / t_tuned_us END
            AS measured_speedup_vs_default,
        CASE WHEN superseded_reason IS NULL THEN ties.best_configs END
            AS measured_best_configs,
        CASE WHEN superseded_reason IS NULL THEN ties.best_labels END AS best_labels,
        CASE WHEN superseded_reason IS NULL THEN ties.n_tied END AS n_best_tied,
        CASE WHEN superseded_reason IS NULL THEN ties.n_tied > 1 END AS best_is_tie,
        CASE WHEN superseded_reason IS NULL AND ties.n_tied = 1 THEN ties.best_labels[1] END
            AS best_label,
        CASE WHEN superseded_reason IS NULL AND ties.n_tied = 1 THEN fastest_config END
            AS measured_best_config,
        CASE WHEN superseded_reason IS NULL THEN greatest(spread_tuned, spread_best) END
            AS noise_tuned_vs_best
    FROM agg
    LEFT JOIN ties
        ON ties.row_id = agg.row_id AND ties.measured_on IS NOT DISTINCT FROM agg.measured_on
        AND ties.routing = agg.routing
)
SELECT
    row_id AS id,
    kernel,
    repo,
    dtype,
    quant,
    gpu,
    measured_on,
    measured_on IS DISTINCT FROM gpu AS cross_gpu,
    routing,
    config_path,
    "E",
    "N",
    "K",
    "M",
    block_shape,
    top_k,
    n_shared,
    moe_gemms,
    model_reading,
    best_config,
    default_config,
    latency_table,
    t_tuned_us,
    t_default_us,
    measured_speedup_vs_default,
    documented_speedup_vs_default,
    t_best_us,
    fastest_label,
    best_label,
    measured_best_config,
    measured_best_configs,
    best_labels,
    n_best_tied,
    best_is_tie,
    -- the tuned config alone fastest beyond noise (NULL when superseded)
    CASE WHEN superseded_reason IS NULL
        THEN coalesce(measured_best_config = tuned_config, false) END AS tuned_is_best,
    CASE WHEN superseded_reason IS NULL THEN t_tuned_us / t_best_us END AS tuned_gap,
    spread_tuned,
    spread_default,
    spread_best,
    -- noise of a comparison: the larger spread of the two timings compared
    noise_tuned_vs_best,
    CASE WHEN superseded_reason IS NULL THEN
        t_tuned_us <= t_best_us * (1 + greatest(spread_tuned, spread_best)) END
        AS tuned_within_noise_of_best,
    CASE WHEN superseded_reason IS NULL THEN
        t_tuned_us > t_default_us * (1 + greatest(spread_tuned, spread_default)) END
        AS default_faster_beyond_noise,
    superseded_reason,
    tuned_status,
    default_status,
    n_candidates,
    n_ok,
    n_neighbours,
    n_invalid_config,
    n_out_of_resources,
    n_compile_failed,
    n_launch_failed,
    n_wrong_result,
    n_harness_error,
    device,
    driver_version,
    cuda_version,
    torch_version,
    triton_version,
    harness_version,
    timing,
    batches,
    exhaustive_space,
    space_size,
    n_space_measured,
    -- every candidate of the space timed: t_best_us is then the space's optimum
    coalesce(n_space_measured >= space_size, false) AS exhaustive,
    CASE WHEN superseded_reason IS NULL AND n_space_measured >= space_size
        THEN t_tuned_us / t_space_best_us - 1 END AS tuned_regret_vs_optimum,
    CASE WHEN superseded_reason IS NULL AND n_space_measured >= space_size
        THEN t_default_us / t_space_best_us - 1 END AS default_regret_vs_optimum,
    kernel_source_sha,
    measured_at,
    split
FROM labelled
ORDER BY kernel, quant, repo, config_path, "M", id, measured_on, routing
