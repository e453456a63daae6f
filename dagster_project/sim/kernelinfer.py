"""kernelinfer: long-horizon single-agent optimisation sessions in the card's row format.

Public API (used by the Dagster assets; no dagster import here):

* ``build_tasks`` → (session tasks, held-out task specs), deterministic in ``seed``;
* ``n_shards`` / ``generate_shard`` → card-format session dicts, 100 per shard, each a
  pure function of (task, seed, ``GENERATOR_VERSION``) so shards can be built in any
  order or process with byte-identical results;
* ``session_frames`` / ``task_frame`` / ``holdout_frame`` → polars tables;
* ``check_session`` → the mechanical invariants of a session (feature gating, smem caps,
  best/baseline/speedup consistency, monotone timestamps, code-only assistant turns, and
  since 1.7.0 causal errors: every mistake lies in lines its step changed, see
  ``error_causes``; no configuration that overflowed shared memory is submitted again).
"""

from __future__ import annotations

import ast
import json
import math
import re
import symtable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..settings import KERNELINFER_DEFAULT_SEED
from . import GENERATOR_VERSION
from .agent import AgentProfile, Engineer, StepRecord
from .env import (
    COMPILE_ERROR,
    OK,
    UNVERIFIED,
    WRONG_RESULT,
    KernelEnv,
    mistake_lines,
    touched_lines,
)
from .feedback import (
    MISMATCH,
    fmt_ms,
    hms,
    ok_result,
    rebench_result,
    resource_line,
    stamp,
    unverified_line,
)
from .hardware import FEATURE_INSTRUCTION, compile_command, get_gpu, nvcc_arch_flag
from .kernels import plan
from .ops import get_op, shape_str
from .oracle import StepOracle
from .rng import stream
from .tasks import OBJECTIVE, TaskSpec, draw_split
from .timing import time_floor_ms
from .variants import features_used, get_variant
from .verification import step_status

if TYPE_CHECKING:  # the tables are built here only; generating a session needs no polars
    import polars as pl

DEFAULT_SEED = KERNELINFER_DEFAULT_SEED
DEFAULT_SESSIONS = 1899
DEFAULT_HOLDOUT = 195
SHARD_SIZE = 100
NAMESPACE = "kernelinfer"

#: The card's published figures, for side-by-side reporting.
CARD_STATS: dict[str, float] = {
    "sessions": 1899,
    "steps": 179_500,
    "mean_steps": 94.6,
    "mean_hours": 2.18,
    "min_hours": 1.03,
    "max_hours": 4.93,
    "mean_speedup": 13.4,
    "ok_share": 151.8 / 179.5,
    "compile_error_share": 22.4 / 179.5,
    "wrong_result_share": 5.3 / 179.5,
    "holdout": 195,
}

SYSTEM_PROMPT = {
    "cuda": (
        "You are a GPU kernel optimization agent for LLM inference. Each turn you write one "
        'complete CUDA source file (kernels plus the extern "C" launch wrapper) for the task. The '
        "harness compiles it with nvcc, checks it against an fp32 reference and benchmarks it, "
        "then replies with a RESULT line. Use the feedback to fix errors and make the kernel "
        "faster. Reply with the full kernel source only: no prose, no explanations, no markdown."
    ),
    "triton": (
        "You are a GPU kernel optimization agent for LLM inference. Each turn you write one "
        "complete Python module with the @triton.jit kernel(s) and the launch function for the "
        "task. The harness compiles it with Triton, checks it against an fp32 reference and "
        "benchmarks it, then replies with a RESULT line. Use the feedback to fix errors and make "
        "the kernel faster. Reply with the full kernel source only: no prose, no explanations, no "
        "markdown."
    ),
}

#: Typical session length per family (steps); a session draws around this.
_FAMILY_STEPS = {
    "gemm": 104,
    "attn_prefill": 104,
    "attn_decode": 100,
    "gemv": 90,
    "sampling": 92,
    "scan": 96,
    "rowwise": 86,
    "elementwise": 84,
}


# --------------------------------------------------------------------------------------
# tasks and shards
# --------------------------------------------------------------------------------------


@lru_cache(maxsize=8)
def _tasks_cached(
    seed: int, n_sessions: int, n_holdout: int
) -> tuple[tuple[TaskSpec, ...], tuple[TaskSpec, ...]]:
    sessions, holdout = draw_split(seed, n_sessions, n_holdout, namespace=NAMESPACE)
    return tuple(sessions), tuple(holdout)


def build_tasks(
    seed: int = DEFAULT_SEED, n_sessions: int = DEFAULT_SESSIONS, n_holdout: int = DEFAULT_HOLDOUT
) -> tuple[list[TaskSpec], list[TaskSpec]]:
    """(session tasks in shard order, held-out task specs); combos unique across both."""
    s, h = _tasks_cached(seed, n_sessions, n_holdout)
    return list(s), list(h)


def n_shards(n_sessions: int = DEFAULT_SESSIONS) -> int:
    return max(1, math.ceil(n_sessions / SHARD_SIZE))


