"""Generator 1.6.0: labels backed by execution, one compile flag per GPU, times inside
physics, feedback that agrees with the code it describes."""

from __future__ import annotations

import math
import random
import re
from typing import Any

from dagster_project.sim.env import OK, UNVERIFIED, WRONG_RESULT, Candidate, KernelEnv
from dagster_project.sim.hardware import GPUS, get_gpu, nvcc_arch_flag
from dagster_project.sim.kernelinfer import check_session, task_prompt
from dagster_project.sim.kernels import gemm_mnk, plan
from dagster_project.sim.ops import OPS, get_op
from dagster_project.sim.tasks import TaskSpec
from dagster_project.sim.timing import BW_CAP, FLOP_CAP, physical_floor_ms, predict
from dagster_project.sim.variants import default_params, get_variant, ladder
from dagster_project.sim.verification import (
    FAMILIES,
    VERIFIED,
    WRONG,
    best_kernel_violations,
    rung_status,
    verification_rows,
)

#: The rungs the issue names as measured wrong or faulting on the H200.
KNOWN_WRONG = (
    ("flash_decode", "cuda", "v4_wgmma_tma"),
    ("flash_decode", "cuda", "v4_tma_mma"),
    ("flash_decode", "triton", "v4_tma_desc"),
    ("gemm_fp16", "cuda", "v4_streamk"),
    ("gemm_fp16", "cuda", "v4_tma_mma"),
    ("gemv_fp16", "cuda", "v4_cp_async_pipe"),
    ("topk_sample", "cuda", "v0_sort"),
)


def test_every_emittable_rung_has_a_row() -> None:
    rows = verification_rows()
    keys = {(r["op"], r["impl"], r["variant"], r["family"]) for r in rows}
    want = {
        (name, impl, v.tag, fam)
        for name, op in OPS.items()
        for impl in ("cuda", "triton")
        for v in ladder(op.family, impl)
        for fam in FAMILIES
    }
    assert keys == want
    assert {r["status"] for r in rows} <= {VERIFIED, WRONG, "unverified"}
    # a verified rung has its evidence written down
    assert all(r["evidence"] for r in rows if r["status"] == VERIFIED)


def test_known_wrong_rungs_are_wrong_with_a_measured_report() -> None:
    for op, impl, tag in KNOWN_WRONG:
        st = rung_status(op, impl, tag, "sm_90a")
        assert st.status == WRONG, (op, impl, tag, st.row())
        assert "on the H200" in st.mismatch
    # a rung that passed at three shapes on the H200 is verified there
    assert rung_status("rmsnorm", "cuda", "v2_warp_shuffle", "sm_90a").status == VERIFIED


def test_a_wrong_rung_never_runs_clean_in_the_environment() -> None:
    task = TaskSpec(
        0,
        "flash_decode",
        "cuda",
        "h100",
        "bf16",
        (("B", 16), ("Hq", 32), ("Hkv", 8), ("D", 128), ("Skv", 4096), ("page", 16)),
        3,
    )
    env = KernelEnv(task)
    v = get_variant("attn_decode", "cuda", "v4_wgmma_tma")
    p = default_params(v, env.op, task.dtype, task.shape, env.gpu)
    sub = env.submit(Candidate.of(v, p), random.Random(0))
    assert sub.status == WRONG_RESULT and sub.error_kind == "rung"
    # the measured error, at this task's own output size, without naming where it was measured
    assert "max_rel_err" in sub.detail and "does not match the fp32 reference" in sub.detail
    assert "H200" not in sub.detail and "sim_" not in sub.detail


def test_an_fp4_mma_build_is_never_verified_by_other_evidence() -> None:
    # the Hopper render of this rung dequantises and ran correct on the H200, but on the
    # 5090 a clean build takes the block-scaled e2m1 MMA path that nothing here executes
    assert rung_status("fp4_gemm", "cuda", "v2_mma_sync", "sm_90a").status == VERIFIED
    st = rung_status("fp4_gemm", "cuda", "v2_mma_sync", "sm_120")
    assert st.status == "unverified" and st.fp4_mma
    assert any("FP4 MMA" in e for e in st.evidence)
    # a rung without tensor cores has no such path: its own 5090 render ran correct
    assert rung_status("fp4_gemm", "cuda", "v0_naive", "sm_120").status == VERIFIED


