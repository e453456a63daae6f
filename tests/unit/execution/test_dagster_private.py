"""The private Dagster names behind ``execution/dagster_private.py`` still mean what the
adapter assumes: they import, have the signatures it calls, and the stale-status
resolver gives the answers ``kernelhouse refresh`` relies on, on a real instance."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import dagster as dg


def test_pinned_dagster_is_the_one_the_adapter_was_checked_against() -> None:
    """Bumping the pin means re-reading the adapter: then update ``CHECKED_AGAINST``."""
    from dagster_project.execution.dagster_private import CHECKED_AGAINST

    pyproject = (Path(__file__).parents[3] / "pyproject.toml").read_text()
    pinned = re.search(r'"dagster==([^"]+)"', pyproject)
    assert pinned and pinned.group(1) == CHECKED_AGAINST, (pinned, CHECKED_AGAINST)


def test_private_names_have_the_shape_the_adapter_uses() -> None:
    from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
    from dagster._core.errors import raise_execution_interrupts
    from dagster._core.loader import LoadingContext
    from dagster._utils import iterate_with_context

    params = list(inspect.signature(CachingStaleStatusResolver.__init__).parameters)
    assert params[:4] == ["self", "instance", "asset_graph", "loading_context"], params
    for method in ("get_status", "get_stale_root_causes"):
        assert callable(getattr(CachingStaleStatusResolver, method, None)), method
    assert {"MISSING", "STALE", "FRESH"} <= set(StaleStatus.__members__)
    assert LoadingContext.__abstractmethods__ == frozenset({"instance", "loaders"})
    assert list(inspect.signature(iterate_with_context).parameters)[:2] == [
        "context_fn",
        "iterator",
    ]
    with raise_execution_interrupts():  # a context manager, as iterate_with_context wants
        pass


def test_stale_status_resolver_on_a_real_instance(tmp_path: Path) -> None:
    """Missing before a run, fresh after it, stale once the code version moved."""
    from dagster_project.execution.dagster_private import (
        StaleStatus,
        interruptible,
        stale_status_resolver,
    )

    def defs_with(version: str) -> dg.Definitions:
        @dg.asset(code_version=version)
        def probe() -> dg.MaterializeResult:
            return dg.MaterializeResult()

        return dg.Definitions(assets=[probe])

    key = dg.AssetKey("probe")
    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:
        one = defs_with("1")
        graph = one.resolve_asset_graph()
        assert stale_status_resolver(instance, graph).get_status(key, None) == StaleStatus.MISSING
        assert dg.materialize(one.assets or [], instance=instance).success
        assert stale_status_resolver(instance, graph).get_status(key, None) == StaleStatus.FRESH
        two = defs_with("2").resolve_asset_graph()
        resolver = stale_status_resolver(instance, two)
        assert resolver.get_status(key, None) == StaleStatus.STALE
        causes = resolver.get_stale_root_causes(key, None)
        assert any("code version" in c.reason for c in causes), causes
    assert list(interruptible(iter([1, 2]))) == [1, 2]


def test_no_other_production_module_imports_private_dagster() -> None:
    """The adapter is the one place to check when Dagster moves."""
    import dagster_project

    root = Path(dagster_project.__file__).parent
    offenders = [
        str(p.relative_to(root.parent))
        for p in [*root.rglob("*.py"), *(root.parent / "assets").glob("*.py")]
        if p.name != "dagster_private.py"
        and re.search(r"^\s*(from|import) dagster\._", p.read_text(), re.M)
    ]
    assert not offenders, offenders
