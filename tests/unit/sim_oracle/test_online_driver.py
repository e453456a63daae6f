"""The online measured tier's two halves (issue 36): a session generated against answers
(``StepOracle`` inside ``KernelEnv``) and the device driver's rounds
(``benchmarks/device/sim_online.py`` with the oracle's fake workers, no GPU)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dagster_project.sim.kernelinfer import build_tasks, simulate_session
from dagster_project.sim.online import ONLINE_FIELDS, replay_online, session_digest
from dagster_project.sim.oracle import Answer, OracleMiss, StepOracle, _answer, evidence_digest

ROOT = Path(__file__).resolve().parents[3]


def _task(op: str = "rmsnorm", gpu: str = "h100"):  # noqa: ANN202
    return next(t for t in build_tasks()[0] if t.op == op and t.gpu == gpu)


def _ok(key: str, ms: float) -> Answer:
    return Answer(key, "rmsnorm", "cuda", "v", "ok", ms, 1.5, 2e-4, "", "fake")


def _fill(task, answer) -> tuple[dict[str, Answer], int]:  # noqa: ANN001
    """Answer every question the provisional passes ask until one asks nothing: the
    driver's loop without a device. ``answer(i, question)`` makes each answer."""
    answers: dict[str, Answer] = {}
    for rnd in range(40):
        o = StepOracle("h100", answers, strict=False)
        simulate_session(task, oracle=o)
        if not o.misses:
            return answers, rnd
        for q in o.misses:
            answers.setdefault(q["key"], answer(len(answers), q))
    raise AssertionError("the provisional passes never stopped asking")


def test_strict_oracle_raises_and_provisional_records_the_question() -> None:
    task = _task()
    with pytest.raises(OracleMiss):
        simulate_session(task, oracle=StepOracle("h100", {}, strict=True))
    o = StepOracle("h100", {}, strict=False)
    simulate_session(task, oracle=o)
    assert o.misses, "a session with no answers asks at least its baseline"
    q = o.misses[0]
    assert {"key", "op", "impl", "variant", "params", "dtype", "shape", "code"} <= set(q)
    assert q["op"] == task.op and q["shape"] == task.shape


def test_every_ran_step_carries_the_measured_time() -> None:
    task = _task()
    answers, rounds = _fill(task, lambda i, q: _ok(q["key"], 0.05 + 0.001 * i))
    assert rounds >= 1
    s = simulate_session(task, oracle=StepOracle("h100", answers, strict=True))
    assert s["measured_on"] == "h100"
    ran = [t for t in s["trace"] if t["time_ms"] is not None]
    assert ran
    times = {round(a.ms, 4) for a in answers.values() if a.ms is not None}
    for t in ran:
        assert t["timing"] == "measured:h100" and t["measured_ms"] == t["time_ms"]
        assert t["time_ms"] in times  # the answer's time, not the model's
    # the modelled session of the same task is untouched by the mode
    assert "measured_on" not in simulate_session(task)


def test_a_measured_failure_is_the_steps_verdict() -> None:
    task = _task()

    def answer(i: int, q: dict) -> Answer:
        if i == 0:  # the baseline runs; every later kernel faults on the device
            return _ok(q["key"], 0.05)
        return Answer(q["key"], task.op, "cuda", q["variant"], "fault", None, None, None,
                      "CUDA error: an illegal memory access was encountered", "fake")  # fmt: skip

    answers, _ = _fill(task, answer)
    s = simulate_session(task, oracle=StepOracle("h100", answers, strict=True))
    failed = [i for i, t in enumerate(s["trace"]) if t["status"] == "wrong_result"]
    assert failed
    fb = s["messages"][3 + 2 * failed[0]]["content"]
    assert "illegal memory access" in fb
    assert s["best"]["step"] in (0, None) or s["trace"][s["best"]["step"]]["status"] == "ok"


def test_an_ok_answer_without_a_time_cannot_carry_a_step() -> None:
    task = _task()
    o = StepOracle("h100", {}, strict=False)
    simulate_session(task, oracle=o)
    key = o.misses[0]["key"]
    lost = Answer(key, task.op, "cuda", "v", "ok", None, None, 1e-4, "", "fake")
    o2 = StepOracle("h100", {key: lost}, strict=False)
    simulate_session(task, oracle=o2)
    assert key in o2.unusable
    with pytest.raises(OracleMiss, match="no time"):
        simulate_session(task, oracle=StepOracle("h100", {key: lost}, strict=True))


