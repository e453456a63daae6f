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


# -- every launch the harness plans, against each engine's launcher restated -----------
#
# Our own restatement (no upstream code) of what each launcher allocates and launches at
# the snapshot, from reading vLLM 28be48fa944d (``moe_align_block_size``, the no-sort
# decision before it, ``invoke_fused_moe_triton_kernel``) and SGLang 30cb848d4b45
# (``moe_align_block_size``, ``invoke_fused_moe_kernel``, ``should_enable_swap_ab``).


def _vllm_moe(rows: int, top_k: int, pairs: int, E: int, bm: int, bk: int, bs: Any) -> dict:
    """vLLM: no-sort path when pairs x 4 <= E; else the padded buffer (capped to
    pairs x BM below E pairs) and, for fewer A rows than BM, EM narrowed to rows x
    top_k x BM; BLOCK_SIZE_K capped at the quantisation block."""
    if pairs * 4 <= E:
        return {
            "sorted": None,
            "experts": pairs,
            "EM": pairs * bm,
            "naive": True,
            "BK": min(bk, *bs) if bs else bk,
        }
    padded = pairs + E * (bm - 1)
    if pairs < E:
        padded = min(padded, pairs * bm)
    em = min(padded, rows * top_k * bm) if rows < bm else padded
    return {
        "sorted": padded,
        "experts": -(-padded // bm),
        "EM": em,
        "naive": False,
        "BK": min(bk, *bs) if bs else bk,
    }


def _sglang_moe(pairs: int, E: int, bm: int, bk: int) -> dict:
    """SGLang: one more expert of padding, the buffer capped to pairs x BM below E + 1
    pairs; EM is the buffer; the config's BLOCK_SIZE_K as is."""
    padded = pairs * bm if pairs < E + 1 else pairs + (E + 1) * (bm - 1)
    return {"sorted": padded, "experts": -(-padded // bm), "EM": padded, "naive": False, "BK": bk}


SWEEP = [
    (M, E, top_k, bm, bn, bk)
    for M in (1, 3, 8, 33, 256)
    for E, top_k in ((8, 2), (64, 6), (256, 8))
    for bm, bn, bk in ((16, 64, 256), (64, 32, 128), (256, 128, 64))
]


@pytest.mark.parametrize("repo", ["vllm", "sglang"])
@pytest.mark.parametrize("quant", ["bf16", "fp8_block"])
def test_every_moe_launch_matches_the_engine_restated(repo: str, quant: str) -> None:
    """Buffers (sorted_token_ids and expert_ids lengths), EM, grid, the no-sort path,
    BLOCK_SIZE_K and swap_ab of both GEMMs over a sweep of batch sizes, expert counts and
    tiles, under uniform and skewed routing (the engines size buffers from the pair
    count alone, so routing must not change them)."""
    src = MOE_SRC_ENGINE if repo == "vllm" else MOE_SRC_PLAIN
    sig = signature_of(src, "fused_moe_kernel")
    fp8 = quant == "fp8_block"
    extra = {"dtype": "fp8_w8a8", "block_shape": [128, 128]} if fp8 else {}
    for M, E, top_k, bm, bn, bk in SWEEP:
        row = moe_row(repo=repo, M=M, E=E, top_k=top_k, N=96, K=256, kernel_source=src, **extra)
        cfg, _ = normalise_config(
            {**TUNED, "BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk}
        )
        pairs = M * top_k
        for routing in ("uniform", "zipf:1.0"):
            r = route(M, E, top_k, seed=1, routing=routing)
            up, down = plan_launches(row, cfg, sig, r)
            for lch, rows, tk, n in ((up, M, top_k, 192), (down, pairs, 1, 256)):
                want = (
                    _vllm_moe(rows, tk, pairs, E, bm, bk, extra.get("block_shape"))
                    if repo == "vllm"
                    else _sglang_moe(pairs, E, bm, bk)
                )
                got_sorted = lch.int_data.get("sorted_token_ids")
                case = (repo, quant, M, E, top_k, bm, lch.problem, routing)
                assert (None if got_sorted is None else got_sorted.size) == want["sorted"], case
                assert lch.int_data["expert_ids"].size == want["experts"], case
                assert lch.args["EM"] == want["EM"], case
                assert lch.grid == (-(-want["EM"] // bm) * -(-n // bn),), case
                assert lch.args["BLOCK_SIZE_K"] == want["BK"], case
                assert bool(lch.args.get("naive_block_assignment")) == want["naive"], case
                swap = repo == "sglang" and fp8 and bm < 64 <= bn  # vLLM has no swap_ab
                assert lch.args.get("swap_ab", False) == swap, case
                if repo == "sglang":
                    assert lch.args["even_Ks"] == (lch.args["K"] % bk == 0), case
            assert engine_grids(row, cfg) == [up.grid, down.grid]


@pytest.mark.parametrize(
    ("kernel", "repo"),
    [("_w8a8_block_fp8_matmul", "sglang"), ("_w8a8_triton_block_scaled_mm", "vllm")],
)
def test_every_block_matmul_launch_matches_the_engine_restated(kernel: str, repo: str) -> None:
    """Both engines' block-fp8 launchers: ``cdiv(M, BM) * cdiv(N, BN)`` programs, the
    config's tiles unchanged (no BLOCK_SIZE_K cap), SGLang's ``needs_masking`` =
    ``K % BLOCK_SIZE_K != 0`` (on CUDA SGLang always selects this kernel)."""
    src = BLOCK_MM_SRC.replace("_w8a8_block_fp8_matmul", kernel)
    sig = signature_of(src, kernel)
    for M in (1, 17, 300, 4097):
        for N, K in ((384, 320), (7168, 2048)):
            for bm, bn, bk in ((16, 32, 64), (64, 128, 128), (128, 256, 128)):
                row = mm_row(kernel=kernel, repo=repo, M=M, N=N, K=K, kernel_source=src)
                cfg, _ = normalise_config(
                    {**TUNED, "BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk}
                )
                (lch,) = plan_launches(row, cfg, sig, None)
                assert lch.grid == (-(-M // bm) * -(-N // bn),)
                assert (lch.args["M"], lch.args["N"], lch.args["BLOCK_SIZE_K"]) == (M, N, bk)
                assert lch.args["needs_masking"] == (K % bk != 0)
                assert engine_grids(row, cfg) == [lch.grid]
