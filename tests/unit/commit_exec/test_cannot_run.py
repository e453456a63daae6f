"""Rows a spec covers but the harness cannot run, and the per-token-group quant launchers
that prefer a compiled op: the spec binds their Triton fallback and never leaves the
platform patched. No torch needed: the runner decides before loading, and the quant
call is exercised on a file written here with stand-in tensors."""

from __future__ import annotations

import textwrap
from pathlib import Path

from dagster_project.commit_exec.device.loader import load_file
from dagster_project.commit_exec.device.runner import run_row
from dagster_project.commit_exec.specs import spec_for
from dagster_project.commit_exec.specs.bound import PER_TOKEN_GROUP_FP8
from dagster_project.commit_exec.specs.fla_chunk import CHUNK_DELTA_H

_FP8 = "vllm/model_executor/layers/quantization/utils/fp8_utils.py"
_INT8 = "vllm/model_executor/layers/quantization/utils/int8_utils.py"


def _row(sha: str, path: str) -> dict[str, str]:
    return {
        "id": "r" + sha[:8],
        "repo": "vllm",
        "sha": sha + "0" * (40 - len(sha)),
        "path": path,
        "before": "missing/before.py",
        "after": "missing/after.py",
    }


def test_compiled_op_rows_get_their_reason_without_loading(tmp_path: Path) -> None:
    for sha, path, op in (("774d0c01", _FP8, "fp8"), ("75d29cf4", _INT8, "int8")):
        res = run_row(_row(sha, path), tmp_path, device=None, timing=False)
        assert res["status"] == "needs_cuda_extension_build", res
        assert "csrc/" in res["error"] and "per_token_group" in res["error"]
        assert op in res["error"]
    # a covered row without such a reason is loaded (and here fails to: no files)
    res = run_row(_row("af0444bf", _FP8), tmp_path, device=None, timing=False)
    assert res["status"] == "load_error"


QUANT_FILE = """
from vllm.platforms import current_platform


class Stand:
    def __init__(self, v):
        self.v = v

    def float(self):
        return self

    def contiguous(self):
        return self


class X:
    def is_contiguous(self):
        return True


def per_token_group_quant_fp8(x, group_size, eps=1e-10, column_major_scales=False,
                              tma_aligned_scales=False):
    if current_platform.is_cuda() and x.is_contiguous():
        torch.ops._C.per_token_group_fp8_quant(x)  # noqa: F821 - never reached here
        return Stand("compiled"), Stand("compiled")
    return Stand("triton"), Stand((column_major_scales, tma_aligned_scales))
"""


def test_quant_launchers_run_their_triton_fallback(tmp_path: Path) -> None:
    f = tmp_path / "fp8_file.py"
    f.write_text(textwrap.dedent(QUANT_FILE))
    mod = load_file(f, "_test_fp8_file", "vllm.model_executor.layers.quantization.utils")
    platform = mod.current_platform
    assert platform.is_cuda() is True
    x = {"x": mod.X(), "group_size": 128}
    out = PER_TOKEN_GROUP_FP8.call(mod, x, "af0444bf" + "0" * 32)
    assert out["q"].v == "triton" and out["scale"].v == (False, False)
    assert mod.current_platform is platform  # restored after the call
    # d08b356e changes only the TMA-aligned column-major scales: the call takes that path
    out = PER_TOKEN_GROUP_FP8.call(mod, x, "d08b356e" + "0" * 32)
    assert out["scale"].v == (True, True)


def test_kda_gate_tolerance_is_wider_on_h_only() -> None:
    assert spec_for("sglang", "eb3da9c1" + "0" * 32, CHUNK_DELTA_H.rows[0][2]) is CHUNK_DELTA_H
    base = CHUNK_DELTA_H.tolerance_for(CHUNK_DELTA_H.shapes[0])
    kda = CHUNK_DELTA_H.tolerance_for(CHUNK_DELTA_H.shapes[3])
    assert CHUNK_DELTA_H.shapes[3].get("gk") and not CHUNK_DELTA_H.shapes[0].get("gk")
    assert base["h"] == (4e-3, 2e-2) and kda["h"] == (4e-2, 2e-2)
    assert base["v_new"] == kda["v_new"] and base["state"] == kda["state"]
