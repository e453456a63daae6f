-- Documented gains by scope, hardware and metric: how much PRs claim, where. Only published
-- measurements count (published: audited and above the publication policy's threshold,
-- gains/policy.py), the same rows that reach kernel_speedup / e2e_speedup, so a withheld or
-- audit-failed pair never enters a median here either.
SELECT g.repo, g.scope, coalesce(g.hardware, '?') AS hardware, g.metric,
       count(*) AS measurements, count(DISTINCT g.pr_number) AS prs,
       median(g.speedup) AS median_speedup,
       quantile_cont(g.speedup, 0.1) AS p10, quantile_cont(g.speedup, 0.9) AS p90
FROM derived.pr_gains AS g
WHERE g."primary" AND g.published AND g.speedup IS NOT NULL
GROUP BY ALL
ORDER BY measurements DESC
