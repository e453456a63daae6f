"""Fixture repositories for the kernel_commits tests: one per engine shape, built once.

They hold only the perf-commit scenario (``tests/fixtures/commit_history.py``), so mined
rows can be compared with the planted truth exactly; ``test_engine_repos.py`` checks the
same truth inside the full engine repos, where other scenarios add commits of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.commit_history import add_commit_history
from tests.fixtures.factory import RepoBuilder

ENGINES = ("vllm", "sglang", "flashinfer")


@dataclass
class PerfRepo:
    engine: str
    builder: RepoBuilder
    truth: dict[str, Any]

    @property
    def path(self) -> Path:
        return self.builder.path


def build_perf_repo(path: Path, engine: str) -> PerfRepo:
    b = RepoBuilder(path)
    b.write("LICENSE", "Apache License, Version 2.0 (fixture)\n").write("README.md", "fixture\n")
    b.commit("Initial commit")
    return PerfRepo(engine, b, add_commit_history(b, engine))


@pytest.fixture(scope="session")
def perf_repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PerfRepo]:
    root = tmp_path_factory.mktemp("perf_repos")
    return {e: build_perf_repo(root / e, e) for e in ENGINES}
