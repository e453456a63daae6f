-- Published rows of the kernel_commits subset for one split ($split), in a stable order.
-- `split` is left out: the split is the file a row lives in.
SELECT
    id,
    repo,
    sha,
    pr_number,
    pr_url,
    title,
    authored_at,
    path,
    language,
    before_code,
    after_code,
    diff,
    prompt,
    models_mentioned,
    hardware_mentioned,
    speedup_claims,
    pr_body,
    gains,
    kernel_speedup,
    e2e_speedup,
    license,
    touches_kernel_body,
    is_binding_file
FROM datasets.kernel_commits
WHERE split = $split
ORDER BY authored_at, id