def shard_tasks(
    shard: int,
    seed: int = DEFAULT_SEED,
    n_sessions: int = DEFAULT_SESSIONS,
    n_holdout: int = DEFAULT_HOLDOUT,
) -> list[TaskSpec]:
    """The session tasks of one shard (positions shard*100 .. shard*100+99)."""
    if not 0 <= shard < n_shards(n_sessions):
        raise ValueError(f"shard {shard} out of range for {n_sessions} sessions")
    tasks, _ = build_tasks(seed, n_sessions, n_holdout)
    return tasks[shard * SHARD_SIZE : (shard + 1) * SHARD_SIZE]


def generate_shard(
    shard: int,
    seed: int = DEFAULT_SEED,
    n_sessions: int = DEFAULT_SESSIONS,
    n_holdout: int = DEFAULT_HOLDOUT,
) -> list[dict[str, Any]]:
    """Card-format session dicts of one shard (≤ ``SHARD_SIZE`` sessions).

    A pure function of (shard's tasks, seed, GENERATOR_VERSION): no state is shared
    between sessions, so shards can be produced in any order and any process.
    """
    return [simulate_session(t, seed) for t in shard_tasks(shard, seed, n_sessions, n_holdout)]


# --------------------------------------------------------------------------------------
# one session
# --------------------------------------------------------------------------------------


def _round4(x: float) -> float:
    return float(f"{x:.4g}")


#: The step budget over the family's typical length: since 1.7.0 the engineer stops at a
#: plateau, so the budget is a cap that many sessions do not reach.
_BUDGET = 1.95


def _n_steps(task: TaskSpec, rng: Any) -> int:
    base = _FAMILY_STEPS[get_op(task.op).family] * (0.94 if task.impl == "triton" else 1.0)
    n = base * rng.lognormvariate(0.0, 0.38) * 0.935 * _BUDGET
    return int(min(200, max(30, round(n))))


def task_prompt(task: TaskSpec) -> str:
    """The first user turn: the task statement."""
    gpu = get_gpu(task.gpu)
    op = task.spec
    if task.impl == "cuda":
        toolchain = f"CUDA C++ ({compile_command(gpu.arch).removesuffix(' -c candidate.cu')})"
        entry = (
            f'extern "C" cudaError_t launch_{task.op}(..., cudaStream_t stream) taking device '
            "pointers in signature order"
        )
    else:
        toolchain = "Triton (Python, torch tensors on the device)"
        entry = (
            f"def {task.op}(...) taking torch tensors in signature order and returning the "
            "output(s)"
        )
    shape = ", ".join(f"{k}={v}" for k, v in task.shape.items())
    return "\n".join(
        [
            f"Task: make `{task.op}` as fast as possible on this GPU.",
            f"GPU: {gpu.name} ({gpu.arch}, {gpu.sms} SMs, {gpu.bw_tbs:g} TB/s {gpu.memory_kind}, "
            f"{gpu.smem_cap_kb} KB shared memory per block)",
            f"Implementation: {toolchain}",
            f"Signature: {task.signature}",
            f"Math: {op.desc}",
            f"Shape: {shape}",
            f"dtype: {task.dtype}",
            f"Objective: {OBJECTIVE} (median of timed runs after warm-up); outputs must match the "
            "fp32 reference within atol 1e-2, rtol 1e-2.",
            f"Entry point: {entry}.",
            "Start with a straightforward correct kernel; you will get compile, correctness and "
            "timing feedback after every submission. Reply with the complete source file only.",
        ]
    )


def _pace(records: list[StepRecord], rng: Any) -> None:
    """Scale thinking time so the session lasts a plausible 1-5 hours, then stamp steps."""
    fixed = sum(r.compile_s + r.bench_s for r in records)
    think = sum(r.think_s for r in records)
    pace = rng.lognormvariate(0.0, 0.22) * 0.83
    total = fixed + think * pace
    lo, hi = 1.03 * 3600, 4.93 * 3600
    if total < lo:
        target = lo + rng.uniform(0.0, 0.35) * 3600
        pace = max(0.05, (target - fixed) / max(think, 1.0))
    elif total > hi:
        target = hi - rng.uniform(0.0, 0.45) * 3600
        pace = max(0.05, (target - fixed) / max(think, 1.0))
    t = 0.0
    for r in records:
        t += r.think_s * pace + r.compile_s + r.bench_s
        r.t_elapsed_s = t


def _feedback(
    rec: StepRecord,
    baseline_ms: float,
    best_before: tuple[float, int | None],
    impl: str,
    rng: Any,
    kept: bool,
    arch: str,
    is_best: bool,
) -> str:
    st = stamp(rec.t_elapsed_s)
    sub = rec.sub
    if sub.status == COMPILE_ERROR:
        return f"{st} RESULT compile_error\n{sub.detail.rstrip()}"
    if sub.status == WRONG_RESULT:
        return f"{st} RESULT wrong_result\n{sub.detail.rstrip()}"
    pred = sub.prediction
    assert pred is not None and sub.time_ms is not None
    kp = pred.plan
    err = 10 ** rng.uniform(-4.3, -2.4)
    res = resource_line(impl, pred, rec.params, kp)
    # an ok whose rung has no execution evidence on this family says so instead of "correct"
    check = None if sub.verified else unverified_line(rec.tag, arch)
    runs = None
    if "measured_runs" in sub.extra:
        # the online tier's step: the device's own error figure, check and repeats
        rel = sub.extra.get("measured_rel_err")
        rel_text = f"{rel:.1e}" if isinstance(rel, float) else "n/a"
        check = f"correct: max_rel_err {rel_text} ({sub.extra['measured_check']})"
        n = sub.extra["measured_runs"]
        runs = f"{n} {sub.extra['measured_how']}s" if isinstance(n, int) else None
    label = "ok" if sub.verified else UNVERIFIED
    if rec.kind == "baseline":
        body = ok_result(
            sub.time_ms, sub.spread_pct, runs or 200, None, None, None, False, err, res, check
        )
        return f"{st} RESULT {label} (baseline)\n{body}"
    best_ms, best_step = best_before
    if rec.kind == "rebench" and best_step is not None and is_best and baseline_ms:
        body = rebench_result(
            sub.time_ms, sub.spread_pct, runs or 1000, baseline_ms, best_ms, best_step, rec.tag
        )
        return f"{st} RESULT rebench\n{body}"
    body = ok_result(
        sub.time_ms,
        sub.spread_pct,
        runs or (1000 if rec.kind == "rebench" else 200),
        baseline_ms,
        best_ms if best_step is not None else None,
        best_step,
        kept,
        err,
        res,
        check,
        no_baseline=not baseline_ms,
    )
    return f"{st} RESULT {label}\n{body}"


