"""Two checks of one whole build on the fixture repos (built once for this module: each
whole build costs CI about a minute on two cores).

Behaviour pinned: the build writes the same rows as recorded. Every table and view of the
lake is fingerprinted (``row_hashes.py``: order-independent, with only wall-clock columns
and temporary paths taken out) and compared with ``expected_row_hashes.json``. A refactor
that changes any row of any table fails here, naming the tables. An intentional change of
output (a new rule or generator version, a new column) re-records the file:

    RECORD_ROW_HASHES=1 .venv/bin/python -m pytest -q tests/unit/execution/test_build_row_hashes.py

and the diff of that JSON in the commit shows which tables the change touched.

Lineage: the build reads exactly the tables each asset declares (``storage/lineage.py``;
the declaration's other checks are in ``tests/assets/test_lineage.py``), and every column
users query has a description.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from dagster_project.definitions import build_definitions
from dagster_project.execution.planner import BuildOutcome, run_build
from dagster_project.storage import lineage
from dagster_project.storage.lake import Lake
from tests.conftest import isolate_home
from tests.unit.execution.row_hashes import lake_hashes

EXPECTED = Path(__file__).with_name("expected_row_hashes.json")

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class WholeBuild:
    home: Path
    roots: list[str]  # temporary paths taken out of the fingerprints
    outcome: BuildOutcome
    observed: dict[str, set[str]]  # lineage.OBSERVED right after the build


@pytest.fixture(scope="module")
def whole_build(engine_repos, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WholeBuild]:
    root = tmp_path_factory.mktemp("whole-build")
    with pytest.MonkeyPatch.context() as mp:
        home = isolate_home(root, mp)
        for name, repo in engine_repos.items():
            mp.setenv(f"KERNELHOUSE_{name.upper()}_SOURCE", str(repo.path))
        # A small simulated build: every simulated table still gets rows, in seconds.
        mp.setenv("KERNELHOUSE_SIM_SESSIONS", "6")
        mp.setenv("KERNELHOUSE_SIM_EPISODES", "6")
        lineage.OBSERVED.clear()
        outcome = run_build(build_definitions(), dg.DagsterInstance.ephemeral())
        observed = {name: set(tables) for name, tables in lineage.OBSERVED.items()}
    engines = {str(Path(r.path).parent) for r in engine_repos.values()}
    yield WholeBuild(home, [str(root), *sorted(engines)], outcome, observed)


def test_build_writes_the_recorded_rows(whole_build: WholeBuild) -> None:
    outcome = whole_build.outcome
    assert outcome.ok, (outcome.failed, outcome.skipped)
    got = lake_hashes(whole_build.home, whole_build.roots)
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


#: Declared reads that only happen on a path the fixture build does not take.
CONDITIONAL = {
    "measured_configs": {"datasets.tuned_configs", "raw.moe_model_shapes"},  # a CUDA GPU
    "hub_push": {"derived.quality_results"},  # a push configured
}


def test_a_build_reads_exactly_what_each_asset_declares(whole_build: WholeBuild) -> None:
    outcome = whole_build.outcome
    ran = set(outcome.rows)
    assert {"kernel_commits", "tuned_configs", "pr_gains", "analysis_views"} <= ran, outcome
    problems = []
    for name in sorted(ran & set(lineage.ASSETS)):
        acc = lineage.access(name)
        seen = {
            t
            for t in whole_build.observed.get(name, set())
            if not any(lineage._matches(w, t) for w in acc.writes)
        }
        if seen != set(acc.reads) - CONDITIONAL.get(name, set()):
            problems.append(
                f"{name}: read but undeclared {sorted(seen - set(acc.reads))}, "
                f"declared but unread {sorted(set(acc.reads) - seen)}"
            )
    assert not problems, "\n".join(problems)

    # Every column users query (each datasets.* table, each analysis.* view the build
    # made) has a description, shown in the UI (issue 34); none is described that is not.
    from dagster_project.storage.columns import COLUMNS

    lake = Lake(whole_build.home / "lake.duckdb", str(whole_build.home / "lake"))
    published = lake.query(
        "SELECT table_schema || '.' || table_name AS t, list(column_name) AS cols "
        "FROM information_schema.columns WHERE table_schema IN ('datasets', 'analysis') "
        "GROUP BY 1"
    )
    built = dict(zip(published["t"], published["cols"], strict=True))
    assert {"datasets.measured_configs", "analysis.measured_speedup_by_kernel"} <= set(built)
    for table, columns in built.items():
        described = set(COLUMNS.get(table, {}))
        assert set(columns) == described, (table, set(columns) ^ described)
