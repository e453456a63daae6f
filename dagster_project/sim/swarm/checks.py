"""Invariants of a finished kernelswarm episode, recomputed from the row alone.

The checker trusts nothing the generator computed: it replays the messages in order,
re-derives the shared best, every result reward, every leaderboard and the verdict, and
re-evaluates arch gating and shared-memory limits with the simulator's own feature and
kernel-plan models. An empty list means the row is internally consistent.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..env import COMPILE_ERROR, OK, UNVERIFIED, WRONG_RESULT
from ..hardware import get_gpu
from ..kernels import plan
from ..ops import get_op
from ..timing import time_floor_ms
from ..variants import features_used, get_variant
from ..verification import rung_status, step_status
from .agents import ENV, ENV_ID, LEAD, LEAD_ID
from .reward_rule import (
    RAN,
    UNSUPPORTED_ARCH,
    episode_speedup,
    result_reward,
    verdict_reward,
    withdrawal_reward,
)
from .spec import CARD_OPS, SCENARIOS, TEAM_SIZES

MESSAGE_KINDS: tuple[str, ...] = (
    "plan",
    "dispatch",
    "candidate",
    "result",
    "status",
    "review",
    "verify",
    "leaderboard",
    "merge",
    "redirect",
    "handoff",
    "verdict",
)
MESSAGE_FIELDS: tuple[str, ...] = (
    "kind",
    "role",
    "sender",
    "recipient",
    "t_elapsed_s",
    "content",
    "params",
    "status",
    "time_ms",
    "reward",
)
_ENV_KINDS = ("result", "leaderboard")
_SMEM_NOTE = re.compile(r"(\d+) B shared memory \(limit (\d+) B\)")
_LEAD_KINDS = ("plan", "dispatch", "merge", "redirect", "verdict")
_NAMED = ("dispatch", "handoff", "redirect")

#: Text only a compiler, ptxas, Triton or the correctness harness prints. A review reads a
#: candidate *before* the harness has compiled it, so none of this may appear in one: the
#: reviewer reports its own reading of the code (resources, the defective line), never the
#: diagnostic the compile is about to produce.
HARNESS_TEXT = re.compile(
    r"error\s*:|ptxas|static assertion failed|CompilationError|expected a \";\"|"
    r"identifier \"[^\"]+\" is undefined|is not defined|unexpected keyword argument|"
    r"must be of type tl\.constexpr|must be a power of 2|max_abs_err|max_rel_err|"
    r"outputs mismatch|RESULT "
)
_DIAG_LINE = re.compile(r"error\s*:\s*(.+?)\s*$")
_PY_EXC = re.compile(r"^[A-Z]\w*(?:Error|Exception)\('(.+)'\)\s*$")
#: a mismatch's first wrong element (short error figures alone collide by chance)
_ERR_VALUE = re.compile(r"got -?[0-9.]+, expected -?[0-9.]+")
#: Messages that are the harness's own output (may quote themselves).
_OUTPUT_KINDS = ("result", "candidate")
#: A latency as messages print it (``feedback.fmt_ms``: four significant digits + " ms").
_MS = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:e[-+]?\d+)?) ms\b")
#: Kinds whose every latency must have been measured before (a verify prints its own
#: new re-measurement, so it is checked through its ``ref`` instead).
_QUOTING_KINDS = (
    "plan",
    "dispatch",
    "status",
    "review",
    "leaderboard",
    "merge",
    "redirect",
    "handoff",
    "verdict",
)


def quotables(content: str) -> set[str]:
    """Distinctive pieces of a result's text that another message could only copy from it.

    Compiler and ptxas diagnostics (the message after ``error:``), Triton's exception
    message, and the first mismatching element a failed correctness check prints.
    """
    out: set[str] = set()
    for line in content.split("\n")[1:]:
        m = _DIAG_LINE.search(line) or _PY_EXC.match(line.strip())
        if m and len(m.group(1)) >= 8:
            out.add(m.group(1))
        out.update(_ERR_VALUE.findall(line))
    return out


def timeline_violations(msgs: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """``(message index, why)`` for every message that quotes a result before it exists.

    Three rules, all about the episode's own timeline: (1) no message quotes a piece of a
    result (a diagnostic, a measured error) that no earlier result printed; (2) a review
    contains no harness output at all, since the candidate it reads has not been compiled;
    (3) every latency a lead or agent message states ("0.01405 ms") was measured by an
    earlier message (the plan's baseline, a result, a verification).
    """
    out: list[tuple[int, str]] = []
    seen: set[str] = set()
    times: set[float] = set()  # latencies printed by the plan (baseline), results, verifies
    future: dict[str, int] = {}
    for j, m in enumerate(msgs):
        if m["kind"] == "result":
            for q in quotables(m["content"] or ""):
                future.setdefault(q, j)
    for i, m in enumerate(msgs):
        why = _timeline_violation(m, seen, times, future)
        if why is not None:
            out.append((i, why))
    return out


def _timeline_violation(
    m: dict[str, Any], seen: set[str], times: set[float], future: dict[str, int]
) -> str | None:
    """The first timeline rule one message breaks (None: none), updating what has been
    printed and measured so far as the message is read."""
    text = m["content"] or ""
    stale = _stale_latency(m, text, times)
    if stale is not None:
        return stale
    if m["kind"] in ("result", "verify", "plan") and m["time_ms"] is not None:
        times.add(float(f"{m['time_ms']:.4g}"))
    if m["kind"] == "verify" or (m["kind"] == "plan" and m["time_ms"] is not None):
        times.update(float(x) for x in _MS.findall(text))
    if m["kind"] == "result":
        seen.update(quotables(text))
        return None
    if m["kind"] in _OUTPUT_KINDS:
        return None
    if m["kind"] == "review":
        hit = HARNESS_TEXT.search(text)
        if hit:
            return f"review quotes harness output {hit.group(0)!r} before any compile"
    for q, j in future.items():
        if q not in seen and q in text:
            return f"{m['kind']} quotes {q!r} from result {j}, which comes later"
    return None


def _stale_latency(m: dict[str, Any], text: str, times: set[float]) -> str | None:
    """A lead or agent message stating a latency no earlier message measured (the plan
    states the baseline itself)."""
    if m["kind"] in _QUOTING_KINDS and m["kind"] != "plan":
        stale = [x for x in _MS.findall(text) if float(x) not in times]
        if stale:
            return f"{m['kind']} quotes {stale[0]} ms, which no earlier message measured"
    return None


def _launch(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != "variant"}


def _key(params: dict[str, Any]) -> str:
    """A kernel's identity (rung + launch params), order-free, bookkeeping keys dropped."""
    return repr(sorted((k, v) for k, v in params.items() if k != "ref"))


class _Report:
    """An episode's violations, each prefixed with its id: ``bad(msg)`` records one."""

    def __init__(self, eid: Any) -> None:
        self.eid = eid
        self.out: list[str] = []

    def __call__(self, msg: str) -> None:
        self.out.append(f"{self.eid}: {msg}")


@dataclass(frozen=True)
class _Episode:
    """What every check of one episode reads: the row and its resolved op, rung ladder
    and GPU."""

    ep: dict[str, Any]
    bad: _Report
    op: Any
    sim_op: str
    impl: str
    gpu: Any
    shape: dict[str, int]
    dtype: str
    ids: list[str]
    msgs: list[dict[str, Any]]


@dataclass
class _Replay:
    """What replaying the messages in order accumulates."""

    best: float
    # trusted ok results so far (time, index): an unstable verification removes one
    trusted: list[tuple[float, int]] = field(default_factory=list)
    measured: dict[str, list[float]] = field(default_factory=dict)  # kernel key -> times
    agent_ok: dict[str, set[float]] = field(default_factory=dict)
    agent_best: dict[str, float] = field(default_factory=dict)
    tries: dict[str, int] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)
    offered: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def check_episode(ep: dict[str, Any]) -> list[str]:
    """Every violation of the episode invariants (empty list = clean)."""
    bad = _Report(ep.get("episode_id", "?"))

    # -- identity, coverage, team ---------------------------------------------------------
    if ep.get("op") not in CARD_OPS:
        bad(f"op {ep.get('op')!r} is not one of the card's ops")
        return bad.out
    sim_op, impl = CARD_OPS[ep["op"]]
    if ep.get("impl") != impl:
        bad(f"{ep['op']} must be {impl}, row says {ep.get('impl')}")
    gpu = get_gpu(ep["gpu"])
    if ep.get("arch") != gpu.arch:
        bad(f"arch {ep.get('arch')} does not match {gpu.id} ({gpu.arch})")
    ids = _team_violations(ep, bad)
    known = set(ids) | {LEAD_ID}
    roles = {a["id"]: a["role"] for a in ep["agents"]} | {LEAD_ID: LEAD, ENV_ID: ENV}
    msgs = ep["messages"]
    if ep["num_messages"] != len(msgs):
        bad(f"num_messages {ep['num_messages']} != {len(msgs)}")
    if not msgs:
        bad("no messages")
        return bad.out
    ctx = _Episode(ep, bad, get_op(sim_op), sim_op, impl, gpu, ep["shape"], ep["dtype"], ids, msgs)

    # -- order, kinds, senders ----------------------------------------------------------
    _sequence_violations(ctx, known, roles)

    # -- replay: rewards, gating, leaderboards, merges -----------------------------------
    r = _Replay(ep["baseline_ms"])
    for i, m in enumerate(msgs):
        handler = _HANDLERS.get(m["kind"])
        if handler is not None:
            handler(ctx, r, i, m)
    for i, why in timeline_violations(msgs):
        bad(f"message {i}: {why}")
    _summary_violations(ctx, r)
    return bad.out


