"""gains layer: benchmark measurements extracted from PR bodies, with the verbatim audit."""

import dagster as dg
import polars as pl

from dagster_project.execution import policy
from dagster_project.resources import LakeResource, LLMResource
from dagster_project.table_metadata import table_schema
from dagster_project.versions import table_version


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    group_name="gains", kinds={"python", "duckdb"}, owners=["team:kernelhouse"],
    deps=[dg.AssetKey("pr_bodies")],
    metadata={"table": "derived.pr_gains"},
    description="One row per extracted measurement (table extractor; LLM too when configured), audited verbatim.",
)
def pr_gains(context: dg.AssetExecutionContext, lake: LakeResource, llm: LLMResource) -> dg.MaterializeResult:
    """Extract only for new/changed bodies or extractor versions; failures keep a reason."""
    from dagster_project.gains.audit import audit_rate
    from dagster_project.gains.llm_extractor import LLMConfig
    from dagster_project.gains.pipeline import (
        RUNS_SCHEMA,
        STATE_SCHEMA,
        cross_checks,
        extract_bodies,
        extraction_state,
        gains_frame,
        pr_numbers_needed,
    )

    handle = lake.lake()
    bodies = handle.read_table_or_none("raw", "pr_bodies")
    needed = pr_numbers_needed(*(
        handle.query(f"SELECT DISTINCT repo, pr_number FROM {table}")
        if handle.table_exists(*table.split(".")) else None
        for table in ("derived.config_attribution", "raw.kernel_commit_files")
    ))
    state = extraction_state(needed, bodies)
    if not state["extracted"]:
        context.log.warning(state["reason"])
    cfg = llm.config()
    llm_cfg = LLMConfig(**cfg) if cfg else None
    runs, new = extract_bodies(
        bodies if bodies is not None else pl.DataFrame(schema={"status": pl.String}),
        handle.read_table_or_none("derived", "pr_extractions"),
        llm_cfg,
        on_progress=lambda i, n: context.log.info(f"extracted {i}/{n}") if i % 100 == 0 else None,
    ) if bodies is not None and bodies.height else (pl.DataFrame(schema=RUNS_SCHEMA), 0)
    gains = gains_frame(runs)
    handle.replace_table("derived", "pr_extractions", runs)
    handle.replace_table("derived", "pr_gains", gains)
    handle.replace_table("derived", "pr_gains_state", pl.DataFrame([state], schema=STATE_SCHEMA))
    checks = cross_checks(runs)
    handle.replace_table("derived", "pr_gains_crosscheck", checks)
    # every extracted value counts (pairs and stated ratios), as in the 98.8% gate
    rate = audit_rate(gains.to_dicts()) if gains.height else None
    plots = ""
    with_speedup = gains.filter(pl.col("speedup").is_not_null() & pl.col("primary"))
    if with_speedup.height:
        from dagster_project.report import plots_markdown

        for scope in ("kernel", "e2e"):
            part = with_speedup.filter(pl.col("scope") == scope)
            if part.height:
                plots += plots_markdown(part, "histogram", x="speedup", log_x=True, title=f"{scope} speedups") + "\n\n"
    return dg.MaterializeResult(data_version=dg.DataVersion(table_version(handle, "derived.pr_gains")), metadata={
        "plots": dg.MetadataValue.md(plots or state["reason"]),
        "gains_state": state["reason"],
        "dagster/row_count": gains.height,
        **table_schema(lake.lake(), "derived.pr_gains"),
        "new_extractions": new,
        "prs_with_gains": gains.select("repo", "pr_number").unique().height if gains.height else 0,
        "failed_extractions": int((~runs["ok"]).sum()) if runs.height else 0,
        "llm_table_disagreements": int((~checks["agree"]).sum()) if checks.height else 0,
        "audit_pass_rate": float(rate) if rate is not None else -1.0,
        "llm": cfg["model"] if cfg else "not configured (table extractor only)",
        "tokens": int(runs["prompt_tokens"].sum() + runs["completion_tokens"].sum()) if runs.height else 0,
    })
