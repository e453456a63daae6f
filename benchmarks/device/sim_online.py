"""The online measured tier (issue 36): simulated Hopper sessions generated against the GPU,
every step that compiles answered by a real measurement the engineer then decides on.

Device (stdlib, torch, triton, numpy; the generator imports nothing else)::

    PYTHONUNBUFFERED=1 python3 benchmarks/device/sim_online.py run --out $OUT --budget 500

``run`` draws the card's tasks from the default kernelinfer task set and generates each
session with a provisional ``StepOracle`` over the answers shipped for the card: a step
whose source has no answer yet falls back to the model and its question is recorded, so
one pass yields every question of the session's current trajectory. The questions of all
pending sessions go to ``sim_oracle.py run`` as one batch (compile pool, checking workers,
one timing worker), the answers join the set, and the sessions are generated again; a
session is *complete* when a pass asks nothing new, and its digest (sha256 of the session
dict) is recorded. Sessions closest to complete go first (fewest open questions), so a run
cut by its budget leaves the most complete sessions. A question the device could not
answer twice, or an ok answer without a time, drops the sessions that need it.

Writes ``$OUT/answers.csv`` (rows in the shipped answer format, every round's) and
``$OUT/sessions.csv`` (one row per session tried: complete or not, digest, rounds).

Here::

    .venv/bin/python benchmarks/device/sim_online.py collect --run <files_at> --gpu h100

merges the answers into ``dagster_project/sim/data/measured/<gpu>_online_answers.csv`` (kept
apart from ``<gpu>_answers.csv``, the generator's evidence) and lists the complete sessions
that replay identically here in ``<gpu>_online.csv``; a GPU-less build replays them with a
strict oracle (``dagster_project.sim.online``) and checks each digest. After a change to
the generator, ``relist --gpu h100`` re-checks the list: a session that still completes on
the shipped answers gets its new digest, one that asks something new is dropped.

``plan --gpu h100`` (GPU-less) counts the card's unlisted tasks by the open questions they
start with on the shipped answers: what ``run --max-open N`` would take up.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "device"))

#: A question asked this many times without an answer drops the sessions that need it.
MAX_ASKS = 2


def _card() -> str:
    if os.environ.get("SIM_ORACLE_FAKE"):
        return os.environ.get("SIM_ONLINE_GPU", "h100")
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout
    return "h200" if "H200" in smi else "h100"


def _pass(task: Any, answers: dict[str, Any], gpu: str) -> tuple[dict[str, Any], Any]:
    """One provisional generation of ``task``: (session, oracle with its misses)."""
    from dagster_project.sim.kernelinfer import simulate_session
    from dagster_project.sim.oracle import StepOracle

    oracle = StepOracle(gpu, answers, strict=False)
    return simulate_session(task, oracle=oracle), oracle


def _ask(
    qs: list[dict[str, Any]], rdir: Path, first_id: int, gpu: str, budget: float, jobs: int
) -> Path:
    """Write one round's questions and measure them with ``sim_oracle.py run``."""
    if rdir.exists():
        shutil.rmtree(rdir)
    (rdir / "src").mkdir(parents=True)
    cases = []
    for i, q in enumerate(qs):
        q = dict(q)
        code = q.pop("code")
        cid = first_id + i
        rel = f"src/{cid:06d}_{q['op']}.{'cu' if q['impl'] == 'cuda' else 'py'}"
        (rdir / rel).write_text(code)
        cases.append({**q, "id": cid, "file": rel, "gpu": gpu, "uses": q.pop("uses")})
    (rdir / "manifest.json").write_text(json.dumps(cases))
    cmd = [sys.executable, str(ROOT / "benchmarks" / "device" / "sim_oracle.py"), "run"]
    cmd += ["--src", str(rdir), "--out", str(rdir / "out"), "--budget", f"{budget:.0f}"]
    cmd += ["--verify-share", "0.7", "--workers", "4", "--compile-jobs", str(jobs)]
    cmd += ["--case-timeout", os.environ.get("SIM_ONLINE_CASE_TIMEOUT", "30")]
    with (rdir / "run.log").open("w") as log:
        subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=budget + 60, check=False)
    return rdir / "out"


def _answers_of(rdir: Path, gpu: str) -> list[dict[str, Any]]:
    """The round's answer rows (``sim_oracle.collect``'s rules, without touching the
    shipped file): harness failures and unreached cases give none."""
    import sim_oracle as so

    out = rdir / "out"
    if not (out / "stamps.json").exists():
        return []
    cases = [{**c, "_root": str(rdir)} for c in json.loads((rdir / "manifest.json").read_text())]
    stamps = json.loads((out / "stamps.json").read_text())
    comp = {r["id"]: r for r in so._records(out / "compile.jsonl")}
    res = {r["id"]: r for r in so._records(out / "verify.jsonl")}
    tim = {r["id"]: r for r in so._records(out / "timing.jsonl")}
    rows = []
    for c in cases:
        r, cp, t = res.get(c["id"]), comp.get(c["id"], {}), tim.get(c["id"], {})
        status = so._status(c, r, cp)
        if status is None:
            continue
        if status == "ok" and t and "ms" not in t and not so._timing_harness_failure(t):
            status = str(t.get("status", "error"))
        rows.append(so._row(c, r, cp, t, status, stamps, gpu))
    return rows


