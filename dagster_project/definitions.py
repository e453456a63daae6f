"""The one place a ``Definitions`` object is built.

``defs`` is lazy (``@dg.definitions``): importing this module reads no environment,
opens no database and touches no network. Dagster calls ``defs()`` when it loads the
code location; the CLI and tests call ``build_definitions()``.
"""

from __future__ import annotations

import dagster as dg

from dagster_project.settings import load_settings


def asset_modules() -> list:
    """Every asset module under ``assets/`` (one per layer)."""
    import importlib
    import pkgutil

    import assets as assets_pkg

    return [
        importlib.import_module(f"assets.{m.name}")
        for m in sorted(pkgutil.iter_modules(assets_pkg.__path__), key=lambda m: m.name)
    ]


def select_executor(name: str | None = None) -> dg.ExecutorDefinition:
    """In-process by default (DuckDB has one writer; 2 cores): multiprocess or Dask on
    request via ``KERNELHOUSE_EXECUTOR``."""
    settings = load_settings()
    name = name or settings.executor
    if name == "multiprocess":
        return dg.multiprocess_executor
    if name == "dask":
        from dagster_dask import dask_executor

        cluster = (
            {"existing": {"address": settings.dask_scheduler}}
            if settings.dask_scheduler
            else {"local": {"n_workers": 2, "threads_per_worker": 1}}
        )
        return dask_executor.configured({"cluster": cluster})
    return dg.in_process_executor


def automation_for(group: str | None) -> dg.AutomationCondition | None:
    """Refresh policy per layer: sources are scheduled; simulated shards rebuild only when
    missing or when the generator's code version changed; everything else updates
    eagerly after its inputs did (each asset does only incremental work)."""
    if group == "sources":
        return None
    if group == "simulated":
        return dg.AutomationCondition.missing() | dg.AutomationCondition.code_version_changed()
    if group == "publish":
        return None  # exports and the Hub push stay explicit
    return dg.AutomationCondition.eager()


def build_definitions(executor: str | None = None) -> dg.Definitions:
    from dagster_project import checks, jobs, schedules, sensors
    from dagster_project.resources import default_resources

    modules = asset_modules()
    assets = dg.map_asset_specs(
        lambda spec: spec.replace_attributes(automation_condition=automation_for(spec.group_name)),
        dg.load_assets_from_modules(modules),
    )
    keys = [k for a in assets if isinstance(a, dg.AssetsDefinition) for k in a.keys]
    return dg.Definitions(
        assets=assets,
        asset_checks=[*dg.load_asset_checks_from_modules(modules), *checks.all_checks(keys)],
        jobs=jobs.all_jobs(),
        schedules=schedules.all_schedules(),
        sensors=sensors.all_sensors(),
        resources=default_resources(),
        executor=select_executor(executor),
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions()
