"""touches_cpu_kernel: CPU kernels (no device qualifier) changed inside a function body."""

from __future__ import annotations

import difflib

from dagster_project.mining.commits.kernel_body import (
    cpp_function_ranges,
    is_cpu_kernel_file,
    touches_cpu_kernel,
    touches_kernel_body,
)
from dagster_project.mining.commits.languages import CPP, CUDA

BEFORE = """#include <immintrin.h>
#include "cpu_types.hpp"

namespace vllm {
namespace {
template <typename T>
void rms_norm_impl(T* out, const T* x, int n, float eps) {
  #pragma omp parallel for
  for (int i = 0; i < n; ++i) {
    out[i] = x[i] * eps;
  }
}
}  // namespace

void rms_norm(torch::Tensor& out, torch::Tensor& x, double eps) {
  rms_norm_impl(out.data_ptr<float>(), x.data_ptr<float>(), x.numel(), eps);
}
}  // namespace vllm

TORCH_LIBRARY_FRAGMENT(ops, m) {
  m.def("rms_norm");
}
"""


def _diff(a: str, b: str) -> str:
    return "".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True), "a/x", "b/x"))


def test_function_ranges_skip_namespaces_and_registration() -> None:
    assert cpp_function_ranges(BEFORE) == [(7, 12), (15, 17)]


def test_cpu_kernel_body_change_is_counted() -> None:
    after = BEFORE.replace(
        "out[i] = x[i] * eps;", "_mm512_storeu_ps(out + i, _mm512_set1_ps(eps));"
    )
    d = _diff(BEFORE, after)
    path = "csrc/cpu/layernorm.cpp"
    assert is_cpu_kernel_file(path, BEFORE)
    assert touches_cpu_kernel(CPP, path, BEFORE, after, d)
    assert not touches_kernel_body(CPP, BEFORE, after, d)  # no device code: the old flag


def test_includes_and_registration_only_are_not_kernel_changes() -> None:
    path = "csrc/cpu/layernorm.cpp"
    after = BEFORE.replace('#include "cpu_types.hpp"', '#include "cpu_types.hpp"\n#include <cmath>')
    assert not touches_cpu_kernel(CPP, path, BEFORE, after, _diff(BEFORE, after))
    after = BEFORE.replace('m.def("rms_norm");', 'm.def("rms_norm");\n  m.def("rms_norm2");')
    assert not touches_cpu_kernel(CPP, path, BEFORE, after, _diff(BEFORE, after))


def test_gpu_and_plain_host_files_are_not_cpu_kernels() -> None:
    host = BEFORE.replace("#include <immintrin.h>\n", "").replace(
        "  #pragma omp parallel for\n", ""
    )
    after = host.replace("x[i] * eps", "x[i] / eps")
    assert not is_cpu_kernel_file("csrc/ops/host.cpp", host)
    assert not touches_cpu_kernel(CPP, "csrc/ops/host.cpp", host, after, _diff(host, after))
    assert not touches_cpu_kernel(CUDA, "csrc/cpu/x.cu", BEFORE, BEFORE, "")
