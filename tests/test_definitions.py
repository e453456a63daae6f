"""The code location loads, is import-side-effect free, and wires every layer."""

from __future__ import annotations

import importlib
import sys

import dagster as dg


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
