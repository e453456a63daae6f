"""The task text of one tuned_configs row.

A prompt carries everything an agent needs to choose a launch config and nothing that
gives the answer away: the kernel source, the GPU, the problem shape and dtype, the batch
size M, the models the shape belongs to, the keys a config may set (with what each one
means), and the request for a single JSON object. It deliberately leaves out the file's
other M entries, the default heuristic and the PR.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Version of the config prompt. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "1"

TILE_KEYS = (
    "BLOCK_SIZE_M",
    "BLOCK_SIZE_N",
    "BLOCK_SIZE_K",
    "GROUP_SIZE_M",
    "num_warps",
    "num_stages",
)
ROCM_KEYS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")

KEY_HELP = {
    "BLOCK_SIZE_M": "rows of the output tile (tokens)",
    "BLOCK_SIZE_N": "columns of the output tile",
    "BLOCK_SIZE_K": "reduction-dimension step per loop iteration",
    "GROUP_SIZE_M": "output tiles grouped along M for L2 reuse",
    "num_warps": "warps per program",
    "num_stages": "software-pipelining stages",
    "SPLIT_K": "split of the reduction across programs",
    "num_ctas": "CTAs per cluster (Hopper and newer)",
    "USE_TMA": "load tiles with the Tensor Memory Accelerator (down projection)",
    "waves_per_eu": "ROCm occupancy hint",
    "matrix_instr_nonkdim": "ROCm MFMA instruction size (16 or 32)",
    "kpack": "ROCm K packing for MFMA (1 or 2)",
}

FAMILY_TEXT = {
    "moe": "fused mixture-of-experts GEMM (tokens routed to experts, one launch for all experts)",
    "block_fp8": "block-scaled FP8 GEMM (per-token-group activation scales, per-block weight "
    "scales)",
    "block_int8": "block-scaled INT8 GEMM (per-token-group activation scales, per-block weight "
    "scales)",
    "ssu": "Mamba selective-state-update (one decode step of the SSM recurrence)",
}

DTYPE_TEXT = {
    None: "bf16/fp16 activations and weights",
    "fp8_w8a8": "FP8 (e4m3) weights and activations",
    "int8_w8a8": "INT8 weights and activations",
    "int8_w8a16": "INT8 weights, bf16/fp16 activations",
    "int4_w4a16": "INT4 weights (group-quantised), bf16/fp16 activations",
    "float8": "FP8 (legacy 'float8' file name)",
    "bf16": "bf16 (legacy file name)",
}

REPO_TEXT = {"vllm": "vLLM", "sglang": "SGLang", "flashinfer": "FlashInfer"}

#: Stands for the batch size in a prompt template. Everything in a prompt except M is a
#: property of the config file, so the dataset builder renders one template per file and
#: substitutes M per row in a vectorised replace; ``build_prompt`` does the same for one
#: row, so both paths give identical text.
M_SLOT = "\x00M\x00"


def allowed_keys(repo: str, family: str, gpu_vendor: str | None, is_down: bool) -> list[str]:
    """The config keys the runtime passes to this kernel for this repo and GPU vendor.

    An unknown vendor (empty device name) gets the ROCm keys too: it cannot be ruled out.
    """
    if family == "ssu":
        return ["BLOCK_SIZE_M", "num_warps"]
    keys = list(TILE_KEYS)
    if family == "moe":
        if repo == "vllm":
            keys.append("SPLIT_K")
        if gpu_vendor in ("NVIDIA", None):
            keys.append("num_ctas")
        if repo == "sglang" and is_down:
            keys.append("USE_TMA")
    if gpu_vendor in ("AMD", None):
        keys += ROCM_KEYS
    return keys


def _shape_lines(row: Mapping[str, Any]) -> list[str]:
    family = row.get("family")
    if family == "moe":
        lines = [
            f"- Experts E = {row['E']}; N = {row['N']} (per-expert intermediate size on this "
            "GPU, i.e. after tensor parallelism; the gate/up weight is [E, 2N, hidden], the "
            "down weight [E, hidden, N])",
        ]
        block = row.get("block_shape")
        if block:
            lines.append(f"- Weight quantisation blocks: {block[0]}x{block[1]}")
        if row.get("per_channel_quant"):
            lines.append("- Per-channel weight scales")
        if row.get("is_down"):
            lines.append("- This config is for the down-projection GEMM (second GEMM)")
        lines.append(f"- M = {M_SLOT} tokens in the batch (before top-k routing)")
        return lines
    if family in ("block_fp8", "block_int8"):
        block = row.get("block_shape")
        lines = [f"- GEMM C[M, N] = A[M, K] @ B[N, K]^T with N = {row['N']}, K = {row['K']}"]
        if block:
            lines.append(f"- Quantisation blocks: {block[0]}x{block[1]}")
        lines.append(f"- M = {M_SLOT} rows of A (tokens)")
        return lines
    if family == "ssu":
        return [
            f"- headdim = {row.get('headdim')}, dstate = {row.get('dstate')}, "
            f"state cache dtype = {row.get('cache_dtype')}",
            f"- M = {M_SLOT} = batch x heads (the kernel grid scales with the product)",
        ]
    return [f"- M = {M_SLOT}"]


def build_prompt(row: Mapping[str, Any]) -> str:
    """The prompt for one (config file, M) row.

    ``row`` needs: repo, family, kernel, kernel_source, device_name, gpu, dtype, M and the
    family's shape fields (E/N, N/K, headdim/dstate/cache_dtype). Optional: block_shape,
    per_channel_quant, is_down, triton_version, gpu_vendor, candidate_models and
    ``candidate_details`` (model + parallelism strings, preferred when present).
    """
    return prompt_template(row).replace(M_SLOT, str(row["M"]))


def prompt_template(row: Mapping[str, Any]) -> str:
    """The prompt of a config file with ``M_SLOT`` where the batch size goes."""
    repo = row["repo"]
    family = row.get("family") or "moe"
    kernel = row.get("kernel") or "?"
    gpu = row.get("gpu") or "unknown GPU"
    device = row.get("device_name")
    device_text = f"`{device}`" if device else "empty (the tuner could not name the device)"
    dtype = row.get("dtype")
    dtype_text = (
        DTYPE_TEXT.get(dtype, dtype or "")
        if family != "ssu"
        else (f"state cache {row.get('cache_dtype')}")
    )
    keys = allowed_keys(repo, family, row.get("gpu_vendor"), bool(row.get("is_down")))
    details: Sequence[str] = row.get("candidate_details") or row.get("candidate_models") or []

    out = [
        f"You are tuning the launch configuration of a Triton kernel in "
        f"{REPO_TEXT.get(repo, repo)} for one deployment.",
        "",
        f"## Kernel `{kernel}`: {FAMILY_TEXT.get(family, family)}",
        "",
        "```python",
        (row.get("kernel_source") or f"# source of {kernel} unavailable").rstrip(),
        "```",
        "",
        "## Deployment",
        f"- GPU: {gpu} (device name {device_text})",
        f"- Data type: {dtype_text}" + (f" ({dtype})" if dtype and family != "ssu" else ""),
        *_shape_lines(row),
    ]
    if row.get("triton_version"):
        out.append(f"- Triton version: {row['triton_version']}")
    if family == "moe":
        if details:
            out.append("- Models with this shape: " + "; ".join(details))
        else:
            out.append("- Models with this shape: none of the known MoE models")
    out += [
        "",
        "## Task",
        f"Choose the launch configuration that minimises this kernel's latency at M = "
        f"{M_SLOT} on this GPU. Keys you may set (omitted keys use the kernel's defaults):",
        *(f"- `{k}`: {KEY_HELP.get(k, '')}" for k in keys),
        "",
        "Reply with a single JSON object mapping keys to integer values (booleans for "
        "`USE_TMA`), and nothing else.",
    ]
    return "\n".join(out)