def _team_violations(ep: dict[str, Any], bad: _Report) -> list[str]:
    """The scenario and its team size, distinct specialists, no lead among them; returns
    the specialists' ids."""
    if ep.get("scenario") not in SCENARIOS:
        bad(f"unknown scenario {ep.get('scenario')!r}")
    else:
        lo, hi = TEAM_SIZES[ep["scenario"]]
        if not lo <= ep["n_agents"] <= hi:
            bad(f"{ep['n_agents']} agents outside {lo}-{hi} for {ep['scenario']}")
    agents = ep["agents"]
    ids = [a["id"] for a in agents]
    if ep["n_agents"] != len(agents) or len(set(ids)) != len(ids):
        bad("n_agents does not match a list of distinct agents")
    if LEAD_ID in ids:
        bad("the lead is listed among the specialists")
    return ids


def _sequence_violations(ctx: _Episode, known: set[str], roles: dict[str, str]) -> None:
    """Every message's fields, kind, time order and sender; then the episode's frame: a
    plan first, exactly one verdict last, and ``elapsed_s`` at the last message."""
    ep, msgs, bad = ctx.ep, ctx.msgs, ctx.bad
    last_t = -1
    for i, m in enumerate(msgs):
        if tuple(m) != MESSAGE_FIELDS:
            bad(f"message {i} fields {tuple(m)} differ from {MESSAGE_FIELDS}")
        if m["kind"] not in MESSAGE_KINDS:
            bad(f"message {i} has unknown kind {m['kind']!r}")
        if m["t_elapsed_s"] < last_t:
            bad(f"message {i} time {m['t_elapsed_s']} goes back from {last_t}")
        last_t = m["t_elapsed_s"]
        _sender_violations(bad, i, m, known, roles)
    if msgs[0]["kind"] != "plan" or msgs[0]["time_ms"] != ep["baseline_ms"]:
        bad("the first message must be the plan carrying the baseline time")
    if msgs[-1]["kind"] != "verdict" or sum(m["kind"] == "verdict" for m in msgs) != 1:
        bad("exactly one verdict, as the last message")
    if ep["elapsed_s"] != msgs[-1]["t_elapsed_s"]:
        bad(f"elapsed_s {ep['elapsed_s']} != last message time {msgs[-1]['t_elapsed_s']}")


