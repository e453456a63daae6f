"""loaded_at_runtime: the engine's own lookup, read from its source at the snapshot."""

from __future__ import annotations

import polars as pl

from dagster_project.mining.configs import discover_config_files
from dagster_project.mining.configs.entries import BlobCache
from dagster_project.mining.configs.lookup import (
    LookupRules,
    is_loaded,
    read_lookup_rules,
    template_regex,
)


def test_vllm_fixture_block_int8_is_never_loaded(config_repos) -> None:
    cr = config_repos["vllm"]
    rules = read_lookup_rules(cr.repo, "vllm", "HEAD")
    assert rules.moe_found and rules.moe_strips_spaces and len(rules.block_templates) == 2
    files = discover_config_files(cr.repo, "vllm", "HEAD", cache=BlobCache())
    named = files.filter(pl.col("parse_status") != "bad_name")
    assert named["loaded_at_runtime"].null_count() == 0
    int8 = named.filter(pl.col("family") == "block_int8")
    assert int8.height and not int8["loaded_at_runtime"].any()
    assert int8["not_loaded_reason"].str.contains(r"block_shape=\[\{block_n\}, \{block_k\}\]").all()
    others = named.filter(pl.col("family") != "block_int8")
    assert (
        others["loaded_at_runtime"].all()
        and others["not_loaded_reason"].null_count() == others.height
    )


def test_sglang_fixture_configs_are_loaded(config_repos) -> None:
    cr = config_repos["sglang"]
    files = discover_config_files(cr.repo, "sglang", "HEAD", cache=BlobCache())
    named = files.filter(pl.col("parse_status") != "bad_name")
    moe = named.filter(pl.col("family") == "moe")
    assert moe.height and moe["loaded_at_runtime"].all()


def test_no_lookup_in_source_is_unknown_not_false(config_repos) -> None:
    # FlashInfer has no lookup modules: nothing to say, so null with the reason.
    assert read_lookup_rules(config_repos["flashinfer"].repo, "flashinfer") == LookupRules()
    loaded, why = is_loaded(LookupRules(), "moe", "E=8,N=1,device_name=X.json", "X", None)
    assert loaded is None and "not found" in why
    loaded, why = is_loaded(LookupRules(moe_found=True), "ssu", "x.json", "X", None)
    assert loaded is None and "not modelled" in why


def test_moe_rules() -> None:
    vllm = LookupRules(moe_found=True, moe_strips_spaces=True, moe_folds_h200=True)
    sg = LookupRules(moe_found=True)
    spaced = "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"
    tight = spaced.replace("[128, 128]", "[128,128]")
    assert is_loaded(vllm, "moe", tight, "NVIDIA_H200", "fp8_w8a8") == (True, None)
    assert is_loaded(vllm, "moe", spaced, "NVIDIA_H200", "fp8_w8a8")[0] is False
    assert is_loaded(sg, "moe", spaced, "NVIDIA_H200", "fp8_w8a8") == (True, None)
    assert is_loaded(sg, "moe", tight, "NVIDIA_H200", "fp8_w8a8")[0] is False
    nvl = "E=8,N=1,device_name=NVIDIA_H200_NVL.json"
    assert "H200" in is_loaded(vllm, "moe", nvl, "NVIDIA_H200_NVL", None)[1]
    assert is_loaded(sg, "moe", nvl, "NVIDIA_H200_NVL", None) == (True, None)


def test_template_regex() -> None:
    r = template_regex(
        "N={N},K={K},device_name={device_name},dtype=int8_w8a8,"
        "block_shape=[{block_n}, {block_k}].json"
    )
    assert r.fullmatch(
        "N=1536,K=1536,device_name=NVIDIA_A100-SXM4-80GB,dtype=int8_w8a8,"
        "block_shape=[128, 128].json"
    )
    assert not r.fullmatch(
        "N=1536,K=1536,device_name=NVIDIA_A100-SXM4-80GB,dtype=int8_w8a8,block_shape=[128,128].json"
    )


def test_moe_dtype_the_lookup_never_asks_for(tmp_path) -> None:
    """vLLM's _get_config_dtype_str never returns int8_w8a8: such MoE files are not read."""
    from dagster_project.mining.git import GitRepo
    from tests.fixtures.factory import RepoBuilder

    b = RepoBuilder(tmp_path / "v")
    b.write(
        "vllm/model_executor/layers/fused_moe/fused_moe.py",
        "def get_config_file_name(E, N, dtype, block_shape=None):\n"
        "    dtype_selector = '' if not dtype else f',dtype={dtype}'\n"
        "    return f'E={E},N={N}{dtype_selector}.json'\n",
    )
    b.write(
        "vllm/model_executor/layers/fused_moe/config.py",
        "def _get_config_dtype_str(dtype, use_fp8_w8a8=False):\n"
        '    if use_fp8_w8a8:\n        return "fp8_w8a8"\n    return None\n',
    )
    b.commit("lookup")
    rules = read_lookup_rules(GitRepo(b.path), "vllm")
    assert rules.moe_dtypes == frozenset({"fp8_w8a8"})
    ok = is_loaded(rules, "moe", "E=8,N=1,device_name=X,dtype=fp8_w8a8.json", "X", "fp8_w8a8")
    assert ok == (True, None)
    no, why = is_loaded(
        rules, "moe", "E=8,N=1,device_name=X,dtype=int8_w8a8.json", "X", "int8_w8a8"
    )
    assert no is False and "int8_w8a8" in why
    assert is_loaded(rules, "moe", "E=8,N=1,device_name=X.json", "X", None) == (True, None)
