"""gains layer: benchmark measurements extracted from PR bodies, with the verbatim audit."""

import dagster as dg

from dagster_project.execution import policy
from dagster_project.gains.pipeline import extractor_code_version
from dagster_project.storage.lineage import PR_NUMBER_TABLES
from dagster_project.wiring import lineage
from dagster_project.wiring.resources import LakeResource, LLMResource
from dagster_project.wiring.table_metadata import materialize_result


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    group_name="gains",
    kinds={"python", "duckdb"},
    owners=["team:kernelhouse"],
    tags={policy.CODE_VERSION_TAG: policy.EXTRACTOR},
    code_version=extractor_code_version(None),
    deps=lineage.deps("pr_gains"),
    metadata=lineage.tables("pr_gains"),
    description=(
        "One row per extracted measurement (table extractor; LLM too when configured), audited "
        "verbatim."
    ),
)
def pr_gains(
    context: dg.AssetExecutionContext, lake: LakeResource, llm: LLMResource
) -> dg.MaterializeResult:
    """Extract only for new/changed bodies or extractor versions; failures keep a reason."""
    from dagster_project.gains.pipeline import gains_tables

    handle = lake.lake()
    needed_from = [
        handle.query(f"SELECT DISTINCT repo, pr_number FROM {table}")
        if handle.table_exists(*table.split("."))
        else None
        for table in PR_NUMBER_TABLES
    ]
    out = gains_tables(
        handle.read_table_or_none("raw", "pr_bodies"),
        needed_from,
        handle.read_table_or_none("derived", "pr_extractions"),
        llm.config(),
        log=context.log.info,
        warn=context.log.warning,
    )
    handle.replace_table("derived", "pr_extractions", out.runs)
    handle.replace_table("derived", "pr_gains", out.gains)
    handle.replace_table("derived", "pr_gains_state", out.state)
    handle.replace_table("derived", "pr_gains_crosscheck", out.crosscheck)
    handle.replace_table("derived", "pr_quarantine", out.quarantine)
    return materialize_result(handle, out.metadata, version=("derived.pr_gains",))