def _sender_violations(
    bad: _Report, i: int, m: dict[str, Any], known: set[str], roles: dict[str, str]
) -> None:
    """A message comes from who its kind requires, in that sender's role, and names an
    agent of the episode where its kind names one."""
    if m["kind"] in _ENV_KINDS and m["sender"] != ENV_ID:
        bad(f"message {i} {m['kind']} must come from env")
    if m["kind"] in _LEAD_KINDS and m["sender"] != LEAD_ID:
        bad(f"message {i} {m['kind']} must come from the lead")
    if m["sender"] not in known | {ENV_ID}:
        bad(f"message {i} sent by unknown {m['sender']!r}")
    elif m["role"] != roles.get(m["sender"]):
        bad(
            f"message {i} role {m['role']!r} is not {m['sender']}'s role {roles.get(m['sender'])!r}"
        )
    if m["kind"] in _NAMED:
        to = m["params"].get("to")
        if to not in known or m["recipient"] != to:
            bad(
                f"message {i} {m['kind']} names {to!r} (recipient {m['recipient']!r}), "
                "not an agent of the episode"
            )


def _on_candidate(ctx: _Episode, r: _Replay, i: int, m: dict[str, Any]) -> None:
    """Count the sender's try and remember what it offered."""
    r.tries[m["sender"]] = r.tries.get(m["sender"], 0) + 1
    r.offered.setdefault(m["sender"], []).append(m["params"])


