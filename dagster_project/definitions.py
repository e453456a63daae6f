"""The one place a ``Definitions`` object is built.

``defs`` is lazy (``@dg.definitions``): importing this module reads no environment,
opens no database and touches no network. Dagster calls ``defs()`` when it loads the
code location; the CLI and tests call ``build_definitions()``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import multiprocessing
import os
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import dagster as dg

from dagster_project.settings import Settings, load_settings


def asset_modules() -> list:
    """Every asset module under ``assets/`` (one per layer)."""
    import importlib
    import pkgutil

    import assets as assets_pkg

    return [
        importlib.import_module(f"assets.{m.name}")
        for m in sorted(pkgutil.iter_modules(assets_pkg.__path__), key=lambda m: m.name)
    ]


def select_executor(name: str | dg.ExecutorDefinition | None = None) -> dg.ExecutorDefinition:
    """In-process by default (DuckDB has one writer; 2 cores): multiprocess or Dask on
    request via ``KERNELHOUSE_EXECUTOR`` (``dask``: against ``KERNELHOUSE_DASK_SCHEDULER``,
    else a local cluster per run). The UI's runs use whatever this returns."""
    if isinstance(name, dg.ExecutorDefinition):
        return name
    settings = load_settings()
    name = name or settings.executor
    if name == "multiprocess":
        return dg.multiprocess_executor
    if name == "dask":
        return dask_executor_def(settings.dask_scheduler)
    return dg.in_process_executor


def dask_executor_def(address: str | None) -> dg.ExecutorDefinition:
    """Dagster's Dask executor (``run_scoped_dask_executor``) against the scheduler at
    ``address``; without one, a LocalCluster per run (two single-threaded worker
    processes: Dagster steps are not thread-safe; no dashboard, so concurrent runs do not
    fight over its port)."""
    cluster: dict[str, object] = (
        {"existing": {"address": address}}
        if address
        else {"local": {"n_workers": 2, "threads_per_worker": 1, "dashboard_address": None}}
    )
    return run_scoped_dask_executor().configured({"cluster": cluster}, name="dask")


def quiet_dask_sizeof() -> None:
    """Dask cannot size Dagster's event objects and logs a warning for each one, here and
    on every worker; the size only feeds Dask's memory estimates, so keep logs readable."""
    logging.getLogger("distributed.sizeof").setLevel(logging.ERROR)


@functools.lru_cache(maxsize=1)
def run_scoped_dask_executor() -> dg.ExecutorDefinition:
    """dagster-dask's executor with one fix: Dask task keys carry the run id.

    Upstream names each Dask task ``<job>.<step>``. Two runs of one job in flight at once
    (two partitions of a backfill, from the UI or a distributed build) then submit the
    same key, and Dask, which treats equal keys as the same computation, hands the second
    run the first run's result: the second partition is never computed, yet its run
    succeeds. Same configuration and worker function (``query_on_dask_worker``) as
    upstream; only the orchestration loop is ours. Built lazily, so importing the
    definitions does not import Dask."""
    import dask.distributed as dd
    from dagster_dask import executor as upstream

    class RunScopedDaskExecutor(upstream.DaskExecutor):
        def execute(self, plan_context: Any, execution_plan: Any) -> Iterator[dg.DagsterEvent]:
            from dagster._core.errors import raise_execution_interrupts
            from dagster._utils import iterate_with_context

            if not plan_context.instance.is_persistent:
                raise dg.DagsterInvariantViolationError(
                    "Dask execution needs a persistent Dagster instance (set DAGSTER_HOME)"
                )
            if self.cluster_type == "existing":
                cluster: Any = self.cluster_configuration["address"]
                owned = None
            elif self.cluster_type == "local":
                cluster = owned = dd.LocalCluster(**self.build_dict(plan_context.job_name))
            else:
                raise dg.DagsterInvariantViolationError(
                    f"kernelhouse runs Dask on an existing or a local cluster, not {self.cluster_type!r}"
                )
            quiet_dask_sizeof()
            try:
                with dd.Client(cluster) as client:
                    client.run(quiet_dask_sizeof)
                    futures: dict[str, Any] = {}
                    for level in execution_plan.get_steps_to_execute_by_level():
                        for step in level:
                            # Upstream steps' futures as an argument: Dask runs a step
                            # only after the steps it reads from.
                            deps = [
                                futures[key]
                                for step_input in step.step_inputs
                                for key in step_input.dependency_keys
                            ]
                            futures[step.key] = client.submit(
                                upstream.query_on_dask_worker,
                                deps,
                                plan_context.reconstructable_job,
                                plan_context.dagster_run,
                                plan_context.run_config,
                                [step.key],
                                plan_context.instance.get_ref(),
                                execution_plan.known_state,
                                key=f"{plan_context.job_name}.{step.key}.{plan_context.run_id}",
                                resources=upstream.get_dask_resource_requirements(step.tags),
                            )
                    done = dd.as_completed(list(futures.values()), with_results=True)
                    for _future, events in iterate_with_context(raise_execution_interrupts, done):
                        yield from events
            finally:
                if owned is not None:
                    owned.close()

    @dg.executor(
        name="dask",
        config_schema=upstream.dask_executor.config_schema,
        requirements=dg.multiple_process_executor_requirements(),
    )
    def kernelhouse_dask_executor(init_context: dg.InitExecutorContext) -> dg.Executor:
        ((cluster_type, cluster_config),) = init_context.executor_config["cluster"].items()
        return RunScopedDaskExecutor(cluster_type, cluster_config)

    return kernelhouse_dask_executor


