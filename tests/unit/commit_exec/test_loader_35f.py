"""Loader shims of task 35f: vLLM's ``current_platform.simple_compile_backend`` (the backend
its ``torch.compile``-decorated helpers name at import time) is inductor, as on CUDA, not an
inert stub that dynamo would take for a custom backend; SGLang's ``get_cuda_version`` is a
tuple (class bodies compare it at import time). Files written here."""

from __future__ import annotations

from pathlib import Path

from dagster_project.commit_exec.device.loader import Stub, load_file

ENGINE_FILE = """
from vllm.platforms import current_platform
from sglang.srt.utils import get_cuda_version

BACKEND = current_platform.simple_compile_backend
OTHER = current_platform.some_platform_field
CUDA_OK = get_cuda_version() >= (12, 0) or get_cuda_version() == (0, 0)
"""


def test_simple_compile_backend_is_inductor(tmp_path: Path) -> None:
    path = tmp_path / "utils.py"
    path.write_text(ENGINE_FILE)
    mod = load_file(path, "_ce_test_35f_backend", "vllm.model_executor.layers.fused_moe")
    assert mod.BACKEND == "inductor"
    assert isinstance(mod.OTHER, Stub)  # other platform fields stay inert stubs
    assert mod.CUDA_OK is True  # SGLang's get_cuda_version compares as a tuple
