"""Issue 41: tuned-config files copied to another device name are found, credited to the
PR that tuned the values, and never straddle the split. The history is a real git
repository built here and mined with the real miners."""

from __future__ import annotations

import json

import polars as pl
import pytest

from dagster_project.mining.configs import (
    attribute_config_prs,
    build_tuned_configs,
    discover_config_files,
    extract_kernel_sources,
    load_model_shapes_snapshot,
    read_config_entries,
)
from dagster_project.mining.configs.split import apply_deployment_split
from dagster_project.mining.git import GitRepo
from tests.fixtures.factory import RepoBuilder

DIR = "vllm/model_executor/layers/fused_moe/configs"
NS = [128 * (i + 1) for i in range(24)]


def _table(seed: int, indent: int = 4) -> str:
    doc = {
        str(m): {
            "BLOCK_SIZE_M": 16 * (1 + (seed + m) % 4),
            "BLOCK_SIZE_N": 64,
            "BLOCK_SIZE_K": 128,
            "GROUP_SIZE_M": 1 + seed % 3,
            "num_warps": 4,
            "num_stages": 2 + m % 3,
        }
        for m in (1, 2, 4, 8, 16)
    }
    return json.dumps(doc, indent=indent) + "\n"


def _name(n: int, device: str) -> str:
    return f"{DIR}/E=8,N={n},device_name={device}.json"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    b = RepoBuilder(tmp_path_factory.mktemp("copies") / "vllm")
    b.write("LICENSE", "Apache License 2.0 (fixture)\n").commit("Initial commit")
    for n in NS:
        b.write(_name(n, "AMD_Instinct_MI300X"), _table(n))
    b.commit("[ROCm] Tune fused MoE on MI300X (#10)")
    for n in NS:
        b.write(_name(n, "NVIDIA_H100_80GB_HBM3"), _table(n + 1))
    b.commit("[Kernel] Tune fused MoE on H100 (#20)")
    for n in NS:  # the MI300X tables shipped under two more names, re-indented
        b.write(_name(n, "AMD_Instinct_MI325X"), _table(n, indent=2))
        b.write(_name(n, "AMD_Radeon_Graphics"), _table(n))
    b.commit("[ROCm] Add MI325X and Radeon configs (#30)")
    repo = GitRepo(b.path)
    files = discover_config_files(repo, "vllm", "HEAD")
    entries = read_config_entries(repo, files)
    attrs = attribute_config_prs(repo, "vllm", "HEAD", files["path"].to_list())
    rows = build_tuned_configs(
        files,
        entries,
        attrs,
        extract_kernel_sources(repo, "vllm", "HEAD"),
        load_model_shapes_snapshot(),
        {"vllm": repo.head("HEAD")},
    )
    return rows


def _device(df: pl.DataFrame, device: str) -> pl.DataFrame:
    return df.filter(pl.col("device_name") == device)


def test_copies_point_at_the_tuned_file_and_its_pr(built) -> None:
    for device in ("AMD_Instinct_MI325X", "AMD_Radeon_Graphics"):
        copies = _device(built, device)
        assert copies.height == len(NS) * 5
        for path, source, pr in copies.select(
            "config_path", "copied_from", "config_pr_number"
        ).iter_rows():
            assert source == path.replace(device, "AMD_Instinct_MI300X")
            assert pr == 10  # the tuning PR, not #30 that copied it
    for device, pr in (("AMD_Instinct_MI300X", 10), ("NVIDIA_H100_80GB_HBM3", 20)):
        own = _device(built, device)
        assert own["copied_from"].null_count() == own.height
        assert set(own["config_pr_number"]) == {pr}


def test_a_copy_never_straddles_the_split(built) -> None:
    def straddling(df: pl.DataFrame) -> int:
        amd = df.filter(pl.col("device_name").str.starts_with("AMD"))
        return int((amd.group_by("N").agg(pl.col("split").n_unique())["split"] > 1).sum())

    # Keyed by deployment alone, some of the 24 shapes put a copy and its original on
    # both sides (the leak this rule closes) ...
    plain = apply_deployment_split(built.drop("split", "split_group"))
    assert straddling(plain) > 0
    # ... grouped by content, none does, and each family is one split group.
    assert straddling(built) == 0
    amd = built.filter(pl.col("device_name").str.starts_with("AMD"))
    assert (amd.group_by("N").agg(pl.col("split_group").n_unique())["split_group"] == 1).all()
    train = built.filter(pl.col("split") == "train")
    test = built.filter(pl.col("split") == "test")
    key = ["N", "M", "best_config"]
    assert test.join(train.select(key), on=key).is_empty()
