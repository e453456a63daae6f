"""Catalogue facts: GPUs, feature gates, the 41 ops, signatures and work formulas."""

from __future__ import annotations

import random
import re

import pytest

from dagster_project.sim.hardware import GPUS, arch_features, nvcc_arch_flag
from dagster_project.sim.ops import KERNELSWARM_OPS, OPS
from dagster_project.sim.variants import (
    VARIANTS,
    default_params,
    features_used,
    iter_params,
    ladder,
)

SIG = re.compile(r"^[a-z0-9_]+\((?:[A-Za-z_]+(?:\[[^\]]+\])? [a-z0-9_]+(?:, )?)+\) -> .+$")


def test_gpu_ids_arches_and_smem_caps() -> None:
    assert set(GPUS) == {"h100", "h200", "a100", "a10", "rtx_a6000", "rtx_5090"}
    arch = {g: GPUS[g].arch for g in GPUS}
    assert arch == {
        "h100": "sm_90a",
        "h200": "sm_90a",
        "a100": "sm_80",
        "a10": "sm_86",
        "rtx_a6000": "sm_86",
        "rtx_5090": "sm_120",
    }
    caps = {g: GPUS[g].smem_cap_kb for g in GPUS}
    assert caps == {
        "h100": 227,
        "h200": 227,
        "a100": 163,
        "a10": 99,
        "rtx_a6000": 99,
        "rtx_5090": 99,
    }
    assert GPUS["h200"].bw_tbs == 4.8 and GPUS["h100"].sms == 132 and GPUS["rtx_5090"].sms == 170


def test_feature_gating_table() -> None:
    # wgmma / TMA multicast / setmaxnreg only on sm_90a; fp8 on sm_90a + sm_120; fp4 on sm_120;
    # TMA (unicast) on sm_90a + sm_120; cp.async everywhere (all targets are sm_80+)
    for feat in ("wgmma", "tma_multicast", "setmaxnreg"):
        assert [a for a in ("sm_80", "sm_86", "sm_90a", "sm_120") if feat in arch_features(a)] == [
            "sm_90a"
        ]
    assert [a for a in ("sm_80", "sm_86", "sm_90a", "sm_120") if "fp8_mma" in arch_features(a)] == [
        "sm_90a",
        "sm_120",
    ]
    assert [a for a in ("sm_80", "sm_86", "sm_90a", "sm_120") if "fp4_mma" in arch_features(a)] == [
        "sm_120"
    ]
    assert [a for a in ("sm_80", "sm_86", "sm_90a", "sm_120") if "tma" in arch_features(a)] == [
        "sm_90a",
        "sm_120",
    ]
    assert all("cp_async" in arch_features(a) for a in ("sm_80", "sm_86", "sm_90a", "sm_120"))
    assert nvcc_arch_flag("sm_120", {"fp4_mma"}) == "sm_120a"
    # one flag per GPU (prompt = harness = compile check): the 5090 always targets sm_120a
    assert nvcc_arch_flag("sm_120", {"tma"}) == "sm_120a"
    assert nvcc_arch_flag("sm_90a") == "sm_90a" and nvcc_arch_flag("sm_86") == "sm_86"


def test_41_ops_with_kernelswarm_names() -> None:
    assert len(OPS) == 41
    names = set(OPS)
    for name in (
        "flash_decode",
        "flash_prefill",
        "swa_decode",
        "mla_decode",
        "tree_attn",
        "chunked_prefill",
        "cross_attn",
        "fused_qkv_rope",
        "paged_kv_copy",
        "kv_append",
        "kv_int8_quant",
        "topk_sample",
        "nucleus_sample",
        "minp_sample",
        "logits_softmax",
        "moe_scatter",
        "moe_combine",
        "moe_grouped_gemm",
        "mamba_scan",
        "mamba_step",
        "rmsnorm",
        "rope",
        "swiglu_act",
        "embedding_gather",
        "conv1d_causal",
        "conv2d_nhwc",
        "gemv_fp16",
        "fp8_blockwise_gemm",
    ):
        assert name in names
    assert len(KERNELSWARM_OPS) == 17
    assert {op for op, _ in KERNELSWARM_OPS} <= names
    assert ("flash_decode", "triton") in KERNELSWARM_OPS and (
        "rmsnorm",
        "triton",
    ) in KERNELSWARM_OPS


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_signature_desc_shapes_and_work(name: str) -> None:
    op = OPS[name]
    rng = random.Random(name)
    for dtype in op.dtypes:
        assert SIG.match(op.signature_for(dtype)), op.signature_for(dtype)
    assert len(op.desc) > 20 and "\n" not in op.desc
    for _ in range(5):
        shape = op.sample(rng)
        assert tuple(shape) == op.shape_keys
        assert op.bytes(shape, op.dtypes[0]) > 0 and op.flops(shape, op.dtypes[0]) >= 0


def test_every_family_has_both_ladders_with_defaults() -> None:
    for op in OPS.values():
        for impl in ("cuda", "triton"):
            rungs = ladder(op.family, impl)
            assert [v.level for v in rungs][0] == 0 and max(v.level for v in rungs) == 4
            for v in rungs:
                assert iter_params(v, op, op.dtypes[0]), (op.name, v.tag)
                p = default_params(v, op, op.dtypes[0], op.sample(random.Random(1)), GPUS["a100"])
                assert set(p) == {d for d in (x.name for x in v.dims)} | (
                    {"mma"} if "mma" in p else set()
                )
    assert len(VARIANTS) > 80


def test_quantised_mma_choice_adds_the_feature() -> None:
    op = OPS["fp8_gemm"]
    v = VARIANTS[("gemm", "cuda", "v3_cp_async")]
    p = {"BM": 128, "BN": 128, "BK": 64, "warps": 4, "stages": 3, "split_k": 1, "mma": "e4m3"}
    assert "fp8_mma" in features_used(v, op, "fp8", p)
    assert "fp8_mma" not in features_used(v, op, "fp8", {**p, "mma": "f16"})
    hop = VARIANTS[("gemm", "cuda", "v4_wgmma_tma")]
    assert "tma_multicast" in features_used(
        hop, OPS["gemm_fp16"], "fp16", {"BM": 128, "BN": 128, "stages": 4, "cluster_m": 2}
    )