def automation_for(group: str | None, name: str = "") -> dg.AutomationCondition | None:
    """Refresh policy per layer, for the automation sensor (the CLI's ``refresh`` applies
    the same rule itself, see ``build.run_build``).

    * sources: none here; the daily schedule fetches the repositories.
    * assets that observe an external service (Hub shapes, GitHub PR bodies): once a day.
    * simulated: only when missing or when the generator's code version (which includes
      its seed and sizes) changed.
    * publish: exports follow their datasets (they refuse to write while a blocking
      gate fails); the Hub push stays explicit.
    * everything else: when an input's *data version* changed. Every table writer
      reports a content fingerprint as its data version, so a fetch that found the same
      head, or a re-parse that produced the same rows, starts nothing downstream
      (Dagster's ``eager`` would react to any new materialisation instead)."""
    if group == "sources":
        return None
    if group == "simulated":
        return dg.AutomationCondition.missing() | dg.AutomationCondition.code_version_changed()
    if name == "hub_push":
        return None  # publishing to the Hub is a deliberate act
    from dagster_project.schedules import DAILY_CRON

    if name in ("moe_model_shapes", "pr_bodies"):
        return (
            dg.AutomationCondition.cron_tick_passed(DAILY_CRON, "UTC")
            & ~dg.AutomationCondition.in_progress()
        ).with_label("daily")
    changed = (
        dg.AutomationCondition.newly_missing()
        | dg.AutomationCondition.any_deps_match(dg.AutomationCondition.data_version_changed())
    ).since_last_handled()
    return (
        changed
        & ~dg.AutomationCondition.any_deps_missing()
        & ~dg.AutomationCondition.any_deps_in_progress()
        & ~dg.AutomationCondition.in_progress()
    ).with_label("inputs' data changed")


def _with_policy(spec: dg.AssetSpec, settings: Settings) -> dg.AssetSpec:
    """Attach the refresh policy; simulated code versions also carry the generation
    parameters (seed, sizes), so changing them marks the shards stale like a new
    generator version does; simulated shard keys follow the configured sizes."""
    name = spec.key.to_user_string()
    code_version = spec.code_version
    if spec.group_name == "simulated" and code_version:
        code_version = (
            f"{code_version}+seed{settings.sim_seed}"
            f".s{settings.sim_sessions}.e{settings.sim_episodes}"
        )
    from dagster_project import partitions
    from dagster_project.mining.versions import ASSET_RULES, asset_code_version

    if name in ASSET_RULES:  # mined assets: the rule versions as loaded now
        code_version = asset_code_version(name)

    pdef = spec.partitions_def
    if name == "kernelinfer_sessions":
        pdef = partitions.shard_partitions(settings.sim_sessions, partitions.KERNELINFER_SHARDS)
    elif name == "kernelswarm_episodes":
        pdef = partitions.shard_partitions(settings.sim_episodes, partitions.KERNELSWARM_SHARDS)
    return spec.replace_attributes(
        automation_condition=automation_for(spec.group_name, name),
        code_version=code_version,
        partitions_def=pdef,
    )