def _on_result(ctx: _Episode, r: _Replay, i: int, m: dict[str, Any]) -> None:
    """A result judges a kernel its specialist submitted, obeys gating and shared-memory
    limits, and carries a time exactly when the kernel ran."""
    bad = ctx.bad
    who = m["recipient"]
    if who not in ctx.ids:
        bad(f"result {i} addressed to {who!r}, not a specialist")
    if m["params"] not in r.offered.get(who, []):
        bad(f"result {i} judges a kernel {who} never submitted")
    for v in _gating(ctx.op, ctx.impl, ctx.gpu, ctx.dtype, ctx.shape, m):
        bad(f"result {i} {v}")
    st = m["status"]
    if st in RAN and (m["time_ms"] is None or m["time_ms"] <= 0):
        bad(f"result {i} {st} without a positive time")
        return
    if st not in RAN and m["time_ms"] is not None:
        bad(f"result {i} {st} carries a time")
    _score_result(ctx, r, i, m)


def _score_result(ctx: _Episode, r: _Replay, i: int, m: dict[str, Any]) -> None:
    """The result's reward recomputed from the shared best so far; a kept result moves
    the best, and a measured one joins the kernel's and its agent's times."""
    who, st = m["recipient"], m["status"]
    try:
        want, was_kept = result_reward(st, m["time_ms"], r.best)
    except ValueError as exc:
        ctx.bad(f"result {i}: {exc}")
        return
    if m["reward"] != want:
        ctx.bad(
            f"result {i} reward {m['reward']} != {want} from the history (shared best {r.best})"
        )
    if was_kept:
        r.best = m["time_ms"]
        r.kept[who] = r.kept.get(who, 0) + 1
    if st in RAN:
        r.measured.setdefault(_key(m["params"]), []).append(m["time_ms"])
    if st == OK:
        r.agent_best[who] = min(r.agent_best.get(who, math.inf), m["time_ms"])
        r.agent_ok.setdefault(who, set()).add(m["time_ms"])
        r.trusted.append((m["time_ms"], i))


def _on_verify(ctx: _Episode, r: _Replay, i: int, m: dict[str, Any]) -> None:
    """A verification re-measures an earlier result that ran; an unstable one withdraws
    that result's gain."""
    bad = ctx.bad
    ref_i = m["params"].get("ref")
    ref = ctx.msgs[ref_i] if isinstance(ref_i, int) and 0 <= ref_i < i else None
    r.measured.setdefault(_key(m["params"]), []).append(m["time_ms"])
    if ref is None or ref["kind"] != "result" or ref["status"] not in RAN:
        bad(f"verify {i} does not name an earlier result that ran (ref {ref_i!r})")
        return
    if _key(ref["params"]) != _key(m["params"]):
        bad(f"verify {i} re-measures another kernel than result {ref_i}")
    if ref["status"] != OK and "correct on" in m["content"]:
        bad(f"verify {i} calls {ref['params']['variant']} correct without execution evidence")
    want_r = None
    if m["status"] == "unstable":
        r.trusted = [o for o in r.trusted if o[1] != ref_i]
        want_r = withdrawal_reward(ref["reward"])
        r.best = min([ctx.ep["baseline_ms"], *(t for t, _ in r.trusted)])
    elif m["status"] != "pass":
        bad(f"verify {i} status {m['status']!r} is not pass/unstable")
    if m["reward"] != want_r:
        bad(f"verify {i} reward {m['reward']} != {want_r} (an unstable gain is not rewarded)")


