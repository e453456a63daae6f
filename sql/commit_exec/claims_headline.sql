-- Issue 35: the headline of analysis.claims_vs_measured: how often a stated speedup
-- reproduces within 2x, by timing scope and hardware match (rows with a claim only).
SELECT scope, hardware, claim_source,
       count(*) AS claims,
       count(*) FILTER (WHERE reproduces) AS reproduce_within_2x,
       round(100.0 * count(*) FILTER (WHERE reproduces) / nullif(count(*), 0), 1) AS pct,
       round(median(measured), 3) AS median_measured,
       round(median(claim_value), 3) AS median_claim
FROM analysis.claims_vs_measured
WHERE claim_value IS NOT NULL AND measured IS NOT NULL
GROUP BY ALL
ORDER BY scope, hardware, claim_source