def build_definitions(executor: str | dg.ExecutorDefinition | None = None) -> dg.Definitions:
    from dagster_project import checks, jobs, schedules, sensors
    from dagster_project.resources import default_resources

    modules = asset_modules()
    settings = load_settings()
    assets = dg.map_asset_specs(
        lambda spec: _with_policy(spec, settings), dg.load_assets_from_modules(modules)
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


# -- Distributed builds -------------------------------------------------------------
#
# Dagster runs one partition per run, and the Dask executor spreads the *steps of one
# run* over the cluster. Parallel partitions therefore need several runs at once: a
# distributed build keeps one run per cluster thread in flight, each orchestrated by a
# spawned process (Dagster's run machinery is not thread-safe: two runs in one process
# deadlock in its logging set-up), and each sending its steps to the same cluster. Both
# the run processes and the Dask workers rebuild the job by name (``dask_asset_job``).


class DistributedError(RuntimeError):
    """The Dask cluster cannot run this build; the message says what to fix."""


DISTRIBUTED_JOB = "kernelhouse_distributed"


@functools.lru_cache(maxsize=1)
def _base_definitions() -> dg.Definitions:
    return build_definitions("in_process")


@functools.lru_cache(maxsize=64)
def dask_asset_job(address: str, selection: str) -> dg.JobDefinition:
    """The job a distributed run executes: the assets ``selection`` names (comma-separated
    keys of one build stage, so one partitions definition) with the Dask executor at
    ``address``. Run processes and Dask workers rebuild it from these two strings
    (``build_reconstructable_job``); cached, so a worker builds the definitions once rather
    than once per step. (The implicit asset job cannot be used: it mixes partitionings,
    and its reserved name cannot be handed to a reconstructed repository.)"""
    base = _base_definitions()
    keys = [dg.AssetKey.from_user_string(k) for k in selection.split(",")]
    job = dg.define_asset_job(
        DISTRIBUTED_JOB,
        selection=dg.AssetSelection.assets(*keys),
        executor_def=dask_executor_def(address),
        tags={"kernelhouse/executor": "dask"},
    )
    return dg.Definitions(
        assets=base.assets, asset_checks=base.asset_checks, resources=base.resources, jobs=[job]
    ).resolve_job_def(DISTRIBUTED_JOB)


def worker_view() -> dict[str, str]:
    """What a process would read and write: the driver's must equal every worker's.

    Workers of an existing cluster read their own environment, so a worker started
    without ``KERNELHOUSE_LAKE_URI`` (or with another home or simulator size) would
    silently write somewhere else or produce other rows."""
    s = load_settings()
    return {
        "KERNELHOUSE_HOME": str(s.home),
        "partition root (KERNELHOUSE_LAKE_URI)": s.parquet_root,
        "KERNELHOUSE_SIM_*": f"seed={s.sim_seed} sessions={s.sim_sessions} episodes={s.sim_episodes}",
    }


def warm_worker() -> None:
    """Build the definitions a worker's first step would otherwise build."""
    quiet_dask_sizeof()
    _base_definitions()


@dataclass(frozen=True)
class DaskCluster:
    address: str
    threads: int
    started_here: bool


@contextlib.contextmanager
def dask_cluster(address: str | None, n_workers: int | None = None) -> Iterator[DaskCluster]:
    """Connect to the scheduler at ``address`` (``KERNELHOUSE_DASK_SCHEDULER``), or start
    a LocalCluster on 127.0.0.1 (one single-threaded worker process per core, or
    ``n_workers``) that lives as long as the block. Checks that the workers see the same
    lake and settings as this process before any run starts."""
    import dask.distributed as dd

    cluster = None
    if address is None:
        n = n_workers or max(1, os.cpu_count() or 1)
        cluster = dd.LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None,
        )
        address = str(cluster.scheduler_address)
    try:
        try:
            client = dd.Client(address)  # waits distributed.comm.timeouts.connect
        except OSError as exc:
            raise DistributedError(
                f"cannot reach the Dask scheduler at KERNELHOUSE_DASK_SCHEDULER={address} ({exc})"
            ) from exc
        with client:
            try:
                client.wait_for_workers(1, timeout="30s")
            except (TimeoutError, OSError) as exc:
                raise DistributedError(f"the Dask scheduler at {address} has no workers") from exc
            threads = sum(client.nthreads().values())
            mine = worker_view()
            try:
                theirs = client.run(worker_view)
            except Exception as exc:
                raise DistributedError(
                    f"Dask workers at {address} cannot load kernelhouse settings: "
                    f"{type(exc).__name__}: {exc} (install kernelhouse in the workers' "
                    "environment and give them the same KERNELHOUSE_* and AWS_* variables)"
                ) from exc
            for worker, view in sorted(theirs.items()):
                diff = [k for k in mine if view.get(k) != mine[k]]
                if diff:
                    k = diff[0]
                    raise DistributedError(
                        f"Dask worker {worker} sees {k} = {view.get(k)!r}, this process "
                        f"{mine[k]!r}: start the workers with the same KERNELHOUSE_* and "
                        "AWS_* variables"
                    )
            # Each worker imports Dagster and builds the definitions once (seconds);
            # start that now, while the run processes start, not at the first step.
            for worker in client.nthreads():
                dd.fire_and_forget(client.submit(
                    warm_worker, key=f"kernelhouse-warm-{uuid.uuid4().hex}", workers=[worker],
                    pure=False,
                ))
        yield DaskCluster(address, threads, started_here=cluster is not None)
    finally:
        if cluster is not None:
            cluster.close()


