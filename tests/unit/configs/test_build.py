"""The dataset rows: schema, counts, joins, split leakage, prompt content."""

from __future__ import annotations

import json

import polars as pl
import pytest

from dagster_project.mining.configs import (
    TUNED_CONFIGS_SCHEMA,
    attribute_config_prs,
    build_prompt,
    build_tuned_configs,
    discover_config_files,
    extract_kernel_sources,
    load_model_shapes_snapshot,
    read_config_entries,
)
from dagster_project.mining.configs.prompt import M_SLOT, allowed_keys
from tests.fixtures.config_history import SSU_BRANCH


def _inputs(config_repos, refs: dict[str, str]):
    files, entries, attrs, kernels, snapshot = [], [], [], [], {}
    for engine, ref in refs.items():
        cr = config_repos[engine]
        f = discover_config_files(cr.repo, engine, ref)
        files.append(f)
        entries.append(read_config_entries(cr.repo, f))
        attrs.append(attribute_config_prs(cr.repo, engine, ref, f["path"].to_list()))
        kernels.append(extract_kernel_sources(cr.repo, engine, ref))
        snapshot[engine] = cr.repo.head(ref)
    return (
        pl.concat(files),
        pl.concat(entries),
        pl.concat(attrs),
        pl.concat(kernels),
        load_model_shapes_snapshot(),
        snapshot,
    )


@pytest.fixture(scope="module")
def built(config_repos):
    inputs = _inputs(config_repos, {"vllm": SSU_BRANCH, "sglang": "HEAD", "flashinfer": "HEAD"})
    return inputs, build_tuned_configs(*inputs)


def test_schema_and_counts(built, config_repos) -> None:
    (files, entries, *_), df = built
    assert dict(df.schema) == TUNED_CONFIGS_SCHEMA
    expected = sum(t["rows"] for t in config_repos["vllm"].truth["branches"][SSU_BRANCH].values())
    expected += config_repos["sglang"].truth["row_count"]
    assert df.height == expected == entries.height
    assert df["id"].is_unique().all()
    assert df.select("repo", "config_path", "M").is_duplicated().sum() == 0
    ok_paths = set(files.filter(pl.col("parse_status") == "ok")["path"])
    assert set(df["config_path"]) == ok_paths  # bad files never become rows
    assert set(df["license"]) == {"Apache-2.0"}
    assert df["config_pr_gains"].null_count() == df.height
    assert df["speedup_vs_default"].null_count() == df.height
    assert set(df["family"]) == {"moe", "block_fp8", "block_int8", "ssu"}


def test_row_values(built, config_repos) -> None:
    _, df = built
    assert (
        df["best_config"]
        .map_elements(lambda s: isinstance(json.loads(s), dict), return_dtype=pl.Boolean)
        .all()
    )
    assert df["default_config"].null_count() == 0
    snap = {
        r: config_repos[r].repo.head(ref) for r, ref in (("vllm", SSU_BRANCH), ("sglang", "HEAD"))
    }
    for repo, sha in snap.items():
        assert set(df.filter(pl.col("repo") == repo)["snapshot_commit"]) == {sha}
    # the PR column follows the attribution (one sglang file came from a direct push)
    assert df.filter(pl.col("config_pr_url").is_null())["config_path"].n_unique() == 1
    # dtype vocabulary of the card; SSU names its cache dtype
    assert "bf16/fp16" in set(df["dtype"])
    assert set(df.filter(pl.col("family") == "ssu")["dtype"]) == {"cache_float16", "cache_float32"}
    # triton_version: vLLM top-level key, SGLang folder
    b200 = df.filter(pl.col("config_path").str.contains("E=128,N=384,device_name=NVIDIA_B200"))
    assert set(b200["triton_version"]) == {"3.4.0"}
    sg = df.filter(pl.col("config_path").str.contains("/triton_3_2_0/"))
    assert set(sg["triton_version"]) == {"3.2.0"}
    # kernel source joined per repo and kernel
    awq = df.filter(pl.col("kernel") == "fused_moe_kernel_gptq_awq")
    assert (
        awq.height > 0 and awq["kernel_source"].str.contains("def fused_moe_kernel_gptq_awq").all()
    )
    assert df["kernel_source"].null_count() == 0


def test_candidate_models_in_rows(built) -> None:
    _, df = built
    v3 = df.filter(pl.col("repo") == "sglang", pl.col("E") == 257, pl.col("N") == 256)
    assert v3.height and all("DeepSeek-V3" in c for c in v3["candidate_models"])
    block = df.filter(pl.col("family") != "moe")
    assert block["candidate_models"].list.len().max() == 0


def test_default_config_follows_repo_and_platform(built) -> None:
    _, df = built
    amd = df.filter(
        pl.col("repo") == "vllm", pl.col("gpu") == "AMD MI300X", pl.col("family") == "moe"
    ).row(0, named=True)
    assert json.loads(amd["default_config"])["num_stages"] == 2  # ROCm
    sg = df.filter(
        pl.col("repo") == "sglang",
        pl.col("family") == "moe",
        pl.col("dtype") == "bf16/fp16",
        pl.col("M") == 4096,
    ).row(0, named=True)
    assert json.loads(sg["default_config"]) == {
        "BLOCK_SIZE_M": 64,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 32,
        "GROUP_SIZE_M": 8,
    }


