"""Hardware and models from the file's own path and architecture guards (issue 21)."""

from __future__ import annotations

import pytest

from dagster_project.mining.commits.mentions import code_mentions


@pytest.mark.parametrize(
    ("path", "code", "diff", "hardware"),
    [
        ("csrc/quantization/cutlass_w8a8/c3x/scaled_mm_sm90_fp8.cu", "", "", ["sm90"]),
        ("csrc/attention/blackwell/fmha_kernel.cu", "", "", ["blackwell"]),
        ("flashinfer/hopper/prefill.cuh", "", "", ["hopper"]),
        ("csrc/rocm/attention_gfx942.cu", "", "", ["gfx942", "rocm"]),
        # v5: the platform of the path when it names one.
        ("csrc/cpu/cpu_attn_vxe.hpp", "", "", ["cpu", "s390x"]),
        ("python/sglang/srt/hardware_backend/mlx/moe/fused_swiglu.py", "", "", ["apple"]),
        ("vllm/v1/attention/backends/rocm_aiter_fa.py", "", "", ["rocm"]),
        ("csrc/x.cu", "#if __CUDA_ARCH__ >= 900\nk();\n#endif\n", "", ["sm90"]),
        ("csrc/x.cu", "#if defined(__gfx942__)\nk();\n#endif\n", "", ["gfx942"]),
        ("vllm/x.py", "if current_platform.is_device_capability(100):\n    f()\n", "", ["sm100"]),
        # Many guards in the file say nothing about the change, unless near it.
        ("csrc/x.cu", "#if __CUDA_ARCH__ >= 800\n#elif __CUDA_ARCH__ >= 900\n#endif", "", []),
        (
            "csrc/x.cu",
            "#if __CUDA_ARCH__ >= 800\n#elif __CUDA_ARCH__ >= 900\n#endif",
            "@@ -1 +1 @@\n #elif __CUDA_ARCH__ >= 900\n-a\n+b\n",
            ["sm90"],
        ),
        ("csrc/ops/activation.cu", "__global__ void k() {}", "", []),
    ],
)
def test_code_hardware(path: str, code: str, diff: str, hardware: list[str]) -> None:
    assert code_mentions(path, code, diff)[0] == hardware


def test_models_from_path() -> None:
    assert code_mentions("csrc/moe/deepseek_v3_router_gemm.cu", "")[1] == ["deepseek-v3"]
    assert code_mentions("csrc/moe/topk_softmax.cu", "")[1] == []


def test_config_device_names_of_the_same_commit(tmp_path) -> None:
    """A tuning PR that changes a kernel and adds a config for a GPU names that GPU."""
    from dagster_project.mining.commits import DEFAULT_SPECS, mine_repo
    from dagster_project.mining.git import GitRepo
    from tests.fixtures.factory import RepoBuilder

    b = RepoBuilder(tmp_path / "v")
    k = "csrc/moe/topk_kernel.cu"
    cfg = "vllm/model_executor/layers/fused_moe/configs/E=8,N=64,device_name=NVIDIA_H200.json"
    b.write(k, "__global__ void topk(float* x) { x[0] = 1.0f; }\n")
    b.commit("[Kernel] add (#1)")
    b.write(k, "__global__ void topk(float* x) { x[0] = 2.0f; }\n")
    b.write(cfg, '{"1": {"BLOCK_SIZE_M": 16}}\n')
    sha = b.commit("[Perf] Faster topk (#2)")
    _, rows, _ = mine_repo(GitRepo(b.path), DEFAULT_SPECS["vllm"], head="HEAD")
    row = rows.filter(rows["sha"] == sha).row(0, named=True)
    assert row["hardware_from_code"] == ["H200"] and "H200" in row["hardware_mentioned"]


@pytest.mark.parametrize(
    ("title", "hardware"),
    [
        ("[ROCm] Fix blockReduceSum (#1)", ["rocm"]),
        ("[CPU][Perf] Accelerate attention head for s390x (#2)", ["cpu", "s390x"]),
        ("[Intel GPU] DeepSeek V4 on XPU (#3)", ["xpu"]),
        ("[NPU]Optimization of forward_npu (#4)", ["npu"]),
        ("Reduce CPU overhead of the scheduler (#5)", []),  # "CPU" here is not the target
        ("[AMD] Tune for MI300X (#6)", ["MI300X", "rocm"]),
    ],
)
def test_platforms_from_the_title(title: str, hardware: list[str]) -> None:
    from dagster_project.mining.commits.mentions import hardware_mentioned

    assert hardware_mentioned(title) == hardware
