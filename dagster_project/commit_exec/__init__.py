"""Executing kernel_commits rows: census (which rows can run and why not), harness specs,
the GPU runner, ingestion of its shipped results, and the execution reward (issue 35)."""