def _digest(session: dict[str, Any]) -> str:
    from dagster_project.sim.online import session_digest

    return session_digest(session)


def _generate(
    pending: list[Any],
    answers: dict[str, Any],
    gpu: str,
    state: dict[str, dict[str, Any]],
    asks: dict[str, int],
) -> tuple[list[Any], dict[str, dict[str, Any]]]:
    """One pass over the pending sessions: (still pending, their open questions by key);
    complete and unanswerable sessions are marked in ``state``."""
    qs: dict[str, dict[str, Any]] = {}
    still = []
    for t in pending:
        s, o = _pass(t, answers, gpu)
        st = state.setdefault(t.session_id, {"task": t, "rounds": 0})
        st["rounds"] += 1
        keys = [q["key"] for q in o.misses]
        if o.unusable or any(asks.get(k, 0) >= MAX_ASKS for k in keys):
            st["end"] = "unanswerable"
            continue
        if not o.misses:
            st.update(end="complete", session=s)
            continue
        still.append(t)
        for q in o.misses:
            qs.setdefault(q["key"], {**q, "uses": []})["uses"].append([t.session_id, -1, "online"])
    return still, qs


def _ranked(
    gpu: str, answers: dict[str, Any], ops: str = "", fresh: bool = False
) -> tuple[list[Any], list[tuple[int, str, Any]]]:
    """The card's tasks not yet listed (all with ``fresh``: a new toolchain asks
    everything anew) and the measurable ones as (open questions on ``answers``, session
    id, task), closest to complete first."""
    from dagster_project.sim.kernelinfer import build_tasks
    from dagster_project.sim.online import read_online

    shipped = set() if fresh else {r["session_id"] for r in read_online(gpu)}
    tasks = [t for t in build_tasks()[0] if t.gpu == gpu and t.session_id not in shipped]
    if ops:
        tasks = [t for t in tasks if t.op in ops.split(",")]
    ranked = []
    for t in tasks:
        _s, o = _pass(t, answers, gpu)
        if not o.unusable:
            ranked.append((len({q["key"] for q in o.misses}), t.session_id, t))
    ranked.sort(key=lambda r: (r[0], r[1]))
    return tasks, ranked


def plan(gpu: str, ops: str = "") -> None:
    """GPU-less: how many of the card's unlisted tasks start with how many open questions
    on the shipped answers (what ``run --max-open N`` would take up), per op too."""
    from dagster_project.sim.oracle import tier_answers

    tasks, ranked = _ranked(gpu, dict(tier_answers(gpu)), ops)
    counts = Counter(n for n, _sid, _t in ranked)
    print(f"{gpu}: {len(tasks)} unlisted tasks, {len(ranked)} measurable")
    total = 0
    for n in sorted(counts):
        total += counts[n]
        print(f"  <= {n:2d} open questions: {total:3d} tasks ({counts[n]} with {n})")
    per_op: dict[str, list[int]] = {}
    for n, _sid, t in ranked:
        per_op.setdefault(t.op, []).append(n)
    for op, ns in sorted(per_op.items()):
        print(f"  {op:22s} {sorted(ns)}")


