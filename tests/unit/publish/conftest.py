"""Shared, read-only publish fixtures: one synthetic lake and one export of each dataset per
test session (exports and ``datasets`` loads are the slow part, so they are built once).

Tests that break a lake or an export on purpose build their own from ``lakes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dagster_project.publish import (
    CompileValidation,
    ExportReport,
    export_kernel_opt_rl,
    export_kernelinfer,
    export_kernelswarm,
    read_snapshot,
)
from dagster_project.settings import KERNELINFER_DEFAULT_SEED
from dagster_project.storage.lake import Lake
from tests.unit.publish import lakes


@dataclass(frozen=True)
class SimExport:
    lake: Lake
    report: ExportReport
    rows: list[dict[str, Any]]  # the expected rows, in shard/batch order


@pytest.fixture(scope="session")
def opt_lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    lake = lakes.new_lake(tmp_path_factory.mktemp("opt-lake"))
    lakes.build_kernel_opt_rl_lake(lake)
    return lake


@pytest.fixture(scope="session")
def opt_export(opt_lake: Lake, tmp_path_factory: pytest.TempPathFactory) -> ExportReport:
    out = tmp_path_factory.mktemp("opt-export") / "kernel-opt-rl"
    return export_kernel_opt_rl(
        opt_lake,
        out,
        reward_module=lakes.REWARD_MODULE,
        licenses=lakes.LICENSES,
        snapshot=read_snapshot(opt_lake),
    )


@pytest.fixture(scope="session")
def hf_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hf-datasets-cache")


@pytest.fixture(scope="session")
def infer_export(tmp_path_factory: pytest.TempPathFactory) -> SimExport:
    lake = lakes.new_lake(tmp_path_factory.mktemp("infer-lake"))
    shards = lakes.build_kernelinfer_lake(lake)
    out = tmp_path_factory.mktemp("infer-export") / "kernelinfer"
    report = export_kernelinfer(
        lake,
        out,
        compile_validation=CompileValidation(checked=40, compiled=37, toolchain="nvcc 13.0"),
        build={"generator_version": "1.0.0", "seed": KERNELINFER_DEFAULT_SEED},
    )
    # Within a batch the export orders rows by session_id.
    rows = [s for shard in shards for s in sorted(shard, key=lambda r: r["session_id"])]
    return SimExport(lake, report, rows)


@pytest.fixture(scope="session")
def swarm_export(tmp_path_factory: pytest.TempPathFactory) -> SimExport:
    lake = lakes.new_lake(tmp_path_factory.mktemp("swarm-lake"))
    episodes = lakes.build_kernelswarm_lake(lake)
    out = tmp_path_factory.mktemp("swarm-export") / "kernelswarm"
    report = export_kernelswarm(lake, out)
    return SimExport(lake, report, sorted(episodes, key=lambda r: r["episode_id"]))
