"""The code location loads, is import-side-effect free, and wires every layer."""

from __future__ import annotations

import importlib
import sys

import dagster as dg

from dagster_project.settings import DEFAULT_SIM_SEED


def test_import_reads_no_environment(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("KERNELHOUSE_EXECUTOR", "not-an-executor")
    sys.modules.pop("dagster_project.definitions", None)
    importlib.import_module("dagster_project.definitions")  # must not raise: nothing read yet


def test_definitions_validate() -> None:
    from dagster_project.definitions import build_definitions

    defs = build_definitions()
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert "repo_clone" in keys
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if node.is_materializable:
            assert node.group_name and node.group_name != "default", key
            assert node.description, f"{key} has no description"


def test_executor_is_in_process_by_default() -> None:
    from dagster_project.definitions import build_definitions

    assert build_definitions().executor.name == "in_process"


def test_executor_configurable(monkeypatch) -> None:  # noqa: ANN001
    from dagster_project.definitions import build_definitions

    monkeypatch.setenv("KERNELHOUSE_EXECUTOR", "multiprocess")
    assert build_definitions().executor.name == "multiprocess"


def test_simulated_shard_keys_follow_the_configured_size(monkeypatch) -> None:  # noqa: ANN001
    """Ten times the sessions is ten times the shards (the unit of parallel work); a
    smaller build keeps the default keys so an earlier build's shards get cleaned up."""
    import dagster as dg

    from dagster_project.definitions import build_definitions

    def shard_counts() -> tuple[int, int]:
        graph = build_definitions().resolve_asset_graph()
        return tuple(  # type: ignore[return-value]
            len(graph.get(dg.AssetKey(k)).partitions_def.get_partition_keys())
            for k in ("kernelinfer_sessions", "kernelswarm_episodes")
        )

    assert shard_counts() == (19, 24)  # tests build 40 sessions / episodes
    monkeypatch.setenv("KERNELHOUSE_SIM_SESSIONS", "18990")
    monkeypatch.setenv("KERNELHOUSE_SIM_EPISODES", "2401")
    assert shard_counts() == (190, 25)
    defs = build_definitions()
    keys = defs.resolve_job_def("kernelinfer_job").partitions_def.get_partition_keys()
    assert keys[0] == "000" and keys[-1] == "189"


def test_each_asset_declares_its_refresh_policy() -> None:
    """Policy lives beside each asset: observers by tag (the set the old name list held),
    an automation condition on everything but the repo fetch (the daily schedule's) and
    the Hub push (a deliberate act), and the simulator's parameters in its code versions
    (but for the simulated assets that replay shipped device data)."""
    from dagster_project.definitions import build_definitions
    from dagster_project.execution.planner import observers
    from dagster_project.execution.policy import CODE_VERSION_TAG, SHIPPED, SIM_PARAMS

    defs = build_definitions()
    assert observers(defs) == {"repo_clone", "moe_model_shapes", "pr_bodies"}
    graph = defs.resolve_asset_graph()
    manual = {"repo_clone", "hub_push"}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if not node.is_materializable:
            continue
        name = key.to_user_string()
        assert (node.automation_condition is None) == (name in manual), name
        if node.group_name == "simulated" and node.tags.get(CODE_VERSION_TAG) != SHIPPED:
            # the online tier replays shipped device sessions of the default draw: no
            # simulator parameter changes it, the shipped answers and lists do
            assert node.tags.get(CODE_VERSION_TAG) == SIM_PARAMS, name
            assert node.code_version and f"+seed{DEFAULT_SIM_SEED}.s40.e40" in node.code_version, (
                name
            )


def test_execution_reads_no_asset_names() -> None:
    """The planner, executors and assembly decide by tags: no asset's name appears in
    their source (a name there is a rule keyed on a name, which policy.py replaced)."""
    from pathlib import Path

    import dagster_project
    from dagster_project.definitions import build_definitions

    root = Path(dagster_project.__file__).parent
    sources = {
        p: p.read_text() for p in [*(root / "execution").glob("*.py"), root / "definitions.py"]
    }
    names = {
        k.to_user_string() for k in build_definitions().resolve_asset_graph().get_all_asset_keys()
    }
    found = {
        (p.name, n)
        for p, text in sources.items()
        for n in names
        if f'"{n}"' in text or f"'{n}'" in text
    }
    assert not found, found
