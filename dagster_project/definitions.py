"""The one place a ``Definitions`` object is built: it only assembles.

``defs`` is lazy (``@dg.definitions``): importing this module reads no environment,
opens no database and touches no network. Dagster calls ``defs()`` when it loads the
code location; the CLI and tests call ``build_definitions()``.

What runs the graph (executors, the staged build and refresh planner, distributed runs)
is in ``dagster_project/execution/``; each asset declares its own refresh policy in its
decorator (``execution/policy.py``); what of it depends on settings or on the rule
versions loaded now (the simulator's seed and sizes in code versions and shard keys, the
miner's rule versions) is resolved here, from the assets' tags, by ``policy.resolve``.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import cast

import dagster as dg

from dagster_project.settings import load_settings


def asset_modules() -> list[ModuleType]:
    """Every asset module under ``assets/`` (one per layer)."""
    import importlib
    import pkgutil

    import assets as assets_pkg

    return [
        importlib.import_module(f"assets.{m.name}")
        for m in sorted(pkgutil.iter_modules(assets_pkg.__path__), key=lambda m: m.name)
    ]


def build_definitions(executor: str | dg.ExecutorDefinition | None = None) -> dg.Definitions:
    """Assets (with their declared policy resolved against the settings), checks, jobs,
    schedules, sensors and resources, and the executor ``KERNELHOUSE_EXECUTOR`` names
    (or ``executor``)."""
    from dagster_project.execution import policy
    from dagster_project.execution.executors import select_executor
    from dagster_project.wiring import checks, jobs, schedules, sensors
    from dagster_project.wiring.resources import default_resources

    modules = asset_modules()
    settings = load_settings()
    # load_assets_from_modules is typed to return source assets, cacheable assets and specs
    # too; assets/ declares none (and include_specs is off), so each is an AssetsDefinition.
    loaded = cast(list[dg.AssetsDefinition], dg.load_assets_from_modules(modules))
    assets = dg.map_asset_specs(lambda spec: policy.resolve(spec, settings), loaded)
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


@functools.lru_cache(maxsize=1)
def base_definitions() -> dg.Definitions:
    """The in-process definitions a worker process (``execution.local``, a Dask worker)
    builds once and reuses for every run and step it is given."""
    return build_definitions("in_process")


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions()