def test_every_op_has_h200_evidence_for_some_rung() -> None:
    # each op's reference passed at least one rung on the H200, so its failures count
    rows = verification_rows()
    verified_ops = {r["op"] for r in rows if r["family"] == "sm_90a" and r["status"] == VERIFIED}
    assert verified_ops == set(OPS)


def test_best_kernel_check_flags_unverified_and_wrong_rungs() -> None:
    bad = best_kernel_violations(
        [
            ("a", "flash_decode", "cuda", "v4_wgmma_tma", "sm_90a"),
            ("b", "rmsnorm", "cuda", "v2_warp_shuffle", "sm_90a"),
            ("c", "fp4_gemm", "cuda", "v2_mma_sync", "sm_120"),
            ("d", "rmsnorm", "cuda", None, "sm_90a"),
        ]
    )
    assert [x.split(":")[0] for x in bad] == ["a", "c"]


def test_prompt_flags_are_the_compile_flags() -> None:
    for gpu in GPUS.values():
        task = TaskSpec(
            0, "gemm_fp16", "cuda", gpu.id, "fp16", (("M", 64), ("N", 64), ("K", 64)), 1
        )
        assert f"-arch={nvcc_arch_flag(gpu.arch)})" in task_prompt(task)
    assert nvcc_arch_flag("sm_120") == "sm_120a"
    # an arch-feature error's compile command carries the same flag
    task = TaskSpec(
        0, "gemm_fp16", "cuda", "rtx_5090", "fp16", (("M", 512), ("N", 512), ("K", 512)), 1
    )
    env = KernelEnv(task)
    v = get_variant("gemm", "cuda", "v4_wgmma_tma")
    sub = env.submit(
        Candidate.of(v, default_params(v, env.op, "fp16", task.shape, env.gpu)), random.Random(1)
    )
    assert "-arch=sm_120a " in sub.detail


def test_no_prediction_beats_the_measured_caps() -> None:
    rng = random.Random(5)
    for name in ("gemv_fp16", "paged_kv_copy", "gemm_fp16", "topk_sample", "rmsnorm"):
        op = get_op(name)
        for gpu_id in ("h100", "a10", "rtx_5090"):
            gpu = get_gpu(gpu_id)
            for impl in ("cuda", "triton"):
                for v in ladder(op.family, impl):
                    s = op.sample(rng)
                    dt = [d for d in op.dtypes if d != "fp32"][0]
                    p = default_params(v, op, dt, s, gpu)
                    try:
                        pred = predict(op, s, dt, gpu, v, p)
                    except Exception:  # noqa: BLE001 - infeasible on this GPU
                        continue
                    kp = pred.plan
                    launch = pred.launch_ms
                    bw = kp.bytes / ((pred.time_ms - launch) * 1e-3) / gpu.bandwidth
                    assert bw <= BW_CAP * 1.0001, (name, gpu_id, v.tag, bw)
                    peak = gpu.peak(kp.path) or gpu.peak("fp16")
                    assert kp.flops / ((pred.time_ms - launch) * 1e-3) / peak <= FLOP_CAP * 1.0001
                    assert pred.time_ms >= physical_floor_ms(kp, gpu, impl) * (1 - 1e-9)


def test_a_triton_sampler_reads_its_row_once_per_pass_when_rows_overflow_l2() -> None:
    op = get_op("topk_sample")
    gpu = get_gpu("a10")
    s = {"B": 64, "V": 151936, "k": 50}
    v = get_variant("sampling", "triton", "v4_sortfree_rejection")
    p = default_params(v, op, "fp32", s, gpu)
    kp = plan(op, s, "fp32", gpu, v, p)
    row_bytes = s["B"] * s["V"] * 4
    assert kp.bytes >= 3 * row_bytes  # stats + two draw passes at least, from DRAM
    assert predict(op, s, "fp32", gpu, v, p).time_ms >= kp.bytes / (gpu.bandwidth * BW_CAP) * 1e3


