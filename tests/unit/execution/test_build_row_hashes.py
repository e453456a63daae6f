"""Behaviour pinned: a whole build on the fixture repos writes the same rows as recorded.

Every table and view of the lake is fingerprinted (``row_hashes.py``: order-independent,
with only wall-clock columns and temporary paths taken out) and compared with
``expected_row_hashes.json``. A refactor that changes any row of any table fails here,
naming the tables. An intentional change of output (a new rule or generator version, a
new column) re-records the file:

    RECORD_ROW_HASHES=1 .venv/bin/python -m pytest -q tests/unit/execution/test_build_row_hashes.py

and the diff of that JSON in the commit shows which tables the change touched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import dagster as dg
import pytest

from dagster_project.definitions import build_definitions
from dagster_project.execution.planner import run_build
from tests.unit.execution.row_hashes import lake_hashes

EXPECTED = Path(__file__).with_name("expected_row_hashes.json")

pytestmark = pytest.mark.slow


def test_build_writes_the_recorded_rows(
    use_engine_repos, kh_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A small simulated build: every simulated table still gets rows, in seconds.
    monkeypatch.setenv("KERNELHOUSE_SIM_SESSIONS", "6")
    monkeypatch.setenv("KERNELHOUSE_SIM_EPISODES", "6")
    outcome = run_build(build_definitions(), dg.DagsterInstance.ephemeral())
    assert outcome.ok, (outcome.failed, outcome.skipped)
    engines = {str(Path(r.path).parent) for r in use_engine_repos.values()}
    got = lake_hashes(kh_home, [str(tmp_path), *sorted(engines)])
    if os.environ.get("RECORD_ROW_HASHES") == "1":
        EXPECTED.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"recorded {len(got)} tables in {EXPECTED.name}")
    expected = json.loads(EXPECTED.read_text())
    differ = {
        t: (expected.get(t), got.get(t))
        for t in sorted(set(expected) | set(got))
        if expected.get(t) != got.get(t)
    }
    assert not differ, (
        "tables whose rows differ from expected_row_hashes.json (recorded, now): "
        f"{differ}; if the change is intended, re-record (see this module's docstring)"
    )
