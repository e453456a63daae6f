"""Where tuned configs and their Triton kernels live in each repo, over all of history.

SGLang moved its MoE config directory four times and its block-matmul configs once
(configs.md §1.2); vLLM never moved a directory but renamed files inside them. Discovery
only looks at the directories that exist at the chosen ref, but PR attribution needs
*every* directory a file ever lived in, so a move shows up as a rename (R100) that the
history walk can follow instead of an "add" that would wrongly claim the file.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigDir:
    """One directory that holds (or once held) tuned-config JSON files.

    ``versioned`` directories keep their files in ``triton_X_Y_Z/`` sub-folders once any
    exist (SGLang since #5955): the runtime then reads only those folders, so JSON files
    lying directly in such a directory (Helion configs, custom formats) are not tuned
    launch configs and are not discovered. Before the first sub-folder appeared the same
    directory was flat, and flat files are discovered.
    """

    repo: str
    path: str
    family: str  # "moe" | "block" | "ssu" — what the directory is for
    versioned: bool = False
    current: bool = True  # still the live location at the newest snapshot we know of


CONFIG_DIR_SPECS: tuple[ConfigDir, ...] = (
    # vLLM (configs.md §1.1): directories never moved.
    ConfigDir("vllm", "vllm/model_executor/layers/fused_moe/configs", "moe"),
    ConfigDir("vllm", "vllm/model_executor/layers/quantization/utils/configs", "block"),
    ConfigDir("vllm", "vllm/model_executor/layers/mamba/ops/configs/selective_state_update", "ssu"),
    # SGLang (configs.md §1.2), oldest first.
    ConfigDir("sglang", "python/sglang/srt/layers/fused_moe/configs", "moe", current=False),
    ConfigDir("sglang", "python/sglang/srt/layers/triton_fused_moe/configs", "moe", current=False),
    ConfigDir("sglang", "python/sglang/srt/layers/fused_moe_grok/configs", "moe", current=False),
    ConfigDir("sglang", "python/sglang/srt/layers/fused_moe_triton/configs", "moe", current=False),
    ConfigDir(
        "sglang",
        "python/sglang/srt/layers/moe/fused_moe_triton/configs",
        "moe",
        versioned=True,
        current=False,
    ),
    ConfigDir(
        "sglang",
        "python/sglang/srt/layers/moe/moe_runner/triton_utils/configs",
        "moe",
        versioned=True,
    ),
    ConfigDir("sglang", "python/sglang/srt/layers/quantization/configs", "block", current=False),
    ConfigDir("sglang", "python/sglang/kernels/ops/quantization/configs", "block"),
)

#: Every directory each repo's tuned configs ever lived in (FlashInfer has none).
CONFIG_DIRS: dict[str, list[str]] = {
    repo: [d.path for d in CONFIG_DIR_SPECS if d.repo == repo] for repo in ("vllm", "sglang")
}

PR_URL_BASE: dict[str, str] = {
    "vllm": "https://github.com/vllm-project/vllm/pull/",
    "sglang": "https://github.com/sgl-project/sglang/pull/",
    "flashinfer": "https://github.com/flashinfer-ai/flashinfer/pull/",
}


@dataclass(frozen=True)
class KernelSpec:
    """A Triton kernel a config family drives, and every file it has lived in.

    ``kernel`` is the name at the newest snapshot; ``aliases`` are older names of the same
    kernel (vLLM renamed ``_w8a8_block_fp8_matmul`` to ``_w8a8_triton_block_scaled_mm`` in
    #25696), so an older ref still yields the right source. ``paths`` are newest first.
    """

    repo: str
    kernel: str
    paths: tuple[str, ...]
    aliases: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (self.kernel, *self.aliases)


_V_MOE = ("vllm/model_executor/layers/fused_moe/fused_moe.py",)
_S_MOE = (
    "python/sglang/kernels/ops/moe/fused_moe_triton_kernels.py",
    "python/sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_kernels.py",
    "python/sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_kernels.py",
    "python/sglang/srt/layers/moe/fused_moe_triton/fused_moe.py",
    "python/sglang/srt/layers/fused_moe_triton/fused_moe.py",
    "python/sglang/srt/layers/triton_fused_moe/fused_moe.py",
    "python/sglang/srt/layers/fused_moe/fused_moe.py",
)
_S_QUANT = ("python/sglang/kernels/ops/quantization/", "python/sglang/srt/layers/quantization/")

#: The kernels each repo's config families drive, keyed by repo then kernel name.
KERNEL_FILES: dict[str, dict[str, KernelSpec]] = {
    "vllm": {
        "fused_moe_kernel": KernelSpec("vllm", "fused_moe_kernel", _V_MOE),
        "fused_moe_kernel_gptq_awq": KernelSpec("vllm", "fused_moe_kernel_gptq_awq", _V_MOE),
        "_w8a8_triton_block_scaled_mm": KernelSpec(
            "vllm",
            "_w8a8_triton_block_scaled_mm",
            ("vllm/model_executor/layers/quantization/utils/fp8_utils.py",),
            aliases=("_w8a8_block_fp8_matmul",),
        ),
        "_w8a8_block_int8_matmul": KernelSpec(
            "vllm",
            "_w8a8_block_int8_matmul",
            ("vllm/model_executor/layers/quantization/utils/int8_utils.py",),
        ),
        "_selective_scan_update_kernel": KernelSpec(
            "vllm",
            "_selective_scan_update_kernel",
            ("vllm/model_executor/layers/mamba/ops/mamba_ssm.py",),
        ),
    },
    "sglang": {
        "fused_moe_kernel": KernelSpec("sglang", "fused_moe_kernel", _S_MOE),
        "fused_moe_kernel_gptq_awq": KernelSpec("sglang", "fused_moe_kernel_gptq_awq", _S_MOE),
        "_w8a8_block_fp8_matmul": KernelSpec(
            "sglang", "_w8a8_block_fp8_matmul", tuple(p + "fp8_kernel.py" for p in _S_QUANT)
        ),
        "_w8a8_block_int8_matmul": KernelSpec(
            "sglang", "_w8a8_block_int8_matmul", tuple(p + "int8_kernel.py" for p in _S_QUANT)
        ),
    },
}


def kernel_for(repo: str, family: str | None, dtype: str | None) -> str | None:
    """The Triton kernel a config file tunes.

    int4 weights go through the GPTQ/AWQ kernel in both runtimes (a group size is always
    set for them); every other MoE dtype, int8_w8a16 per-channel included, uses
    ``fused_moe_kernel``.
    """
    if family == "moe":
        return "fused_moe_kernel_gptq_awq" if dtype == "int4_w4a16" else "fused_moe_kernel"
    if family == "block_fp8":
        return "_w8a8_triton_block_scaled_mm" if repo == "vllm" else "_w8a8_block_fp8_matmul"
    if family == "block_int8":
        return "_w8a8_block_int8_matmul"
    if family == "ssu":
        return "_selective_scan_update_kernel" if repo == "vllm" else None
    return None
