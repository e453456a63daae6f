"""Distributed builds: partitions in parallel on a Dask cluster.

Dagster runs one partition per run, and the Dask executor spreads the *steps of one
run* over the cluster. Parallel partitions therefore need several runs at once: a
distributed build keeps one run per cluster thread in flight, each orchestrated by a
spawned process (Dagster's run machinery is not thread-safe: two runs in one process
deadlock in its logging set-up), and each sending its steps to the same cluster. Both
the run processes and the Dask workers rebuild the job by name (``dask_asset_job``).
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import dagster as dg

from dagster_project.execution.executors import dask_executor_def, quiet_dask_sizeof
from dagster_project.execution.runs import load_definitions
from dagster_project.settings import load_settings


class DistributedError(RuntimeError):
    """The Dask cluster cannot run this build; the message says what to fix."""


DISTRIBUTED_JOB = "kernelhouse_distributed"


@functools.lru_cache(maxsize=64)
def dask_asset_job(address: str, selection: str, definitions: str) -> dg.JobDefinition:
    """The job a distributed run executes: the assets ``selection`` names (comma-separated
    keys of one build stage, so one partitions definition) with the Dask executor at
    ``address``, from the definitions ``definitions`` names (``runs.load_definitions``).
    Run processes and Dask workers rebuild it from these three strings
    (``build_reconstructable_job``); cached, so a worker builds the definitions once rather
    than once per step. (The implicit asset job cannot be used: it mixes partitionings,
    and its reserved name cannot be handed to a reconstructed repository.)"""
    base = load_definitions(definitions)
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
        "KERNELHOUSE_SIM_*": (
            f"seed={s.sim_seed} sessions={s.sim_sessions} episodes={s.sim_episodes}"
        ),
    }


def warm_worker(definitions: str) -> None:
    """Build the definitions a worker's first step would otherwise build."""
    quiet_dask_sizeof()
    load_definitions(definitions)


@dataclass(frozen=True)
class DaskCluster:
    address: str
    threads: int
    started_here: bool


@contextlib.contextmanager
def dask_cluster(
    address: str | None, n_workers: int | None = None, *, definitions: str | None = None
) -> Iterator[DaskCluster]:
    """Connect to the scheduler at ``address`` (``KERNELHOUSE_DASK_SCHEDULER``), or start
    a LocalCluster on 127.0.0.1 (one single-threaded worker process per core, or
    ``n_workers``) that lives as long as the block. Checks that the workers see the same
    lake and settings as this process before any run starts; with ``definitions``, each
    worker starts building them at once."""
    import dask.distributed as dd

    cluster = None
    if address is None:
        n = n_workers or max(1, os.cpu_count() or 1)
        cluster = dd.LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
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
                # distributed's hint says float, but it parses a duration string (its
                # parse_timedelta); kept as one so the timeout error still reads "after 30s".
                client.wait_for_workers(1, timeout="30s")  # type: ignore[arg-type]  # see above
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
            for worker in client.nthreads() if definitions else ():
                dd.fire_and_forget(
                    client.submit(
                        warm_worker,
                        definitions,
                        key=f"kernelhouse-warm-{uuid.uuid4().hex}",
                        workers=[worker],
                        pure=False,
                    )
                )
        yield DaskCluster(address, threads, started_here=cluster is not None)
    finally:
        if cluster is not None:
            cluster.close()


_RUN_INSTANCE: list[dg.DagsterInstance] = []


def _run_on_dask(
    address: str,
    definitions: str,
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
        __name__,
        "dask_asset_job",
        # Dagster hints a 1-tuple (tuple[object]) but takes any tuple of arguments.
        reconstructable_args=(address, selection, definitions),  # type: ignore[arg-type]
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
    """Launches runs on the Dask executor, up to ``parallel`` at once (``planner.run_build``'s
    ``launch``): calling it starts a run of ``keys`` for one partition and returns a
    function that waits for the run and gives its result, read back from the instance."""

    def __init__(
        self,
        instance: dg.DagsterInstance,
        address: str,
        parallel: int,
        *,
        definitions: str,
        run_config: dict[str, Any] | None = None,
        tags: dict[str, str] | None = None,
    ) -> None:
        if not instance.is_persistent:
            raise DistributedError("Dask runs need a persistent Dagster instance (DAGSTER_HOME)")
        self._instance = instance
        self._address = address
        self._definitions = definitions  # "module:function", see runs.load_definitions
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
            _run_on_dask,
            self._address,
            self._definitions,
            [list(k.path) for k in keys],
            partition_key,
            self._run_config,
            self._tags,
        )
        return lambda: self._result(future.result(), keys)

    def _result(self, run_id: str, keys: list[dg.AssetKey]) -> dg.JobExecutionResult:
        run = self._instance.get_run_by_id(run_id)
        if run is None:  # pragma: no cover - execute_job created it
            raise DistributedError(f"run {run_id} is not in the instance")
        events = [e.dagster_event for e in self._instance.all_logs(run_id) if e.dagster_event]
        selection = ",".join(k.to_user_string() for k in keys)
        job = dask_asset_job(self._address, selection, self._definitions)
        return dg.JobExecutionResult(job, _no_outputs(), events, run)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> DaskRuns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
