"""Malformed upstream config files: each is recorded with its reason and skipped, and the
rest of the dataset still builds (issue 21). Built on a real fixture repo with git."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from dagster_project.mining.configs import (
    build_tuned_configs,
    discover_config_files,
    load_model_shapes_snapshot,
    read_config_entries,
)
from dagster_project.mining.configs.entries import (
    MAX_CONFIG_BYTES,
    BlobCache,
    parse_config_blob,
)
from dagster_project.mining.git import GitRepo
from tests.fixtures.config_history import GRID_SHORT, V_MOE, V_MOE_CFG, config_doc, moe_module
from tests.fixtures.factory import RepoBuilder

DEV = "device_name=NVIDIA_H100_80GB_HBM3"
GOOD = f"{V_MOE_CFG}/E=8,N=14336,{DEV}.json"

#: name -> (content, expected status, a fragment of the expected reason)
MALFORMED: dict[str, tuple[bytes, str, str]] = {
    "superscript_key": (
        b'{"\xc2\xb2": {"BLOCK_SIZE_M": 16}, "1": {"BLOCK_SIZE_M": 16}}',
        "bad_json",
        "not M -> config",
    ),
    "non_numeric_key": (b'{"one": {"BLOCK_SIZE_M": 16}}', "bad_json", "not M -> config"),
    "deep_nesting": (
        b'{"1": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5000 + b"}",
        "bad_json",
        "nesting deeper",
    ),
    "shallow_extra_nesting": (b'{"1": {"a": {"b": {"c": [1]}}}}', "bad_json", "nesting deeper"),
    "m_beyond_int64": (
        b'{"9223372036854775808": {"BLOCK_SIZE_M": 16}}',
        "bad_json",
        "not M -> config",
    ),
    "value_beyond_int64": (
        b'{"1": {"BLOCK_SIZE_M": 99999999999999999999999}}',
        "bad_json",
        "beyond int64",
    ),
    "huge_literal": (b'{"1": {"BLOCK_SIZE_M": ' + b"9" * 5000 + b"}}", "bad_json", "invalid"),
    "nan_value": (b'{"1": {"BLOCK_SIZE_M": NaN}}', "bad_json", "non-finite"),
    "inf_value": (b'{"1": {"BLOCK_SIZE_M": -Infinity}}', "bad_json", "non-finite"),
    "overflow_float": (b'{"1": {"BLOCK_SIZE_M": 1e999}}', "bad_json", "non-finite"),
    "not_utf8": (b'{"1": {"BLOCK_SIZE_M": "\xff"}}', "bad_json", "not UTF-8"),
    "top_level_list": (b"[1, 2]", "bad_json", "top level is a list"),
    "too_large": (
        json.dumps(
            {str(m): {"BLOCK_SIZE_M": 16, "pad": "x" * 200} for m in range(1, 6000)}
        ).encode(),
        "too_large",
        "cap",
    ),
}


def _path(i: int) -> str:
    return f"{V_MOE_CFG}/E={16 + i},N=1024,{DEV}.json"


@pytest.fixture(scope="module")
def malformed_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepo, dict[str, str]]:
    b = RepoBuilder(Path(tmp_path_factory.mktemp("malformed")) / "vllm")
    b.write("LICENSE", "Apache License 2.0 (fixture)\n")
    b.write(f"{V_MOE}/fused_moe.py", moe_module("vllm"))
    b.write(GOOD, config_doc("good", GRID_SHORT))
    names = {}
    for i, (name, (content, _, _)) in enumerate(MALFORMED.items()):
        b.write(_path(i), content)
        names[_path(i)] = name
    b.commit("[Perf] configs, some of them broken (#1)")
    return GitRepo(b.path), names


def test_parse_config_blob_never_raises_and_names_the_problem() -> None:
    for name, (content, status, reason) in MALFORMED.items():
        blob = parse_config_blob(content)
        assert blob.status == status, name
        assert blob.error and reason in blob.error, (name, blob.error)
        assert blob.entries == (), name
    assert len(MALFORMED["too_large"][0]) > MAX_CONFIG_BYTES
    # a real-shaped file is still fine, booleans and lists of ints included
    ok = parse_config_blob(b'{"triton_version": "3.4.0", "1": {"USE_TMA": true, "x": [1, 2]}}')
    assert ok.status == "ok" and ok.error is None and ok.entries[0][0] == 1


def test_malformed_files_recorded_and_rest_builds(malformed_repo) -> None:
    repo, names = malformed_repo
    files = discover_config_files(repo, "vllm", cache=BlobCache())
    assert files.height == len(MALFORMED) + 1
    for path, name in names.items():
        row = files.filter(pl.col("path") == path).row(0, named=True)
        _, status, reason = MALFORMED[name]
        assert row["parse_status"] == status, name
        assert reason in row["parse_error"], (name, row["parse_error"])
    entries = read_config_entries(repo, files, cache=BlobCache())
    assert set(entries["path"]) == {GOOD} and entries.height == len(GRID_SHORT)
    rows = build_tuned_configs(
        files,
        entries,
        pl.DataFrame(),
        pl.DataFrame(schema={"kernel": pl.String(), "repo": pl.String(), "source": pl.String()}),
        load_model_shapes_snapshot(),
        {"vllm": repo.head("HEAD")},
    )
    assert rows.height == len(GRID_SHORT)
    assert set(rows["config_path"]) == {GOOD}
