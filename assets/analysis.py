"""Analysis layer: SQL views over the datasets (``sql/analysis``) for users' questions."""

import dagster as dg

from dagster_project.execution import policy
from dagster_project.wiring import lineage
from dagster_project.wiring.resources import LakeResource


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    tags=policy.lineage_tags("analysis_views"),
    group_name="analysis",
    kinds={"duckdb", "sql"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("analysis_views"),
    description="(Re)create the analysis.* views from sql/analysis/*.sql.",
)
def analysis_views(lake: LakeResource) -> dg.MaterializeResult:
    """Create every view whose tables exist; list the ones waiting for a table."""
    from dagster_project.report.analysis import create_views
    from dagster_project.storage.columns import columns_markdown

    report = create_views(lake.lake())
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(report.created),
            "views": dg.MetadataValue.json(report.created),
            "waiting": dg.MetadataValue.json(report.skipped),
            "columns": dg.MetadataValue.md(
                columns_markdown([f"analysis.{v}" for v in report.created])
            ),
        }
    )
