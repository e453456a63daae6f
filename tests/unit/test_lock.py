"""The dependency bounds and the lock (constraints.txt) agree with each other.

A fresh install once paired dask 2026.11 with distributed 2021.4 because nothing bounded
distributed; these tests keep the bounds complete and the lock inside them, without any
network: they read pyproject.toml and constraints.txt only.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def _requirements() -> list[Requirement]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"])
    for extra in meta.get("optional-dependencies", {}).values():
        reqs += extra
    return [Requirement(r) for r in reqs]


def _lock() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for raw in (ROOT / "constraints.txt").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==", 1)
            pins[_norm(name)] = Version(version)
    return pins


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_declared_dependency_has_an_upper_bound() -> None:
    unbounded = [
        str(r)
        for r in _requirements()
        if not any(s.operator in ("<", "<=", "==", "~=") for s in r.specifier)
    ]
    assert unbounded == [], f"bound these in pyproject.toml: {unbounded}"


def test_distributed_has_a_floor_that_pairs_it_with_dask() -> None:
    by_name = {_norm(r.name): r for r in _requirements()}
    assert "distributed" in by_name, "dagster-dask's distributed must be bounded here"
    # 2021.4.1, the release pip fell back to, must stay outside the bounds.
    assert not by_name["distributed"].specifier.contains("2021.4.1")


def test_lock_pins_every_declared_dependency_inside_its_bounds() -> None:
    lock = _lock()
    missing = [r.name for r in _requirements() if _norm(r.name) not in lock]
    assert missing == [], f"constraints.txt lacks {missing}: run `bash .ci/lock`"
    outside = [
        f"{r.name}=={lock[_norm(r.name)]} (wants {r.specifier})"
        for r in _requirements()
        if not r.specifier.contains(lock[_norm(r.name)], prereleases=True)
    ]
    assert outside == [], f"the lock is stale: {outside}: run `bash .ci/lock`"


def test_lock_keeps_dask_and_distributed_on_one_release() -> None:
    lock = _lock()
    assert lock["dask"] == lock["distributed"], (lock["dask"], lock["distributed"])