_RUN_INSTANCE: list[dg.DagsterInstance] = []


def _run_on_dask(
    address: str,
    key_paths: list[list[str]],
    partition_key: str | None,
    run_config: dict[str, Any],
    tags: dict[str, str],
) -> str:
    """In a run process: one Dagster run of these assets (one partition) on the Dask
    executor; returns the run id (the events are in the instance)."""
    if not _RUN_INSTANCE:
        _RUN_INSTANCE.append(dg.DagsterInstance.get())
    selection = ",".join(dg.AssetKey(p).to_user_string() for p in key_paths)
    job = dg.build_reconstructable_job(
        __name__, "dask_asset_job", reconstructable_args=(address, selection)
    )
    if partition_key is not None:
        tags = {**tags, "dagster/partition": partition_key}
    result = dg.execute_job(
        job, _RUN_INSTANCE[0], run_config=run_config or None, tags=tags, raise_on_error=False
    )
    return result.run_id


@contextlib.contextmanager
def _no_outputs() -> Iterator[Any]:
    raise dg.DagsterInvariantViolationError(
        "a distributed run's outputs are in the lake, not in this process"
    )
    yield  # pragma: no cover


class DaskRuns:
    """Launches runs on the Dask executor, up to ``parallel`` at once (``build.run_build``'s
    ``launch``): calling it starts a run of ``keys`` for one partition and returns a
    function that waits for the run and gives its result, read back from the instance."""

    def __init__(
        self,
        instance: dg.DagsterInstance,
        address: str,
        parallel: int,
        *,
        run_config: dict[str, Any] | None = None,
        tags: dict[str, str] | None = None,
    ) -> None:
        if not instance.is_persistent:
            raise DistributedError("Dask runs need a persistent Dagster instance (DAGSTER_HOME)")
        self._instance = instance
        self._address = address
        self._run_config = dict(run_config or {})
        self._tags = dict(tags or {})
        # Spawned, not forked: the parent may hold DuckDB, sqlite and s3fs handles.
        self._pool = ProcessPoolExecutor(
            max_workers=max(1, parallel), mp_context=multiprocessing.get_context("spawn")
        )

    def __call__(
        self, keys: list[dg.AssetKey], partition_key: str | None
    ) -> Callable[[], dg.JobExecutionResult]:
        future = self._pool.submit(
            _run_on_dask, self._address, [list(k.path) for k in keys], partition_key,
            self._run_config, self._tags,
        )
        return lambda: self._result(future.result(), keys)

    def _result(self, run_id: str, keys: list[dg.AssetKey]) -> dg.JobExecutionResult:
        run = self._instance.get_run_by_id(run_id)
        if run is None:  # pragma: no cover - execute_job created it
            raise DistributedError(f"run {run_id} is not in the instance")
        events = [e.dagster_event for e in self._instance.all_logs(run_id) if e.dagster_event]
        job = dask_asset_job(self._address, ",".join(k.to_user_string() for k in keys))
        return dg.JobExecutionResult(job, _no_outputs(), events, run)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> DaskRuns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
