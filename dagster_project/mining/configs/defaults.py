"""What each runtime launches when no tuned file matches: its default heuristic.

``default_config`` is the baseline a tuned config is measured against
(``speedup_vs_default``), so it reimplements each repo's fallback exactly as the
snapshot code has it (configs.md §3): vLLM ``fused_moe.get_default_config`` (+ the
``get_moe_wna16_block_config`` it defers BLOCK_SIZE_N/K to), SGLang
``fused_moe_triton_config.get_default_config``, the block-matmul fallbacks in
``w8a8_triton_block_scaled_mm`` / ``w8a8_block_int8_matmul`` (vLLM) and
``get_w8a8_block_{fp8,int8}_configs`` callers (SGLang), and vLLM's SSU
``_get_default_ssm_launch_config``.

Only the name of the GPU is known when mining, so the platform facts the heuristics
branch on are derived from it: ``platform`` is ``"rocm"`` for AMD GPUs (fewer pipeline
stages) and ``"cuda"`` otherwise; SGLang's fp8 branch asks whether the GPU has less than
128 KiB of opt-in shared memory; vLLM's SSU asks for Blackwell (sm_100 family). Modes
that bypass the files entirely (vLLM batch-invariant, SGLang deterministic inference)
are not modelled: in them no tuned config is ever read.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Version of the runtime default-config heuristics. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "1"


def _vllm_wna16_triton_block(M: int) -> dict[str, int]:
    """``get_moe_wna16_block_config`` for the Triton kernel (batch of one token vs more)."""
    return (
        {"BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64}
        if M == 1
        else {"BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32}
    )


def _ensure_block_k_divisible(size_k: int, block_k: int, group: int) -> int:
    if size_k % block_k == 0 and block_k % group == 0:
        return block_k
    start = (min(block_k, size_k) // group) * group
    for cand in range(start, group - 1, -group):
        if cand and size_k % cand == 0:
            return cand
    return group if size_k % group == 0 else size_k


def _vllm_wna16_cuda_block(
    M: int, topk: int, E: int, size_k: int, size_n: int, group: int, block_m: int
) -> dict[str, int]:
    """``get_moe_wna16_block_config`` for the CUDA wna16 kernel (first GEMM: n = 2N)."""
    tokens = M * topk
    block_n, block_k = 128, 128
    if block_k <= group:
        block_k = group
    n_blocks_n = size_k // block_k
    n_blocks_k = size_n // block_k
    n_blocks_m: float = (tokens + block_m - 1) / block_m + E
    if tokens // topk <= block_m:
        n_blocks_m = min(n_blocks_m, tokens)
    blocks = n_blocks_m * n_blocks_n * n_blocks_k
    if size_k % 256 == 0 and blocks >= 256 and block_k < 256:
        block_k = 256
        blocks = blocks // (256 // block_k)
    if n_blocks_m <= 16 and size_k % (block_k * 2) == 0 and block_k <= 512 and blocks >= 512:
        block_k *= 2
        blocks = blocks // 2
    if blocks > 1024:
        block_n = 256
        blocks = blocks // 2
    if size_n <= 1024 and blocks >= 1024:
        block_n = 1024
    block_k = _ensure_block_k_divisible(size_k, block_k, group)
    return {"BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block_k}


def _vllm_moe(
    M: int,
    E: int,
    N: int,
    K: int | None,
    dtype: str | None,
    block_shape: Sequence[int] | None,
    topk: int,
    group_size: int,
    rocm: bool,
) -> dict[str, int]:
    stages_rocm = 2
    if dtype == "fp8_w8a8" and block_shape is not None:
        return {
            "BLOCK_SIZE_M": 16 if M <= 64 else 64,
            "BLOCK_SIZE_N": block_shape[0],
            "BLOCK_SIZE_K": block_shape[1],
            "GROUP_SIZE_M": 1 if M <= 16 else 32,
            "SPLIT_K": 1,
            "num_warps": 4,
            "num_stages": stages_rocm if rocm else 3,
        }
    if dtype == "int4_w4a16" or (dtype == "int8_w8a16" and block_shape is not None):
        # wna16: int4 always runs with a group size (block_shape=[0, g], never in the file
        # name); int8_w8a16 only when grouped. get_default_config sets BLOCK_SIZE_M and the
        # kernel launcher fills N/K; we fill them the same way so the config is complete.
        group = block_shape[1] if block_shape is not None and block_shape[1] else group_size
        bits = 4 if dtype == "int4_w4a16" else 8
        use_cuda = not rocm and bits == 4 and group in (32, 64, 128) and M * topk / max(E, 1) <= 6
        if use_cuda:
            cfg = {"BLOCK_SIZE_M": min(16, M), "SPLIT_K": 1}
            if K is not None:
                # The launcher passes num_experts=B.size(1), i.e. 2N, not E: kept as is.
                cfg |= _vllm_wna16_cuda_block(M, topk, 2 * N, K, 2 * N, group, cfg["BLOCK_SIZE_M"])
            return cfg
        block_m = 16 if M <= 20 else 32 if M <= 40 else 64
        return {
            "BLOCK_SIZE_M": block_m,
            "GROUP_SIZE_M": 1,
            "SPLIT_K": 1,
            **_vllm_wna16_triton_block(M),
        }
    block_m = 16 if M <= 32 else 32 if M <= 96 else 64 if M <= 512 else 128
    return {
        "BLOCK_SIZE_M": block_m,
        "BLOCK_SIZE_N": 64 if M <= 64 else 128,
        "BLOCK_SIZE_K": 128 if dtype == "fp8_w8a8" or M <= 64 else 64,
        "GROUP_SIZE_M": 16 if M // max(E, 1) > 128 else 1,
        "SPLIT_K": 1,
        "num_warps": 4 if M <= 128 else 8,
        "num_stages": stages_rocm if rocm else (4 if M <= 32 else 3),
    }


def _sglang_moe(
    M: int,
    E: int,
    dtype: str | None,
    block_shape: Sequence[int] | None,
    rocm: bool,
    low_smem: bool,
    is_marlin: bool,
) -> dict[str, int]:
    if dtype == "fp8_w8a8":
        if block_shape is None:
            if low_smem and not rocm:
                if M > E:
                    return {
                        "BLOCK_SIZE_M": 64,
                        "BLOCK_SIZE_N": 128,
                        "BLOCK_SIZE_K": 256,
                        "GROUP_SIZE_M": 64,
                        "num_warps": 4,
                        "num_stages": 2,
                    }
                return {
                    "BLOCK_SIZE_M": 32,
                    "BLOCK_SIZE_N": 64,
                    "BLOCK_SIZE_K": 256,
                    "GROUP_SIZE_M": 1,
                    "num_warps": 4,
                    "num_stages": 4,
                }
            if M <= E:
                return {
                    "BLOCK_SIZE_M": 64,
                    "BLOCK_SIZE_N": 128,
                    "BLOCK_SIZE_K": 128,
                    "GROUP_SIZE_M": 1,
                    "num_warps": 4,
                    "num_stages": 2 if rocm else 4,
                }
            return {
                "BLOCK_SIZE_M": 128,
                "BLOCK_SIZE_N": 256,
                "BLOCK_SIZE_K": 128,
                "GROUP_SIZE_M": 32,
                "num_warps": 8,
                "num_stages": 2 if rocm else 4,
            }
        return {
            "BLOCK_SIZE_M": 64,
            "BLOCK_SIZE_N": block_shape[0],
            "BLOCK_SIZE_K": block_shape[1],
            "GROUP_SIZE_M": 32,
            "num_warps": 4,
            "num_stages": 2 if rocm else 3,
        }
    if M <= E or (is_marlin and M <= 32):
        return {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}
    return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}


def _block_matmul(repo: str, family: str, block_shape: Sequence[int] | None) -> dict[str, int]:
    bn, bk = block_shape if block_shape else (128, 128)
    stages = 2 if (repo == "vllm" and family == "block_fp8") else 3
    return {
        "BLOCK_SIZE_M": 64,
        "BLOCK_SIZE_N": bn,
        "BLOCK_SIZE_K": bk,
        "GROUP_SIZE_M": 32,
        "num_warps": 4,
        "num_stages": stages,
    }


def _vllm_ssu(dstate: int, blackwell: bool) -> dict[str, int]:
    if dstate <= 16:
        m, w = 32, 4
    elif dstate <= 32:
        m, w = 16, 4
    elif dstate <= 64:
        m, w = 8, 4
    elif blackwell:
        m, w = 32, 8
    elif dstate <= 128:
        m, w = 4, 4
    else:
        m, w = 4, 8
    return {"BLOCK_SIZE_M": m, "num_warps": w}


def default_config(
    repo: str,
    family: str,
    dtype: str | None,
    M: int,
    E: int | None = None,
    N: int | None = None,
    K: int | None = None,
    block_shape: Sequence[int] | None = None,
    *,
    platform: str = "cuda",
    low_smem: bool = False,
    blackwell: bool = False,
    dstate: int | None = None,
    topk: int = 8,
    group_size: int = 128,
    is_marlin: bool = False,
) -> dict[str, int] | None:
    """The config ``repo``'s fallback heuristic picks for this shape at batch size ``M``.

    ``platform`` is ``"cuda"`` (the default path) or ``"rocm"``. ``topk`` and
    ``group_size`` only matter for vLLM's int4 path and are not in file names, so they
    default to the usual DeepSeek-style top-8 and group 128. Returns ``None`` for a
    family the repo has no heuristic for.
    """
    rocm = platform == "rocm"
    if family == "moe":
        if E is None or N is None:
            return None
        if repo == "vllm":
            return _vllm_moe(M, E, N, K, dtype, block_shape, topk, group_size, rocm)
        if repo == "sglang":
            return _sglang_moe(M, E, dtype, block_shape, rocm, low_smem, is_marlin)
        return None
    if family in ("block_fp8", "block_int8"):
        return _block_matmul(repo, family, block_shape)
    if family == "ssu" and repo == "vllm":
        return _vllm_ssu(dstate if dstate is not None else 128, blackwell)
    return None


def nearest_key(keys: Sequence[int], M: int) -> int:
    """The runtimes' lookup: the closest M key, the first in file order on a tie."""
    return min(keys, key=lambda k: abs(k - M))
