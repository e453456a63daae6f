-- Whether gains were extracted for this build, in words (written by the pr_gains asset):
-- the card says "gains not extracted: N of N PR bodies unavailable" instead of claiming
-- "0 PRs with benchmark numbers" it never checked. Empty when pr_gains has not run.
SELECT prs_needed, bodies_available, bodies_unavailable, extracted, reason
FROM derived.pr_gains_state
LIMIT 1
