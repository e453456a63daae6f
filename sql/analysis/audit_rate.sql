-- Verbatim audit pass rate of extracted baseline/optimized pairs, per extractor.
SELECT extractor, coalesce(model_used, '-') AS model, count(*) AS pairs,
       count(*) FILTER (WHERE audit_pass) AS passed,
       round(100.0 * count(*) FILTER (WHERE audit_pass) / nullif(count(*), 0), 2) AS pass_pct
FROM derived.pr_gains
WHERE baseline IS NOT NULL AND optimized IS NOT NULL
GROUP BY ALL
