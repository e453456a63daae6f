"""Issue 39: the engineer remembers what it fixed, fails mostly semantically, and provably
inert parameters neither move times nor get tuned."""

from __future__ import annotations

import difflib
import random
from typing import Any

import pytest

from dagster_project.sim.env import ANY_BUG, WRONG_RESULT, Candidate, KernelEnv
from dagster_project.sim.failure_model import MistakeMemory, bug_intent, slip_intent
from dagster_project.sim.kernelinfer import build_tasks, simulate_session
from dagster_project.sim.kernels import plan
from dagster_project.sim.ops import get_op
from dagster_project.sim.tasks import TaskSpec
from dagster_project.sim.timing import inert_params, predict
from dagster_project.sim.variants import default_params, get_variant

#: a seed no rule was tuned on (20260 was the default build's seed until stop 39)
SEED = 777


@pytest.fixture(scope="module")
def sessions() -> list[dict[str, Any]]:
    tasks, _ = build_tasks(SEED)
    return [simulate_session(t, SEED) for t in random.Random(3).sample(tasks, 14)]


def _edit(a: str, b: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    la, lb = a.split("\n"), b.split("\n")
    rem: list[str] = []
    add: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, la, lb, autojunk=False).get_opcodes():
        if tag != "equal":
            rem += [x.strip() for x in la[i1:i2] if x.strip()]
            add += [x.strip() for x in lb[j1:j2] if x.strip()]
    return tuple(sorted(rem)), tuple(sorted(add))


def test_no_fix_repeats_an_earlier_fix_or_resubmits_the_failing_code(
    sessions: list[dict[str, Any]],
) -> None:
    fixes = 0
    for s in sessions:
        codes = [m["content"] for m in s["messages"][2::2]]
        seen: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
        for i, t in enumerate(s["trace"]):
            if (
                i
                and t["kind"] != "rebench"
                and s["trace"][i - 1]["status"]
                in (
                    "compile_error",
                    WRONG_RESULT,
                )
            ):
                assert codes[i] != codes[i - 1], (s["session_id"], i)
            if t["kind"] == "fix":
                fixes += 1
                e = _edit(codes[i - 1], codes[i])
                assert e not in seen, (s["session_id"], i)
                seen.add(e)
    assert fixes > 5


def test_compile_errors_are_rarely_typed_slips(sessions: list[dict[str, Any]]) -> None:
    slips = ('expected a ";"', "is undefined", "cannot be used to initialize", "NameError(")
    n = typed = wrong = 0
    for s in sessions:
        for t, fb in zip(s["trace"], s["messages"][3::2], strict=True):
            if t["status"] == "compile_error":
                n += 1
                typed += any(x in fb["content"] for x in slips)
            wrong += t["status"] == WRONG_RESULT
    assert typed <= max(1, 0.3 * n)
    assert wrong > n


def test_intent_rates_put_semantic_bugs_first() -> None:
    for kind in ("variant", "tune"):
        assert bug_intent(kind, 0.112, 0.8) > 10 * slip_intent(kind, 0.2, 0.8)
    assert slip_intent("fix", 0.2, 0.8) == 0.0  # a fix is a focused edit


def test_a_remembered_bug_is_never_written_again() -> None:
    task = TaskSpec(
        0, "gemm_fp16", "cuda", "a100", "fp16", (("M", 1000), ("N", 1000), ("K", 512)), 1
    )
    env = KernelEnv(task)
    v = get_variant("gemm", "cuda", "v1_smem_tiled")
    p = default_params(v, env.op, "fp16", task.shape, env.gpu)
    bugs = env.bugs_for(v, p)
    assert bugs, "the fixture rung must have a visible bug"
    sub = env.submit(Candidate.of(v, p, bug=bugs[0]), random.Random(0))
    assert sub.status == WRONG_RESULT and sub.extra.get("bug") == bugs[0]
    mem = MistakeMemory()
    mem.shown(v.tag, bugs[0], None)
    for b in (bugs[0], ANY_BUG):
        again = env.submit(Candidate.of(v, p, bug=b), random.Random(0), avoid=mem.avoid(v.tag))
        assert again.error_kind != "bug" or again.extra.get("bug") != bugs[0]
    # another rung's code is new code: the memory is per rung for bugs
    assert bugs[0] not in mem.avoid("v2_mma_sync")


def test_group_m_over_one_row_of_tiles_is_inert() -> None:
    op = get_op("int4_gemm")
    from dagster_project.sim.hardware import get_gpu

    gpu = get_gpu("a10")
    v = get_variant("gemm", "triton", "v2_pipelined")
    base = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}
    one_row = {"M": 32, "N": 14336, "K": 8192}
    t1 = predict(op, one_row, "int4", gpu, v, {**base, "GROUP_M": 1}).time_ms
    t8 = predict(op, one_row, "int4", gpu, v, {**base, "GROUP_M": 8}).time_ms
    assert t1 == t8
    kp = plan(op, one_row, "int4", gpu, v, {**base, "GROUP_M": 1})
    assert "GROUP_M" in inert_params(kp, {**base, "GROUP_M": 1})
    rows = {"M": 4096, "N": 14336, "K": 8192}
    kp = plan(op, rows, "int4", gpu, v, {**base, "GROUP_M": 1})
    assert "GROUP_M" not in inert_params(kp, {**base, "GROUP_M": 1})


def test_the_policy_does_not_spend_a_step_on_an_inert_move() -> None:
    from dagster_project.sim.agent import AgentProfile, Policy
    from dagster_project.sim.hardware import get_gpu

    v = get_variant("gemm", "triton", "v2_pipelined")
    p = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}
    for m, inert in ((32, True), (4096, False)):
        task = TaskSpec(
            0, "int4_gemm", "triton", "a10", "int4", (("M", m), ("N", 14336), ("K", 8192)), 1
        )
        gpu = get_gpu("a10")
        pol = Policy(task, gpu, random.Random(0), 40, AgentProfile(), v)
        assert pol._inert_move(v, {**p, "GROUP_M": 1}, {**p, "GROUP_M": 8}) is inert
        # a move of a parameter that does something is never inert
        assert not pol._inert_move(v, {**p, "GROUP_M": 1}, {**p, "GROUP_M": 1, "num_warps": 8})
