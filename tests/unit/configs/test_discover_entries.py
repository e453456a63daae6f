"""Discovery and entries on fixture repos: counts, parsed fields, statuses, incrementality."""

from __future__ import annotations

import json

import polars as pl
import pytest

from dagster_project.mining.configs.discover import FILES_SCHEMA, discover_config_files
from dagster_project.mining.configs.entries import (
    ENTRIES_SCHEMA,
    BlobCache,
    parse_config_blob,
    read_config_entries,
)
from tests.fixtures.config_history import SSU_BRANCH, config_doc

FIELDS = (
    "family",
    "E",
    "N",
    "K",
    "device_name",
    "dtype",
    "block_shape",
    "is_down",
    "per_channel_quant",
    "gpu",
    "kernel",
    "triton_version",
    "triton_dir_version",
    "headdim",
    "dstate",
    "cache_dtype",
)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_discovery_matches_planted_truth(config_repos, engine: str) -> None:
    cr = config_repos[engine]
    files = discover_config_files(cr.repo, engine, "HEAD", cache=BlobCache())
    assert dict(files.schema) == FILES_SCHEMA
    truth = cr.truth["files"]
    assert sorted(files["path"]) == sorted(truth)
    assert files.height == cr.truth["file_count"]
    by_path = {r["path"]: r for r in files.iter_rows(named=True)}
    for path, t in truth.items():
        row = by_path[path]
        assert row["parse_status"] == t["status"], path
        assert (row["parse_error"] is None) == (t["status"] == "ok"), path
        if t["status"] == "ok":
            assert row["n_entries"] == t["rows"], path
        for key in FIELDS:
            if key in t:
                assert row[key] == t[key], (path, key)
    for excluded in cr.truth["excluded"]:
        assert excluded not in by_path  # Helion JSON beside the triton_X_Y_Z folders


def test_every_ok_file_has_family_kernel_and_gpu_or_empty_device(config_repos) -> None:
    for engine in ("vllm", "sglang"):
        files = discover_config_files(config_repos[engine].repo, engine)
        ok = files.filter(pl.col("parse_status") == "ok")
        assert ok["family"].null_count() == 0
        assert ok["kernel"].null_count() == 0
        assert ok.filter(pl.col("gpu").is_null())["device_name"].to_list() in ([], ["", ""])


def test_branch_ref_finds_ssu_configs(config_repos) -> None:
    cr = config_repos["vllm"]
    head = discover_config_files(cr.repo, "vllm", "HEAD")
    branch = discover_config_files(cr.repo, "vllm", SSU_BRANCH)
    assert "ssu" not in head["family"].to_list()
    ssu = branch.filter(pl.col("family") == "ssu")
    assert ssu.height == 2
    assert set(ssu["cache_dtype"]) == {"float16", "float32"}
    assert set(ssu["triton_version"]) == {"3.6.0"}
    assert set(ssu["kernel"]) == {"_selective_scan_update_kernel"}


def test_flashinfer_has_no_tuned_configs(config_repos) -> None:
    files = discover_config_files(config_repos["flashinfer"].repo, "flashinfer")
    assert files.is_empty() and dict(files.schema) == FILES_SCHEMA
    entries = read_config_entries(config_repos["flashinfer"].repo, files)
    assert entries.is_empty() and dict(entries.schema) == ENTRIES_SCHEMA


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_entries_count_and_content(config_repos, engine: str) -> None:
    cr = config_repos[engine]
    files = discover_config_files(cr.repo, engine)
    entries = read_config_entries(cr.repo, files, cache=BlobCache())
    assert entries.height == cr.truth["row_count"]
    assert entries.select("path", "M").is_duplicated().sum() == 0
    per_file = dict(entries.group_by("path").len().iter_rows())
    for path, t in cr.truth["files"].items():
        assert per_file.get(path, 0) == t["rows"], path
    # configs are kept whole, ROCm keys included
    amd = entries.filter(pl.col("path").str.contains("MI300X"))
    keys = set().union(*(json.loads(c).keys() for c in amd["config_json"]))
    assert {"waves_per_eu", "matrix_instr_nonkdim", "kpack"} <= keys


