"""The roofline model: deterministic, physically ordered, infeasible configs rejected."""

from __future__ import annotations

import pytest

from dagster_project.sim.hardware import GPUS
from dagster_project.sim.ops import OPS
from dagster_project.sim.timing import InfeasibleConfig, predict, predict_time_ms
from dagster_project.sim.variants import VARIANTS

BIG = {"M": 4096, "N": 4096, "K": 4096}


def test_predict_time_is_deterministic_and_positive() -> None:
    p = {"BM": 128, "BN": 256, "stages": 4, "cluster_m": 1}
    a = predict_time_ms("gemm_fp16", BIG, "fp16", "h200", "v4_wgmma_tma", p)
    b = predict_time_ms("gemm_fp16", BIG, "fp16", "h200", "v4_wgmma_tma", p)
    assert a == b and a > 0
    # 137 GFLOP at 45-80% of 989 TFLOPS dense (calibrated: the simulator's own wgmma
    # template ran at ~54% of peak on an H200, cuBLAS at ~80%)
    assert 0.17 < a < 0.31


def test_best_rung_beats_naive_by_a_realistic_margin() -> None:
    naive = predict_time_ms("gemm_fp16", BIG, "fp16", "h100", "v0_naive", {"TB": 16})
    best = predict_time_ms(
        "gemm_fp16",
        BIG,
        "fp16",
        "h100",
        "v4_wgmma_tma",
        {"BM": 128, "BN": 256, "stages": 4, "cluster_m": 1},
    )
    assert 10 < naive / best < 200
    # memory-bound op: vectorised single pass reaches most of HBM bandwidth
    t = predict_time_ms(
        "rmsnorm",
        {"T": 8192, "H": 8192},
        "bf16",
        "h100",
        "v3_vec_onepass",
        {"threads": 256, "vec": 16, "rows": 1, "minb": 1},
    )
    bytes_moved = 2 * 8192 * 8192 * 2
    # The H200 measured this template at 69% of spec bandwidth (T=16384); the calibrated
    # rung predicts a little less because its 5 µs T=64 points pull the shared efficiency
    # down (see sim/README.md, what remains unmodelled), hence the 0.55 floor.
    assert 0.55 < bytes_moved / (t * 1e-3) / 3.35e12 < 0.95


def test_missing_feature_and_smem_overflow_are_infeasible() -> None:
    op, gpu = OPS["gemm_fp16"], GPUS["a100"]
    with pytest.raises(InfeasibleConfig, match="wgmma"):
        predict(
            op,
            BIG,
            "fp16",
            gpu,
            VARIANTS[("gemm", "cuda", "v4_wgmma_tma")],
            {"BM": 128, "BN": 128, "stages": 2, "cluster_m": 1},
        )
    with pytest.raises(InfeasibleConfig, match="cap"):
        predict(
            op,
            BIG,
            "fp16",
            GPUS["a10"],
            VARIANTS[("gemm", "cuda", "v3_cp_async")],
            {"BM": 256, "BN": 128, "BK": 64, "warps": 8, "stages": 5, "split_k": 1},
        )


def test_split_kv_helps_small_batch_long_context_decode() -> None:
    shape = {"B": 1, "Hq": 32, "Hkv": 8, "D": 128, "Skv": 65536, "page": 16}
    base = {"BLOCK_N": 64, "warps": 4}
    one = predict_time_ms(
        "flash_decode", shape, "bf16", "h100", "v3_split_kv", {**base, "splits": 1}
    )
    many = predict_time_ms(
        "flash_decode", shape, "bf16", "h100", "v3_split_kv", {**base, "splits": 16}
    )
    assert many < one / 3
