"""Kernel function ranges (fast scan == ast), touches_kernel_body, and diff round trips."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dagster_project.mining.commits.diffs import (
    PatchCase,
    PatchError,
    apply_patch,
    changed_lines,
    split_diff_tree,
    split_lines,
    verify_with_git_apply,
)
from dagster_project.mining.commits.kernel_body import (
    cuda_kernel_ranges,
    kernel_body_lines,
    python_kernel_ranges,
    python_kernel_ranges_ast,
    touches_kernel_body,
)

TRICKY_PY = '''"""Module docstring with a fake kernel:

@triton.jit
def not_a_kernel():
    pass
"""
import triton
import triton.language as tl
from triton import jit


@triton.autotune(
    configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})],
    key=["n"],
)
@triton.jit
def first(x_ptr, n,
BLOCK: tl.constexpr):
    """Docstring (with an open bracket
that runs to column 0.
"""
    s = "a string with ) and # inside"
    # a comment at column 0 follows
# like this one
    t = (1 +
2)
    tl.store(x_ptr, s)


def host(x):
    return first[(1,)](x, 1)


@jit
def bare(x):
    return x


class Holder:
    @cute.struct
    class Storage:
        a: int

    @cute.jit
    def method(self, x):
        @cute.kernel
        def inner(y):
            return y
        return inner(x)

    def plain(self):
        return 1


@triton.jit
def last(x):
    return x
'''


def test_python_ranges_equal_ast_on_tricky_source() -> None:
    ref = python_kernel_ranges_ast(TRICKY_PY)
    assert ref is not None
    assert python_kernel_ranges(TRICKY_PY) == ref
    starts = [a for a, _ in ref]
    assert TRICKY_PY.split("\n")[starts[0] - 1].startswith("@triton.autotune(")
    assert len(ref) == 5  # first, bare, method, inner, last (not the class, not host)


def test_python_ranges_with_changed_lines_only_report_what_matters() -> None:
    full = python_kernel_ranges(TRICKY_PY)
    last_line = len(TRICKY_PY.split("\n"))
    assert python_kernel_ranges(TRICKY_PY, []) == []
    assert python_kernel_ranges(TRICKY_PY, [1, 2]) == []  # above every kernel
    some = python_kernel_ranges(TRICKY_PY, [full[-1][0] + 1, last_line])
    assert full[-1] in some


CUDA_SRC = """// SPDX-License-Identifier: Apache-2.0
/* a block comment with __global__ void fake() { */
#define KERNEL_ATTR __device__ __forceinline__
#include <cuda_runtime.h>

__device__ int counter[2] = {0, 0};
__device__ float declared(float x);

template <typename T>
__global__ void __launch_bounds__(256) kernel(const T* in, T* out, int n) {
  int i = threadIdx.x;
  const char* s = "} not a brace {";
  auto f = [] __device__ (T v) { return v * 2; };
  if (i < n) {
    out[i] = f(in[i]);  // }
  }
}

void host_launcher(int n) {
  kernel<float><<<1, 256>>>(nullptr, nullptr, n);
}

CUTLASS_DEVICE
void cutlass_helper() {
  return;
}
"""


def test_cuda_ranges() -> None:
    ranges = cuda_kernel_ranges(CUDA_SRC)
    lines = CUDA_SRC.split("\n")
    assert [lines[a - 1].split("(")[0] for a, _ in ranges] == [
        "__global__ void __launch_bounds__",
        "CUTLASS_DEVICE",
    ]
    kernel_start, kernel_end = ranges[0]
    assert lines[kernel_end - 1] == "}" and lines[kernel_end] == ""
    assert kernel_end - kernel_start == 7  # from the qualifier line to the brace
    assert cuda_kernel_ranges("int main() { return 0; }\n") == []


def _diff(before: str, after: str, tmp: Path, name: str = "f") -> str:
    (tmp / "a").write_text(before)
    (tmp / "b").write_text(after)
    out = subprocess.run(
        ["git", "diff", "--no-index", "--no-color", "a", "b"], cwd=tmp, capture_output=True
    ).stdout.decode()
    return out.replace("a/a", f"a/{name}").replace("b/b", f"b/{name}")


def test_touches_kernel_body(tmp_path: Path) -> None:
    inside = CUDA_SRC.replace("out[i] = f(in[i]);", "out[i] = f(in[i]) + 1;")
    outside = CUDA_SRC.replace("<<<1, 256>>>", "<<<2, 128>>>")
    assert touches_kernel_body("CUDA", CUDA_SRC, inside, _diff(CUDA_SRC, inside, tmp_path))
    assert not touches_kernel_body("CUDA", CUDA_SRC, outside, _diff(CUDA_SRC, outside, tmp_path))
    # A new kernel added after a host function counts (new side).
    added = CUDA_SRC + "\n__global__ void extra() {\n  return;\n}\n"
    assert touches_kernel_body("CUDA", CUDA_SRC, added, _diff(CUDA_SRC, added, tmp_path))
    py_in = TRICKY_PY.replace("tl.store(x_ptr, s)", "tl.store(x_ptr, s * 2)")
    py_out = TRICKY_PY.replace("return first[(1,)](x, 1)", "return first[(2,)](x, 1)")
    py_cfg = TRICKY_PY.replace('"BLOCK": 128', '"BLOCK": 256')
    assert touches_kernel_body("Triton", TRICKY_PY, py_in, _diff(TRICKY_PY, py_in, tmp_path))
    assert not touches_kernel_body("Triton", TRICKY_PY, py_out, _diff(TRICKY_PY, py_out, tmp_path))
    # Autotune configs in the decorator are part of the kernel.
    assert touches_kernel_body("Triton", TRICKY_PY, py_cfg, _diff(TRICKY_PY, py_cfg, tmp_path))


def test_formatting_inside_a_kernel_is_not_a_body_change(tmp_path: Path) -> None:
    """Issue 41: re-indenting, reflowing and comment edits inside a kernel leave the flag off;
    a statement moved inside the kernel (same lines, other order) still sets it."""
    reindent = CUDA_SRC.replace("    out[i] = f(in[i]);", "      out[i] =\n          f(in[i]);")
    comment = CUDA_SRC.replace("int i = threadIdx.x;", "int i = threadIdx.x;  // the lane")
    blank = CUDA_SRC.replace("int i = threadIdx.x;", "int i = threadIdx.x;\n")
    for after in (reindent, comment, blank):
        assert after != CUDA_SRC
        assert not touches_kernel_body("CUDA", CUDA_SRC, after, _diff(CUDA_SRC, after, tmp_path))
    assert kernel_body_lines("CUDA", CUDA_SRC, comment, _diff(CUDA_SRC, comment, tmp_path)) == 0
    lines = CUDA_SRC.split("\n")
    a = lines.index("  int i = threadIdx.x;")
    b = lines.index('  const char* s = "} not a brace {";')
    lines[a], lines[b] = lines[b], lines[a]
    moved = "\n".join(lines)
    assert touches_kernel_body("CUDA", CUDA_SRC, moved, _diff(CUDA_SRC, moved, tmp_path))
    py_comment = TRICKY_PY.replace("tl.store(x_ptr, s)", "tl.store(x_ptr, s)  # write back")
    py_diff = _diff(TRICKY_PY, py_comment, tmp_path)
    assert not touches_kernel_body("Triton", TRICKY_PY, py_comment, py_diff)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("a\nb\nc\n", "a\nB\nc\n"),
        ("a\nb\nc", "a\nb\nC"),  # no final newline on either side
        ("a\nb\nc", "a\nb\nc\n"),  # the newline is added
        ("a\nb\nc\n", "a\nb\nc"),  # ... or removed
        ("", "new\n"),
        ("x\r\ny\r\n", "x\r\nY\r\n"),  # CRLF stays CRLF
        ("form\x0cfeed\nline\u2028sep\n", "form\x0cfeed\nLINE\u2028sep\n"),
        ("caf\ufffd\n1\n2\n3\n4\n5\n6\n7\n8\n", "cafe\n1\n2\n3\n4\n5\n6\n7\n8\nnine\n"),
    ],
)
def test_apply_patch_round_trip(before: str, after: str, tmp_path: Path) -> None:
    diff = _diff(before, after, tmp_path)
    assert apply_patch(before, diff) == after
    assert verify_with_git_apply([PatchCase("k", "f", before, after, diff)], workdir=tmp_path) == []


def test_apply_patch_rejects_a_wrong_base(tmp_path: Path) -> None:
    diff = _diff("a\nb\nc\n", "a\nB\nc\n", tmp_path)
    with pytest.raises(PatchError):
        apply_patch("a\nx\nc\n", diff)
    failures = verify_with_git_apply(
        [PatchCase("bad", "f", "a\nx\nc\n", "a\nB\nc\n", diff)], workdir=tmp_path
    )
    assert [k for k, _ in failures] == ["bad"]


def test_changed_lines_and_split_lines() -> None:
    diff = (
        "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,3 +1,4 @@\n a\n-b\n+B\n+B2\n c\n"
        "@@ -10,0 +12 @@\n+tail\n"
    )
    ch = changed_lines(diff)
    assert ch.old == [2] and ch.new == [2, 3, 12] and ch.count == 4
    assert split_lines("a\r\nb\x0cc\nd") == ["a\r\n", "b\x0cc\n", "d"]


def test_split_diff_tree_keys_by_commit_and_path() -> None:
    sha1, sha2 = "1" * 40, "2" * 40
    raw = (
        f"{sha1}\ndiff --git a/x.cu b/x.cu\nindex 1..2 100644\n--- a/x.cu\n+++ b/x.cu\n"
        "@@ -1 +1 @@\n-a\n+b\n"
        f"diff --git a/y z.cu b/y z.cu\n--- a/y z.cu\n+++ b/y z.cu\n@@ -1 +1 @@\n-c\r\n+d\r\n"
        f"{sha2}\ndiff --git a/bin.h b/bin.h\nindex 1..2 100644\n"
        "Binary files a/bin.h and b/bin.h differ\n"
    ).encode()
    patches = split_diff_tree(raw)
    assert set(patches) == {(sha1, "x.cu"), (sha1, "y z.cu"), (sha2, "bin.h")}
    assert patches[(sha1, "y z.cu")].endswith(b"+d\r\n")
    assert b"Binary files" in patches[(sha2, "bin.h")]
