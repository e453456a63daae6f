"""The executor the code location's runs use, and the run-scoped Dask executor."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Mapping
from typing import Any, cast

import dagster as dg

from dagster_project.settings import load_settings


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

    from dagster_project.execution.dagster_private import interruptible

    class RunScopedDaskExecutor(upstream.DaskExecutor):
        def execute(self, plan_context: Any, execution_plan: Any) -> Iterator[dg.DagsterEvent]:
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
                    "kernelhouse runs Dask on an existing or a local cluster, "
                    f"not {self.cluster_type!r}"
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
                    for _future, events in interruptible(done):
                        yield from events
            finally:
                if owned is not None:
                    owned.close()

    @dg.executor(
        name="dask",
        # Upstream's schema as the Field it wraps: what the decorator's types accept
        # (it wraps a Field in the same kind of definition schema again).
        config_schema=upstream.dask_executor.config_schema.as_field(),
        requirements=dg.multiple_process_executor_requirements(),
    )
    def kernelhouse_dask_executor(init_context: dg.InitExecutorContext) -> dg.Executor:
        # A selector: validated by the schema to one {cluster type: its config} entry.
        cluster = cast(Mapping[str, Any], init_context.executor_config["cluster"])
        ((cluster_type, cluster_config),) = cluster.items()
        return RunScopedDaskExecutor(cluster_type, cluster_config)

    return kernelhouse_dask_executor
