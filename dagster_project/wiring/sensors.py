"""Sensors: the automation sensor for downstream refresh, and an optional watcher that
notices new upstream heads with ``git ls-remote`` and requests a fetch."""

from __future__ import annotations

import json

import dagster as dg

from dagster_project.settings import REPOS


def remote_heads() -> dict[str, str]:
    """Current head of every configured source (``git ls-remote``); unreachable → absent."""
    from dagster_project.mining.git import ls_remote_head
    from dagster_project.settings import load_settings

    s = load_settings()
    heads = {}
    for repo in REPOS:
        sha = ls_remote_head(s.sources[repo], s.refs[repo])
        if sha:
            heads[repo] = sha
    return heads


def all_sensors() -> list[dg.SensorDefinition]:
    @dg.sensor(
        name="upstream_heads",
        job_name="sources_job",
        minimum_interval_seconds=900,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Requests repo_clone[repo] when `git ls-remote` shows a head "
        "the lake has not seen.",
    )
    def upstream_heads(context: dg.SensorEvaluationContext):  # noqa: ANN202
        seen = json.loads(context.cursor) if context.cursor else {}
        heads = remote_heads()
        for repo, sha in heads.items():
            if seen.get(repo) != sha:
                yield dg.RunRequest(run_key=f"{repo}-{sha}", partition_key=repo)
        context.update_cursor(json.dumps({**seen, **heads}))

    automation = dg.AutomationConditionSensorDefinition(
        "kernelhouse_automation",
        target=dg.AssetSelection.all(),
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Evaluates the assets' automation conditions (incremental downstream refresh).",
    )
    return [upstream_heads, automation]
