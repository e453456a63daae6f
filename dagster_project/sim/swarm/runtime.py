"""Message-level runtime of one episode: a shared environment, a simulated clock, a log.

Every specialist keeps its own clock; work that happens in parallel (several workers
writing kernels at once) is generated agent by agent and merged afterwards by time. The
lead only acts at barriers, after every event it reacts to, so what it decides (winner,
losers, next wave) is what the merged log shows.

Finishing an episode (``finish``) does what can only be done once the whole log exists:

1. sort events by (simulated time, creation order);
2. stretch the clock uniformly so the episode lasts a 1-5 hour horizon (a monotone map,
   so no two events swap places);
3. walk the log once, pricing every ``result`` against the shared best *in message
   order* and rendering the texts that quote it (results, leaderboards, merges, verify
   reports, the verdict). Computing these in the same pass is what makes every reward
   and every leaderboard consistent with the episode's own history by construction;
   ``checks.check_episode`` verifies it independently. An ``unstable`` verify withdraws
   its result in that walk (``rewards.withdrawal_reward``; the shared best falls back),
   and merges, verdict and verify texts state the counts and decisions the walk has seen
   up to that message, never later ones.

Reviews are written when they happen, from the submitted code alone (``review``): the
harness's outcome for that candidate is computed first only because the simulator needs
it if the review passes; no reviewer text is derived from it.

**Team memory** (swarm 1.4.0, issue 39): what is on the episode's log before an agent's own
clock is what it knows of its teammates' work. A bug reported (by the harness or a review)
in a rung's code is one no teammate writes into that rung again, and a slip one the agent
was shown itself it does not type again (``_TeamMemory``); a configuration anyone has
already submitted is not tuned to again (its result is on the log); and a rung whose best
logged time is ``SLOW_RUNG`` times the team's best or more is not tuned further without a
new reason (a lead's redirect onto it is one: the redirected agent tunes the winner's rung).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..agent import SLOW_RUNG
from ..env import OK, WRONG_RESULT, Candidate, KernelEnv, Submission
from ..feedback import (
    ATOL,
    RTOL,
    SMEM_GUARD,
    fmt_ms,
    hms,
    ok_result,
    rebench_result,
    resource_line,
    stamp,
    unverified_line,
)
from ..rng import stream
from ..timing import benchmark, noise_sigma
from ..variants import Params, Variant, default_params, hw_choice, iter_params, ladder, param_space
from ..verification import evidenced_rung, evidenced_rungs, rung_status, step_status
from .agents import ENV, ENV_ID, LEAD, LEAD_ID, SwarmAgent, draw_skill, make_agent
from .review import fail_note, pass_note, read_candidate
from .reward_rule import (
    RAN,
    UNSUPPORTED_ARCH,
    episode_speedup,
    result_reward,
    result_status,
    verdict_reward,
    withdrawal_reward,
)
from .spec import NAMESPACE, STREAM_EPOCH, SwarmSpec

#: Card horizon of an episode, in hours.
MIN_HOURS = 1.0
MAX_HOURS = 5.0

#: Marker of the shared-memory guard every CUDA template is meant to emit.
_SMEM_GUARD = SMEM_GUARD


def sig4(x: float) -> float:
    """Four significant digits: what the harness prints and the dataset stores."""
    return float(f"{x:.4g}")


def launch_params(params: dict[str, Any]) -> Params:
    """A candidate's launch parameters without the ``variant`` tag the messages add."""
    return {k: v for k, v in params.items() if k != "variant"}


def fmt_params(p: Params) -> str:
    return ", ".join(f"{k}={v}" for k, v in p.items()) or "defaults"


@dataclass
class Event:
    """One message before it is frozen into the episode's row."""

    t: float
    seq: int
    kind: str
    sender: str
    role: str
    recipient: str | None
    params: dict[str, Any]
    content: str = ""
    status: str | None = None
    time_ms: float | None = None
    reward: float | None = None
    sub: Submission | None = None
    variant: Variant | None = None
    ref: Event | None = None
    spread: float = 0.0
    render: Callable[[Event, _Pass], None] | None = None
    idx: int = -1
    ts: int = 0

    def as_message(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "role": self.role,
            "sender": self.sender,
            "recipient": self.recipient,
            "t_elapsed_s": self.ts,
            "content": self.content,
            "params": self.params,
            "status": self.status,
            "time_ms": self.time_ms,
            "reward": self.reward,
        }


@dataclass
class _Pass:
    """State of the finishing walk over the sorted log."""

    baseline_ms: float
    rng: random.Random
    best_ms: float
    best_idx: int = -1
    holder: str | None = None
    holder_variant: str | None = None
    holder_params: Params = field(default_factory=dict)
    agent_best: dict[str, tuple[float, str]] = field(default_factory=dict)
    tries: dict[str, int] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)
    #: trusted ok results so far: (time, index, agent, tag, params); a result whose
    #: verification came back unstable leaves this list (its gain is noise)
    oks: list[tuple[float, int, str, str, Params]] = field(default_factory=list)
    #: statuses of every result so far, rungs they tried, improvements kept, withdrawals
    statuses: dict[str, int] = field(default_factory=dict)
    tags: set[str] = field(default_factory=set)
    n_kept: int = 0
    withdrawn: int = 0
    #: unverified runs faster than the baseline (they ran, but count for nothing)
    fast_unverified: int = 0
    #: what the last merge saw: (results, kept, withdrawn, holder index, best, fast unverified)
    at_merge: tuple[int, int, int, int, float, int] | None = None

    def revert_best(self) -> None:
        """Shared best = the fastest trusted ok result so far (or the baseline)."""
        top = min(self.oks, default=None, key=lambda o: (o[0], o[1]))
        if top is None or top[0] >= self.baseline_ms:
            self.best_ms, self.best_idx = self.baseline_ms, -1
            self.holder, self.holder_variant, self.holder_params = None, None, {}
        else:
            self.best_ms, self.best_idx = top[0], top[1]
            self.holder, self.holder_variant, self.holder_params = top[2], top[3], dict(top[4])


