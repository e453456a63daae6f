"""Structure the H200 measurements put into the kernel model (generator 1.5.0).

Each test pins one effect read off a template to the behaviour it explains, so removing
or mis-wiring the effect fails here rather than only moving the calibration metrics.
"""

from __future__ import annotations

import random

import pytest

from dagster_project.sim.hardware import GPUS
from dagster_project.sim.kernels import plan
from dagster_project.sim.ops import OPS
from dagster_project.sim.timing import predict
from dagster_project.sim.variants import VARIANTS

H200 = GPUS["h200"]


def _pred(op: str, shape: dict[str, int], dtype: str, impl: str, tag: str, params: dict):  # type: ignore[no-untyped-def]
    spec = OPS[op]
    return predict(spec, shape, dtype, H200, VARIANTS[(spec.family, impl, tag)], params)


def test_online_softmax_statistic_makes_cuda_trips_slower_than_a_sum_of_squares() -> None:
    """Same loop, same trip count: the softmax's divergent exp update costs ALU cycles per
    trip that a norm's FFMA does not (the H200: ~0.63 vs ~0.37 µs per trip)."""
    params = {"threads": 256, "unroll": 2}
    soft = _pred("logits_softmax", {"B": 1, "V": 131072}, "fp32", "cuda", "v1_block_reduce", params)
    norm = _pred("rmsnorm", {"T": 1, "H": 131072}, "fp32", "cuda", "v1_block_reduce", params)
    assert soft.plan.chain == norm.plan.chain > 200
    assert soft.plan.trip_cycles > 20 * norm.plan.trip_cycles
    assert soft.bound == norm.bound == "serial"
    assert 1.3 < soft.t_serial_ms / norm.t_serial_ms < 1.8


def test_one_warp_rung_walks_its_row_in_unrolled_trips() -> None:
    """The naive CUDA rowwise rung is latency-bound on a long row: one warp, 4-way unroll."""
    p = _pred(
        "logits_softmax", {"B": 1, "V": 128256}, "fp32", "cuda", "v0_scalar", {"threads": 128}
    )
    assert p.plan.chain == pytest.approx(128256 / 128 + 1, abs=1)
    assert p.bound == "serial"
    assert 0.5 < p.device_ms < 1.0  # measured 0.707 ms on the H200


def test_vector_rung_streams_one_vector_per_trip_when_the_row_does_not_fit() -> None:
    params = {"threads": 256, "vec": 8, "rows": 2, "minb": 2}
    vec_rung = VARIANTS[("rowwise", "cuda", "v3_vec_onepass")]
    long_row = plan(OPS["logits_softmax"], {"B": 64, "V": 151936}, "fp32", H200, vec_rung, params)
    assert not long_row.extra["fits"]
    # 8-byte vectors of fp32 = 2 elements per thread per trip, two rows per block in turn
    assert long_row.chain == 2 * (-(-151936 // (256 * 2)) + 1)
    short_row = plan(OPS["rmsnorm"], {"T": 64, "H": 4096}, "bf16", H200, vec_rung, params)
    assert short_row.extra["fits"] and short_row.chain == 2 * 2


def test_block_and_shuffle_rungs_move_the_same_bytes() -> None:
    shape = {"B": 256, "V": 32000}
    kw = {"threads": 256, "unroll": 2}
    v1 = _pred("logits_softmax", shape, "fp32", "cuda", "v1_block_reduce", kw)
    v2 = _pred("logits_softmax", shape, "fp32", "cuda", "v2_warp_shuffle", {**kw, "minb": 2})
    assert v1.plan.bytes == v2.plan.bytes
    assert v1.plan.inflight == v2.plan.inflight
    assert 0.8 < v1.device_ms / v2.device_ms < 1.25  # measured 64.6 vs 64.2 µs


def test_spills_that_fit_in_l1_cost_nothing_and_row_tiles_that_do_not_are_serial() -> None:
    small = _pred(
        "rmsnorm",
        {"T": 2048, "H": 8192},
        "bf16",
        "triton",
        "v2_multirow",
        {"ROWS": 4, "num_warps": 4},
    )
    assert small.plan.spill_local > 0 and small.plan.spill_footprint * 2 < H200.smem_per_sm
    assert small.t_serial_ms == 0.0 and small.bound != "serial"
    big = _pred(
        "logits_softmax", {"B": 1, "V": 128256}, "fp32", "triton", "v1_block", {"num_warps": 8}
    )
    assert big.plan.spill_footprint > H200.smem_per_sm
    assert big.bound == "serial" and big.t_serial_ms > 100e-3


def test_fused_ilp_steps_are_serial_on_a_small_tensor_and_hidden_on_a_large_one() -> None:
    params = {"threads": 256, "vec": 16, "unroll": 4, "minb": 2}
    small = _pred("swiglu_act", {"M": 64, "N": 14336}, "bf16", "cuda", "v3_fused_ilp", params)
    vec = _pred(
        "swiglu_act",
        {"M": 64, "N": 14336},
        "bf16",
        "cuda",
        "v2_vec",
        {"threads": 256, "vec": 8, "minb": 2},
    )
    assert small.plan.chain == 4
    assert small.device_ms > vec.device_ms  # measured 5.9 vs 3.3 µs
    large = _pred("swiglu_act", {"M": 8192, "N": 7168}, "bf16", "cuda", "v3_fused_ilp", params)
    assert large.t_serial_ms < large.t_memory_ms


def test_device_ms_at_matches_a_full_prediction_at_other_efficiencies() -> None:
    rng = random.Random(7)
    cases = [
        (
            "gemm_fp16",
            {"M": 512, "N": 28672, "K": 4096},
            "bf16",
            "cuda",
            "v2_mma_sync",
            {"BM": 128, "BN": 128, "BK": 32, "warps": 8, "stages": 1, "split_k": 1},
        ),
        (
            "flash_decode",
            {"B": 16, "Hq": 32, "Hkv": 8, "D": 128, "Skv": 4096, "page": 16},
            "bf16",
            "triton",
            "v3_split_kv",
            {"BLOCK_N": 64, "NUM_SPLITS": 8, "num_stages": 3, "num_warps": 4},
        ),
        (
            "logits_softmax",
            {"B": 1, "V": 128256},
            "fp32",
            "cuda",
            "v1_block_reduce",
            {"threads": 256, "unroll": 2},
        ),
    ]
    for op, shape, dtype, impl, tag, params in cases:
        spec = OPS[op]
        v = VARIANTS[(spec.family, impl, tag)]
        once = predict(spec, shape, dtype, H200, v, params)
        for _ in range(5):
            mem, comp = rng.uniform(0.05, 1.0), rng.uniform(0.05, 1.0)
            full = predict(spec, shape, dtype, H200, v, params, eff=(mem, comp)).device_ms
            assert once.device_ms_at(mem, comp) == pytest.approx(full, rel=1e-12)
