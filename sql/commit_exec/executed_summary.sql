-- Issue 35: rows per harness spec and device session (batch): rows run, commits, executed
-- rows (equivalent, judged by device/judge.py), their median graph/host speedups, executed
-- rows whose graph speedup is significant (CI clears the 2% floor, device/stats.py),
-- A/A or path controls whose CI holds 1.0, device seconds of the timing process.
SELECT batch, spec, count(*) AS rows, count(DISTINCT sha) AS commits,
       count(*) FILTER (WHERE status = 'executed') AS executed,
       round(median(graph_speedup) FILTER (WHERE status = 'executed'), 3) AS median_graph,
       round(median(host_speedup) FILTER (WHERE status = 'executed'), 3) AS median_host,
       count(*) FILTER (WHERE status = 'executed' AND graph_significant) AS significant_graph,
       count(*) FILTER (WHERE control_graph_ci_lo <= 1 AND control_graph_ci_hi >= 1)
           AS controls_at_1,
       count(control_graph_speedup) AS controls,
       round(sum(seconds), 1) AS seconds
FROM derived.commit_exec_runs
GROUP BY ALL
ORDER BY batch, spec