#: Diagnostics caused by the configuration itself, not by how its code was typed.
_CONFIG_FAILURES = frozenset({"smem", "feature", "rung", "oom"})


@dataclass
class _TeamMemory:
    """What the team's log says, by the time it was logged (issue 39, swarm 1.4.0)."""

    #: (time, rung tag, bug) of every bug a result or a review reported
    bugs: list[tuple[float, str, str]] = field(default_factory=list)
    #: (time, agent id, slip kind) of every slip an agent was shown in its own code
    slips: list[tuple[float, str, str]] = field(default_factory=list)
    #: (rung tag, launch params) -> when its first result or review fail was logged
    tried: dict[tuple[str, tuple[tuple[str, Any], ...]], float] = field(default_factory=dict)
    #: (time, rung tag, verified ok time) of every ok result
    times: list[tuple[float, str, float]] = field(default_factory=list)
    #: (rung tag, launch params) -> (time, swarm status, submission) of a result that
    #: failed for its configuration (over the shared memory, a feature this GPU lacks, a
    #: rung or region measured wrong, out of memory): no teammate writes it again
    failed: dict[tuple[str, tuple[tuple[str, Any], ...]], tuple[float, str, Submission]] = field(
        default_factory=dict
    )

    def avoid(self, agent: str, tag: str, now: float) -> frozenset[str]:
        """Bugs logged in ``tag``'s code and slips ``agent`` was shown, by ``now``."""
        out = {b for t, g, b in self.bugs if g == tag and t <= now}
        out |= {k for t, a, k in self.slips if a == agent and t <= now}
        return frozenset(out)

    def logged(self, tag: str, p: Params, t: float) -> None:
        self.tried.setdefault((tag, tuple(sorted(p.items()))), t)

    def was_tried(self, tag: str, p: Params, now: float) -> bool:
        return self.tried.get((tag, tuple(sorted(p.items()))), math.inf) <= now

    def known_failure(self, tag: str, p: Params, now: float) -> tuple[str, Submission] | None:
        """(status, submission) of a logged failure of this configuration, by ``now``."""
        hit = self.failed.get((tag, tuple(sorted(p.items()))))
        return (hit[1], hit[2]) if hit is not None and hit[0] <= now else None

    def slow(self, tag: str, now: float) -> bool:
        """Whether ``tag``'s best logged time is ``SLOW_RUNG`` x the team's best or more."""
        known = [(g, x) for t, g, x in self.times if t <= now]
        mine = [x for g, x in known if g == tag]
        return bool(mine) and min(mine) >= SLOW_RUNG * min(x for _, x in known)