def _on_status(ctx: _Episode, r: _Replay, i: int, m: dict[str, Any]) -> None:
    """A status that quotes a time quotes one of its sender's earlier ok results."""
    if m["time_ms"] is not None and m["time_ms"] not in r.agent_ok.get(m["sender"], set()):
        ctx.bad(f"status {i} quotes {m['time_ms']} ms, not an earlier ok result of {m['sender']}")


def _on_handoff(ctx: _Episode, r: _Replay, i: int, m: dict[str, Any]) -> None:
    """A handoff that quotes a time quotes one measured earlier for that kernel."""
    if m["time_ms"] is None:
        return
    hk = _key({"variant": m["params"].get("variant"), **m["params"].get("params", {})})
    if m["time_ms"] not in r.measured.get(hk, []):
        ctx.bad(
            f"handoff {i} quotes {m['time_ms']} ms, measured for that kernel by no earlier message"
        )


def _on_leaderboard(ctx: _Episode, r: _Replay, i: int, m: dict[str, Any]) -> None:
    """A leaderboard is sorted by time and shows every agent's best ok result so far."""
    ranking = m["params"].get("ranking", [])
    times = [x["best_ms"] for x in ranking]
    if times != sorted(times):
        ctx.bad(f"leaderboard {i} is not sorted by time")
    shown = {x["agent"]: x["best_ms"] for x in ranking}
    if shown != r.agent_best:
        ctx.bad(f"leaderboard {i} {shown} disagrees with results so far {r.agent_best}")


def _on_merge(ctx: _Episode, r: _Replay, i: int, m: dict[str, Any]) -> None:
    """A merge carries the shared best of the results so far."""
    if m["time_ms"] != r.best:
        ctx.bad(f"merge {i} shared best {m['time_ms']} != {r.best} from the results so far")


def _on_verdict(ctx: _Episode, r: _Replay, i: int, m: dict[str, Any]) -> None:
    """The verdict names a verified rung, the episode's best time and its reward."""
    ep = ctx.ep
    won = m["params"].get("variant")
    if won:
        rung = rung_status(ctx.sim_op, ctx.impl, won, ctx.gpu.arch)
        if not rung.verified:
            ctx.bad(f"best kernel {won} is {rung.status} on {ctx.gpu.arch}")
    if m["time_ms"] != ep["best_ms"]:
        ctx.bad(f"verdict time {m['time_ms']} != best_ms {ep['best_ms']}")
    if m["reward"] != verdict_reward(ep["speedup"]):
        ctx.bad(f"verdict reward {m['reward']} != log2({ep['speedup']})/4")


def _on_review(ctx: _Episode, r: _Replay, i: int, m: dict[str, Any]) -> None:
    """A review passes or fails; a pass is checked against the code's own arithmetic."""
    if m["status"] not in ("pass", "fail"):
        ctx.bad(f"review {i} status {m['status']!r} is not pass/fail")
    elif m["status"] == "pass":
        _review_pass_violations(ctx, i, m)


def _review_pass_violations(ctx: _Episode, i: int, m: dict[str, Any]) -> None:
    """Shared memory and arch features are arithmetic on the code: a reviewer never passes
    a kernel over the limit or one the target cannot run."""
    bad, op, gpu, dtype = ctx.bad, ctx.op, ctx.gpu, ctx.dtype
    try:
        rv = get_variant(op.family, ctx.impl, m["params"]["variant"])
    except KeyError:
        bad(f"review {i} names unknown rung {m['params'].get('variant')!r}")
        return
    rl = _launch(m["params"])
    rsmem = plan(op, ctx.shape, dtype, gpu, rv, rl).smem
    if rsmem > gpu.smem_per_block_optin:
        bad(
            f"review {i} passes {rsmem} B of shared memory over the "
            f"{gpu.smem_per_block_optin} B cap"
        )
    rmiss = sorted(f for f in features_used(rv, op, dtype, rl) if f not in gpu.features)
    if rmiss:
        bad(f"review {i} passes a kernel using {','.join(rmiss)} on {gpu.arch}")
    # a pass never reports a figure over the limit it quotes
    hit = _SMEM_NOTE.search(m["content"])
    if hit and int(hit.group(1)) > int(hit.group(2)):
        bad(f"review {i} passes {hit.group(1)} B of shared memory over its {hit.group(2)} B limit")


