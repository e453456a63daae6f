"""The execution census on file texts written for these tests (no upstream code)."""

from __future__ import annotations

import pytest

from dagster_project.commit_exec.census import CENSUS_VERSION, census_row, claim_hardware

KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * {factor}, mask=mask)


def scale(x):
    y = torch.empty_like(x)
    _scale_kernel[(triton.cdiv(x.numel(), {block}),)](x, y, x.numel(), BLOCK={block})
    return y


def host_helper(n):
    return n + {extra}
"""


def _code(factor: str = "2.0", block: int = 1024, extra: int = 1) -> str:
    return KERNEL.format(factor=factor, block=block, extra=extra)


def _census(
    before: str,
    after: str,
    *,
    path: str = "vllm/ops/scale.py",
    lang: str = "Triton",
    title: str = "[Perf] faster scale",
    repo: str = "vllm",
    sha: str = "f" * 40,
):
    return census_row(repo, sha, path, lang, title, before, after)


def test_changed_kernel_with_launcher_is_runnable_without_spec() -> None:
    c = _census(_code(), _code(factor="2.5"))
    assert c.status == "no_harness_spec"
    assert c.changed_kernels == ("_scale_kernel",)
    assert c.launchers == ("scale",)
    assert c.import_tier == "self_contained"


def test_changed_launch_site_alone_is_runnable() -> None:
    c = _census(_code(), _code(block=256))
    assert c.status == "no_harness_spec"
    assert c.launchers == ("scale",)


def test_host_only_change() -> None:
    c = _census(_code(), _code(extra=2))
    assert c.status == "host_side_only"


def test_kernel_launched_only_from_a_method() -> None:
    cls = """
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), {v})


class Op:
    def run(self, x):
        _k[(1,)](x, BLOCK=16)
"""
    c = _census(cls.format(v="1.0"), cls.format(v="2.0"))
    assert c.status == "no_launcher_found"
    assert c.changed_kernels == ("_k",)


def test_engine_imports_set_the_tier() -> None:
    shim = "from vllm.triton_utils import tl, triton\n" + _code()
    stub = "from vllm.model_executor.layers.utils import dispatch\n" + _code()
    assert _census(shim, shim.replace("2.0", "3.0")).import_tier == "shims"
    assert _census(stub, stub.replace("2.0", "3.0")).import_tier == "stubs"


@pytest.mark.parametrize(
    ("lang", "path", "code", "status"),
    [
        ("CUDA", "csrc/a.cu", "__global__ void k() { tcgen05_mma(); }", "blackwell_only"),
        ("CUDA", "csrc/a.cu", "__global__ void k() {}", "needs_cuda_extension_build"),
        ("C++", "csrc/cpu/attn.cpp", "void f() {}", "cpu_kernel"),
        ("C++", "csrc/ops.cpp", "at::cuda::getCurrentCUDAStream();", "needs_cuda_extension_build"),
        (
            "CuTe DSL",
            "fi/cute/gemm.py",
            "import cutlass.cute as cute\ncute.arch.tmem",
            "blackwell_only",
        ),
        ("CuTe DSL", "fi/cute/gemm.py", "import cutlass.cute as cute\n", "cute_dsl_no_harness"),
        ("Triton", "vllm/attention/ops/rocm_aiter_mla.py", _code(), "amd_only"),
        ("Triton", "vllm/ops/x.py", "def broken(:\n", "unparseable"),
    ],
)
def test_non_runnable_reasons(lang: str, path: str, code: str, status: str) -> None:
    c = _census(code, code + "\n", path=path, lang=lang)
    assert c.status == status
    assert c.reason


def test_spec_covered_row_is_harness_ready() -> None:
    # a (repo, sha, path) the shipped specs cover; the code is ours, with a changed kernel
    c = census_row(
        "vllm",
        "280d62b8" + "0" * 32,
        "vllm/attention/ops/triton_merge_attn_states.py",
        "Triton",
        "[Kernel] x",
        _code(),
        _code(factor="3.0"),
    )
    assert c.status == "harness_ready"


def test_claim_hardware() -> None:
    assert claim_hardware("[AMD] faster decode", "vllm/x.py") == "amd"
    assert claim_hardware("[Perf] 2x on B200", "vllm/x.py") == "blackwell"
    assert claim_hardware("[Perf] faster", "vllm/rocm/x.py") == "amd"
    assert claim_hardware("[Perf] faster on H100", "vllm/x.py") is None


def test_version_is_set() -> None:
    assert CENSUS_VERSION


def test_spec_marked_not_runnable_row_gets_the_specs_reason() -> None:
    # vLLM 75d29cf4's int8 group quant: the spec covers the row but marks it not runnable
    # (the change is a csrc CUDA kernel); census 3 says so instead of harness_ready
    sha = "75d29cf4" + "0" * 32
    path = "vllm/model_executor/layers/quantization/utils/int8_utils.py"
    c = census_row(
        sha=sha,
        repo="vllm",
        path=path,
        language="Triton",
        title="[Perf] x",
        before=_code(),
        after=_code(factor="3.0"),
    )
    assert c.status == "needs_cuda_extension_build"
    assert "csrc" in c.reason
    # the same file at a sha the spec does not mark stays as before
    other = census_row("vllm", "1" * 40, path, "Triton", "[Perf] x", _code(), _code(factor="3.0"))
    assert other.status != "needs_cuda_extension_build"
    assert CENSUS_VERSION == "4"