def simulate_session(
    task: TaskSpec,
    seed: int = DEFAULT_SEED,
    profile: AgentProfile | None = None,
    oracle: StepOracle | None = None,
) -> dict[str, Any]:
    """Run one session and return its card-format dict. With ``oracle`` every step that
    compiles is answered by the device's measurement of its exact source (the online tier,
    issue 36): the engineer decides on measured verdicts and times, each ran step's trace
    says ``timing = measured:<gpu>``, and the session says ``measured_on``."""
    rng = stream(NAMESPACE, "session", seed, task.task_id, task.seed)
    env = KernelEnv(task, oracle)
    n = _n_steps(task, rng)
    agent = Engineer(env, rng, n, profile)
    records = agent.run()
    _pace(records, stream(NAMESPACE, "pace", seed, task.task_id))
    fb_rng = stream(NAMESPACE, "feedback", seed, task.task_id)

    # rounded times are what the dataset reports; best/speedup are derived from them. Only
    # a step whose rung is verified correct on this arch family can be (or stay) the best.
    baseline_ms = _round4(records[0].sub.time_ms or 0.0)
    # a baseline that did not run (only ever measured: the online tier's device can fail
    # the task's own first kernel) has no time, and nothing has a speedup over it
    base_ran = records[0].status == OK and records[0].sub.time_ms is not None
    base_time: float | None = baseline_ms if base_ran or oracle is None else None
    trace: list[dict[str, Any]] = []
    messages: list[dict[str, str]] = [
        {"role": "system", "content": SYSTEM_PROMPT[task.impl]},
        {"role": "user", "content": task_prompt(task)},
    ]
    base_ok = records[0].status == OK and records[0].sub.verified
    best_ms: float = baseline_ms if base_ok else math.inf
    best_step: int | None = 0 if base_ok else None
    best_key: tuple[str, str] | None = (records[0].tag, "") if base_ok else None
    arch = get_gpu(task.gpu).arch
    for rec in records:
        key = (rec.tag, json.dumps(rec.params, sort_keys=True) if rec.step else "")
        ran = rec.status == OK and rec.sub.time_ms is not None
        t = _round4(rec.sub.time_ms) if ran and rec.sub.time_ms is not None else None
        verified = ran and rec.sub.verified
        status = rec.status if rec.status != OK else (OK if verified else UNVERIFIED)
        kept = bool(
            rec.step > 0 and rec.kind != "rebench" and verified and t is not None and t < best_ms
        )
        if rec.step == 0:
            kept = verified
        is_best = verified and key == best_key
        feedback = _feedback(
            rec, baseline_ms, (best_ms, best_step), task.impl, fb_rng, kept, arch, is_best
        )
        if kept and rec.step > 0 and t is not None:
            best_ms, best_step, best_key = t, rec.step, key
        rec.kept = kept
        trace.append(
            {
                "step": rec.step,
                "tag": rec.tag,
                "kind": rec.kind,
                "params": dict(rec.params) if rec.kind != "baseline" else {},
                "status": status,
                "time_ms": t,
                "kept": kept,
            }
        )
        if oracle is not None:
            trace[-1]["timing"] = f"measured:{oracle.gpu}" if t is not None else None
            trace[-1]["measured_ms"] = t
        messages.append({"role": "assistant", "content": rec.sub.code})
        messages.append({"role": "user", "content": feedback})
    elapsed = int(round(records[-1].t_elapsed_s))
    n_kept = sum(1 for r in trace[1:] if r["kept"])
    rebench = sum(1 for r in trace if r["kind"] == "rebench")
    errors = sum(1 for r in trace if r["status"] not in (OK, UNVERIFIED))
    reverted = sum(1 for r in trace[1:] if not r["kept"] and r["kind"] != "rebench")
    out = {
        "session_id": task.session_id,
        "op": task.op,
        "impl": task.impl,
        "gpu": task.gpu,
        "arch": task.arch,
        "dtype": task.dtype,
        "shape": task.shape,
        "signature": task.signature,
        "desc": task.desc,
        "objective": OBJECTIVE,
        "baseline_ms": base_time,
        "best": (
            {
                "step": best_step,
                "time_ms": best_ms,
                "speedup": round(baseline_ms / best_ms, 2) if base_time is not None else None,
            }
            if best_step is not None
            else {"step": None, "time_ms": None, "speedup": None}
        ),
        "attempts": {"kept": n_kept, "reverted": reverted, "errors": errors, "rebench": rebench},
        "elapsed_s": elapsed,
        "elapsed_hms": hms(elapsed),
        "num_steps": len(trace),
        "trace": trace,
        "messages": messages,
    }
    if oracle is not None:
        out["measured_on"] = oracle.gpu
    return out


