"""Default heuristics at the M values where each branch flips (configs.md §3)."""

from __future__ import annotations

import pytest

from dagster_project.mining.configs.defaults import default_config, nearest_key


def cfg(bm, bn, bk, g, w=None, s=None, split_k=True):
    out = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": g}
    if split_k:
        out["SPLIT_K"] = 1
    if w is not None:
        out["num_warps"] = w
    if s is not None:
        out["num_stages"] = s
    return out


VLLM_GENERAL = [
    # (M, dtype, expected) with E=8
    (1, None, cfg(16, 64, 128, 1, 4, 4)),
    (32, None, cfg(16, 64, 128, 1, 4, 4)),
    (33, None, cfg(32, 64, 128, 1, 4, 3)),
    (64, None, cfg(32, 64, 128, 1, 4, 3)),
    (65, None, cfg(32, 128, 64, 1, 4, 3)),
    (65, "fp8_w8a8", cfg(32, 128, 128, 1, 4, 3)),
    (96, None, cfg(32, 128, 64, 1, 4, 3)),
    (97, None, cfg(64, 128, 64, 1, 4, 3)),
    (128, None, cfg(64, 128, 64, 1, 4, 3)),
    (129, None, cfg(64, 128, 64, 1, 8, 3)),
    (512, None, cfg(64, 128, 64, 1, 8, 3)),
    (513, None, cfg(128, 128, 64, 1, 8, 3)),
    (1031, None, cfg(128, 128, 64, 1, 8, 3)),  # 1031 // 8 = 128: not > 128
    (1032, None, cfg(128, 128, 64, 16, 8, 3)),  # 129 tokens per expert: group 16
    (4096, "int8_w8a16", cfg(128, 128, 64, 16, 8, 3)),  # per-channel int8: general path
]


@pytest.mark.parametrize(("M", "dtype", "expected"), VLLM_GENERAL)
def test_vllm_general(M: int, dtype: str | None, expected: dict) -> None:
    assert default_config("vllm", "moe", dtype, M, 8, 14336) == expected


def test_vllm_rocm_uses_two_stages() -> None:
    assert default_config("vllm", "moe", None, 16, 8, 14336, platform="rocm")["num_stages"] == 2
    block = default_config(
        "vllm", "moe", "fp8_w8a8", 16, 256, 256, None, [128, 128], platform="rocm"
    )
    assert block["num_stages"] == 2


@pytest.mark.parametrize(
    ("M", "bm", "g"), [(1, 16, 1), (16, 16, 1), (17, 16, 32), (64, 16, 32), (65, 64, 32)]
)
def test_vllm_fp8_block(M: int, bm: int, g: int) -> None:
    got = default_config("vllm", "moe", "fp8_w8a8", M, 256, 256, None, [128, 128])
    assert got == cfg(bm, 128, 128, g, 4, 3)


@pytest.mark.parametrize(
    ("M", "expected"),
    [
        (
            1,
            {
                "BLOCK_SIZE_M": 16,
                "GROUP_SIZE_M": 1,
                "SPLIT_K": 1,
                "BLOCK_SIZE_N": 32,
                "BLOCK_SIZE_K": 64,
            },
        ),
        (
            2,
            {
                "BLOCK_SIZE_M": 16,
                "GROUP_SIZE_M": 1,
                "SPLIT_K": 1,
                "BLOCK_SIZE_N": 64,
                "BLOCK_SIZE_K": 32,
            },
        ),
        (
            20,
            {
                "BLOCK_SIZE_M": 16,
                "GROUP_SIZE_M": 1,
                "SPLIT_K": 1,
                "BLOCK_SIZE_N": 64,
                "BLOCK_SIZE_K": 32,
            },
        ),
        (
            21,
            {
                "BLOCK_SIZE_M": 32,
                "GROUP_SIZE_M": 1,
                "SPLIT_K": 1,
                "BLOCK_SIZE_N": 64,
                "BLOCK_SIZE_K": 32,
            },
        ),
        (
            41,
            {
                "BLOCK_SIZE_M": 64,
                "GROUP_SIZE_M": 1,
                "SPLIT_K": 1,
                "BLOCK_SIZE_N": 64,
                "BLOCK_SIZE_K": 32,
            },
        ),
    ],
)
def test_vllm_int4_triton_path_on_rocm(M: int, expected: dict) -> None:
    assert default_config("vllm", "moe", "int4_w4a16", M, 384, 256, platform="rocm") == expected


