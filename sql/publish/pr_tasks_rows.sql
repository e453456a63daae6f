-- Published rows of the pr_tasks subset for one split ($split), in a stable order (issue 41).
-- One row per commit (PR) of kernel_commits; `files` holds every kept file with its
-- before_code / after_code, `split` is left out (the file a row lives in says it).
SELECT
    id,
    repo,
    sha,
    pr_number,
    pr_url,
    title,
    rule,
    authored_at,
    n_files,
    paths,
    languages,
    licenses,
    files,
    prompt,
    models_mentioned,
    hardware_mentioned,
    hardware_from_code,
    speedup_claims,
    pr_body,
    gains,
    kernel_speedup,
    e2e_speedup,
    lines_changed,
    touches_kernel_body,
    touches_cpu_kernel,
    reverted_by,
    duplicate_of
FROM datasets.pr_tasks
WHERE split = $split
ORDER BY authored_at, id
