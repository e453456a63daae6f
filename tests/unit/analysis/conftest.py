"""One seeded lake with every analysis view created, shared by the module's tests.

Session-scoped because the lake is read-only for every test here (the report writes its
file elsewhere), and building it once keeps the whole analysis suite at a few seconds.
"""

from __future__ import annotations

import pytest

from dagster_project.report.analysis import ViewReport, create_views
from tests.unit.analysis import seed


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> seed.Seed:
    return seed.build(tmp_path_factory.mktemp("analysis-lake"))


@pytest.fixture(scope="session")
def views(seeded: seed.Seed) -> ViewReport:
    return create_views(seeded.lake)
