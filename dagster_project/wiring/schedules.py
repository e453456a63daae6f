"""The daily refresh: fetch every repo at 04:00 UTC; everything downstream follows.

The schedule only fetches the repositories (one run per repo partition). Downstream
assets declare automation conditions (``execution/policy.py``): mined assets
update as soon as their inputs changed, doing only incremental work; simulated shards
regenerate only when missing or when the generator's code version changed. The
automation sensor that evaluates those conditions is in ``sensors.py``.
"""

from __future__ import annotations

import dagster as dg

from dagster_project.settings import REPOS

DAILY_CRON = "0 4 * * *"


def all_schedules() -> list[dg.ScheduleDefinition]:
    @dg.schedule(
        name="daily_refresh",
        cron_schedule=DAILY_CRON,
        job_name="sources_job",
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description="Fetch vLLM, SGLang and FlashInfer daily; "
        "downstream assets refresh incrementally.",
    )
    def daily_refresh(context: dg.ScheduleEvaluationContext):  # noqa: ANN202
        day = (
            context.scheduled_execution_time.strftime("%Y-%m-%d")
            if context.scheduled_execution_time
            else "manual"
        )
        for repo in REPOS:
            yield dg.RunRequest(
                run_key=f"{day}-{repo}", partition_key=repo, tags={"kernelhouse/refresh": day}
            )

    return [daily_refresh]
