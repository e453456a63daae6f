"""Swarms with substance (issue 20): reviews read code, verifications decide, messages state facts.

Everything runs on the shared small build (``conftest.small_build``) plus a few direct
calls of the reviewer on a real ``KernelEnv``; planted violations are deep copies.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dagster_project.sim import kernelswarm as ks
from dagster_project.sim.env import Candidate, KernelEnv
from dagster_project.sim.feedback import fmt_ms
from dagster_project.sim.hardware import get_gpu
from dagster_project.sim.kernels import plan
from dagster_project.sim.ops import get_op
from dagster_project.sim.swarm.checks import HARNESS_TEXT, timeline_violations
from dagster_project.sim.swarm.review import fail_note, pass_note, read_candidate
from dagster_project.sim.swarm.spec import CARD_OPS
from dagster_project.sim.tasks import TaskSpec
from dagster_project.sim.variants import get_variant, iter_params, ladder

Episode = dict[str, Any]
ROOT = Path(__file__).resolve().parents[3]


def _msgs(eps: list[Episode], kind: str) -> list[tuple[Episode, int, dict[str, Any]]]:
    return [(ep, i, m) for ep in eps for i, m in enumerate(ep["messages"]) if m["kind"] == kind]


def _smem(ep: Episode, params: dict[str, Any]) -> int:
    sim_op, impl = CARD_OPS[ep["op"]]
    op = get_op(sim_op)
    v = get_variant(op.family, impl, params["variant"])
    launch = {k: x for k, x in params.items() if k != "variant"}
    return plan(op, ep["shape"], ep["dtype"], get_gpu(ep["gpu"]), v, launch).smem


# ------------------------------------------------------------------------------ reviews
def test_reviews_never_pass_over_limit_and_never_quote_the_harness(
    small_build: list[Episode],
) -> None:
    reviews = _msgs(small_build, "review")
    assert len(reviews) > 30
    for ep, _i, m in reviews:
        assert not HARNESS_TEXT.search(m["content"]), m["content"]
        if m["status"] == "pass":
            assert _smem(ep, m["params"]) <= get_gpu(ep["gpu"]).smem_per_block_optin
    assert any(m["status"] == "fail" for _, _, m in reviews)


def test_failing_reviews_quote_the_candidates_own_line(small_build: list[Episode]) -> None:
    quoted = 0
    for ep, i, m in _msgs(small_build, "review"):
        if m["status"] != "fail":
            continue
        cand = next(
            c
            for c in reversed(ep["messages"][:i])
            if c["kind"] == "candidate" and c["sender"] == m["recipient"]
        )
        assert cand["params"] == m["params"]
        code = cand["content"].split("\n")
        hit = re.search(
            r"line (\d+)(?: ends without[^:]*| uses [^:]*| lost [^:]*| adds [^:]*)?: `([^`]+)`",
            m["content"],
        )
        if hit is None:
            hit = re.search(r"\(line (\d+): `([^`]+)`\)", m["content"])
        if hit:
            n, text = int(hit.group(1)), hit.group(2)
            assert 1 <= n <= len(code)
            assert code[n - 1].strip().startswith(text), (m["content"], code[n - 1])
            quoted += 1
    # typed slips, what a reviewer quotes by line, are rare since 1.10.0 (sim/failure_model)
    assert quoted >= 2


def _env(ep: Episode) -> KernelEnv:
    sim_op, impl = CARD_OPS[ep["op"]]
    return KernelEnv(
        TaskSpec(0, sim_op, impl, ep["gpu"], ep["dtype"], tuple(ep["shape"].items()), 0)
    )


def _cuda_envs(eps: list[Episode]) -> list[KernelEnv]:
    return [_env(ep) for ep in eps if ep["impl"] == "cuda"]


def test_reviewer_finds_a_slip_by_reading_the_code_not_the_diagnostic(
    small_build: list[Episode],
) -> None:
    found = 0
    for env in _cuda_envs(small_build)[:12]:
        for v in ladder(env.op.family, "cuda")[1:3]:
            p = next(q for q in iter_params(v, env.op, env.task.dtype) if env.fits(v, q))
            for slip in ("missing_semicolon", "undeclared_identifier"):
                try:
                    sub = env.submit(Candidate.of(v, p, slip=slip), random.Random(3))
                except (KeyError, ValueError):
                    continue
                if sub.slip is None:
                    continue
                r = read_candidate(env, v, p, sub.code, None)
                assert r.defect is not None and r.defect[0] == "slip"
                note = fail_note(r, env.gpu.arch)
                assert sub.slip.key not in note  # the compiler's words are not the reviewer's
                assert not HARNESS_TEXT.search(note)
                # the reviewer points at the broken line (nvcc reports a missing ';' one later)
                assert r.defect[1] in (sub.slip.line, sub.slip.line - 1)
                found += 1
    assert found >= 4


def test_reviewer_computes_the_overflow_from_the_code(small_build: list[Episode]) -> None:
    over = None
    for env in _cuda_envs(small_build):
        for v in ladder(env.op.family, "cuda"):
            cfgs = list(iter_params(v, env.op, env.task.dtype))
            big = [p for p in cfgs if not env.missing(v, p) and not env.fits(v, p)]
            fit = [p for p in cfgs if not env.missing(v, p) and env.fits(v, p)]
            if big and fit:
                over = (env, v, big[0], fit[0])
                break
        if over:
            break
    assert over is not None
    env, v, p, q = over
    r = read_candidate(env, v, p, env.code(v, p), None)
    assert r.over and r.smem == env.smem(v, p)
    note = fail_note(r, env.gpu.arch)
    assert f"{r.smem - r.cap} B over the {r.cap} B" in note
    if r.smem_line is not None:
        assert f"kSmemBytes = {r.smem}" in env.code(v, p).split("\n")[r.smem_line - 1]
    ok = read_candidate(env, v, q, env.code(v, q), None)
    assert not ok.over and ok.defect is None
    assert ok.smem == 0 or f"{ok.smem} B shared memory (limit {ok.cap} B)" in pass_note(ok)


# ------------------------------------------------------------------------------ verification
def test_unstable_verification_is_not_rewarded(small_build: list[Episode]) -> None:
    n = 0
    for ep, i, m in _msgs(small_build, "verify"):
        ref = ep["messages"][m["params"]["ref"]]
        assert m["params"]["ref"] < i and ref["kind"] == "result"
        if ref["status"] != "ok":
            assert "correct on" not in m["content"]
        if m["status"] != "unstable":
            continue
        n += 1
        assert (ref["reward"] or 0) + (m["reward"] or 0) <= 0
        v = ep["messages"][-1]
        won = v["params"]["variant"] == ref["params"]["variant"] and v["time_ms"] == ref["time_ms"]
        assert not won, "a kernel whose gain is noise does not win the verdict"
        assert "treat the gain as noise" in m["content"]
    assert n >= 1


# ------------------------------------------------------------------------------ facts in messages
def test_messages_state_the_episodes_numbers(small_build: list[Episode]) -> None:
    for ep in small_build:
        msgs = ep["messages"]
        results = [m for m in msgs if m["kind"] == "result"]
        verdict = msgs[-1]
        hit = re.search(r"; (\d+) results? on (\d+) rungs?", verdict["content"])
        assert hit and int(hit.group(1)) == len(results), verdict["content"]
        assert int(hit.group(2)) == len({m["params"]["variant"] for m in results})
        kept = sum(m["reward"] > 0 for m in results)
        assert f"{kept} kept improvement" in verdict["content"]
        for m in msgs:
            if m["kind"] == "merge":
                assert f"{fmt_ms(m['time_ms'])} ms" in m["content"]
            elif m["kind"] == "status":
                assert str(m["params"]["tries"]) in m["content"]
                if m["time_ms"] is not None:
                    assert f"{fmt_ms(m['time_ms'])} ms" in m["content"]


def _skeletons(eps: list[Episode], kind: str) -> set[str]:
    mod = _load_behaviour()
    return {mod.skeleton(m["content"]) for _, _, m in _msgs(eps, kind)}


def test_phrasing_follows_the_facts_not_two_templates(small_build: list[Episode]) -> None:
    assert len(_skeletons(small_build, "status")) >= 15
    assert len(_skeletons(small_build, "merge")) >= 4
    assert len(_skeletons(small_build, "verdict")) >= 8
    assert len(_skeletons(small_build, "verify")) >= 3


# ------------------------------------------------------------------------------ the checker
def _copy_with(eps: list[Episode], pred: Any) -> tuple[Episode, int]:
    for ep in eps:
        for i, m in enumerate(ep["messages"]):
            if pred(m):
                return copy.deepcopy(ep), i
    raise AssertionError("no message to plant on")


def test_checker_catches_a_review_quoting_the_compiler(small_build: list[Episode]) -> None:
    ep, i = _copy_with(small_build, lambda m: m["kind"] == "review" and m["status"] == "fail")
    ep["messages"][i]["content"] += '; candidate.cu(57): error: identifier "grids" is undefined'
    assert any("harness output" in v for v in ks.check_episode(ep))


def test_checker_catches_a_quote_of_a_later_result(small_build: list[Episode]) -> None:
    for ep0 in small_build:
        msgs = ep0["messages"]
        j = next(
            (j for j, m in enumerate(msgs) if m["kind"] == "result" and "error:" in m["content"]),
            None,
        )
        if j is None:
            continue
        i = next((i for i in range(j) if msgs[i]["kind"] == "status"), None)
        if i is None:
            continue
        ep = copy.deepcopy(ep0)
        diag = next(ln for ln in msgs[j]["content"].split("\n") if "error:" in ln)
        ep["messages"][i]["content"] += f"; saw {diag.split('error:', 1)[1].strip()}"
        assert timeline_violations(ep["messages"])
        assert any("which comes later" in v for v in ks.check_episode(ep))
        return
    pytest.fail("no compile error after a status in the small build")


def test_checker_catches_a_passed_overflow(small_build: list[Episode]) -> None:
    for ep0 in small_build:
        cap = get_gpu(ep0["gpu"]).smem_per_block_optin
        for i, m in enumerate(ep0["messages"]):
            if m["kind"] == "review" and m["status"] == "fail" and _smem(ep0, m["params"]) > cap:
                ep = copy.deepcopy(ep0)
                ep["messages"][i]["status"] = "pass"
                assert any("over the" in v and "review" in v for v in ks.check_episode(ep))
                return
    pytest.skip("no overflow reached review in the small build")


def test_checker_catches_a_rewarded_unstable_gain(small_build: list[Episode]) -> None:
    ep, i = _copy_with(small_build, lambda m: m["kind"] == "verify" and m["status"] == "unstable")
    ep["messages"][i]["reward"] = None
    problems = ks.check_episode(ep)
    ref = ep["messages"][ep["messages"][i]["params"]["ref"]]
    if ref["reward"] > 0:
        assert any("an unstable gain is not rewarded" in v for v in problems)
    ep, i = _copy_with(small_build, lambda m: m["kind"] == "verify" and m["status"] == "unstable")
    ep["messages"][i]["status"] = "pass"  # the withdrawal no longer explains the best
    assert ks.check_episode(ep)


def test_checker_catches_a_status_quoting_an_unmeasured_time(small_build: list[Episode]) -> None:
    ep, i = _copy_with(small_build, lambda m: m["kind"] == "status" and m["time_ms"] is not None)
    ep["messages"][i]["time_ms"] = ep["messages"][i]["time_ms"] * 0.5
    assert any("not an earlier ok result" in v for v in ks.check_episode(ep))


def test_checker_catches_correctness_claimed_without_evidence(small_build: list[Episode]) -> None:
    for ep0 in small_build:
        for i, m in enumerate(ep0["messages"]):
            if (
                m["kind"] == "verify"
                and ep0["messages"][m["params"]["ref"]]["status"] == "unverified"
            ):
                ep = copy.deepcopy(ep0)
                ep["messages"][i]["content"] += "\ncorrect on the task shape"
                assert any("without execution evidence" in v for v in ks.check_episode(ep))
                return
    pytest.skip("no verification of an unverified rung in the small build")


# ----------------------------------------------------------------------------- the benchmark script
def _load_behaviour() -> Any:
    name = "swarm_behaviour_under_test"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "swarm_behaviour.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_behaviour_script_on_parquet(small_build: list[Episode], tmp_path: Path) -> None:
    for name, frame in zip(
        ("episodes", "agents", "messages"), ks.episode_frames(small_build, 0), strict=True
    ):
        frame.write_parquet(tmp_path / f"kernelswarm_{name}_000.parquet")
    r = _load_behaviour().measure(tmp_path)
    f = Counter(r["figures"])
    assert f["episodes"] == len(small_build)
    assert f["over_limit_passes"] == 0 and f["future_quotes"] == 0
    assert f["unstable"] >= 1 and f["unstable_rewarded"] == 0
    assert f["verify_claims_unverified_correct"] == 0
    assert r["templates"]["status"] >= 15
    json.dumps(r)  # the --json output is plain data


def test_checker_catches_a_latency_measured_only_later(small_build: list[Episode]) -> None:
    for ep0 in small_build:
        msgs = ep0["messages"]
        i = next((i for i, m in enumerate(msgs) if m["kind"] == "merge"), None)
        later = [
            m["time_ms"]
            for m in msgs[i + 1 :]
            if i is not None and m["kind"] == "result" and m["time_ms"] is not None
        ]
        earlier = {m["time_ms"] for m in msgs[: i or 0] if m["time_ms"] is not None}
        fresh = [t for t in later if t not in earlier]
        if i is None or not fresh:
            continue
        ep = copy.deepcopy(ep0)
        ep["messages"][i]["content"] += f"; a06 expects {fmt_ms(fresh[0])} ms next"
        assert any("which no earlier message measured" in v for v in ks.check_episode(ep))
        return
    pytest.fail("no merge followed by a new time in the small build")
