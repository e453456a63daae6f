"""task_kind (issue 41): each kind from real files and real git diffs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import polars as pl

from dagster_project.mining.commits.task_kind import (
    KINDS,
    attach_task_kind,
    classify,
    is_cosmetic,
    not_perf_word,
)

KERNEL = """#include <cuda_runtime.h>

__global__ void scale(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = in[i] * 2.0f;
  }
}

void launch(const float* in, float* out, int n, cudaStream_t s) {
  scale<<<(n + 255) / 256, 256, 0, s>>>(in, out, n);
}
"""


def _diff(before: str, after: str, tmp: Path) -> str:
    (tmp / "a").write_text(before)
    (tmp / "b").write_text(after)
    out = subprocess.run(
        ["git", "diff", "--no-index", "--no-color", "a", "b"], cwd=tmp, capture_output=True
    ).stdout.decode()
    return out


def _row(after: str, tmp: Path, **kw: object) -> dict:
    row = {
        "repo": "vllm",
        "sha": "a" * 40,
        "path": kw.pop("path", "csrc/scale.cu"),
        "language": kw.pop("language", "CUDA"),
        "title": kw.pop("title", "[Perf] Faster scale kernel"),
        "before_code": KERNEL,
        "after_code": after,
        "diff": _diff(KERNEL, after, tmp),
        "touches_cpu_kernel": False,
        "is_binding_file": False,
        "lines_changed": 2,
    }
    row.update(kw)
    return row


def test_each_kind(tmp_path: Path) -> None:
    body = KERNEL.replace("out[i] = in[i] * 2.0f;", "out[i] = __fmul_rn(in[i], 2.0f);")
    host = KERNEL.replace("(n + 255) / 256, 256", "(n + 511) / 512, 512")
    spaces = KERNEL.replace("  if (i < n) {", "  if (i < n)   {  // bounds")
    assert classify(_row(body, tmp_path), 1)[0] == "kernel_edit"
    # The same small kernel change is a fragment when other files of the commit carry it.
    assert classify(_row(body, tmp_path), 3)[0] == "fragment"
    assert classify(_row(host, tmp_path), 1)[0] == "host_side"
    assert classify(_row(host, tmp_path, path="csrc/ops.h"), 2)[0] == "fragment"
    assert classify(_row(spaces, tmp_path), 1) == ("cosmetic", "only whitespace or comments change")
    feature = _row(body, tmp_path, title="[Kernel] Add support for strided inputs")
    assert classify(feature, 1)[0] == "not_perf"


def test_titles_that_are_not_about_perf() -> None:
    assert not_perf_word("[Bugfix] Fix illegal memory access in fused kernels") == "bugfix"
    assert not_perf_word("feat: Add FP4 TRTLLM-Gen throughput MOE batched gemms") == "feat"
    # A perf outcome or mechanism next to the feature word keeps the row perf work.
    assert not_perf_word("[Feature] Fuse mrope all in 1 kernel") is None
    assert not_perf_word("[perf] extend cutlass_mla_decode to support num_head < 128") is None


def test_cosmetic_is_whole_file_formatting_only() -> None:
    assert is_cosmetic("CUDA", KERNEL, KERNEL.replace("  int i", "    int i"))
    assert not is_cosmetic("CUDA", KERNEL, KERNEL.replace("2.0f", "3.0f"))
    assert not is_cosmetic("CUDA", KERNEL, KERNEL)  # no change at all is no cosmetic edit
    py = "def f(x):\n    return x + 1\n"
    assert is_cosmetic("Triton", py, "def f(x):  # add one\n    return x+1\n")


def test_attach_counts_each_commits_files(tmp_path: Path) -> None:
    body = KERNEL.replace("out[i] = in[i] * 2.0f;", "out[i] = __fmul_rn(in[i], 2.0f);")
    one = _row(body, tmp_path)
    other = dict(one, path="csrc/other.cu")
    alone = dict(one, sha="b" * 40)
    frame = pl.DataFrame([one, other, alone])
    out = attach_task_kind(frame)
    assert out["task_kind"].to_list() == ["fragment", "fragment", "kernel_edit"]
    assert out["task_kind_reason"].null_count() == 0
    assert set(out["task_kind"]) <= set(KINDS)
    empty = attach_task_kind(frame.clear())
    assert empty.columns[-2:] == ["task_kind", "task_kind_reason"]
