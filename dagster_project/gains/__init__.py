"""Benchmark gains extracted from PR descriptions (domain code; never imports dagster).

Entry points: :func:`extract_text` / :func:`extract_pr_gains` (either extractor, then
finalise + verbatim audit), :mod:`.attribution` for kernel_commits / tuned_configs
fields, :mod:`.evaluation` for scoring extractors on labelled fixtures.
"""

from dagster_project.gains.attribution import (
    attribute_config_row,
    config_speedup_vs_default,
    kernel_commit_speedups,
)
from dagster_project.gains.audit import audit_measurement, audit_rate
from dagster_project.gains.extract import (
    PRGains,
    body_sha256,
    extract_pr_gains,
    extract_text,
    pr_text,
)
from dagster_project.gains.extract.choose import EXTRACTOR_VERSION, extract_table
from dagster_project.gains.llm_extractor import PROMPT_VERSION, LLMConfig, LLMExtractor, LLMResult
from dagster_project.gains.schema import GAIN_FIELDS, LLM_OUTPUT_SCHEMA, Measurement

__all__ = [
    "EXTRACTOR_VERSION",
    "GAIN_FIELDS",
    "LLM_OUTPUT_SCHEMA",
    "PROMPT_VERSION",
    "LLMConfig",
    "LLMExtractor",
    "LLMResult",
    "Measurement",
    "PRGains",
    "attribute_config_row",
    "config_speedup_vs_default",
    "kernel_commit_speedups",
    "audit_measurement",
    "audit_rate",
    "body_sha256",
    "extract_pr_gains",
    "extract_table",
    "extract_text",
    "pr_text",
]