def run(args: argparse.Namespace) -> None:
    from dagster_project.sim.oracle import ANSWER_FIELDS, _answer, tier_answers

    t0 = time.time()
    gpu = args.gpu or _card()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    answers = {} if args.fresh else dict(tier_answers(gpu))
    from dagster_project.sim.oracle import evidence_digest

    tasks, ranked = _ranked(gpu, answers, args.ops, args.fresh)
    pending = [t for n, _sid, t in ranked if n <= args.max_open][: args.sessions]
    print(
        f"{gpu}: {len(tasks)} tasks, {len(ranked)} measurable, {len(pending)} pending "
        f"(<= {args.max_open} open questions); {len(answers)} shipped answers "
        f"(evidence {evidence_digest()})",
        flush=True,
    )
    asks: dict[str, int] = {}
    state: dict[str, dict[str, Any]] = {}
    answers_csv = out / "answers.csv"
    with answers_csv.open("w", newline="") as fh:
        csv.DictWriter(fh, fieldnames=list(ANSWER_FIELDS)).writeheader()
    next_id, rnd = 0, 0
    while pending:
        left = args.budget - (time.time() - t0)
        pending, qs = _generate(pending, answers, gpu, state, asks)
        done = sum(1 for s in state.values() if s.get("end") == "complete")
        print(
            f"[{time.time() - t0:5.0f}s] round {rnd}: {done} complete, {len(pending)} pending, "
            f"{len(qs)} questions",
            flush=True,
        )
        if not pending or left < args.min_round:
            break
        batch = list(qs.values())
        for q in batch:
            asks[q["key"]] = asks.get(q["key"], 0) + 1
        rdir = out / f"round{rnd:02d}"
        _ask(batch, rdir, next_id, gpu, left - 15, args.compile_jobs)
        next_id += len(batch)
        rows = _answers_of(rdir, gpu)
        with answers_csv.open("a", newline="") as fh:
            csv.DictWriter(fh, fieldnames=list(ANSWER_FIELDS)).writerows(rows)
        for r in rows:
            answers[r["key"]] = _answer({k: str(v) for k, v in r.items()})
        print(f"[{time.time() - t0:5.0f}s] round {rnd}: {len(rows)} answers", flush=True)
        shutil.rmtree(rdir / "src", ignore_errors=True)
        rnd += 1
    _write_sessions(out / "sessions.csv", state, gpu)


def _write_sessions(path: Path, state: dict[str, dict[str, Any]], gpu: str) -> None:
    from dagster_project.sim import GENERATOR_VERSION
    from dagster_project.sim.online import ONLINE_FIELDS
    from dagster_project.sim.oracle import evidence_digest

    evidence = evidence_digest()  # the rung evidence these sessions were generated under
    rows = []
    for sid, st in sorted(state.items()):
        s = st.get("session")
        rows.append(
            {
                "session_id": sid,
                "gpu": gpu,
                "op": st["task"].op,
                "impl": st["task"].impl,
                "end": st.get("end", "cut"),
                "rounds": st["rounds"],
                "num_steps": s["num_steps"] if s else "",
                "best_speedup": (s["best"]["speedup"] or "") if s else "",
                "digest": _digest(s) if s else "",
                "generator_version": GENERATOR_VERSION,
                "evidence": evidence,
            }
        )
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(ONLINE_FIELDS))
        w.writeheader()
        w.writerows(rows)
    done = [r for r in rows if r["end"] == "complete"]
    print(
        f"sessions: {len(done)} complete over {len({r['op'] for r in done})} ops; "
        f"{sum(r['end'] == 'unanswerable' for r in rows)} unanswerable, "
        f"{sum(r['end'] == 'cut' for r in rows)} cut by the budget"
    )


def collect(run_dir: Path, gpu: str) -> None:
    """Merge a run's answers into the tier's answer file, replay every session the run
    completed with a strict oracle here, and list those whose digest matches the device's
    (with the evidence digest they replayed under)."""
    from dagster_project.sim import GENERATOR_VERSION
    from dagster_project.sim.kernelinfer import build_tasks
    from dagster_project.sim.online import ONLINE_FIELDS, online_path, replay_online
    from dagster_project.sim.oracle import (
        ANSWER_FIELDS,
        evidence_digest,
        online_answers_path,
        read_answers,
        shipped_answers,
        tier_answers,
    )

    new = list(csv.DictReader((run_dir / "answers.csv").open(newline="")))
    want = {"h100": "H100", "h200": "H200"}[gpu]
    bad = [r for r in new if want not in r["device"]]
    if bad:
        raise SystemExit(f"{len(bad)} answers were measured on {bad[0]['device']!r}, not an {want}")
    path = online_answers_path(gpu)
    evidence = shipped_answers(gpu)
    new = tier_rows(new, evidence)
    keys = {r["key"] for r in new}
    old = [r for r in csv.DictReader(path.open(newline=""))] if path.exists() else []
    old = [r for r in old if r["key"] not in keys]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(ANSWER_FIELDS))
        w.writeheader()
        w.writerows(sorted(old + new, key=lambda r: r["key"]))
    tier_answers.cache_clear()
    answers = {**evidence, **read_answers(path)}
    done = [
        {**r, "evidence": evidence_digest(), "generator_version": GENERATOR_VERSION}
        for r in csv.DictReader((run_dir / "sessions.csv").open(newline=""))
        if r["end"] == "complete" and r["generator_version"] == GENERATOR_VERSION
    ]
    tmp = run_dir / "complete.csv"
    with tmp.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(ONLINE_FIELDS))
        w.writeheader()
        w.writerows(done)
    rep = replay_online(gpu, {t.session_id: t for t in build_tasks()[0]}, tmp, answers)
    same = {s["session_id"] for s in rep.sessions}
    for sid, why in rep.failed:
        print(f"  not listed: {sid}: {why}")
    opath = online_path(gpu)
    prev = list(csv.DictReader(opath.open(newline=""))) if opath.exists() else []
    merged = [r for r in prev if r["session_id"] not in same]
    merged += [r for r in done if r["session_id"] in same]
    with opath.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(ONLINE_FIELDS))
        w.writeheader()
        w.writerows(sorted(merged, key=lambda r: r["session_id"]))
    print(
        f"{len(old) + len(new)} answers in {path.name} ({len(new)} from this run); "
        f"{len(same)} of {len(done)} complete sessions replay identically here; "
        f"{len(merged)} online sessions in {opath.name}"
    )