_TRITON_GEMM = ("gemm_fp16", "gemm_splitk_fp16", "gemm_persistent_fp16", "int8_gemm", "fp8_gemm")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _code_grid_triton_gemm(code: str, m: int, n: int, sms: int) -> int | None:
    """Evaluate the launch wrapper's ``grid = (...)`` the way Python would."""
    hit = re.search(r"^    grid = (\(.*\))$", code, re.M)
    if hit is None:
        return None
    blocks = dict(re.findall(r"BLOCK_(M|N)=(\d+)", code))
    bm, bn = int(blocks.get("M", 1)), int(blocks.get("N", 1))
    ns = {
        "triton": type("T", (), {"cdiv": staticmethod(_cdiv)}),
        "M": m,
        "N": n,
        "num_sms": sms,
        "tiles": _cdiv(m, bm) * _cdiv(n, bn),
    }
    dims = eval(hit.group(1), {"__builtins__": {"min": min}}, ns)  # noqa: S307 - our own render
    return math.prod(dims)


def test_feedback_fields_agree_with_the_code(small_build: dict[str, Any]) -> None:
    """1,000 steps that ran: threads/warps/grid/smem/registers in the feedback are the
    candidate's own launch parameters, and never over a limit for a step that ran."""
    steps = [
        (s, i)
        for s in small_build["sessions"]
        for i, t in enumerate(s["trace"])
        if t["status"] in (OK, UNVERIFIED)
        and "re-measured best" not in s["messages"][3 + 2 * i]["content"]
    ]
    random.Random(0).shuffle(steps)
    checked = grids = 0
    for s, i in steps[:1000]:
        gpu = get_gpu(s["gpu"])
        code = s["messages"][2 + 2 * i]["content"]
        fb = s["messages"][3 + 2 * i]["content"]
        res = fb.strip().splitlines()[-1]
        if s["impl"] == "cuda":
            hit = re.match(
                r"ptxas: (\d+) registers.*?, (\d+) B smem, (\d+) threads x (\d+) CTAs", res
            )
            assert hit, res
            regs, smem, threads, _grid = (int(x) for x in hit.groups())
            assert regs <= gpu.max_regs_per_thread and smem <= gpu.smem_per_block_optin
            kt = re.search(r"constexpr int kThreads = (\d+);", code)
            if kt:
                assert int(kt.group(1)) == threads, (s["session_id"], i)
        else:
            hit = re.match(
                r"triton: num_warps=(\d+) num_stages=\d+, (\d+) B shared, grid (\d+)", res
            )
            assert hit, res
            warps, smem, grid = (int(x) for x in hit.groups())
            assert smem <= gpu.smem_per_block_optin
            # the main kernel's launch (a split-KV decode also launches a small combine);
            # a launch without num_warps runs Triton's default of 4
            launch = re.findall(r"num_warps=(\d+)", code) or ["4"]
            assert str(warps) in launch, (s["session_id"], i, warps, launch)
            if s["op"] in _TRITON_GEMM:
                m, n, _ = gemm_mnk(get_op(s["op"]), s["shape"])
                want = _code_grid_triton_gemm(code, m, n, gpu.sms)
                if want is not None and "SPLIT_K" not in code:
                    assert grid == want, (s["session_id"], i, grid, want)
                    grids += 1
        checked += 1
    # (generator 1.12.0's shorter sessions leave the small build ~430 ok steps)
    assert checked >= min(1000, len(steps)) and checked >= 400
    assert grids > 0


def test_sessions_pass_the_invariants_with_the_new_rules(small_build: dict[str, Any]) -> None:
    for s in small_build["sessions"][:20]:
        assert check_session(s) == []
