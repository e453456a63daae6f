"""Fixtures of the online tier's tests: a three-row list cut from the shipped H100 list
(real rows, real digests) and the default task draw, each built once per module."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from dagster_project.sim.online import ONLINE_FIELDS, online_path, read_online
from dagster_project.sim.online_tier import OnlineTier, default_tasks, replay_tier

#: How many shipped rows the fast tests replay (the whole list takes ~3 s).
ROWS = 3


def write_list(path: Path, rows: list[dict[str, str]]) -> Path:
    """An online list in the shipped format."""
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=ONLINE_FIELDS)
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.fixture(scope="module")
def shipped_rows() -> list[dict[str, str]]:
    """The first rows of the shipped H100 list, as shipped."""
    rows = read_online("h100", online_path("h100"))
    assert len(rows) >= 150, "the shipped H100 tier holds at least 150 sessions (issue 36)"
    return rows[:ROWS]


@pytest.fixture(scope="module")
def tasks() -> dict[str, Any]:
    return default_tasks()


@pytest.fixture(scope="module")
def tier(
    shipped_rows: list[dict[str, str]],
    tasks: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> OnlineTier:
    """The three shipped rows replayed with the shipped answers."""
    path = write_list(tmp_path_factory.mktemp("online") / "h100_online.csv", shipped_rows)
    return replay_tier(("h100",), tasks, paths={"h100": path})
