-- Issue 35: executed rows per harness spec and device session (batch): rows, commits,
-- equivalent rows, median graph/host speedup, rows whose graph speedup is significant,
-- control shapes whose CI holds 1.0, device seconds.
SELECT batch, spec, count(*) AS rows, count(DISTINCT sha) AS commits,
       count(*) FILTER (WHERE status = 'executed') AS executed,
       round(median(graph_speedup), 3) AS median_graph_speedup,
       round(median(host_speedup), 3) AS median_host_speedup,
       count(*) FILTER (WHERE graph_ci_lo > 1 OR graph_ci_hi < 1) AS significant_graph,
       count(*) FILTER (WHERE control_graph_ci_lo <= 1 AND control_graph_ci_hi >= 1) AS controls_at_1,
       count(control_graph_speedup) AS controls,
       round(sum(seconds), 1) AS seconds
FROM derived.commit_exec_runs
GROUP BY ALL
ORDER BY batch, spec
