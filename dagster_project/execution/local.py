"""A stage's partitions as separate Dagster runs in a pool of processes on this machine."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import dagster as dg

from dagster_project.execution.runs import (
    Result,
    RunSummary,
    load_definitions,
    materializable,
    run_assets,
)

__all__ = ["LocalRuns", "RunSummary", "default_workers"]


def default_workers() -> int:
    """Processes a build uses for the partitions of one stage: every core."""
    return max(1, os.cpu_count() or 1)


def _run_in_worker(
    definitions: str,
    key_paths: list[list[str]],
    partition_key: str | None,
    run_config: dict[str, Any] | None,
    tags: dict[str, str],
) -> RunSummary:
    """In a worker process: one in-process Dagster run of these assets for one partition,
    against the same persistent instance (DAGSTER_HOME) as the build."""
    defs = load_definitions(definitions)  # built once per worker process
    result = run_assets(
        materializable(defs),
        defs.resources or {},
        dg.DagsterInstance.get(),
        [dg.AssetKey(p) for p in key_paths],
        partition_key,
        run_config=run_config,
        tags=tags,
    )
    return RunSummary(result.run_id, result.success, list(result.all_events))


def _warm_worker(definitions: str) -> None:
    load_definitions(definitions)


class LocalRuns:
    """``planner.run_build``'s ``launch`` for one machine: the partitions of a stage run as
    separate Dagster runs in ``workers`` processes at once (every core by default).

    Dagster runs one partition per run, so its multiprocess executor (which spreads the
    steps of *one* run) cannot run shards side by side; a pool of runs can. Processes, not
    threads: the simulator is pure Python, and Dagster's run machinery is not thread-safe.
    Spawned, not forked: the parent holds DuckDB and sqlite handles. Partition writers
    write Parquet files of their own; the few DuckDB writes (views, small tables) wait
    for the single writer lock (``Lake.connect``), so they are serialised. Unpartitioned
    stages run in this process, where their own progress reports reach the CLI; the
    workers are stopped before one runs (``run_build`` has collected the previous stage's
    runs by then), so they hold no memory while the parent works alone, and started again
    for the next partitioned stage."""

    def __init__(
        self,
        workers: int,
        *,
        definitions: str,
        run_config: dict[str, Any] | None,
        tags: dict[str, str],
    ) -> None:
        self.workers = max(1, workers)
        self._definitions = definitions  # "module:function", see runs.load_definitions
        self._run_config = run_config
        self._tags = dict(tags)
        self._pool: Any = None  # started by the first partition run of a stage

    def _start(self) -> Any:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn")
            )
            # Each worker imports Dagster and builds the definitions (seconds) first.
            for _ in range(self.workers):
                self._pool.submit(_warm_worker, self._definitions)
        return self._pool

    def __call__(self, keys: list[dg.AssetKey], partition_key: str | None) -> Callable[[], Result]:
        if partition_key is None:
            self.close()
            summary = _run_in_worker(
                self._definitions, [list(k.path) for k in keys], None, self._run_config, self._tags
            )
            return lambda: summary
        future = self._start().submit(
            _run_in_worker,
            self._definitions,
            [list(k.path) for k in keys],
            partition_key,
            self._run_config,
            self._tags,
        )
        return future.result

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> LocalRuns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
