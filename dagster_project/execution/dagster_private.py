"""Every private Dagster name kernelhouse uses, and the version it was checked against.

Dagster's public API has no stale-status resolver (the one behind the UI's stale
markers, which ``kernelhouse refresh`` must agree with) and no hook for an executor's
interrupt handling, so these few names come from ``dagster._*``. Nothing else in the
project imports a private Dagster module: when Dagster is bumped, this file and
``tests/unit/execution/test_dagster_private.py`` are what to check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import dagster as dg
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.errors import raise_execution_interrupts
from dagster._core.loader import LoadingContext
from dagster._utils import iterate_with_context

if TYPE_CHECKING:
    from dagster._core.loader import BlockingDataLoader, DataLoader

#: The Dagster release these names and signatures were read from (pyproject pins it).
CHECKED_AGAINST = "1.13.27"

__all__ = [
    "CHECKED_AGAINST",
    "StaleStatus",
    "interruptible",
    "stale_status_resolver",
]


class _InstanceLoadingContext(LoadingContext):
    """The loading context the stale-status resolver wants: the instance and an empty
    loader cache for one refresh wave. (Dagster builds one per web request; outside a
    request it offers only a class named for tests, so this is ours, the two members the
    abstract base asks for.)"""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self._instance = instance
        self._loaders: dict[type, tuple[DataLoader, BlockingDataLoader]] = {}

    @property
    def instance(self) -> dg.DagsterInstance:
        return self._instance

    @property
    def loaders(self) -> dict[type, tuple[DataLoader, BlockingDataLoader]]:
        return self._loaders


def stale_status_resolver(instance: dg.DagsterInstance, graph: dg.AssetGraph) -> Any:
    """Dagster's own caching stale-status resolver over ``graph``: ``get_status(key,
    partition)`` gives a ``StaleStatus``, ``get_stale_root_causes`` the UI's causes. It
    caches event-log reads, so build a new one after anything ran."""
    return CachingStaleStatusResolver(instance, graph, _InstanceLoadingContext(instance))


def interruptible(iterator: Any) -> Any:
    """Iterate ``iterator`` so that a run's termination interrupts the wait (SIGINT is
    held back while Dagster writes events, and raised between items), as Dagster's own
    executors do."""
    return iterate_with_context(raise_execution_interrupts, iterator)
