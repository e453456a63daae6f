"""The harness launches every kernel family on the grid its engine would use (issue 38).

Each case below was worked out by hand from reading the engine's launcher at the snapshot
the rows' kernel sources come from (vLLM 28be48fa944d, SGLang 30cb848d4b45): the
alignment buffer ``moe_align_block_size`` allocates (with its cap for batches with fewer
(token, expert) pairs than padded experts), vLLM's no-sort path for very sparse batches
and its small-batch ``EM``, and ``cdiv(EM, BM) * cdiv(N, BN)`` programs. The numbers are
ours, not copied code; a planner that drifts from any rule fails a case.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import polars as pl
import pytest

from dagster_project.rewards import measured
from dagster_project.rewards.gpu.plan import engine_grids, plan_launches
from dagster_project.rewards.gpu.routing import route
from dagster_project.rewards.gpu.source import signature_of
from dagster_project.rewards.gpu.spec import normalise_config
from tests.unit.test_execution_reward import (
    BLOCK_MM_SRC,
    MOE_SRC_ENGINE,
    MOE_SRC_PLAIN,
    TUNED,
    emulate_moe,
    mm_row,
    moe_row,
)

# (repo, M, E, top_k, BLOCK_SIZE_M, up grid, down grid) for a row with N=512 (the up
# GEMM's output is 2N = 1024 wide), K=7168 (the down GEMM's output) and BLOCK_SIZE_N=64:
# 16 and 112 column blocks.
MOE_CASES = [
    # SGLang: 8 pairs < E+1 = 257: buffer 8*16 = 128 -> 8 row blocks (uncapped: 4118 -> 258)
    ("sglang", 1, 256, 8, 16, 8 * 16, 8 * 112),
    # SGLang at the edge: 256 pairs < 257 still capped: 256*16 = 4096 -> 256 blocks
    # (uncapped 256 + 257*15 = 4111 -> 257)
    ("sglang", 32, 256, 8, 16, 256 * 16, 256 * 112),
    # SGLang, 512 pairs >= 257: uncapped 512 + 257*15 = 4367 -> 273 blocks
    ("sglang", 64, 256, 8, 16, 273 * 16, 273 * 112),
    # SGLang, BM 64, 40 pairs < 129: 40*64 -> 40 blocks
    ("sglang", 5, 128, 8, 64, 40 * 16, 40 * 112),
    # vLLM: 8 pairs * 4 <= 256 experts: no-sort path, EM = pairs * BM -> 8 blocks
    ("vllm", 1, 256, 8, 16, 8 * 16, 8 * 112),
    # vLLM: 128 pairs < 256: buffer capped to 128*16 = 2048 -> 128 blocks, both GEMMs
    # (the down GEMM's A has 128 rows >= BM, so only the cap narrows it)
    ("vllm", 16, 256, 8, 16, 128 * 16, 128 * 112),
    # vLLM: 64 pairs < 128, M = 8 < BM: EM = min(64*16, 8*8*16) -> 64 blocks; the down
    # GEMM (64 rows >= 16) gets the same capped buffer, not 64 + 128*15 = 1984
    ("vllm", 8, 128, 8, 16, 64 * 16, 64 * 112),
    # vLLM: 512 pairs >= 256: 512 + 256*15 = 4352 -> 272 blocks
    ("vllm", 64, 256, 8, 16, 272 * 16, 272 * 112),
    # vLLM: 20 pairs < 64, M = 5 < BM 64: EM = 20*64 -> 20 blocks
    ("vllm", 5, 64, 4, 64, 20 * 16, 20 * 112),
]


def _moe(repo: str, M: int, E: int, top_k: int) -> Any:
    src = MOE_SRC_ENGINE if repo == "vllm" else MOE_SRC_PLAIN
    return moe_row(repo=repo, M=M, E=E, top_k=top_k, N=512, K=7168, kernel_source=src)


@pytest.mark.parametrize(("repo", "M", "E", "top_k", "bm", "up", "down"), MOE_CASES)
def test_fused_moe_grid_is_the_engines(
    repo: str, M: int, E: int, top_k: int, bm: int, up: int, down: int
) -> None:
    row = _moe(repo, M, E, top_k)
    cfg, _ = normalise_config({**TUNED, "BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": 64})
    sig = signature_of(row.kernel_source, "fused_moe_kernel")
    launches = plan_launches(row, cfg, sig, route(M, E, top_k, seed=3))
    assert [lch.grid for lch in launches] == [(up,), (down,)]
    assert engine_grids(row, cfg) == [(up,), (down,)]


@pytest.mark.parametrize(
    ("repo", "M", "E", "top_k", "bm"),
    [("sglang", 32, 256, 8, 16), ("sglang", 5, 128, 8, 64), ("vllm", 8, 128, 8, 16)],
)
def test_capped_launches_still_compute_every_pair(
    repo: str, M: int, E: int, top_k: int, bm: int
) -> None:
    """The capped buffer holds every padded pair: the kernel, emulated block by block
    from the planned arguments, writes every (token, expert) output of both GEMMs."""
    src = MOE_SRC_ENGINE if repo == "vllm" else MOE_SRC_PLAIN
    row = moe_row(repo=repo, M=M, E=E, top_k=top_k, N=12, K=16, kernel_source=src)
    r = route(M, E, top_k, seed=7)
    cfg, _ = normalise_config({**TUNED, "BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": 16})
    rng = np.random.default_rng(1)
    sig = signature_of(src, "fused_moe_kernel")
    for lch in plan_launches(row, cfg, sig, r):
        n, k, tk = lch.args["N"], lch.args["K"], lch.args["top_k"]
        a = rng.standard_normal((M * top_k // tk, k))
        b = rng.standard_normal((E, n, k))
        got = emulate_moe(lch, a, b, r.topk_weights)
        flat = r.topk_ids.reshape(-1)
        want = np.stack([a[i // tk] @ b[flat[i]].T for i in range(M * top_k)])
        if lch.args["MUL_ROUTED_WEIGHT"]:
            want = want * r.topk_weights.reshape(-1, 1)
        np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize(
    ("kernel", "repo", "M", "N", "bm", "bn", "grid"),
    [
        # cdiv(M, BM) * cdiv(N, BN), no padding or cap, in both engines
        ("_w8a8_block_fp8_matmul", "sglang", 1, 3072, 16, 32, 1 * 96),
        ("_w8a8_block_fp8_matmul", "sglang", 300, 384, 128, 128, 3 * 3),
        ("_w8a8_triton_block_scaled_mm", "vllm", 1, 3072, 64, 128, 1 * 24),
        ("_w8a8_triton_block_scaled_mm", "vllm", 4097, 7168, 64, 128, 65 * 56),
    ],
)
def test_block_matmul_grid_is_the_engines(
    kernel: str, repo: str, M: int, N: int, bm: int, bn: int, grid: int
) -> None:
    src = BLOCK_MM_SRC.replace("_w8a8_block_fp8_matmul", kernel)
    row = mm_row(kernel=kernel, repo=repo, M=M, N=N, K=1536, kernel_source=src)
    cfg, _ = normalise_config({**TUNED, "BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn})
    (lch,) = plan_launches(row, cfg, signature_of(src, kernel), None)
    assert lch.grid == (grid,)
    assert engine_grids(row, cfg) == [(grid,)]


def _result(row_id: str, grid: list[list[int]], **over: Any) -> dict[str, Any]:
    cfg = {**TUNED, "BLOCK_SIZE_N": 64}
    base: dict[str, Any] = {
        "row_id": row_id,
        "label": "tuned",
        "status": "ok",
        "config": json.dumps(cfg),
        "details": json.dumps({"grid": grid}),
        "kernel": "fused_moe_kernel",
        "repo": "sglang",
        "dtype": "bf16/fp16",
        "M": 1,
        "N": 512,
        "K": 7168,
        "E": 256,
        "top_k": 8,
        "n_shared": 0,
        "moe_gemms": "both",
        "device": "NVIDIA H200",
        "harness_version": "1.1.0",
    }
    return {**base, **over}


def test_results_on_another_grid_are_superseded_per_table() -> None:
    """A (row, GPU) table with one result launched on the uncapped grid is superseded as a
    whole; the same row measured on the engine's grid (here on another GPU) is not."""
    wrong = [[258 * 16], [258 * 112]]  # 1.1.0's uncapped SGLang grid for M=1, E=256
    right = [[8 * 16], [8 * 112]]
    rows = [
        _result("a", wrong),
        _result("a", right, label="default"),
        _result("a", right, device="NVIDIA H100 80GB HBM3", harness_version="1.2.0"),
        _result("b", right),
    ]
    schema = {c: t for c, t in measured.RAW_SCHEMA.items() if c != "measured_at"}
    df = pl.DataFrame([{c: r.get(c) for c in schema} for r in rows], schema=schema, orient="row")
    out = measured.mark_superseded(df)
    got = {
        (r["row_id"], r["measured_on"], r["label"]): r["superseded_reason"] for r in out.to_dicts()
    }
    assert got[("a", "NVIDIA H200", "tuned")] and "grid" in got[("a", "NVIDIA H200", "tuned")]
    assert got[("a", "NVIDIA H200", "default")] == got[("a", "NVIDIA H200", "tuned")]
    assert got[("a", "NVIDIA H100", "tuned")] is None
    assert got[("b", "NVIDIA H200", "tuned")] is None


def test_shipped_h200_batches_superseded_where_the_grid_was_wrong() -> None:
    """The shipped H200 batches (harness <= 1.1.0): exactly the fused-MoE tables launched
    on the uncapped grid are superseded, 268 SGLang and 59 vLLM rows (vLLM's cap also
    narrows the down GEMM, which the 41 up-GEMM rows of the issue's re-timing missed);
    no block-matmul row is."""
    df = measured.read_shipped([p for p in measured.shipped_batches() if p.parent.name == "h200"])
    out = measured.mark_superseded(df)
    sup = out.filter(pl.col("superseded_reason").is_not_null())
    by = dict(sup.group_by("repo").agg(pl.col("row_id").n_unique()).iter_rows())
    assert by == {"sglang": 268, "vllm": 59}
    assert set(sup["kernel"]) == {"fused_moe_kernel"}
