"""The lineage declaration (``storage/lineage.py``) against the code, both ways: every
asset of the definitions is declared and depends on exactly the writers of what it
declares; a lake handle opened for an asset refuses an undeclared read. That a whole
build on the fixture repos reads exactly the tables each asset declares is checked on the
one whole in-process build of ``tests/unit/execution/test_build_row_hashes.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagster_project.definitions import build_definitions
from dagster_project.storage import lineage
from dagster_project.storage.lake import Lake


def _graph():  # noqa: ANN202
    return build_definitions().resolve_asset_graph()


def test_every_asset_is_declared_and_its_deps_come_from_the_declaration() -> None:
    graph = _graph()
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if not node.is_materializable:
            continue
        name = key.to_user_string()
        assert name in lineage.ASSETS, f"{name} has no lineage declaration"
        parents = {k.to_user_string() for k in node.parent_keys}
        assert parents == set(lineage.upstream(name)), name
    # One writer per table, and every read table has one (or is a check table).
    for name in lineage.ASSETS:
        lineage.upstream(name)


def test_the_declared_edges_the_issue_named() -> None:
    assert {"pr_bodies", "perf_commits", "pr_gains"} <= set(lineage.upstream("kernel_commits"))
    assert "config_files" in lineage.upstream("tuned_configs")


def test_a_lake_opened_for_an_asset_refuses_an_undeclared_read(kh_home: Path) -> None:
    plain = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))
    plain.execute("CREATE TABLE raw.pr_bodies AS SELECT 1 AS n")
    plain.execute("CREATE TABLE raw.config_files AS SELECT 1 AS n")
    lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"), asset="config_entries")
    assert lake.read_table("raw", "config_files")["n"].to_list() == [1]
    for read in (
        lambda: lake.read_table("raw", "pr_bodies"),
        lambda: lake.read_table_or_none("raw", "pr_bodies"),
        lambda: lake.query('SELECT * FROM "raw"."pr_bodies" WHERE n = ?', [1]),
    ):
        with pytest.raises(lineage.UndeclaredRead, match=r"config_entries reads raw\.pr_bodies"):
            read()
    with lake.connect(read_only=True) as con, pytest.raises(lineage.UndeclaredRead):
        con.execute("SELECT count(*) FROM raw.pr_bodies")
    # The same handle without an asset (the CLI, tests) reads anything.
    assert plain.read_table("raw", "pr_bodies").height == 1


def test_a_missing_table_names_the_step_that_creates_it() -> None:
    assert lineage.needs_sources("kernel_commits") and lineage.needs_sources("pr_gains")
    assert not lineage.needs_sources("measured_configs")  # builds from the shipped batches
    assert not lineage.needs_sources("sim_tasks")
    said = lineage.build_steps(["datasets.kernel_commits"])
    assert "step kernel_commits creates it" in said and "kernelhouse refresh" in said
    said = lineage.build_steps(["sim.kernelinfer_sessions"])
    assert "kernelhouse build --select kernelinfer_sessions" in said
    assert "kernelhouse check" in lineage.build_steps(["derived.quality_results"])