# --------------------------------------------------------------------------------------
# frames
# --------------------------------------------------------------------------------------

_STAMP = re.compile(r"^\[t\+(\d+):(\d{2}):(\d{2})\] RESULT")

#: Session columns of the label with its evidence (``label_columns``; null when not attached).
_LABEL_COLUMNS = (
    "speedup_label",
    "speedup_provenance",
    "speedup_unknown_reason",
    "speedup_error_scale",
)


@lru_cache(maxsize=1)
def _dtypes() -> dict[str, Any]:
    """The nested column types of the tables. Built on first use, so that generating a
    session imports no polars (the device's online tier runs the generator where polars is
    not installed: ``benchmarks/device/sim_online.py``)."""
    import polars as pl

    trace_fields = {
        "step": pl.Int64,
        "tag": pl.String,
        "kind": pl.String,
        "params": pl.String,
        "status": pl.String,
        "time_ms": pl.Float64,
        "kept": pl.Boolean,
        # issue 36 (36p): whether the step's time was measured on its GPU, and that time
        "timing": pl.String,
        "measured_ms": pl.Float64,
    }
    return {
        "trace_fields": trace_fields,  # a session's trace entry; a steps-table row's columns
        "trace": pl.List(pl.Struct(trace_fields)),
        "labels": {
            "speedup_label": pl.Float64,
            "speedup_provenance": pl.String,
            "speedup_unknown_reason": pl.String,
            "speedup_error_scale": pl.Float64,
        },
        "messages": pl.List(pl.Struct({"role": pl.String, "content": pl.String})),
        "task": {
            "task_id": pl.String,
            "op": pl.String,
            "impl": pl.String,
            "gpu": pl.String,
            "arch": pl.String,
            "dtype": pl.String,
            "shape": pl.String,
            "signature": pl.String,
            "desc": pl.String,
            "objective": pl.String,
        },
    }


def _stamp_seconds(text: str) -> int | None:
    m = _STAMP.match(text)
    if not m:
        return None
    h, mi, s = (int(x) for x in m.groups())
    return h * 3600 + mi * 60 + s


