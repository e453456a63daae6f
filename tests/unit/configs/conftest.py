"""Fixture repositories for the tuned-config miners, built once per test session."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dagster_project.mining.git import GitRepo
from tests.fixtures.config_history import add_config_history
from tests.fixtures.factory import RepoBuilder


@dataclass
class ConfigRepo:
    engine: str
    builder: RepoBuilder
    truth: dict[str, Any]

    @property
    def repo(self) -> GitRepo:
        return GitRepo(self.builder.path)


def build_config_repo(path: Path, engine: str) -> ConfigRepo:
    b = RepoBuilder(path)
    b.write("LICENSE", "Apache License 2.0 (fixture)\n").write("README.md", f"# {engine}\n")
    b.commit("Initial commit")
    return ConfigRepo(engine, b, add_config_history(b, engine))


@pytest.fixture(scope="session")
def config_repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ConfigRepo]:
    root = tmp_path_factory.mktemp("config-engines")
    return {e: build_config_repo(root / e, e) for e in ("vllm", "sglang", "flashinfer")}


@pytest.fixture
def fresh_repo(tmp_path: Path):
    """A private, mutable copy-by-rebuild of one engine (for tests that add commits)."""

    def make(engine: str) -> ConfigRepo:
        return build_config_repo(tmp_path / f"{engine}-mutable", engine)

    return make
