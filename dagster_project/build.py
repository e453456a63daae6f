"""Former home of the staged build and refresh planner: now ``dagster_project.execution``.

Only re-exports, for callers not yet moved (``status.py``, some tests and benchmarks);
new code imports from ``dagster_project.execution.planner`` / ``.local`` / ``.probes``.
Delete this module once nothing imports it (``grep -rn "dagster_project.build\\b"``).
"""

from __future__ import annotations

from dagster_project.execution.local import LocalRuns, RunSummary, default_workers
from dagster_project.execution.planner import (
    QUIET_RUN_CONFIG,
    BuildOutcome,
    Launch,
    Result,
    Stage,
    normalise_selection,
    plan_stages,
    run_build,
    stale_reasons,
)
from dagster_project.execution.probes import (
    PROBE_TIMEOUT_S,
    probe_source,
    probe_sources,
    service_unreachable,
)

__all__ = [
    "PROBE_TIMEOUT_S",
    "QUIET_RUN_CONFIG",
    "BuildOutcome",
    "Launch",
    "LocalRuns",
    "Result",
    "RunSummary",
    "Stage",
    "default_workers",
    "normalise_selection",
    "plan_stages",
    "probe_source",
    "probe_sources",
    "run_build",
    "service_unreachable",
    "stale_reasons",
]


def _unreachable(name: str) -> str | None:
    """``status.source_notes``' old call by asset name; use ``service_unreachable``."""
    from dagster_project.execution import policy

    legacy = {"pr_bodies": policy.GITHUB, "moe_model_shapes": policy.HUB}
    return service_unreachable(legacy.get(name, name))