@lru_cache(maxsize=1)
def _default_shard_index() -> dict[str, int]:
    tasks, _ = build_tasks()
    return {t.session_id: i // SHARD_SIZE for i, t in enumerate(tasks)}


def session_frames(
    sessions: list[dict[str, Any]], shard: int | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(sessions table, steps table) for a list of session dicts.

    ``shard`` fills the ``shard`` column; when omitted it is looked up in the default
    build (-1 for sessions outside it). The label columns and each step's ``timing`` /
    ``measured_ms`` are those ``label_columns.attach_labels`` wrote (null when it did not).
    """
    import polars as pl

    srows: list[dict[str, Any]] = []
    steps: dict[str, list[Any]] = {
        k: []
        for k in (
            "session_id",
            "step",
            "tag",
            "kind",
            "params",
            "status",
            "time_ms",
            "kept",
            "timing",
            "measured_ms",
            "t_elapsed_s",
            "code",
            "feedback",
        )
    }
    for s in sessions:
        sh = shard if shard is not None else _default_shard_index().get(s["session_id"], -1)
        trace = [
            {
                **t,
                "params": json.dumps(t["params"], sort_keys=True),
                "timing": t.get("timing"),
                "measured_ms": t.get("measured_ms"),
            }
            for t in s["trace"]
        ]
        srows.append(
            {
                "session_id": s["session_id"],
                "op": s["op"],
                "impl": s["impl"],
                "gpu": s["gpu"],
                "arch": s["arch"],
                "dtype": s["dtype"],
                "shape": json.dumps(s["shape"]),
                "signature": s["signature"],
                "desc": s["desc"],
                "objective": s["objective"],
                "baseline_ms": s["baseline_ms"],
                "best": s["best"],
                **{k: s.get(k) for k in _LABEL_COLUMNS},
                "attempts": s["attempts"],
                "elapsed_s": s["elapsed_s"],
                "elapsed_hms": s["elapsed_hms"],
                "num_steps": s["num_steps"],
                "trace": trace,
                "messages": s["messages"],
                "shard": sh,
            }
        )
        msgs = s["messages"]
        for t in s["trace"]:
            i = t["step"]
            fb = msgs[3 + 2 * i]["content"]
            steps["session_id"].append(s["session_id"])
            steps["step"].append(i)
            steps["tag"].append(t["tag"])
            steps["kind"].append(t["kind"])
            steps["params"].append(json.dumps(t["params"], sort_keys=True))
            steps["status"].append(t["status"])
            steps["time_ms"].append(t["time_ms"])
            steps["kept"].append(t["kept"])
            steps["timing"].append(t.get("timing"))
            steps["measured_ms"].append(t.get("measured_ms"))
            steps["t_elapsed_s"].append(_stamp_seconds(fb))
            steps["code"].append(msgs[2 + 2 * i]["content"])
            steps["feedback"].append(fb)
    schema: dict[str, pl.DataType | type[pl.DataType]] = {
        "session_id": pl.String,
        # the task's fields, in the task table's order
        **{k: v for k, v in _dtypes()["task"].items() if k != "task_id"},
        "baseline_ms": pl.Float64,
        "best": pl.Struct({"step": pl.Int64, "time_ms": pl.Float64, "speedup": pl.Float64}),
        **_dtypes()["labels"],
        "attempts": pl.Struct(
            {"kept": pl.Int64, "reverted": pl.Int64, "errors": pl.Int64, "rebench": pl.Int64}
        ),
        "elapsed_s": pl.Int64,
        "elapsed_hms": pl.String,
        "num_steps": pl.Int64,
        "trace": _dtypes()["trace"],
        "messages": _dtypes()["messages"],
        "shard": pl.Int64,
    }
    sdf = pl.DataFrame(srows, schema=schema, orient="row") if srows else pl.DataFrame(schema=schema)
    step_schema = {
        "session_id": pl.String,
        **_dtypes()["trace_fields"],
        "t_elapsed_s": pl.Int64,
        "code": pl.String,
        "feedback": pl.String,
    }
    tdf = pl.DataFrame(steps, schema=step_schema)
    return sdf, tdf


def task_frame(tasks: list[TaskSpec]) -> pl.DataFrame:
    """Session tasks in shard order (``shard`` = position // SHARD_SIZE)."""
    import polars as pl

    rows = []
    for i, t in enumerate(tasks):
        rows.append(
            {**_task_row(t), "session_id": t.session_id, "seed": t.seed, "shard": i // SHARD_SIZE}
        )
    schema = {**_dtypes()["task"], "session_id": pl.String, "seed": pl.Int64, "shard": pl.Int64}
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def holdout_frame(tasks: list[TaskSpec]) -> pl.DataFrame:
    """Held-out task specs (no solutions): the fields of ``tasks_holdout.jsonl`` plus the prompt."""
    import polars as pl

    rows = [{**_task_row(t), "prompt": task_prompt(t)} for t in tasks]
    schema = {**_dtypes()["task"], "prompt": pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def _task_row(t: TaskSpec) -> dict[str, Any]:
    rec = t.as_record()
    rec["shape"] = json.dumps(rec["shape"])
    return rec


def holdout_record(t: TaskSpec) -> dict[str, Any]:
    """One line of ``tasks_holdout.jsonl``: the task spec only (no prompt, no solution),
    which keeps the file near the card's ~78 kB; ``task_prompt`` rebuilds the prompt."""
    return t.as_record()


# --------------------------------------------------------------------------------------
# invariants
# --------------------------------------------------------------------------------------

_PROSE = re.compile(
    r"^(here is|here's|this kernel|i |i'm|let me|the following|explanation|note:|sure)", re.I
)


@lru_cache(maxsize=4096)
def _code_only(content: str, impl: str) -> str | None:
    """Why an assistant turn is not code only (None when it is).

    Memoised (a pure function of two strings): a session can resubmit a source it sent
    before, and parsing it is most of ``check_session``'s time.
    """
    if "```" in content:
        return "markdown fence"
    first = next((ln for ln in content.splitlines() if ln.strip()), "")
    if _PROSE.match(first.strip()):
        return "starts with prose"
    if impl == "cuda":
        if "__global__" not in content:
            return "no __global__ kernel"
    else:
        if "@triton.jit" not in content:
            return "no @triton.jit kernel"
        return _parse_error(content)
    return None


def _parse_error(content: str) -> str | None:
    """``ast.parse``'s verdict on ``content``, the cheap way first.

    ``symtable`` runs the same parser on the same text and then builds only the symbol
    tables, not the Python AST objects that are most of ``ast.parse``'s cost (40% less
    time on the shards' Triton turns). Whatever it accepts parses; only when it fails
    (it also rejects code that parses, e.g. ``nonlocal`` at module level) does
    ``ast.parse`` decide, so the verdict and message are always ``ast.parse``'s.
    """
    try:
        symtable.symtable(content, "<unknown>", "exec")
    except Exception:  # any failure: ast.parse decides
        try:
            ast.parse(content)
        except SyntaxError as e:
            return f"does not parse: {e.msg}"
    return None


def check_session(session: dict[str, Any]) -> list[str]:
    """Violations of the session invariants (empty list = clean)."""
    v: list[str] = []
    sid = session.get("session_id", "?")
    op = get_op(session["op"])
    gpu = get_gpu(session["gpu"])
    impl = session["impl"]
    trace = session["trace"]
    msgs = session["messages"]
    if session["arch"] != gpu.arch:
        v.append(f"{sid}: arch {session['arch']} does not match gpu {gpu.id}")
    if session["num_steps"] != len(trace):
        v.append(f"{sid}: num_steps {session['num_steps']} != len(trace) {len(trace)}")
    if len(msgs) != 2 + 2 * len(trace):
        v.append(f"{sid}: {len(msgs)} messages for {len(trace)} steps")
        return v
    if not trace or trace[0]["kind"] != "baseline" or trace[0]["step"] != 0:
        v.append(f"{sid}: step 0 is not the baseline")
    for t in trace:
        v.extend(_step_violations(session, op, gpu, impl, t))
    v.extend(_best_violations(session))
    v.extend(_timestamp_violations(session))
    if msgs[0]["role"] != "system" or msgs[1]["role"] != "user":
        v.append(f"{sid}: conversation does not open with system + user task")
    v.extend(_causal_violations(session))
    return v


def _step_violations(
    session: dict[str, Any], op: Any, gpu: Any, impl: str, t: dict[str, Any]
) -> list[str]:
    """One trace step's invariants: a known rung, feature gating, what an ok (or an error)
    must and must not carry, and the step's two conversation turns."""
    sid = session.get("session_id", "?")
    msgs = session["messages"]
    i = t["step"]
    fb = msgs[3 + 2 * i]["content"]
    try:
        variant = get_variant(op.family, impl, t["tag"])
    except KeyError:
        return [f"{sid}: step {i} unknown variant {t['tag']}"]
    params = t["params"] if t["kind"] != "baseline" else _baseline_params(session, variant)
    v = _feature_violations(session, op, gpu, t, variant, params)
    rung = step_status(
        op.name, impl, t["tag"], gpu.arch, params, session["shape"], session["dtype"]
    )
    if t["status"] in (OK, UNVERIFIED):
        # a measured step (the online tier) was executed and checked at this very shape:
        # its verdict stands over the rung-level evidence, its device time is checked
        # against the device-only floor
        measured = bool(session.get("measured_on"))
        v.extend(_ran_step_violations(session, op, gpu, t, variant, params, measured))
        v.extend(_rung_violations(sid, t, rung, fb, measured))
    elif t["time_ms"] is not None:
        v.append(f"{sid}: step {i} {t['status']} carries a time")
    v.extend(_turn_violations(sid, impl, gpu, t, msgs))
    return v


def _feature_violations(
    session: dict[str, Any],
    op: Any,
    gpu: Any,
    t: dict[str, Any],
    variant: Any,
    params: dict[str, Any],
) -> list[str]:
    """A step using a feature its GPU lacks must be a compile error that names the feature
    (or an nvcc front-end error that stops before it)."""
    sid = session.get("session_id", "?")
    impl = session["impl"]
    i = t["step"]
    fb = session["messages"][3 + 2 * i]["content"]
    missing = sorted(
        f for f in features_used(variant, op, session["dtype"], params) if f not in gpu.features
    )
    if not missing:
        return []
    if t["status"] != COMPILE_ERROR:
        return [
            f"{sid}: step {i} uses {','.join(missing)} on {gpu.arch} but status is {t['status']}"
        ]
    if not (any(_mentions(fb, f, impl) for f in missing) or _front_end_error(fb, impl)):
        return [f"{sid}: step {i} compile error does not name the missing feature {missing}"]
    return []


def _ran_step_violations(
    session: dict[str, Any],
    op: Any,
    gpu: Any,
    t: dict[str, Any],
    variant: Any,
    params: dict[str, Any],
    measured: bool = False,
) -> list[str]:
    """A step that ran fits the shared-memory cap and has a time no faster than its
    floor: a modelled (host-inclusive) time its launch-inclusive floor, a measured device
    time (the online tier's ``time_ms``, any step's ``measured_ms``) the device-only one
    (``timing.time_floor_ms``). A measured time under the device floor means the floor's
    count for that op is wrong: the violation names the op."""
    sid = session.get("session_id", "?")
    i = t["step"]
    v: list[str] = []
    kp = plan(op, session["shape"], session["dtype"], gpu, variant, params)
    if kp.smem > gpu.smem_per_block_optin:
        v.append(
            f"{sid}: step {i} ok with {kp.smem} B smem over the {gpu.smem_per_block_optin} B cap"
        )
    if t["time_ms"] is None or t["time_ms"] <= 0:
        v.append(f"{sid}: step {i} ok without a time")
        return v
    timed = [("time_ms", t["time_ms"], measured)]
    if not measured and t.get("measured_ms") is not None:
        timed.append(("measured_ms", t["measured_ms"], True))
    for field, ms, device in timed:
        floor = time_floor_ms(
            kp, gpu, session["impl"], op, session["shape"], session["dtype"], device
        )
        if ms < floor * (1 - 2e-3):  # the times are rounded to 4 significant digits
            kind = "device-only" if device else "launch-inclusive"
            v.append(
                f"{sid}: step {i} ({op.name}) {field} {ms} ms is under its {kind} physical "
                f"floor {floor:.4g} ms"
            )
    return v


def _rung_violations(
    sid: str, t: dict[str, Any], rung: Any, fb: str, measured: bool = False
) -> list[str]:
    """A step that ran is ok exactly when its rung is verified on this family (a measured
    step: when the device checked it correct), and its feedback's correctness line
    agrees."""
    i = t["step"]
    v: list[str] = []
    # a "correct" needs execution evidence on this family; a measured-wrong rung
    # is never anything but wrong
    if measured:
        if t["status"] != OK:
            v.append(f"{sid}: step {i} ran on the device but is {t['status']}")
    elif rung.wrong:
        v.append(f"{sid}: step {i} {t['tag']} is measured wrong but is {t['status']}")
    elif (t["status"] == OK) != rung.verified:
        v.append(f"{sid}: step {i} is {t['status']} but its rung is {rung.status}")
    if (t["status"] == OK) != ("\ncorrect: " in fb) and not (
        t["kind"] == "rebench" and "re-measured best" in fb
    ):
        v.append(f"{sid}: step {i} feedback's correctness line disagrees with {t['status']}")
    return v


def _turn_violations(
    sid: str, impl: str, gpu: Any, t: dict[str, Any], msgs: list[dict[str, Any]]
) -> list[str]:
    """The step's compile command targets the GPU's arch, its turns alternate assistant /
    user, and the assistant turn is code only."""
    i = t["step"]
    fb = msgs[3 + 2 * i]["content"]
    v: list[str] = []
    if impl == "cuda" and t["status"] == COMPILE_ERROR and "nvcc " in fb:
        flag = nvcc_arch_flag(gpu.arch)
        if f"-arch={flag} " not in fb:
            v.append(f"{sid}: step {i} compile command does not use -arch={flag}")
    if msgs[2 + 2 * i]["role"] != "assistant" or msgs[3 + 2 * i]["role"] != "user":
        v.append(f"{sid}: step {i} message roles out of order")
    why = _code_only(msgs[2 + 2 * i]["content"], impl)
    if why:
        v.append(f"{sid}: step {i} assistant turn is not code-only ({why})")
    return v


def _best_violations(session: dict[str, Any]) -> list[str]:
    """The session's best agrees with its trace: a verified step, the fastest one, and a
    speedup that is baseline / best; the baseline is step 0's time."""
    sid = session.get("session_id", "?")
    trace = session["trace"]
    base = session["baseline_ms"]
    best = session["best"]
    v: list[str] = []
    if best["step"] is None:
        if any(t["status"] == OK for t in trace):
            v.append(f"{sid}: verified steps but no best kernel")
        if best["time_ms"] is not None or best["speedup"] is not None:
            v.append(f"{sid}: a best time without a best step")
    elif base is not None:
        v.extend(_best_step_violations(sid, trace, base, best))
    if trace and trace[0]["time_ms"] != base:
        v.append(f"{sid}: baseline_ms differs from step 0 time")
    if base is None and (best["speedup"] is not None or not session.get("measured_on")):
        v.append(f"{sid}: no baseline time, yet a speedup (or a modelled baseline failed)")
    return v


def _best_step_violations(
    sid: str, trace: list[dict[str, Any]], base: float, best: dict[str, Any]
) -> list[str]:
    """A session with a best step: not slower than the baseline, a consistent speedup, and
    the step holds the best time as the fastest verified ok."""
    bstep = best["step"]
    v: list[str] = []
    if best["time_ms"] > base and trace[0]["status"] == OK:
        # an unverified or failed baseline can be faster than every verified kernel: the
        # best is then slower than it, and the speedup says so (below 1)
        v.append(f"{sid}: best {best['time_ms']} slower than baseline {base}")
    if abs(best["speedup"] - round(base / best["time_ms"], 2)) > 0.011:
        v.append(f"{sid}: speedup {best['speedup']} != baseline/best {base / best['time_ms']:.3f}")
    if not (0 <= bstep < len(trace)) or (trace[bstep]["time_ms"] != best["time_ms"] and bstep != 0):
        v.append(f"{sid}: best step {bstep} does not hold the best time")
    elif trace[bstep]["status"] != OK:
        v.append(f"{sid}: best step {bstep} is {trace[bstep]['status']}, not a verified ok")
    else:
        verified_times = [
            t["time_ms"]
            for t in trace
            if t["status"] == OK and t["time_ms"] and t["kind"] != "rebench"
        ]
        if verified_times and min(verified_times) < best["time_ms"]:
            v.append(f"{sid}: a faster verified step than the best {best['time_ms']}")
    return v


def _timestamp_violations(session: dict[str, Any]) -> list[str]:
    """Every feedback turn opens with a [t+H:MM:SS] stamp, strictly increasing and not past
    the session's elapsed time."""
    sid = session.get("session_id", "?")
    trace = session["trace"]
    msgs = session["messages"]
    v: list[str] = []
    last = -1
    for i in range(len(trace)):
        sec = _stamp_seconds(msgs[3 + 2 * i]["content"])
        if sec is None:
            v.append(f"{sid}: step {i} feedback lacks a [t+H:MM:SS] RESULT prefix")
            continue
        if sec <= last:
            v.append(f"{sid}: step {i} timestamp {hms(sec)} does not increase")
        last = sec
    if last > session["elapsed_s"] + 1:
        v.append(f"{sid}: last timestamp after elapsed_s")
    return v


_RAN = (OK, UNVERIFIED)
_OVERFLOW = re.compile(r"\((\d+) B\) exceeds the opt-in|Required: (\d+), Hardware limit")
#: Feedback marks of an error the configuration causes without a textual mistake: a rung
#: (or parameter region, or this very source) measured wrong, an allocation over the card.
_MEASURED_WRONG = (MISMATCH, "CUDA error: out of memory")


def step_parent(trace: list[dict[str, Any]], i: int) -> int | None:
    """The step whose code step ``i`` was edited from: the previous step for a fix or a
    variant; for a tune or rebench the fastest measured (non-rebench) step of the same rung
    so far, else the rung's latest step. ``Engineer.run`` edits from exactly these."""
    r = trace[i]
    if i == 0:
        return None
    if r["kind"] in ("tune", "rebench"):
        best, best_t = None, math.inf
        for j in range(i):
            q = trace[j]
            if (
                q["tag"] == r["tag"]
                and q["status"] in _RAN
                and q["kind"] != "rebench"
                and q["time_ms"] is not None
                and q["time_ms"] < best_t
            ):
                best, best_t = j, q["time_ms"]
        if best is not None:
            return best
        for j in range(i - 1, -1, -1):
            if trace[j]["tag"] == r["tag"]:
                return j
    return i - 1


def error_causes(
    trace: list[dict[str, Any]], codes: list[str], feedbacks: list[str]
) -> list[dict[str, Any]]:
    """For each compile_error / wrong_result step: where its mistake lies and whether it
    lies in what the step changed.

    *intended* is the clean source of the step's rung and parameters (any ok/unverified
    step of the session with the same rung and parameters: the source is a pure function
    of them); the mistake is ``mistake_lines(intended, code)``, the step's edit is
    ``touched_lines(parent code, intended)``. An error without a textual mistake (shared
    memory over the cap, a missing feature, a rung measured wrong) is caused by the rung
    or parameters, so it must come from a step that changed one of them (or fixes an
    error). ``traced`` is None when the intended source never appears (unresolved)."""
    clean: dict[tuple[str, str], int] = {}
    keys = [(t["tag"], json.dumps(t["params"], sort_keys=True)) for t in trace]
    for i, t in enumerate(trace):
        if t["status"] in _RAN:
            clean.setdefault(keys[i], i)
    out: list[dict[str, Any]] = []
    for i, t in enumerate(trace):
        if t["status"] not in (COMPILE_ERROR, WRONG_RESULT):
            continue
        fb = feedbacks[i]
        m = _OVERFLOW.search(fb)
        rec: dict[str, Any] = {
            "step": i,
            "kind": t["kind"],
            "status": t["status"],
            "overflow": int(m.group(1) or m.group(2)) if m else None,
            "mistake": set(),
            "intended": None,
            "traced": None,
        }
        p = step_parent(trace, i)
        twin = clean.get(keys[i])
        if twin is None:
            if m or any(k in fb for k in _MEASURED_WRONG) or "ptxas" in fb:
                twin = i  # it cannot run as written: the configuration is the cause
            else:
                out.append(rec)
                continue
        intended = codes[twin]
        rec["intended"] = intended
        mistake = mistake_lines(intended, codes[i]) if twin != i else set()
        rec["mistake"] = mistake
        if not mistake:
            rec["traced"] = (
                p is None
                or keys[p] != keys[i]
                or trace[p]["status"] in (COMPILE_ERROR, WRONG_RESULT)
            )
        else:
            edit = touched_lines(codes[p], intended) if p is not None else None
            rec["traced"] = edit is None or mistake <= edit
        out.append(rec)
    return out


def _causal_violations(session: dict[str, Any]) -> list[str]:
    """Mistakes outside what their step changed; a parameter-only tune failing for
    anything but a resource; an identical shared-memory overflow submitted twice."""
    sid = session.get("session_id", "?")
    trace = session["trace"]
    msgs = session["messages"]
    codes = [msgs[2 + 2 * i]["content"] for i in range(len(trace))]
    fbs = [msgs[3 + 2 * i]["content"] for i in range(len(trace))]
    v: list[str] = []
    seen: set[tuple[str, str]] = set()
    for r in error_causes(trace, codes, fbs):
        i = r["step"]
        if r["traced"] is False:
            v.append(f"{sid}: step {i} {r['status']} lies outside the lines the step changed")
        if r["overflow"] is not None:
            key = (trace[i]["tag"], json.dumps(trace[i]["params"], sort_keys=True))
            if key in seen:
                v.append(f"{sid}: step {i} resubmits a configuration that already overflowed")
            seen.add(key)
    return v


def _baseline_params(session: dict[str, Any], variant: Any) -> dict[str, Any]:
    from .variants import default_params

    return default_params(
        variant, get_op(session["op"]), session["dtype"], session["shape"], get_gpu(session["gpu"])
    )


def _front_end_error(feedback: str, impl: str) -> bool:
    """An nvcc front-end error (syntax, shared-memory static_assert) stops compilation
    before ptxas ever sees the missing instruction, so it legitimately hides it."""
    return impl == "cuda" and "candidate.cu(" in feedback and ": error:" in feedback


def _mentions(feedback: str, feature: str, impl: str) -> bool:
    if impl == "triton":
        words = {
            "fp8_mma": "fp8e4nv",
            "fp4_mma": "e2m1",
            "wgmma": "wgmma",
            "tma": "TMA",
            "tma_multicast": "multicast",
            "setmaxnreg": "setmaxnreg",
            "cp_async": "cp.async",
            "mma_sync": "mma",
        }
        return words[feature] in feedback
    return (
        FEATURE_INSTRUCTION[feature].split(" ")[0] in feedback
        or FEATURE_INSTRUCTION[feature] in feedback
    )


__all__ = [
    "CARD_STATS",
    "DEFAULT_SEED",
    "DEFAULT_SESSIONS",
    "DEFAULT_HOLDOUT",
    "SHARD_SIZE",
    "GENERATOR_VERSION",
    "build_tasks",
    "n_shards",
    "generate_shard",
    "simulate_session",
    "session_frames",
    "task_frame",
    "holdout_frame",
    "holdout_record",
    "check_session",
    "task_prompt",
    "fmt_ms",
    "shape_str",
]