class Runtime:
    """Shared state of one episode: environment, team, clocks and the event log."""

    def __init__(self, spec: SwarmSpec, seed: int) -> None:
        self.spec = spec
        self.task = spec.task
        self.seed = seed
        self.env = KernelEnv(self.task)
        self.op = self.env.op
        self.gpu = self.env.gpu
        self.dtype = self.task.dtype
        self.rng = stream(NAMESPACE, "episode", STREAM_EPOCH, seed, spec.episode_id)
        # only rungs with execution evidence on this GPU's family (issue 39, 39b)
        rungs = evidenced_rungs(
            ladder(self.op.family, self.task.impl), self.op.name, self.task.impl, self.gpu.arch
        )
        self.base_rung = self.env.sound_baseline(rungs)
        self.mid_rungs = [v for v in rungs if 1 <= v.level <= 3]
        self.hw_rung = evidenced_rung(
            hw_choice(self.op.family, self.task.impl, self.gpu),
            self.op.name,
            self.task.impl,
            self.gpu.arch,
        )
        self.events: list[Event] = []
        self.results: list[Event] = []
        self.agents: list[SwarmAgent] = []
        self.by_id: dict[str, SwarmAgent] = {}
        self._seq = 0
        self._spaces: dict[str, list[Params]] = {}
        self.memory = _TeamMemory()
        # The lead measures the naive reference kernel before anyone plans anything (its
        # default launch; another config of the same rung if that one cannot run here).
        first = default_params(self.base_rung, self.op, self.dtype, self.task.shape, self.gpu)
        for p in [first, *(q for q in self.space(self.base_rung) if q != first)][:8]:
            sub = self.env.submit(Candidate.of(self.base_rung, p), self.rng)
            if sub.status == OK and sub.time_ms is not None:
                break
        else:
            raise RuntimeError(
                f"{spec.episode_id}: no baseline configuration of {self.base_rung.tag} runs"
            )
        self.base_params = p
        self.baseline_ms = sig4(sub.time_ms)
        self.lead_clock = self.rng.uniform(20.0, 90.0)

    # ------------------------------------------------------------------ team and menu
    def add_agents(self, roles: list[str]) -> list[SwarmAgent]:
        """Create specialists ``a01``… with their own random streams and skills."""
        out = []
        for role in roles:
            aid = f"a{len(self.agents) + 1:02d}"
            arng = stream(NAMESPACE, "agent", STREAM_EPOCH, self.seed, self.spec.episode_id, aid)
            agent = make_agent(self.env, arng, aid, role, draw_skill(arng))
            self.agents.append(agent)
            self.by_id[aid] = agent
            out.append(agent)
        return out

    def menu(self) -> list[Variant]:
        """Rungs worth assigning: the portable levels 1-3 and this GPU's level-4 rung."""
        rungs = list(self.mid_rungs)
        if self.hw_rung is not None:
            rungs.append(self.hw_rung)
        return rungs

    def known_wrong(self, v: Variant) -> bool:
        """Whether rung ``v`` was measured wrong on this GPU's arch family."""
        return rung_status(self.op.name, self.task.impl, v.tag, self.gpu.arch).wrong

    def space(self, v: Variant) -> list[Params]:
        """Valid configs of a rung that this GPU can compile (the lead knows the arch)."""
        if v.tag not in self._spaces:
            self._spaces[v.tag] = [
                p for p in iter_params(v, self.op, self.dtype) if not self.env.missing(v, p)
            ]
        return self._spaces[v.tag]

    def mma_choices(self, v: Variant) -> tuple[Any, ...]:
        for d in param_space(v, self.op, self.dtype):
            if d.name == "mma":
                return d.values
        return ()

    # ------------------------------------------------------------------ the log
    def emit(
        self,
        t: float,
        kind: str,
        sender: str,
        role: str,
        recipient: str | None,
        params: dict[str, Any] | None = None,
        content: str = "",
        **kw: Any,
    ) -> Event:
        e = Event(t, self._seq, kind, sender, role, recipient, dict(params or {}), content, **kw)
        self._seq += 1
        self.events.append(e)
        return e

    def barrier(self, lo: float = 20.0, hi: float = 90.0) -> float:
        """A time after every event so far: when the lead has read all reports.

        Everyone waits for it: no agent acts again before the barrier (``sync`` moves them
        past the lead's follow-up messages too).
        """
        t = max((e.t for e in self.events), default=self.lead_clock) + self.rng.uniform(lo, hi)
        self.lead_clock = t
        self.sync()
        return t

    def sync(self) -> None:
        """Agents resume only after the lead's latest message (merge, redirects...)."""
        for a in self.agents:
            a.clock = max(a.clock, self.lead_clock)

    def winner(self) -> Event | None:
        """The result holding the shared best right now (None if nothing beats the baseline)."""
        oks = [e for e in self.results if e.status == OK and e.time_ms is not None]
        if not oks:
            return None
        best = min(oks, key=lambda e: (e.time_ms, e.t, e.seq))
        return best if best.time_ms is not None and best.time_ms < self.baseline_ms else None

    def standings(self) -> list[tuple[float, str]]:
        """(own best, agent id) of every agent with a verified kernel, best first."""
        out = []
        for a in self.agents:
            b = a.best()
            if b is not None:
                out.append((b[0], a.id))
        return sorted(out)

    # ------------------------------------------------------------------ lead messages
    def plan(self, content: str, split: Any) -> Event:
        params = {"baseline": {"variant": self.base_rung.tag, **self.base_params}, "split": split}
        head = (
            f"plan ({self.spec.scenario}, {len(self.agents)} agents): {self.spec.card_op} on "
            f"{self.gpu.name} ({self.gpu.arch}), {self.dtype}; baseline {self.base_rung.tag} "
            f"measured at {fmt_ms(self.baseline_ms)} ms.\n"
        )
        return self.emit(
            self.lead_clock,
            "plan",
            LEAD_ID,
            LEAD,
            None,
            params,
            head + content,
            time_ms=self.baseline_ms,
        )

    def dispatch(
        self, t: float, agent: SwarmAgent, subtask: str, extra: dict[str, Any] | None = None
    ) -> Event:
        agent.clock = max(agent.clock, t)
        params = {"to": agent.id, "subtask": subtask, **(extra or {})}
        return self.emit(
            t, "dispatch", LEAD_ID, LEAD, agent.id, params, f"to {agent.id}: {subtask}"
        )

    def redirect(
        self, t: float, agent: SwarmAgent, v: Variant, why: str, extra: dict[str, Any] | None = None
    ) -> Event:
        agent.clock = max(agent.clock, t)
        params = {"to": agent.id, "variant": v.tag, **(extra or {})}
        return self.emit(
            t, "redirect", LEAD_ID, LEAD, agent.id, params, f"{agent.id}: switch to {v.tag}; {why}"
        )

    def handoff(
        self,
        t: float,
        src: SwarmAgent,
        dst: SwarmAgent,
        v: Variant,
        p: Params,
        time_ms: float | None,
        note: str,
    ) -> Event:
        """``src`` passes a kernel (rung + params) to ``dst``, who continues from it."""
        dst.seeds[v.tag] = dict(p)
        dst.clock = max(dst.clock, t)
        at = f" at {fmt_ms(time_ms)} ms" if time_ms is not None else ""
        params = {"to": dst.id, "variant": v.tag, "params": dict(p)}
        return self.emit(
            t,
            "handoff",
            src.id,
            src.role,
            dst.id,
            params,
            f"{src.id} -> {dst.id}: {v.tag} ({fmt_params(p)}){at}; {note}",
            time_ms=time_ms,
        )

    def status(self, agent: SwarmAgent, note: str = "") -> Event:
        """A progress report from an agent to the lead, stating its own record so far.

        Only what the agent has seen by now goes in: its own results (all earlier than
        this report), the reviews it got back and its best verified kernel.
        """
        agent.clock += agent.rng.uniform(5.0, 25.0)
        b = agent.best()
        tries = agent.sent
        mine = [e for e in self.results if e.recipient == agent.id and e.t <= agent.clock]
        counts: dict[str, int] = {}
        for e in mine:
            counts[e.status or ""] = counts.get(e.status or "", 0) + 1
        rejected = sum(
            1
            for e in self.events
            if e.kind == "review" and e.recipient == agent.id and e.status == "fail"
        )
        trouble = [
            f"{counts[k]} {label}{'s' if counts[k] > 1 else ''}"
            for k, label in (
                ("compile_error", "compile error"),
                ("wrong_result", "wrong result"),
                ("unsupported_arch", "arch rejection"),
                ("unverified", "unverified run"),
            )
            if counts.get(k)
        ]
        if rejected:
            trouble.append(f"{rejected} rejected in review")
        last = agent.reported
        if b is None:
            text = (
                f"{agent.id}: no verified kernel yet after {tries} "
                f"candidate{'s' if tries != 1 else ''}"
            )
            if trouble:
                text += f" ({', '.join(trouble)})"
            elif not mine:
                text += ", nothing measured so far"
            params: dict[str, Any] = {"tries": tries, "best_ms": None}
        else:
            t, tag, p = b
            ratio = self.baseline_ms / t
            vs = (
                f"{ratio:.2f}x vs baseline"
                if ratio >= 1.0
                else f"still {1 / ratio:.2f}x slower than the baseline"
            )
            if last is None:
                text = (
                    f"{agent.id}: first verified kernel, {tag} ({fmt_params(p)}) at {fmt_ms(t)} "
                    f"ms, {vs}, after {tries} candidate{'s' if tries != 1 else ''}"
                )
            elif t < last:
                text = (
                    f"{agent.id}: {tag} ({fmt_params(p)}) down to {fmt_ms(t)} ms from "
                    f"{fmt_ms(last)} ms ({100 * (1 - t / last):.1f}% faster), {vs} after {tries} "
                    "candidates"
                )
            else:
                since = tries - agent.reported_tries
                news = (
                    "none of the last " + str(since) + " beat it"
                    if since
                    else "nothing new since the last report"
                )
                text = (
                    f"{agent.id}: still {fmt_ms(t)} ms with {tag} ({fmt_params(p)}), {vs} after "
                    f"{tries} candidates; {news}"
                )
            if trouble:
                text += f"; {', '.join(trouble)} so far"
            params = {"tries": tries, "best_ms": t, "variant": tag}
            agent.reported = t
        agent.reported_tries = tries
        if note:
            text += f"; {note}"
        return self.emit(
            agent.clock,
            "status",
            agent.id,
            agent.role,
            LEAD_ID,
            params,
            text,
            time_ms=b[0] if b else None,
        )

    def leaderboard(self, t: float, label: str) -> Event:
        return self.emit(t, "leaderboard", ENV_ID, ENV, None, {}, label, render=_render_leaderboard)

    def merge(self, t: float, label: str) -> Event:
        return self.emit(t, "merge", LEAD_ID, LEAD, None, {}, label, render=_render_merge)

    def verdict(self) -> Event:
        t = self.barrier(30.0, 120.0)
        return self.emit(t, "verdict", LEAD_ID, LEAD, None, {}, "", render=self._render_verdict)

    # ------------------------------------------------------------------ kernels
    def _habits(self, agent: SwarmAgent, v: Variant, p: Params) -> tuple[Variant, Params]:
        """What an agent actually writes first when asked for rung ``v``."""
        wrong = agent.hands.wrong_hw
        if v is self.hw_rung and wrong is not None and agent.rng.random() < agent.p_habit:
            return wrong, agent.hands.defaults(wrong)
        natives = [m for m in self.mma_choices(v) if m != "f16"]
        if p.get("mma") == "f16" and natives and agent.rng.random() < agent.p_habit * 0.6:
            p = {**p, "mma": natives[0]}
        if not self.env.fits(v, p) and agent.hands.notices_overflow():
            p = agent.hands.shrink(v, p) or p
        return v, p

    def _fix(
        self,
        agent: SwarmAgent,
        status: str,
        sub: Submission,
        v: Variant,
        p: Params,
        want_v: Variant,
        want_p: Params,
    ) -> tuple[Variant, Params] | None:
        """The next candidate after a failure, or None when the agent gives the rung up."""
        if status == UNSUPPORTED_ARCH:
            missing = set(sub.missing)
            if "mma" in p and missing <= {"fp8_mma", "fp4_mma"} and "f16" in self.mma_choices(v):
                return v, {**p, "mma": "f16"}
            if want_v is not v and not self.env.missing(want_v, want_p):
                q = dict(want_p)
                for _ in range(4):
                    if self.env.fits(want_v, q):
                        break
                    q = agent.hands.shrink(want_v, q) or q
                return want_v, q
            return None
        if sub.error_kind == "smem":
            smaller = agent.hands.shrink(v, p)
            return (v, smaller) if smaller is not None else None
        if sub.error_kind in ("slip", "bug"):
            return v, p
        return None

    def _reportable(self, agent: SwarmAgent, v: Variant, p: Params) -> Params:
        """Keep over-cap configs away from templates that cannot report the overflow.

        Workaround: a CUDA template without the shared-memory ``static_assert`` guard
        (``templates/cuda/sampling.cu.j2`` at the time of writing) makes
        ``KernelEnv.submit`` raise instead of returning a compile error. For those only,
        the agent sizes the tile first (shrinks until it fits), as a careful engineer would.
        """
        if self.task.impl != "cuda" or self.env.fits(v, p) or _SMEM_GUARD in self.env.code(v, p):
            return p
        q: Params | None = p
        while q is not None and not self.env.fits(v, q):
            q = agent.hands.shrink(v, q)
        if q is None:
            fitting = [c for c in self.space(v) if self.env.fits(v, c)]
            q = agent.rng.choice(fitting) if fitting else p
        agent.rule_out(v, p)
        return q

    def attempt(
        self,
        agent: SwarmAgent,
        v: Variant,
        p: Params,
        kind: str,
        reviewer: SwarmAgent | None = None,
    ) -> tuple[Event | None, Submission, Event | None]:
        """Write one candidate and have it judged.

        Without a reviewer the harness judges it directly (candidate → result). With one,
        the reviewer reads it first and may reject it (candidate → review fail) before the
        harness ever sees it. Returns (result or None, submission, review or None).
        """
        p = self._reportable(agent, v, p)
        cand = agent.hands.dress(v, p, kind)
        # what it or a teammate was shown is not written again (the log by its own clock)
        sub = self.env.submit(
            cand, agent.rng, avoid=self.memory.avoid(agent.id, v.tag, agent.clock)
        )
        think, comp, bench = agent.hands.durations(kind, sub, v)
        t = agent.clock + think * agent.pace
        params = {"variant": v.tag, **p}
        to = reviewer.id if reviewer is not None else ENV_ID
        self.emit(t, "candidate", agent.id, agent.role, to, params, sub.code)
        agent.sent += 1
        review = None
        if reviewer is not None:
            t_rev = (
                max(reviewer.clock, t)
                + math.exp(reviewer.rng.gauss(math.log(70.0), 0.4)) * reviewer.pace
            )
            reviewer.clock = t_rev
            # the reviewer reads the source; the harness has not compiled it yet, so
            # nothing of ``sub`` but its code is looked at
            reading = read_candidate(self.env, v, p, sub.code, cand.bug)
            found = reading.defect
            caught = bool(reading.missing) or reading.over
            if found is not None and found[0] in ("slip", "bug"):
                caught = reviewer.rng.random() < reviewer.p_catch(found[0]) or caught
            note = fail_note(reading, self.gpu.arch) if caught else pass_note(reading)
            review = self.emit(
                t_rev,
                "review",
                reviewer.id,
                reviewer.role,
                agent.id,
                params,
                f"review of {agent.id}'s {v.tag}: {'fail' if caught else 'pass'} - {note}",
                status="fail" if caught else "pass",
            )
            t = t_rev
            if caught:
                agent.clock = t_rev
                agent.record(v, p, None)
                self.memory.logged(v.tag, p, t_rev)
                if found is not None and found[0] == "bug" and cand.bug:
                    self.memory.bugs.append((t_rev, v.tag, cand.bug))
                return None, sub, review
        status = result_status(sub)
        time_ms = sig4(sub.time_ms) if status in RAN and sub.time_ms is not None else None
        res = self.emit(
            t + comp + bench,
            "result",
            ENV_ID,
            ENV,
            agent.id,
            params,
            status=status,
            time_ms=time_ms,
            sub=sub,
            variant=v,
            spread=sub.spread_pct,
            render=self._render_result,
        )
        self.results.append(res)
        self._remember(agent, v, p, sub, res)
        agent.clock = res.t
        # an agent's own best is a verified kernel: an unverified time is not a result;
        # any median it was shown still teaches it what the move did
        agent.record(v, p, time_ms if status == OK else None)
        if time_ms is not None:
            agent.observe(v, p, time_ms)
        return res, sub, review

    def _remember(
        self, agent: SwarmAgent, v: Variant, p: Params, sub: Submission, res: Event
    ) -> None:
        """Put a result on the team's memory: its configuration, its verified time, and
        the bug or slip it reported."""
        self.memory.logged(v.tag, p, res.t)
        if res.status == OK and res.time_ms is not None:
            self.memory.times.append((res.t, v.tag, res.time_ms))
        if sub.error_kind in _CONFIG_FAILURES and res.status is not None:
            key = (v.tag, tuple(sorted(p.items())))
            self.memory.failed.setdefault(key, (res.t, res.status, sub))
        if sub.status == WRONG_RESULT and sub.error_kind == "bug" and sub.extra.get("bug"):
            self.memory.bugs.append((res.t, v.tag, str(sub.extra["bug"])))
        elif sub.slip is not None:
            self.memory.slips.append((res.t, agent.id, sub.slip.kind))

    def implement(
        self,
        agent: SwarmAgent,
        v: Variant,
        params: Params | None = None,
        *,
        habits: bool = True,
        reviewer: SwarmAgent | None = None,
        max_fixes: int = 3,
        kind: str = "variant",
    ) -> Event | None:
        """Write rung ``v`` (from ``params`` or the agent's first guess) and fix it until it runs.

        Returns the last result (ok or not), or None if every attempt died in review.
        """
        want_p = dict(params) if params is not None else agent.start_point(v)
        cur_v, cur_p = self._habits(agent, v, want_p) if habits else (v, want_p)
        last: Event | None = None
        for _ in range(max_fixes + 1):
            known = self.memory.known_failure(cur_v.tag, cur_p, agent.clock)
            if known is not None:
                # a teammate's result on the log: this configuration cannot work here, so
                # the agent writes the fix it called for instead of resubmitting it
                status, sub = known
            else:
                res, sub, _review = self.attempt(agent, cur_v, cur_p, kind, reviewer)
                if res is not None:
                    last = res
                    if res.status in RAN:
                        return res
                status = (res.status if res is not None else result_status(sub)) or ""
            nxt = self._fix(agent, status, sub, cur_v, cur_p, v, want_p)
            if nxt is None:
                break
            cur_v, cur_p = nxt
            kind = "fix"
        return last

    def tune(
        self,
        agent: SwarmAgent,
        v: Variant,
        steps: int,
        *,
        focus: str | None = None,
        within: Callable[[Params], bool] | None = None,
    ) -> None:
        """Hill-climb rung ``v`` from the agent's best (or handed-off) config.

        ``focus`` makes the agent prefer moves along one parameter (a redirect's region);
        ``within`` keeps it inside a slice of the space (a sweep or campaign cell).
        """
        for _ in range(steps):
            if focus is None and self.memory.slow(v.tag, agent.clock):
                return  # measured much slower than the team's best: no reason to go on
            options = self._tune_options(agent, v, focus, within)
            if not options:
                return
            fallback = agent.own[v.tag][0] if v.tag in agent.own else self.baseline_ms
            q = agent.pick(self.env, v, options, fallback)
            res, sub, _ = self.attempt(agent, v, q, "tune")
            if res is not None and res.status not in RAN:
                nxt = self._fix(agent, res.status or "", sub, v, q, v, q)
                if nxt is not None:
                    self.attempt(agent, nxt[0], nxt[1], "fix")

    def _tune_options(
        self,
        agent: SwarmAgent,
        v: Variant,
        focus: str | None,
        within: Callable[[Params], bool] | None,
    ) -> list[Params]:
        """The configurations one tuning step chooses from: the untried neighbours of the
        agent's start point (along ``focus`` when it has any), else up to 8 untried ones of
        the rung; "untried" by the agent and by the team's log (``_TeamMemory``)."""
        mem = self.memory
        base = agent.start_point(v)
        opts: list[tuple[Params, str]] = []
        for q, dim, _sign in agent.hands.neighbours(v, base):
            if (
                agent.has_tried(v, q)
                or mem.was_tried(v.tag, q, agent.clock)
                or self.env.missing(v, q)
                or (within is not None and not within(q))
            ):
                continue
            if not self.env.fits(v, q) and agent.hands.notices_overflow():
                agent.rule_out(v, q)
                continue
            opts.append((q, dim))
        if focus is not None:
            opts = [o for o in opts if o[1] == focus] or opts
        if opts:
            return [q for q, _ in opts]
        pool = [
            q
            for q in self.space(v)
            if not agent.has_tried(v, q)
            and not mem.was_tried(v.tag, q, agent.clock)
            and (within is None or within(q))
        ]
        return agent.rng.sample(pool, min(8, len(pool))) if pool else []

    def verify(self, verifier: SwarmAgent, ref: Event, ready: float, to: str) -> Event:
        """Re-benchmark a verified kernel over more runs and check it on ragged shapes."""
        assert ref.sub is not None and ref.sub.prediction is not None and ref.time_ms is not None
        t = max(verifier.clock, ready) + verifier.rng.uniform(30.0, 90.0) * verifier.pace
        measured, spread = benchmark(
            ref.sub.prediction.time_ms, verifier.rng, ref.sub.prediction.floor_ms
        )
        measured = sig4(measured)
        drift = abs(measured / ref.time_ms - 1.0)
        ok = drift <= 3.0 * noise_sigma(ref.time_ms) + 0.01
        verifier.clock = t
        params = {"variant": ref.params["variant"], **launch_params(ref.params)}
        return self.emit(
            t,
            "verify",
            verifier.id,
            verifier.role,
            to,
            params,
            status="pass" if ok else "unstable",
            time_ms=measured,
            ref=ref,
            spread=spread,
            render=self._render_verify,
        )

    # ------------------------------------------------------------------ finishing
    def finish(self) -> dict[str, Any]:
        """Freeze the log into the card's row (see module docstring for the steps)."""
        ev = sorted(self.events, key=lambda e: (e.t, e.seq))
        if not ev or ev[-1].kind != "verdict":
            raise RuntimeError("an episode must end with its verdict")
        hours = math.exp(self.rng.gauss(math.log(2.3) + 0.3 * math.log(len(ev) / 71.0), 0.33))
        target = min(MAX_HOURS - 0.05, max(MIN_HOURS + 0.02, hours)) * 3600.0
        scale = target / ev[-1].t
        st = _Pass(
            self.baseline_ms,
            stream(NAMESPACE, "feedback", STREAM_EPOCH, self.seed, self.spec.episode_id),
            self.baseline_ms,
        )
        for i, e in enumerate(ev):
            e.idx = i
            e.ts = int(round(e.t * scale))
        for e in ev:
            if e.kind == "candidate":
                st.tries[e.sender] = st.tries.get(e.sender, 0) + 1
            if e.render is not None:
                e.render(e, st)
        agents = []
        for a in self.agents:
            oks = [
                e.time_ms
                for e in self.results
                if e.recipient == a.id and e.status == OK and e.time_ms is not None
            ]
            agents.append(
                a.as_dict(st.tries.get(a.id, 0), st.kept.get(a.id, 0), min(oks) if oks else None)
            )
        best = st.best_ms
        verdict = ev[-1]
        task = self.task
        return {
            "episode_id": self.spec.episode_id,
            "scenario": self.spec.scenario,
            "n_agents": len(self.agents),
            "op": self.spec.card_op,
            "impl": task.impl,
            "gpu": task.gpu,
            "arch": self.gpu.arch,
            "dtype": task.dtype,
            "shape": task.shape,
            "baseline_ms": self.baseline_ms,
            "best_ms": best,
            "speedup": episode_speedup(self.baseline_ms, best),
            "elapsed_s": verdict.ts,
            "agents": agents,
            "num_messages": len(ev),
            "messages": [e.as_message() for e in ev],
        }

    def _render_result(self, e: Event, st: _Pass) -> None:
        sub = e.sub
        assert sub is not None and e.status is not None and e.recipient is not None
        prev = st.best_ms
        e.reward, kept = result_reward(e.status, e.time_ms, prev)
        tag = e.params["variant"]
        head = f"{stamp(e.ts)} RESULT {e.status} ({e.recipient}, {tag})"
        if e.status in RAN:
            assert e.time_ms is not None and sub.prediction is not None
            err = 10 ** st.rng.uniform(-4.3, -2.4)
            res = resource_line(
                self.task.impl, sub.prediction, launch_params(e.params), sub.prediction.plan
            )
            body = ok_result(
                e.time_ms,
                e.spread,
                200,
                self.baseline_ms,
                prev,
                max(st.best_idx, 0),
                kept,
                err,
                res,
                None if e.status == OK else unverified_line(tag, self.gpu.arch),
            )
        else:
            body = sub.detail.rstrip()
        e.content = f"{head}\n{body}\nreward {e.reward:+.4f}"
        if kept:
            assert e.time_ms is not None
            st.best_ms, st.best_idx = e.time_ms, e.idx
            st.holder, st.holder_variant, st.holder_params = (
                e.recipient,
                tag,
                launch_params(e.params),
            )
            st.kept[e.recipient] = st.kept.get(e.recipient, 0) + 1
            st.n_kept += 1
        st.statuses[e.status] = st.statuses.get(e.status, 0) + 1
        st.tags.add(tag)
        if e.status == "unverified" and e.time_ms is not None and e.time_ms < self.baseline_ms:
            st.fast_unverified += 1
        if e.status == OK and e.time_ms is not None:
            st.oks.append((e.time_ms, e.idx, e.recipient, tag, launch_params(e.params)))
            cur = st.agent_best.get(e.recipient)
            if cur is None or e.time_ms < cur[0]:
                st.agent_best[e.recipient] = (e.time_ms, tag)

    def _render_verify(self, e: Event, st: _Pass) -> None:
        """The verifier's own re-run, and what the lead does with an unstable one.

        Correctness is claimed only for a rung with execution evidence (an ``ok``). An
        ``unstable`` re-measurement means the recorded gain is noise: the result leaves the
        trusted set, a kept improvement's reward is taken back (this message carries minus
        that reward) and the shared best falls back to the fastest trusted result.
        """
        ref = e.ref
        assert ref is not None and ref.time_ms is not None and e.time_ms is not None
        tag = e.params["variant"]
        e.params["ref"] = ref.idx
        band = 3.0 * noise_sigma(ref.time_ms) + 0.01
        drift = e.time_ms / ref.time_ms - 1.0
        err = 10 ** st.rng.uniform(-4.5, -2.6)
        if ref.status == OK:
            check = (
                f"correct on the task shape and two ragged shapes: max_abs_err {err:.1e} "
                f"(atol {ATOL:.0e}, rtol {RTOL:.0e})"
            )
        else:
            check = (
                "output not checked: no reference comparison runs for this configuration, "
                "so only the timing is re-measured"
            )
        rerun = rebench_result(
            e.time_ms, e.spread, 1000, self.baseline_ms, ref.time_ms, ref.idx, tag
        )
        if e.status == "pass":
            if abs(drift) < 0.005:
                decision = f"{drift:+.1%} from the recorded time: it stands"
            else:
                decision = (
                    f"{drift:+.1%} from the recorded time, inside the ±{band:.1%} noise band: it "
                    "stands"
                )
            if ref.idx == st.best_idx:
                decision += f"; {ref.recipient}'s kernel remains the shared best"
        else:
            decision = (
                f"{drift:+.1%} from the recorded time, outside the ±{band:.1%} noise band: "
                "treat the gain as noise"
            )
            was_best = ref.idx == st.best_idx
            before = st.best_ms
            st.oks = [o for o in st.oks if o[1] != ref.idx]
            e.reward = withdrawal_reward(ref.reward)
            if e.reward is not None:
                assert ref.reward is not None
                decision += (
                    f"; the {ref.reward:+.4f} kept-improvement reward of message {ref.idx} is "
                    f"taken back ({e.reward:+.4f})"
                )
                st.withdrawn += 1
            st.revert_best()
            if was_best or st.best_ms != before:
                who = (
                    f"{st.holder}'s {st.holder_variant} at {fmt_ms(st.best_ms)} ms"
                    if st.holder is not None
                    else f"the baseline ({fmt_ms(st.best_ms)} ms)"
                )
                decision += f"; the shared best falls back to {who}"
            elif ref.status == OK:
                decision += (
                    f"; it was not the shared best ({fmt_ms(st.best_ms)} ms), nothing else changes"
                )
        e.content = (
            f"verify {tag} by {ref.recipient} (message {ref.idx}): "
            f"{e.status}\n{check}\n{rerun}\n{decision}"
        )

    def _render_verdict(self, e: Event, st: _Pass) -> None:
        best = st.best_ms
        speedup = episode_speedup(self.baseline_ms, best)
        e.reward = verdict_reward(speedup)
        e.time_ms = best
        base_ok = step_status(
            self.op.name,
            self.task.impl,
            self.base_rung.tag,
            self.gpu.arch,
            dict(self.base_params),
            self.task.shape,
            self.dtype,
        ).verified
        e.status = (
            "improved"
            if st.holder is not None
            else ("no_gain" if base_ok else "no_verified_kernel")
        )
        kernel = dict(st.holder_params) if st.holder is not None else dict(self.base_params)
        # the baseline is the episode's best kernel only if its rung is verified on this
        # family; otherwise the team ends with no kernel known to be correct
        variant = st.holder_variant or (self.base_rung.tag if base_ok else None)
        e.params = {
            "winner": st.holder,
            "variant": variant,
            "params": kernel if variant else {},
            "baseline_ms": self.baseline_ms,
            "best_ms": best,
            "speedup": speedup,
        }
        base = f"the {self.base_rung.tag} baseline ({fmt_ms(self.baseline_ms)} ms)"
        if st.holder is not None:
            size = (
                "an order of magnitude"
                if speedup >= 10
                else "a clear gain"
                if speedup >= 1.5
                else "a modest gain"
                if speedup >= 1.1
                else "a marginal gain"
            )
            head = (
                f"{st.holder}'s {st.holder_variant} ({fmt_params(st.holder_params)}) wins at "
                f"{fmt_ms(best)} ms, {speedup:.2f}x over {base}: {size}"
            )
        elif base_ok:
            head = f"no verified kernel beat {base}; it stays the team's kernel"
        else:
            head = (
                f"no verified kernel: none beat {base}, and {self.base_rung.tag}'s output "
                "was never checked on this GPU"
            )
        if st.holder is None and st.fast_unverified:
            head += (
                f" ({st.fast_unverified} faster run{'s' if st.fast_unverified > 1 else ''} "
                "of unchecked kernels cannot count)"
            )
        n = sum(st.statuses.values())
        parts = [
            f"{st.statuses[k]} {label if st.statuses[k] == 1 else label.replace('error', 'errors')}"
            for k, label in (
                (OK, "ok"),
                ("unverified", "unverified"),
                ("compile_error", "compile error"),
                ("wrong_result", "wrong"),
                (UNSUPPORTED_ARCH, "rejected for the arch"),
            )
            if st.statuses.get(k)
        ]
        facts = f"{n} results on {len(st.tags)} rung{'s' if len(st.tags) != 1 else ''}"
        if parts:
            facts += f" ({', '.join(parts)})"
        facts += f", {st.n_kept} kept improvement{'s' if st.n_kept != 1 else ''}"
        if st.withdrawn:
            facts += f", {st.withdrawn} withdrawn as noise"
        e.content = (
            f"verdict after {hms(e.ts)}: {head}; {facts}; "
            f"terminal reward log2({speedup:.2f})/4 = {e.reward:+.4f}"
        )