def tier_rows(new: list[dict[str, str]], evidence: dict[str, Any]) -> list[dict[str, str]]:
    """The device's answer rows that join the tier's answer file: those the evidence file
    does not answer, and those it answers with a check but no time where the device timed
    the case (a step that needs a time asked for it; dropping that time left such sessions
    unreplayable: stop 42's run reported "its answer has no time")."""
    return [
        r
        for r in new
        if r["key"] not in evidence or (evidence[r["key"]].ms is None and bool(r["ms"]))
    ]


def relist(gpu: str, from_run: Path | None = None) -> None:
    """Re-check every listed session after a generator change: regenerate it with a strict
    oracle over the tier's answers; one that still completes is, step for step, measured
    (the device answered every source it now writes), so it is listed with its new digest;
    one that asks a question the answers lack is dropped with its reason. ``from_run`` also
    tries every session a device run tried (its ``sessions.csv``, complete or not: a run
    generated under an older generator, or cut by its budget, may leave sessions that the
    current generator completes on the collected answers)."""
    from dagster_project.sim import GENERATOR_VERSION
    from dagster_project.sim.kernelinfer import build_tasks, simulate_session
    from dagster_project.sim.online import ONLINE_FIELDS, online_path, read_online, session_digest
    from dagster_project.sim.oracle import OracleMiss, StepOracle, evidence_digest, tier_answers

    tasks = {t.session_id: t for t in build_tasks()[0]}
    answers = tier_answers(gpu)
    kept, changed = [], 0
    rows = list(read_online(gpu))
    if from_run is not None:
        listed = {r["session_id"] for r in rows}
        for r in csv.DictReader((from_run / "sessions.csv").open(newline="")):
            if r["session_id"] not in listed:
                rows.append({k: r.get(k, "") for k in ONLINE_FIELDS})
                listed.add(r["session_id"])
    for row in rows:
        task = tasks.get(row["session_id"])
        if task is None:
            print(f"  dropped {row['session_id']}: not in the current task draw")
            continue
        try:
            sess = simulate_session(task, oracle=StepOracle(gpu, answers, strict=True))
        except OracleMiss as exc:
            print(f"  dropped {row['session_id']}: {exc}")
            continue
        digest = session_digest(sess)
        changed += digest != row["digest"]
        kept.append(
            {
                **row,
                "num_steps": sess["num_steps"],
                "best_speedup": sess["best"]["speedup"] or "",
                "digest": digest,
                "generator_version": GENERATOR_VERSION,
                "evidence": evidence_digest(),
            }
        )
    with online_path(gpu).open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(ONLINE_FIELDS))
        w.writeheader()
        w.writerows(kept)
    print(f"{len(kept)} sessions listed ({changed} with a new digest)")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", default=os.environ.get("OUT", "online_out"))
    r.add_argument("--gpu", default=None, help="default: the card nvidia-smi names")
    r.add_argument("--budget", type=float, default=500.0)
    r.add_argument("--sessions", type=int, default=400, help="at most this many pending")
    r.add_argument("--max-open", type=int, default=6, help="open questions at the start")
    r.add_argument("--min-round", type=float, default=25.0, help="seconds a round needs")
    r.add_argument("--compile-jobs", type=int, default=14)
    r.add_argument("--ops", default="", help="comma-separated ops (default: all)")
    r.add_argument("--fresh", action="store_true", help="ignore shipped answers and sessions")
    c = sub.add_parser("collect")
    c.add_argument("--run", type=Path, required=True)
    c.add_argument("--gpu", default="h100")
    pl = sub.add_parser("plan", help="GPU-less: open questions per unlisted task")
    pl.add_argument("--gpu", default="h100")
    pl.add_argument("--ops", default="", help="comma-separated ops (default: all)")
    rl = sub.add_parser("relist")
    rl.add_argument("--gpu", default="h100")
    rl.add_argument("--from-run", default="", help="a run folder whose tried sessions to add")
    a = ap.parse_args(argv)
    if a.cmd == "run":
        run(a)
    elif a.cmd == "plan":
        plan(a.gpu, a.ops)
    elif a.cmd == "relist":
        relist(a.gpu, Path(a.from_run) if a.from_run else None)
    else:
        collect(a.run, a.gpu)


if __name__ == "__main__":
    main()