def test_vllm_int4_cuda_path_boundary() -> None:
    # CUDA wna16 kernel while M * topk / E <= 6 (E=384, top-8: up to M=288).
    at = default_config("vllm", "moe", "int4_w4a16", 288, 384, 256)
    assert at == {"BLOCK_SIZE_M": 16, "SPLIT_K": 1}
    small = default_config("vllm", "moe", "int4_w4a16", 4, 384, 256)
    assert small["BLOCK_SIZE_M"] == 4  # min(16, M)
    past = default_config("vllm", "moe", "int4_w4a16", 289, 384, 256)
    assert past["BLOCK_SIZE_M"] == 64 and past["GROUP_SIZE_M"] == 1
    with_k = default_config("vllm", "moe", "int4_w4a16", 8, 384, 256, 7168)
    assert with_k["BLOCK_SIZE_M"] == 8
    assert 7168 % with_k["BLOCK_SIZE_K"] == 0 and with_k["BLOCK_SIZE_K"] % 128 == 0
    assert with_k["BLOCK_SIZE_N"] in (128, 256, 1024)


SGLANG = [
    # (M, dtype, block, kwargs, expected) with E=8
    (8, "fp8_w8a8", None, {}, cfg(64, 128, 128, 1, 4, 4, split_k=False)),
    (9, "fp8_w8a8", None, {}, cfg(128, 256, 128, 32, 8, 4, split_k=False)),
    (9, "fp8_w8a8", None, {"platform": "rocm"}, cfg(128, 256, 128, 32, 8, 2, split_k=False)),
    (8, "fp8_w8a8", None, {"low_smem": True}, cfg(32, 64, 256, 1, 4, 4, split_k=False)),
    (9, "fp8_w8a8", None, {"low_smem": True}, cfg(64, 128, 256, 64, 4, 2, split_k=False)),
    (1, "fp8_w8a8", [128, 128], {}, cfg(64, 128, 128, 32, 4, 3, split_k=False)),
    (1, "fp8_w8a8", [128, 128], {"platform": "rocm"}, cfg(64, 128, 128, 32, 4, 2, split_k=False)),
    (8, None, None, {}, cfg(16, 32, 64, 1, split_k=False)),
    (9, None, None, {}, cfg(64, 64, 32, 8, split_k=False)),
    (9, "int8_w8a8", [128, 128], {}, cfg(64, 64, 32, 8, split_k=False)),
    (32, None, None, {"is_marlin": True}, cfg(16, 32, 64, 1, split_k=False)),
    (33, None, None, {"is_marlin": True}, cfg(64, 64, 32, 8, split_k=False)),
]


@pytest.mark.parametrize(("M", "dtype", "block", "kw", "expected"), SGLANG)
def test_sglang_moe(M, dtype, block, kw, expected) -> None:
    assert default_config("sglang", "moe", dtype, M, 8, 14336, None, block, **kw) == expected


@pytest.mark.parametrize(
    ("repo", "family", "stages"),
    [
        ("vllm", "block_fp8", 2),
        ("vllm", "block_int8", 3),
        ("sglang", "block_fp8", 3),
        ("sglang", "block_int8", 3),
    ],
)
def test_block_matmul(repo: str, family: str, stages: int) -> None:
    for M in (1, 4096):
        got = default_config(repo, family, "fp8_w8a8", M, None, 1536, 7168, [128, 128])
        assert got == cfg(64, 128, 128, 32, 4, stages, split_k=False)


@pytest.mark.parametrize(
    ("dstate", "blackwell", "expected"),
    [
        (16, False, (32, 4)),
        (17, False, (16, 4)),
        (32, False, (16, 4)),
        (33, False, (8, 4)),
        (64, False, (8, 4)),
        (65, False, (4, 4)),
        (128, False, (4, 4)),
        (128, True, (32, 8)),
        (129, False, (4, 8)),
        (256, True, (32, 8)),
    ],
)
def test_vllm_ssu(dstate: int, blackwell: bool, expected: tuple[int, int]) -> None:
    got = default_config("vllm", "ssu", None, 1024, dstate=dstate, blackwell=blackwell)
    assert (got["BLOCK_SIZE_M"], got["num_warps"]) == expected


def test_no_heuristic_cases() -> None:
    assert default_config("sglang", "ssu", None, 8, dstate=128) is None
    assert default_config("vllm", "moe", None, 8) is None  # shape unknown


def test_nearest_key_tie_takes_first_in_file_order() -> None:
    assert nearest_key([16, 32], 24) == 16
    assert nearest_key([32, 16], 24) == 32
    assert nearest_key([1, 2, 4, 4096], 100_000) == 4096