def test_driver_rounds_complete_a_session_that_replays_identically(tmp_path: Path) -> None:
    """The device driver with the oracle's fake workers: rounds until a pass asks nothing,
    then a strict replay over the run's answers reproduces the digest it recorded."""
    out = tmp_path / "run"
    env = {**os.environ, "SIM_ORACLE_FAKE": "1", "SIM_ONLINE_CASE_TIMEOUT": "0.5"}
    cmd = [sys.executable, str(ROOT / "benchmarks/device/sim_online.py"), "run", "--out", str(out)]
    cmd += ["--gpu", "h100", "--ops", "rmsnorm", "--sessions", "1", "--max-open", "12"]
    cmd += ["--fresh", "--budget", "60", "--min-round", "1"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = list(csv.DictReader((out / "sessions.csv").open()))
    assert tuple(rows[0]) == ONLINE_FIELDS
    assert rows[0]["evidence"] == evidence_digest()  # what the device generated under
    done = [r for r in rows if r["end"] == "complete"]
    assert len(done) == 1 and int(done[0]["rounds"]) >= 2, p.stdout
    answers = {r["key"]: _answer(r) for r in csv.DictReader((out / "answers.csv").open())}
    listing = tmp_path / "online.csv"
    with listing.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(ONLINE_FIELDS))
        w.writeheader()
        w.writerows(done)
    tasks = {t.session_id: t for t in build_tasks()[0]}
    rep = replay_online("h100", tasks, listing, answers)
    assert rep.identical == 1 and not rep.failed
    assert session_digest(rep.sessions[0]) == done[0]["digest"]
    # a tampered digest is reported, never published
    done[0]["digest"] = "0" * 64
    with listing.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(ONLINE_FIELDS))
        w.writeheader()
        w.writerows(done)
    rep = replay_online("h100", tasks, listing, answers)
    assert rep.identical == 0 and "differs" in rep.failed[0][1]


def test_collect_keeps_a_device_time_where_the_evidence_has_only_a_check() -> None:
    """``collect``'s filter: the evidence file's answer wins a key, unless it is a check
    without a time and the device timed the case (a timed step stands only on a time)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "sim_online_driver", ROOT / "benchmarks/device/sim_online.py"
    )
    assert spec is not None and spec.loader is not None
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)
    evidence = {
        "timed": _ok("timed", 0.5),
        "check": Answer("check", "rmsnorm", "cuda", "v", "ok", None, None, 2e-4, "", "fake"),
    }
    rows = [
        {"key": "timed", "ms": "0.4"},  # the evidence's time stands
        {"key": "check", "ms": "0.3"},  # a time where the evidence has only a check: kept
        {"key": "check", "ms": ""},  # another untimed check adds nothing
        {"key": "fresh", "ms": ""},  # not in the evidence: kept as is
    ]
    kept = driver.tier_rows(rows, evidence)
    assert [(r["key"], r["ms"]) for r in kept] == [("check", "0.3"), ("fresh", "")]


def test_plan_counts_the_unlisted_tasks_by_open_questions() -> None:
    """``sim_online.py plan`` (GPU-less): what ``run --max-open N`` would take up, over the
    tasks no listed session holds; the cumulative count ends at the measurable tasks."""
    import re

    from dagster_project.sim.online import read_online

    cmd = [sys.executable, str(ROOT / "benchmarks/device/sim_online.py"), "plan"]
    cmd += ["--gpu", "h100", "--ops", "rmsnorm"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    head = re.match(r"h100: (\d+) unlisted tasks, (\d+) measurable", p.stdout)
    assert head, p.stdout
    listed = {r["session_id"] for r in read_online("h100")}
    tasks = [t for t in build_tasks()[0] if t.gpu == "h100" and t.op == "rmsnorm"]
    assert int(head[1]) == sum(t.session_id not in listed for t in tasks)
    cumulative = [int(m) for m in re.findall(r"open questions: +(\d+) tasks", p.stdout)]
    assert cumulative == sorted(cumulative) and cumulative[-1] == int(head[2])
    per_op = re.search(r"rmsnorm +\[([\d, ]*)\]", p.stdout)
    assert per_op and len(per_op[1].split(",")) == int(head[2])
