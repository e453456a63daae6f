-- Issue 35: every speed claim we have about an executed kernel_commits row beside what the
-- row measured when its before/after files ran on a GPU (only rows whose outputs matched:
-- equivalent). One row per (file row, claim, timing scope).
--   claim_source  'text' (a phrase of the title or commit message, mentions.speedup_claims),
--                 'pr_kernel' / 'pr_e2e' (audited PR-description gains), 'none' (no claim)
--   claim_value   the largest factor the phrase states ("2-5x" -> 5, "25% better" -> 1.25)
--   scope         'graph' (CUDA-graph replay, device time) or 'host' (per call, host included)
--   hardware      'match' unless the title/path targets AMD or Blackwell (exec_claim_hardware)
--   reproduces    measured within 2x of the claim (claim/2 <= measured <= 2*claim)
WITH executed AS (
    SELECT *
    FROM datasets.kernel_commits
    WHERE equivalent
),
text_claims AS (
    SELECT id, 'text' AS claim_source, claim AS claim_text,
           greatest(
               list_max(list_transform(
                   regexp_extract_all(claim, '(\d+(?:\.\d+)?)\s*[xX×]', 1), lambda v: v::DOUBLE)),
               1 + list_max(list_transform(
                   regexp_extract_all(claim, '(\d+(?:\.\d+)?)\s*%', 1), lambda v: v::DOUBLE)) / 100
           ) AS claim_value
    FROM (SELECT id, unnest(speedup_claims) AS claim FROM executed)
),
claims AS (
    SELECT * FROM text_claims WHERE claim_value IS NOT NULL
    UNION ALL
    SELECT id, 'pr_kernel', NULL, kernel_speedup FROM executed WHERE kernel_speedup IS NOT NULL
    UNION ALL
    SELECT id, 'pr_e2e', NULL, e2e_speedup FROM executed WHERE e2e_speedup IS NOT NULL
),
with_none AS (
    SELECT * FROM claims
    UNION ALL
    SELECT id, 'none', NULL, NULL FROM executed WHERE id NOT IN (SELECT id FROM claims)
),
scoped AS (
    SELECT e.id, e.repo, e.sha, e.path, e.title, c.claim_source, c.claim_text, c.claim_value,
           s.scope,
           CASE s.scope WHEN 'graph' THEN e.measured_kernel_speedup ELSE e.measured_host_speedup END
               AS measured,
           CASE s.scope WHEN 'graph' THEN e.measured_kernel_speedup_ci_lo
                ELSE e.measured_host_speedup_ci_lo END AS measured_ci_lo,
           CASE s.scope WHEN 'graph' THEN e.measured_kernel_speedup_ci_hi
                ELSE e.measured_host_speedup_ci_hi END AS measured_ci_hi,
           CASE s.scope WHEN 'graph' THEN e.measured_kernel_significant
                ELSE e.measured_host_significant END AS significant,
           coalesce(e.exec_claim_hardware, 'match') AS hardware,
           e.exec_toolchain
    FROM executed e
    JOIN with_none c USING (id)
    CROSS JOIN (VALUES ('graph'), ('host')) s(scope)
)
SELECT *,
       CASE WHEN claim_value IS NULL OR measured IS NULL THEN NULL
            ELSE measured BETWEEN claim_value / 2 AND claim_value * 2 END AS reproduces
FROM scoped
