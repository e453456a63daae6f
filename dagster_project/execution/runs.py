"""One Dagster run of some assets for one partition, as the build planner and its worker
processes start it, and the types both share.

Why a module of its own: ``planner`` (which plans and collects runs) and ``local`` (whose
worker processes execute them) both need the run itself and its result types; with
them in either one, the two imported each other (issue 34). And why not
``dg.materialize``: its runs are all named ``__ephemeral_asset_job__`` in the UI and the
run list; ours carry the command that started them (``kernelhouse_build``,
``kernelhouse_refresh``), through the same ``define_asset_job`` + ``execute_in_process``
that ``materialize`` uses.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import dagster as dg

#: Job names of the runs a command starts (the ``kernelhouse/cli`` tag's value decides).
BUILD_JOB, REFRESH_JOB = "kernelhouse_build", "kernelhouse_refresh"

# The CLI prints its own progress; Dagster's DEBUG event stream would drown it.
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@dataclass
class RunSummary:
    """What ``planner.run_build`` reads from a run that ran in another process: the same three
    views as an ``ExecuteInProcessResult`` (the events are Dagster's own, pickled)."""

    run_id: str
    success: bool
    all_events: list[Any]

    def get_asset_materialization_events(self) -> list[Any]:
        return [e for e in self.all_events if e.is_step_materialization]

    def get_asset_check_evaluations(self) -> list[Any]:
        return [
            e.event_specific_data
            for e in self.all_events
            if e.event_type_value == "ASSET_CHECK_EVALUATION"
        ]


# A run's result: in process, or launched elsewhere (``launch``): a Dask run's result, or
# the summary of a run in a ``LocalRuns`` worker process.
Result = dg.ExecuteInProcessResult | dg.JobExecutionResult | RunSummary
# Starts a run of (asset keys, partition key) elsewhere; returns a wait for its result.
Launch = Callable[[list[dg.AssetKey], str | None], Callable[[], Result]]


@functools.cache
def load_definitions(ref: str) -> dg.Definitions:
    """The ``Definitions`` that ``ref`` (``"package.module:function"``) builds, once per
    process. A worker process (a pool's, a Dask run's) rebuilds the definitions its
    caller names, as a Dagster code location is named by its module: the run machinery
    stays below the assembly it runs (``definitions.py``) and never imports it."""
    module, _, attr = ref.partition(":")
    factory = getattr(importlib.import_module(module), attr)
    defs = factory()
    if not isinstance(defs, dg.Definitions):
        raise TypeError(f"{ref} built {type(defs).__name__}, not dagster Definitions")
    return defs


def materializable(defs: dg.Definitions) -> list[dg.AssetsDefinition | dg.AssetSpec]:
    """Every asset and asset check of ``defs``: what a run materialises from.

    ``Definitions.assets`` is typed to hold source and cacheable assets too; ours come
    from ``build_definitions`` (``map_asset_specs`` over assets definitions only)."""
    assets = cast(list[dg.AssetsDefinition | dg.AssetSpec], list(defs.assets or []))
    return assets + list(defs.asset_checks or [])


def job_name(tags: Mapping[str, str]) -> str:
    """The run's job name: the command that started it (``kernelhouse/cli`` tag)."""
    return REFRESH_JOB if tags.get("kernelhouse/cli") == "refresh" else BUILD_JOB


def run_assets(
    assets: Sequence[dg.AssetsDefinition | dg.AssetSpec],
    resources: Mapping[str, Any],
    instance: dg.DagsterInstance,
    keys: Sequence[dg.AssetKey],
    partition_key: str | None,
    *,
    run_config: Mapping[str, Any] | None,
    tags: Mapping[str, str],
) -> dg.ExecuteInProcessResult:
    """Materialise ``keys`` (and their checks) for one partition in this process, as a run
    of a job named after the command (``job_name``)."""
    name = job_name(tags)
    defs = dg.Definitions(
        jobs=[dg.define_asset_job(name=name, selection=dg.AssetSelection.assets(*keys))],
        assets=list(assets),
        resources=dict(resources),
    )
    return defs.resolve_job_def(name).execute_in_process(
        run_config=dict(run_config) if run_config else None,
        instance=instance,
        partition_key=partition_key,
        raise_on_error=False,
        tags=dict(tags),
    )