#: What the replay checks per message kind (kinds without an entry carry no history).
_HANDLERS: dict[str, Callable[[_Episode, _Replay, int, dict[str, Any]], None]] = {
    "candidate": _on_candidate,
    "result": _on_result,
    "verify": _on_verify,
    "status": _on_status,
    "handoff": _on_handoff,
    "leaderboard": _on_leaderboard,
    "merge": _on_merge,
    "verdict": _on_verdict,
    "review": _on_review,
}


def _summary_violations(ctx: _Episode, r: _Replay) -> None:
    """The row's best time, speedup and per-agent tries / kept / best agree with the
    replay."""
    ep, bad = ctx.ep, ctx.bad
    if ep["best_ms"] != r.best:
        bad(f"best_ms {ep['best_ms']} != minimum verified time {r.best}")
    if ep["speedup"] != episode_speedup(ep["baseline_ms"], ep["best_ms"]):
        bad(f"speedup {ep['speedup']} != baseline/best")
    for a in ep["agents"]:
        aid = a["id"]
        tries, kept = r.tries.get(aid, 0), r.kept.get(aid, 0)
        if a["tries"] != tries or a["kept"] != kept:
            bad(f"agent {aid} tries/kept {a['tries']}/{a['kept']} != {tries}/{kept}")
        if a["best_ms"] != r.agent_best.get(aid):
            bad(f"agent {aid} best_ms {a['best_ms']} != {r.agent_best.get(aid)}")


def _gating(
    op: Any, impl: str, gpu: Any, dtype: str, shape: dict[str, int], m: dict[str, Any]
) -> list[str]:
    """Arch gating and smem limits of one result, from the simulator's own models."""
    params = m["params"]
    try:
        variant = get_variant(op.family, impl, params["variant"])
    except KeyError:
        return [f"names unknown rung {params.get('variant')!r}"]
    launch = _launch(params)
    missing = sorted(f for f in features_used(variant, op, dtype, launch) if f not in gpu.features)
    st = m["status"]
    # A gated kernel must never run. It usually fails as unsupported_arch, but nvcc's front
    # end (a slip, the shared-memory static_assert) reports first when there is one, so a
    # plain compile error is legitimate too.
    if missing and st not in (UNSUPPORTED_ARCH, COMPILE_ERROR):
        return [f"uses {','.join(missing)} on {gpu.arch} but is {st}"]
    if not missing and st == UNSUPPORTED_ARCH:
        return [f"is unsupported_arch although {gpu.arch} has every feature of {variant.tag}"]
    if st in RAN:
        kp = plan(op, shape, dtype, gpu, variant, launch)
        smem = kp.smem
        if smem > gpu.smem_per_block_optin:
            return [f"ok with {smem} B smem over the {gpu.smem_per_block_optin} B cap"]
        # every swarm time is modelled and host-inclusive: the launch-inclusive floor
        floor = time_floor_ms(kp, gpu, impl, op, shape, dtype, device=False)
        if m["time_ms"] is not None and m["time_ms"] < floor * (1 - 2e-3):
            return [f"{m['time_ms']} ms is under its physical floor {floor:.4g} ms"]
        # "ok" only for a rung executed correct on this family; a rung measured wrong
        # never runs clean
        rung = step_status(op.name, impl, variant.tag, gpu.arch, launch, shape, dtype)
        if rung.wrong:
            return [f"{variant.tag} is measured wrong on {gpu.arch} but is {st}"]
        if (st == OK) != rung.verified:
            return [f"is {st} but {variant.tag} is {rung.status} on {gpu.arch}"]
    if st not in (OK, UNVERIFIED, COMPILE_ERROR, WRONG_RESULT, UNSUPPORTED_ARCH):
        return [f"unknown status {st!r}"]
    return []
