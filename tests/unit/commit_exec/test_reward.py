"""The execution reward's plumbing: edits (the patch parser), the score of every sandbox
status (recorded results), monotonicity, and the process boundary with a real subprocess."""

from __future__ import annotations

import math
import sys

import pytest

from dagster_project.commit_exec.sandbox import CandidateResult, run_candidate
from dagster_project.rewards import commit_reward as R
from dagster_project.rewards.patch import oracle_edit

BEFORE = "def f(x):\n    return x * 2\n\n\ndef g(x):\n    return x + 1\n"
AFTER = "def f(x):\n    return x << 1\n\n\ndef g(x):\n    return x + 1\n"


def test_patched_applies_the_oracle_edit() -> None:
    assert R.patched(oracle_edit(BEFORE, AFTER, "a.py"), BEFORE) == AFTER


@pytest.mark.parametrize(
    "completion",
    [
        "no edit at all",
        "<<<<<<< SEARCH\nreturn x * 3\n=======\nreturn x\n>>>>>>> REPLACE\n",  # no match
        "<<<<<<< SEARCH\nreturn x * 2\n=======\n",  # unterminated
    ],
)
def test_malformed_or_non_applying_scores_minus_one(completion: str) -> None:
    row = {"id": "x", "repo": "vllm", "sha": "0" * 40, "path": "a.py", "before_code": BEFORE}
    assert R.execution_reward(completion, row) == R.MALFORMED_REWARD


# Recorded sandbox results (the shapes of what device/candidate.py writes).
RECORDED = [
    (CandidateResult("import_error", detail={"error": "SyntaxError"}), R.ERROR_REWARD),
    (CandidateResult("run_error", detail={"error": "CompilationError"}), R.ERROR_REWARD),
    (CandidateResult("timeout"), R.ERROR_REWARD),
    (CandidateResult("crashed"), R.ERROR_REWARD),
    (CandidateResult("wrong_output"), R.WRONG_REWARD),
    (CandidateResult("ok", 1.02, 0.97, 1.06, False), R.CORRECT_REWARD),
    (CandidateResult("ok", 2.0, 1.9, 2.1, True), 0.6),
    (CandidateResult("ok", 8.0, 7.0, 9.0, True), 1.0),
    (CandidateResult("ok", 0.5, 0.45, 0.55, True), -0.15),
]


@pytest.mark.parametrize(("result", "expected"), RECORDED)
def test_reward_of_each_status(result: CandidateResult, expected: float) -> None:
    assert math.isclose(R.reward_from(result), expected)


def test_speedup_reward_is_monotone() -> None:
    values = [R.speedup_reward(s / 10) for s in range(3, 60)]
    assert all(a <= b for a, b in zip(values, values[1:], strict=False))
    assert R.speedup_reward(1.0) == R.CORRECT_REWARD
    assert min(values) > R.ERROR_REWARD


def test_sandbox_reports_a_row_without_spec_from_its_own_process() -> None:
    row = {"id": "nospec", "repo": "vllm", "sha": "0" * 40, "path": "nowhere.py"}
    res = run_candidate(row, BEFORE, AFTER, time_it=False, timeout_s=60)
    assert res.status == "no_spec"
    assert R.reward_from(res) == R.ERROR_REWARD


def test_sandbox_kills_a_process_past_its_limit(tmp_path) -> None:  # noqa: ANN001
    slow = tmp_path / "python"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    row = {"id": "slow", "repo": "vllm", "sha": "0" * 40, "path": "a.py"}
    res = run_candidate(row, BEFORE, AFTER, timeout_s=1, python=str(slow))
    assert res.status == "timeout"


def _shipped_executed() -> list[dict]:
    from dagster_project.commit_exec.ingest import shipped

    runs, _ = shipped()
    return [r for r in runs.iter_rows(named=True) if r["status"] == "executed"]


def test_reward_of_recorded_oracle_runs_follows_the_measurement() -> None:
    """On every shipped executed row: the commit's own after_code, scored from its recorded
    graph-replay result, gains exactly when its speedup is significant and faster."""
    rows = _shipped_executed()
    if not rows:
        pytest.skip("no batch shipped")
    for r in rows:
        sig = r["graph_significant"]
        res = CandidateResult("ok", r["graph_speedup"], r["graph_ci_lo"], r["graph_ci_hi"], sig)
        got = R.reward_from(res)
        if sig and r["graph_speedup"] > 1:
            assert got > R.CORRECT_REWARD, r["id"]
        elif sig:
            assert got < R.CORRECT_REWARD, r["id"]
        else:
            assert got == R.CORRECT_REWARD, r["id"]


def test_recorded_before_against_itself_earns_no_gain() -> None:
    """The A/A controls (before timed against a second copy of itself) are what the
    unchanged before_code would measure: none may clear the effect floor."""
    from dagster_project.commit_exec.device.stats import significant

    rows = [r for r in _shipped_executed() if r["control_graph_ci_lo"] is not None]
    if not rows:
        pytest.skip("no batch shipped")
    for r in rows:
        sig = significant(r["control_graph_ci_lo"], r["control_graph_ci_hi"])
        res = CandidateResult(
            "ok",
            r["control_graph_speedup"],
            r["control_graph_ci_lo"],
            r["control_graph_ci_hi"],
            sig,
        )
        assert R.reward_from(res) == R.CORRECT_REWARD, r["id"]


def test_sandbox_ignores_a_verdict_the_candidate_forged(tmp_path) -> None:  # noqa: ANN001
    """A child taken over by its candidate writes an 8x verdict into its folder and onto
    the verdict pipe, without the parent's token: the parent reads no verdict (this earned
    the maximum reward before the pipe and token, found by the exploit suite)."""
    forged = tmp_path / "python"
    forged.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "claim = {'status': 'ok', 'speedup': 8.0, 'significant': True}\n"
        "open('result.json', 'w').write(json.dumps(claim))\n"
        "msg = json.dumps({'token': 'guess', 'result': claim}) + '\\n'\n"
        "os.write(int(sys.argv[4]), msg.encode())\n"
    )
    forged.chmod(0o755)
    row = {"id": "forged", "repo": "vllm", "sha": "0" * 40, "path": "a.py"}
    res = run_candidate(row, BEFORE, AFTER, timeout_s=30, python=str(forged))
    assert res.status == "crashed" and res.speedup is None
    assert R.reward_from(res) < 0
