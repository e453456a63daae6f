-- Published rows of the kernel_commits subset for one split ($split), in a stable order.
-- `split` is left out: the split is the file a row lives in. The quality columns the README
-- tells users to filter on (rule, hardware_from_code, touches_cpu_kernel, reverted_by,
-- duplicate_of, task_kind and task_kind_reason: issue 41) are published with the rows, and
-- so is the execution evidence (issue 35:
-- exec_status and its reason for every row; for rows run on a GPU, equivalence, both
-- measured speedups with their 95% CIs and significance, and the toolchain they ran on).
SELECT
    id,
    repo,
    sha,
    pr_number,
    pr_url,
    title,
    rule,
    authored_at,
    path,
    language,
    before_code,
    after_code,
    diff,
    prompt,
    models_mentioned,
    hardware_mentioned,
    hardware_from_code,
    speedup_claims,
    pr_body,
    gains,
    kernel_speedup,
    e2e_speedup,
    license,
    touches_kernel_body,
    touches_cpu_kernel,
    is_binding_file,
    reverted_by,
    duplicate_of,
    task_kind,
    task_kind_reason,
    exec_status,
    exec_reason,
    executed,
    equivalent,
    measured_kernel_speedup,
    measured_kernel_speedup_ci_lo,
    measured_kernel_speedup_ci_hi,
    measured_kernel_significant,
    measured_host_speedup,
    measured_host_speedup_ci_lo,
    measured_host_speedup_ci_hi,
    measured_host_significant,
    exec_toolchain
FROM datasets.kernel_commits
WHERE split = $split
ORDER BY authored_at, id
