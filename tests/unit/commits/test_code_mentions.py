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
        ("csrc/rocm/attention_gfx942.cu", "", "", ["gfx942"]),
        ("csrc/x.cu", "#if __CUDA_ARCH__ >= 900\nk();\n#endif\n", "", ["sm90"]),
        ("csrc/x.cu", "#if defined(__gfx942__)\nk();\n#endif\n", "", ["gfx942"]),
        ("vllm/x.py", "if current_platform.is_device_capability(100):\n    f()\n", "", ["sm100"]),
        # Many guards in the file say nothing about the change, unless near it.
        ("csrc/x.cu", "#if __CUDA_ARCH__ >= 800\n#elif __CUDA_ARCH__ >= 900\n#endif", "", []),
        ("csrc/x.cu", "#if __CUDA_ARCH__ >= 800\n#elif __CUDA_ARCH__ >= 900\n#endif",
         "@@ -1 +1 @@\n #elif __CUDA_ARCH__ >= 900\n-a\n+b\n", ["sm90"]),
        ("csrc/ops/activation.cu", "__global__ void k() {}", "", []),
    ],
)
def test_code_hardware(path: str, code: str, diff: str, hardware: list[str]) -> None:
    assert code_mentions(path, code, diff)[0] == hardware


def test_models_from_path() -> None:
    assert code_mentions("csrc/moe/deepseek_v3_router_gemm.cu", "")[1] == ["deepseek-v3"]
    assert code_mentions("csrc/moe/topk_softmax.cu", "")[1] == []
