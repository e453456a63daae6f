"""Assets that ingest device batches shipped in the package re-run when a batch changes.

The shipped Parquet batches are inputs no lake table records, so before this their assets
(``executed_commits``, ``measured_configs``) kept one code version forever and
``kernelhouse refresh`` never re-ingested a new batch. Their lineage entry names the
folders; the resolved code version carries a fingerprint of those folders' files.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

import dagster_project
from dagster_project.execution import policy
from dagster_project.settings import load_settings
from dagster_project.storage import lineage
from dagster_project.storage.versions import files_version


def test_files_version_follows_names_and_contents(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    empty = files_version(tmp_path, ["d"])
    (tmp_path / "d" / "b-001.parquet").write_bytes(b"one")
    one = files_version(tmp_path, ["d"])
    assert one != empty
    (tmp_path / "d" / "b-001.parquet").write_bytes(b"two")
    changed = files_version(tmp_path, ["d"])
    assert changed != one
    (tmp_path / "d" / "b-001.parquet").rename(tmp_path / "d" / "b-002.parquet")
    assert files_version(tmp_path, ["d"]) != changed
    assert files_version(tmp_path, ["missing"]) != empty  # a folder's name counts too


@pytest.mark.parametrize("asset", ["executed_commits", "measured_configs"])
def test_shipped_assets_carry_their_batches_in_the_code_version(asset: str) -> None:
    shipped = lineage.access(asset).shipped
    assert shipped, f"{asset} ingests shipped batches: its lineage entry must name them"
    root = Path(dagster_project.__file__).parent
    assert all((root / folder).is_dir() for folder in shipped)
    spec = dg.AssetSpec(asset, tags={policy.CODE_VERSION_TAG: policy.SHIPPED})
    resolved = policy.resolve(spec, load_settings())
    assert resolved.code_version == f"data.{files_version(root, shipped)}"


def test_the_definitions_resolve_the_shipped_code_versions() -> None:
    from dagster_project.definitions import build_definitions

    graph = build_definitions().resolve_asset_graph()
    for asset in ("executed_commits", "measured_configs"):
        version = graph.get(dg.AssetKey(asset)).code_version
        assert version is not None and "data." in version, (asset, version)