def test_triton_version_is_a_file_field_not_a_row(config_repos) -> None:
    cr = config_repos["vllm"]
    files = discover_config_files(cr.repo, "vllm")
    entries = read_config_entries(cr.repo, files)
    b200 = files.filter(pl.col("path").str.contains("N=384,device_name=NVIDIA_B200"))
    assert b200["triton_version"].to_list() == ["3.4.0"]
    rows = entries.filter(pl.col("path") == b200["path"][0])
    assert rows.height == 20 and rows["M"].max() == 9216


def test_key_order_is_file_order(config_repos) -> None:
    cr = config_repos["vllm"]
    files = discover_config_files(cr.repo, "vllm", SSU_BRANCH)
    entries = read_config_entries(cr.repo, files.filter(pl.col("family") == "ssu"))
    first = entries.filter(pl.col("path") == entries["path"][0]).sort("key_index")
    # GRID_SSU ends with keys smaller than earlier ones: file order is kept, not sorted
    assert first["M"].to_list()[-4:] == [12, 24, 48, 96]


def test_incremental_reuses_unchanged_blobs(fresh_repo) -> None:
    cr = fresh_repo("sglang")
    cache = BlobCache()
    files1 = discover_config_files(cr.repo, "sglang", cache=cache)
    entries1 = read_config_entries(cr.repo, files1, cache=cache)

    # One retune, one new file.
    changed = files1.filter(pl.col("parse_status") == "ok")["path"][0]
    added = changed.rsplit("/", 1)[0] + "/E=32,N=1024,device_name=NVIDIA_L20.json"
    cr.builder.write(changed, config_doc("retuned", [1, 2, 4]))
    cr.builder.write(added, config_doc("added", [8, 16]))
    cr.builder.commit("Retune one config, add another (#40000)")

    files2 = discover_config_files(cr.repo, "sglang", cache=BlobCache())
    fresh_cache = BlobCache()
    incremental = read_config_entries(cr.repo, files2, previous=entries1, cache=fresh_cache)
    assert fresh_cache.misses == 2  # only the two new blobs were read and parsed
    full = read_config_entries(cr.repo, files2, cache=BlobCache())
    assert incremental.sort("path", "key_index").equals(full.sort("path", "key_index"))
    assert incremental.filter(pl.col("path") == changed)["M"].to_list() == [1, 2, 4]
    assert incremental.filter(pl.col("path") == added)["M"].to_list() == [8, 16]


def test_discovery_then_entries_reads_git_once(config_repos) -> None:
    cr = config_repos["sglang"]
    cache = BlobCache()
    files = discover_config_files(cr.repo, "sglang", cache=cache)
    misses = cache.misses
    read_config_entries(cr.repo, files, cache=cache)
    assert cache.misses == misses  # everything came from the shared parse cache


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (b'{"1": {"BLOCK_SIZE_M": 16},', "invalid JSON"),
        (b"[1, 2]", "not an object"),
        (b'{"1": {"BLOCK_SIZE_M": 16}, "default": {}}', "'default'"),
        (b"{}", "no M entries"),
        (b'\xff\xfe{"1": {}}', "not UTF-8"),
    ],
)
def test_parse_config_blob_errors(content: bytes, error: str) -> None:
    parsed = parse_config_blob(content)
    assert parsed.error is not None and error in parsed.error


def test_parse_config_blob_keeps_every_key() -> None:
    doc = {"triton_version": "3.5.0", "1": {"BLOCK_SIZE_M": 16, "kpack": 2, "USE_TMA": True}}
    parsed = parse_config_blob(json.dumps(doc).encode())
    assert parsed.error is None and parsed.triton_version == "3.5.0"
    assert parsed.entries == ((1, json.dumps(doc["1"])),)
