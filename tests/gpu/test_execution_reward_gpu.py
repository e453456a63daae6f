"""The execution harness end to end on a GPU, with small Triton kernels written for these
tests (the engines' kernels only ever come from the lake).

Skipped without torch/triton or without a CUDA GPU. With ``TRITON_INTERPRET=1`` the same
tests run on a CPU through Triton's interpreter (times are then wall clock and the
shared-memory limit does not exist, which the assertions account for).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
if not INTERPRET and not torch.cuda.is_available():
    pytest.skip("no CUDA GPU here", allow_module_level=True)

# The two toy kernels (a block-scaled fp8 matmul in the engines' parameter naming, imported
# the way vLLM imports Triton, so the shim path is exercised too, and a bf16 fused-MoE GEMM)
# and their tuned config live with the exploit suite, which runs its config exploits on them.
from dagster_project.rewards.exploits.rows import BLOCK_MM, MOE, TUNED  # noqa: E402
from dagster_project.rewards.gpu import Candidate, MeasureRow, execution_reward  # noqa: E402
from dagster_project.rewards.gpu import run_batch as rb  # noqa: E402
from dagster_project.rewards.gpu.device import measure_candidates  # noqa: E402
from dagster_project.rewards.gpu.spec import (  # noqa: E402
    INVALID_CONFIG,
    OK,
    OUT_OF_RESOURCES,
    WRONG_RESULT,
)


def mm_row(source: str = BLOCK_MM) -> MeasureRow:
    return MeasureRow.from_json(
        dict(
            id="gpu-test-mm",
            kernel="_w8a8_block_fp8_matmul",
            repo="sglang",
            dtype="fp8_w8a8",
            kernel_source=source,
            M=64,
            N=512,
            K=1024,
            block_shape=[128, 128],
            best_config=TUNED,
            default_config={**TUNED, "BLOCK_SIZE_N": 128},
        )
    )


def moe_row(source: str = MOE) -> MeasureRow:
    return MeasureRow.from_json(
        dict(
            id="gpu-test-moe",
            kernel="fused_moe_kernel",
            repo="sglang",
            dtype="bf16/fp16",
            kernel_source=source,
            M=32,
            N=128,
            K=256,
            E=8,
            top_k=2,
            moe_gemms="both",
            best_config=TUNED,
            default_config={**TUNED, "BLOCK_SIZE_M": 16},
        )
    )


def test_block_matmul_candidates_and_failures() -> None:
    huge = {
        "BLOCK_SIZE_M": 256,
        "BLOCK_SIZE_N": 256,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 1,
        "num_warps": 8,
        "num_stages": 6,
    }  # 6 x 64 KiB of fp8 tiles > 227 KiB
    cands = [
        Candidate("tuned", TUNED),
        Candidate("default", {**TUNED, "BLOCK_SIZE_N": 128}),
        Candidate("bigK", {**TUNED, "BLOCK_SIZE_K": 256}),
        Candidate("np2", {**TUNED, "BLOCK_SIZE_N": 96}),
        Candidate("huge", huge),
    ]
    res = {m.label: m for m in measure_candidates(mm_row(), cands)}
    for label in ("tuned", "default"):
        assert res[label].status == OK, res[label].reason
        assert res[label].t_us and res[label].t_us > 0
        assert res[label].rel_err is not None and res[label].rel_err < 0.02
    assert res["bigK"].status == WRONG_RESULT and res["bigK"].rel_err > 0.02
    assert res["np2"].status == INVALID_CONFIG
    assert res["huge"].status == (OK if INTERPRET else OUT_OF_RESOURCES), res["huge"].reason


def test_moe_row_and_execution_reward() -> None:
    row = moe_row()
    res = execution_reward(TUNED, row)
    assert res.status == OK, res.reason
    assert res.reward > 0 and res.t_best_us and res.t_pred_us
    if not INTERPRET:  # same config twice: equal within timing noise
        assert 0.8 < res.reward < 1.25
    bad = execution_reward({**TUNED, "BLOCK_SIZE_M": 24}, row)
    assert bad.status == INVALID_CONFIG and bad.reward == -1.0


def test_wrong_and_unwritten_outputs_are_caught() -> None:
    no_weights = MOE.replace("if MUL_ROUTED_WEIGHT:", "if False:")
    (m,) = measure_candidates(moe_row(no_weights), [Candidate("tuned", TUNED)])
    assert m.status == WRONG_RESULT and m.reason.startswith("down GEMM")
    half = MOE.replace(
        "mask=live[:, None] & (cols[None, :] < N))",
        "mask=live[:, None] & (cols[None, :] < N // 2))",
    )
    (m,) = measure_candidates(moe_row(half), [Candidate("tuned", TUNED)])
    assert m.status == WRONG_RESULT and "non-finite or unwritten" in m.reason


def test_batch_runner_on_the_device(tmp_path: Path) -> None:
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [
        json.dumps(
            {
                **mm_row().to_json(),
                "candidates": [
                    {"label": "tuned", "config": TUNED},
                    {"label": "default", "config": {**TUNED, "BLOCK_SIZE_N": 128}},
                ],
            }
        )
    ]
    inp.write_text("\n".join(lines) + "\n")
    assert rb.main([str(inp), str(out), "--budget-s", "300"]) == rb.EXIT_OK
    results = rb.read_results(out)
    assert [r["status"] for r in results] == [OK, OK]
    assert results[0]["env"]["torch"] == torch.__version__