def _render_leaderboard(e: Event, st: _Pass) -> None:
    ranking = sorted(
        ((t, aid, tag) for aid, (t, tag) in st.agent_best.items()), key=lambda x: (x[0], x[1])
    )
    e.params = {
        "ranking": [{"agent": aid, "best_ms": t, "variant": tag} for t, aid, tag in ranking]
    }
    e.time_ms = ranking[0][0] if ranking else None
    lines = [f"leaderboard ({e.content}):"] if e.content else ["leaderboard:"]
    for i, (t, aid, tag) in enumerate(ranking, 1):
        lines.append(f"{i:>2}. {aid}  {fmt_ms(t)} ms  {st.baseline_ms / t:.2f}x  {tag}")
    if not ranking:
        lines.append("no verified kernels yet")
    e.content = "\n".join(lines)


def _render_merge(e: Event, st: _Pass) -> None:
    """The lead's merge decision, stated against what changed since the last merge."""
    label = e.content
    e.time_ms = st.best_ms
    n_res = sum(st.statuses.values())
    prev = st.at_merge
    since = n_res - (prev[0] if prev else 0)
    gains = st.n_kept - (prev[1] if prev else 0)
    dropped = st.withdrawn - (prev[2] if prev else 0)
    fast = st.fast_unverified - (prev[5] if prev else 0)
    st.at_merge = (n_res, st.n_kept, st.withdrawn, st.best_idx, st.best_ms, st.fast_unverified)
    scope = "since the last merge" if prev else "so far"
    tail = f"; {dropped} noisy gain{'s' if dropped > 1 else ''} withdrawn" if dropped else ""
    if fast:
        tail += (
            f"; {fast} faster run{'s are' if fast > 1 else ' is'} unverified on this arch "
            "and cannot be adopted"
        )
    if st.holder is None:
        e.params = {"winner": None, "variant": None, "params": {}, "best_ms": st.best_ms}
        if since == 0:
            e.content = (
                f"merge ({label}): no new results {scope}; the baseline's {fmt_ms(st.best_ms)} ms "
                f"stays the reference{tail}"
            )
        else:
            e.content = (
                f"merge ({label}): none of the {since} result{'s' if since != 1 else ''} {scope} "
                "is a verified kernel faster than the baseline; shared best stays "
                f"{fmt_ms(st.best_ms)} ms{tail}"
            )
        return
    e.params = {
        "winner": st.holder,
        "variant": st.holder_variant,
        "params": dict(st.holder_params),
        "best_ms": st.best_ms,
    }
    kernel = f"{st.holder}'s {st.holder_variant} ({fmt_params(st.holder_params)})"
    ratio = st.baseline_ms / st.best_ms
    if prev is not None and prev[3] == st.best_idx:
        news = (
            "none of the " + str(since) + " results since the last merge is faster"
            if since
            else "no new results"
        )
        e.content = (
            f"merge ({label}): keep {kernel} at {fmt_ms(st.best_ms)} ms ({ratio:.2f}x vs "
            f"baseline); {news}{tail}"
        )
    elif prev is not None and prev[3] >= 0 and st.best_ms > prev[4]:
        e.content = (
            f"merge ({label}): fall back to {kernel} at {fmt_ms(st.best_ms)} ms ({ratio:.2f}x vs "
            f"baseline): the previous shared best {fmt_ms(prev[4])} ms did not survive verification"
            f"; {since} result{'s' if since != 1 else ''} since the last merge{tail}"
        )
    elif prev is not None and prev[3] >= 0:
        e.content = (
            f"merge ({label}): adopt {kernel} at {fmt_ms(st.best_ms)} ms, "
            f"{100 * (1 - st.best_ms / prev[4]):.1f}% under the previous shared best "
            f"{fmt_ms(prev[4])} ms; {ratio:.2f}x vs baseline, {gains} "
            f"improvement{'s' if gains != 1 else ''} in {since} results{tail}"
        )
    else:
        e.content = (
            f"merge ({label}): adopt {kernel} as the first shared best below the baseline, "
            f"{fmt_ms(st.best_ms)} ms = {ratio:.2f}x; {gains} "
            f"improvement{'s' if gains != 1 else ''} in {since} results {scope}{tail}"
        )