def _file_key(path: str) -> str:
    """A file-name grouping written independently of the split rule (basename, spaces
    removed, ``_down`` twin folded): every spelling of one deployment's file."""
    base = path.rsplit("/", 1)[-1].replace(" ", "")
    return base.removesuffix("_down.json").removesuffix(".json")


def test_no_split_leakage(built) -> None:
    _, df = built
    # the split's own groups never straddle ...
    per_group = df.group_by("split_group").agg(pl.col("split").n_unique().alias("n"))
    assert per_group["n"].max() == 1
    # ... and neither do the file names of one deployment (repos, Triton folders, spacing)
    groups = df.with_columns(
        group=pl.col("config_path").map_elements(_file_key, return_dtype=pl.String())
    )
    per_file = groups.group_by("group").agg(pl.col("split").n_unique().alias("n"))
    assert per_file["n"].max() == 1
    # the same (shape, GPU, dtype) in both repos / several Triton folders stays together
    m1 = groups.filter(
        pl.col("config_path").str.ends_with("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json")
    )
    assert m1["config_path"].n_unique() == 2 and m1["split"].n_unique() == 1


def test_prompt_content(built) -> None:
    _, df = built
    row = df.filter(
        pl.col("repo") == "sglang",
        pl.col("is_down"),
        pl.col("gpu") == "NVIDIA B200",
        pl.col("M") == 64,
    ).row(0, named=True)
    p = row["prompt"]
    assert M_SLOT not in p
    assert "def fused_moe_kernel(" in p and "def write_zeros_to_output(" in p  # kernel source
    assert "GPU: NVIDIA B200" in p and "`NVIDIA_B200`" in p  # hardware
    assert "E = 257; N = 256" in p and "128x128" in p  # shape
    assert "FP8" in p and "(fp8_w8a8)" in p  # dtype
    assert "M = 64 tokens" in p and "latency at M = 64" in p  # batch size
    assert "DeepSeek-V3 (TP8 + fused shared" in p  # candidate models with the reading
    assert "down-projection" in p
    for key in allowed_keys("sglang", "moe", "NVIDIA", True):
        assert f"`{key}`" in p
    assert "`USE_TMA`" in p and "`waves_per_eu`" not in p
    assert "single JSON object" in p
    assert row["best_config"] not in p  # the answer is not in the task


def test_prompt_of_amd_block_and_ssu_rows(built) -> None:
    _, df = built
    amd = df.filter(
        pl.col("repo") == "sglang", pl.col("family") == "block_fp8", pl.col("gpu") == "AMD MI300X"
    ).row(0, named=True)
    assert "`waves_per_eu`" in amd["prompt"] and "N = 4096, K = 512" in amd["prompt"]
    ssu = df.filter(pl.col("family") == "ssu").row(0, named=True)
    assert "headdim = 64, dstate = 128" in ssu["prompt"]
    assert "batch x heads" in ssu["prompt"]
    assert "`BLOCK_SIZE_N`" not in ssu["prompt"]


def test_best_config_keys_are_always_allowed(built) -> None:
    (files, *_), df = built
    vendor = dict(zip(files["path"], files["gpu_vendor"], strict=True))
    for r in df.select("repo", "family", "config_path", "is_down", "best_config").iter_rows():
        repo, family, path, is_down, best = r
        allowed = set(allowed_keys(repo, family, vendor[path], is_down))
        assert set(json.loads(best)) <= allowed, path


def test_build_prompt_matches_vectorised_build(built) -> None:
    (files, entries, attrs, kernels, shapes, snap), df = built
    row = df.filter(pl.col("family") == "block_int8").row(0, named=True)
    f = files.filter(pl.col("path") == row["config_path"]).row(0, named=True)
    source = kernels.filter(pl.col("repo") == row["repo"], pl.col("kernel") == row["kernel"])[
        "source"
    ][0]
    direct = build_prompt(
        {**f, "M": row["M"], "kernel_source": source, "triton_version": row["triton_version"]}
    )
    assert direct == row["prompt"]


def test_empty_inputs_give_empty_frame() -> None:
    empty = pl.DataFrame(schema={"parse_status": pl.String()})
    out = build_tuned_configs(empty, empty, empty, empty, load_model_shapes_snapshot(), {})
    assert out.is_empty() and dict(out.schema) == TUNED_CONFIGS_SCHEMA


def test_only_bad_files_give_empty_frame(built) -> None:
    (files, entries, attrs, kernels, shapes, snap), _ = built
    bad = files.with_columns(parse_status=pl.lit("bad_json"))
    out = build_tuned_configs(bad, entries, attrs, kernels, shapes, snap)
    assert out.is_empty() and dict(out.schema) == TUNED_CONFIGS_SCHEMA
