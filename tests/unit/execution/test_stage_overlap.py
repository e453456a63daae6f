"""Partitioned stages that do not depend on each other run back to back through a launcher:
the second stage's runs are launched before the first stage's are collected, and a stage
that reads a launched asset waits for it. Real Dagster runs of small assets, in process,
behind a launcher that records when each run is launched and when it is collected."""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg

from dagster_project.execution.planner import plan_stages, run_build

SHARDS = dg.StaticPartitionsDefinition(["0", "1"])
REPOS = dg.StaticPartitionsDefinition(["a", "b"])


@dg.asset(partitions_def=SHARDS)
def shards() -> int:
    return 1


@dg.asset(partitions_def=REPOS)
def repos() -> int:
    return 2


@dg.asset(deps=[shards])
def export() -> int:
    return 3


@dg.asset(partitions_def=REPOS, deps=[export])
def after_export() -> int:
    return 4


DEFS = dg.Definitions(assets=[shards, repos, export, after_export])


class RecordingLaunch:
    """``run_build``'s ``launch``: runs each partition for real when it is collected."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self.instance = instance
        self.events: list[str] = []

    def __call__(self, keys: list[dg.AssetKey], pkey: str | None) -> Callable[[], object]:
        name = f"{'+'.join(k.to_user_string() for k in keys)}[{pkey}]"
        self.events.append(f"launch {name}")

        def wait() -> object:
            self.events.append(f"collect {name}")
            return dg.materialize(
                [shards, repos, export, after_export],
                instance=self.instance,
                partition_key=pkey,
                selection=keys,
            )

        return wait


def test_independent_partitioned_stages_overlap_and_dependants_wait() -> None:
    stages = [s.label for s in plan_stages(DEFS, None)]
    assert stages == ["repos", "shards", "export", "after_export"]
    with dg.DagsterInstance.ephemeral() as instance:
        launch = RecordingLaunch(instance)
        out = run_build(DEFS, instance, launch=launch)
    assert out.ok, out.failed
    ev = launch.events
    # shards does not read repos: both stages are launched before anything is collected
    assert ev[:4] == ["launch repos[a]", "launch repos[b]", "launch shards[0]", "launch shards[1]"]
    # export reads shards (and runs here, unpartitioned): everything launched is collected
    # first; after_export reads export, which was collected before it was launched
    assert ev.index("collect shards[1]") < ev.index("launch export[None]")
    assert ev.index("collect export[None]") < ev.index("launch after_export[a]")
    assert len([e for e in ev if e.startswith("collect")]) == 7
