"""The miners on a blobless clone give the same answers as on the full repository."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from dagster_project.mining.configs import (
    attribute_config_prs,
    discover_config_files,
    extract_kernel_sources,
    read_config_entries,
)
from dagster_project.mining.configs.entries import BlobCache
from dagster_project.mining.git import GitRepo, clone_or_fetch


def test_blobless_clone_matches_full_repo(config_repos, tmp_path: Path) -> None:
    cr = config_repos["sglang"]
    clone = clone_or_fetch(str(cr.builder.path), tmp_path / "sglang.git")
    assert clone.partial
    partial = GitRepo(clone.path)

    files = discover_config_files(partial, "sglang", cache=BlobCache())
    full_files = discover_config_files(cr.repo, "sglang", cache=BlobCache())
    assert files.drop("blob_oid").equals(full_files.drop("blob_oid"))

    entries = read_config_entries(partial, files, cache=BlobCache())
    assert entries.height == cr.truth["row_count"]

    attr = attribute_config_prs(partial, "sglang", "HEAD", files["path"].to_list())
    expected = {p: t["pr"] for p, t in cr.truth["files"].items()}
    assert dict(zip(attr["path"], attr["pr_number"], strict=True)) == expected

    kernels = extract_kernel_sources(partial, "sglang")
    assert kernels["source"].null_count() == 0
    assert (
        kernels.filter(pl.col("kernel") == "fused_moe_kernel")["source"][0].count(
            "def write_zeros_to_output("
        )
        == 1
    )
