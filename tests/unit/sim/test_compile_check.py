"""Real nvcc agrees with the simulator on a few instantiations, including injected errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagster_project.sim.compile_check import CompileCase, nvcc_path, run_case, stratified_cases

pytestmark = pytest.mark.slow


@pytest.mark.skipif(nvcc_path() is None, reason="nvcc not installed")
def test_nvcc_agrees_on_clean_gated_overcap_and_slipped_sources(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    cases = stratified_cases(seed=1)
    picks: list[CompileCase] = []

    def pick(pred) -> None:
        c = next(c for c in cases if pred(c) and c not in picks)
        picks.append(c)

    pick(
        lambda c: (
            c.op == "rmsnorm"
            and c.variant == "v3_vec_onepass"
            and c.arch == "sm_86"
            and not c.inject
        )
    )
    pick(
        lambda c: (
            c.op == "swiglu_act"
            and c.variant == "v4_tma_bulk"
            and c.arch == "sm_80"
            and not c.inject
        )
    )
    pick(
        lambda c: (
            c.op == "gemm_fp16"
            and c.variant == "v4_wgmma_tma"
            and c.arch == "sm_90a"
            and not c.inject
        )
    )
    pick(
        lambda c: (
            c.op == "int8_gemm"
            and c.variant == "v4_wgmma_tma"
            and c.arch == "sm_86"
            and not c.inject
        )
    )
    pick(
        lambda c: (
            (c.inject or "").startswith("slip:")
            and c.impl == "cuda"
            and c.op in ("rope", "rmsnorm", "kv_append", "gemv_fp16")
        )
    )
    pick(
        lambda c: (
            c.inject == "smem"
            and c.op in ("rmsnorm", "swiglu_act", "kv_append", "gemv_fp16", "int4_gemv")
        )
    )
    assert sum(not c.expected_ok for c in picks) >= 3
    with ThreadPoolExecutor(2) as ex:
        records = list(ex.map(lambda c: run_case(c, tmp_path), picks))
    for r in records:
        assert r["agree"], r
        assert r["message_match"], r
