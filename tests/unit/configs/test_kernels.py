"""Kernel source extraction: the decorated kernel and what it needs, at any ref."""

from __future__ import annotations

import ast

import polars as pl
import pytest

from dagster_project.mining.configs.kernels import (
    KERNELS_SCHEMA,
    extract_from_source,
    extract_kernel_sources,
)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_every_kernel_is_found_with_its_helpers(config_repos, engine: str) -> None:
    cr = config_repos[engine]
    kernels = extract_kernel_sources(cr.repo, engine, "HEAD")
    assert dict(kernels.schema) == KERNELS_SCHEMA
    got = {r["kernel"]: r for r in kernels.iter_rows(named=True)}
    assert set(got) == set(cr.truth["kernels"])
    head = cr.repo.head()
    for kernel, (path, helpers) in cr.truth["kernels"].items():
        row = got[kernel]
        assert row["path"] == path and row["snapshot_sha"] == head
        src = row["source"]
        assert f"def {kernel}(" in src
        assert "@triton.jit" in src
        for helper in helpers:
            assert f"def {helper}(" in src, (kernel, helper)
        assert "import" in src.splitlines()[0]  # the imports that bind tl / triton come first
        # launchers and config loaders are not part of the kernel
        assert "def invoke_fused_moe_kernel" not in src
        assert "def get_moe_configs" not in src
        assert "def w8a8_block_matmul" not in src


def test_ssu_kernel_brings_conditional_helper_constant_and_imported_helper(config_repos) -> None:
    kernels = extract_kernel_sources(config_repos["vllm"].repo, "vllm", "HEAD")
    src = kernels.filter(pl.col("kernel") == "_selective_scan_update_kernel")["source"][0]
    assert src.count("@triton.heuristics") == 3  # every decorator kept
    assert "if TRITON3:" in src and "TRITON3 = " in src  # helper defined under a module if
    assert "from packaging import version" in src  # needed by the constant
    assert "# --- from vllm/model_executor/layers/mamba/ops/triton_helpers.py ---" in src
    assert "def fast_exp(" in src
    assert "def selective_state_update(" not in src


def test_old_ref_resolves_old_kernel_name_and_path(config_repos) -> None:
    cr = config_repos["vllm"]
    # Before #25696 the fp8 block kernel had its old name.
    old = cr.repo.text(["log", "--format=%H", "-1", "--grep", "#25696", "HEAD"]).strip()
    before = extract_kernel_sources(cr.repo, "vllm", f"{old}^")
    row = before.filter(pl.col("kernel") == "_w8a8_triton_block_scaled_mm").row(0, named=True)
    assert row["symbol"] == "_w8a8_block_fp8_matmul"
    assert "def _w8a8_block_fp8_matmul(" in row["source"]

    sg = config_repos["sglang"]
    first = sg.repo.text(["rev-list", "--max-parents=0", "HEAD"]).split()[0]
    early = sg.repo.text(["log", "--format=%H", "--reverse", "HEAD"]).split()[1]
    assert first != early
    rows = extract_kernel_sources(sg.repo, "sglang", early)
    moe = rows.filter(pl.col("kernel") == "fused_moe_kernel").row(0, named=True)
    assert moe["path"] == "python/sglang/srt/layers/fused_moe/fused_moe.py"
    block = rows.filter(pl.col("kernel") == "_w8a8_block_fp8_matmul").row(0, named=True)
    assert block["source"] is None and block["path"] is None  # not written yet: reported


def test_flashinfer_has_no_kernels(config_repos) -> None:
    out = extract_kernel_sources(config_repos["flashinfer"].repo, "flashinfer")
    assert out.is_empty() and dict(out.schema) == KERNELS_SCHEMA


MODULE = """
import os
import triton
import triton.language as tl
from .helpers import scale_tile, unrelated

BLOCK = 128
UNUSED = 3


@triton.jit
def _inner(x, N: tl.constexpr):
    return x * BLOCK


@triton.jit
def _outer(x):
    return _inner(x, 4) + 1


def launcher():
    return os.getcwd()


@triton.autotune(configs=[], key=["N"])
@triton.jit
def kernel(x_ptr, N, BLOCK_SIZE: tl.constexpr):
    # BLOCK_SIZE shadows nothing; N is a parameter, not the module name
    x = tl.load(x_ptr)
    y = _outer(x)
    tl.store(x_ptr, scale_tile(y))
    launcher
"""


def test_extract_from_source_closure() -> None:
    ext = extract_from_source(MODULE, ["kernel"])
    assert ext is not None and ext.symbol == "kernel"
    src = ext.source
    ast.parse(src)  # what we cut out is itself valid Python
    assert sorted(ext.helpers) == ["_inner", "_outer"]
    assert "BLOCK = 128" in src and "UNUSED" not in src
    assert "@triton.autotune" in src
    assert "def launcher" not in src  # plain Python callers are not kernel code
    assert "import os" not in src
    assert "from .helpers import scale_tile, unrelated" in src
    assert ext.imported == {"scale_tile": (".helpers", "scale_tile")}
    # file order: imports, constant, helpers, kernel
    assert (
        src.index("BLOCK = 128")
        < src.index("def _inner")
        < src.index("def _outer")
        < src.index("def kernel")
    )


def test_extract_from_source_missing_or_broken() -> None:
    assert extract_from_source(MODULE, ["nope"]) is None
    assert extract_from_source("def broken(:\n", ["broken"]) is None
