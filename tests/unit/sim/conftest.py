"""Shared small builds for the simulator tests (generated once per test session)."""

from __future__ import annotations

from typing import Any

import pytest

from dagster_project.sim.kernelinfer import build_tasks, generate_shard

SMALL_SEED = 7
SMALL_SESSIONS = 60


@pytest.fixture(scope="session")
def small_build() -> dict[str, Any]:
    """A 60-session build (one shard) with its tasks and holdout."""
    tasks, holdout = build_tasks(SMALL_SEED, SMALL_SESSIONS, 12)
    sessions = generate_shard(0, seed=SMALL_SEED, n_sessions=SMALL_SESSIONS, n_holdout=12)
    return {"tasks": tasks, "holdout": holdout, "sessions": sessions}
