"""Swarm agents: identity, role, skill, and the engineer's hands they write kernels with.

An agent does not re-implement how a kernel engineer writes code. Each one owns a
``Hands`` object that wraps the single-agent ``Engineer`` of ``..agent`` and exposes only
its per-candidate helpers: first-guess parameters, one-step neighbours in the parameter
grid, shrinking a tile that overflows shared memory, the slip / planted-bug model and the
think / compile / bench durations. Those helpers already scale with ``AgentProfile.skill``,
so error rates and timing stay identical in spirit to kernelinfer.

What *is* new here is the team-level policy: which configuration an agent picks from a
shortlist (skilled agents weigh more options, with less noisy hunches, from what they
have measured themselves), how often it reaches for
a rung the GPU cannot run out of habit, how well it reviews someone else's code, and how
fast it works. All of it depends on ``skill`` so the data shows the effect.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from ..agent import AgentProfile, Engineer
from ..env import Candidate, KernelEnv, Submission
from ..variants import Params, Variant

LEAD_ID = "a00"
ENV_ID = "env"

WORKER = "worker"
PROPOSER = "proposer"
REVIEWER = "reviewer"
VERIFIER = "verifier"
TUNER = "tuner"
LEAD = "lead"
ENV = "env"
AGENT_ROLES: tuple[str, ...] = (WORKER, PROPOSER, REVIEWER, VERIFIER, TUNER)

ParamKey = tuple[tuple[str, Any], ...]


def param_key(p: Params) -> ParamKey:
    """Order-free identity of a parameter dict (for "already tried" bookkeeping)."""
    return tuple(sorted(p.items()))


class Hands:
    """The per-candidate craft of ``Engineer``, without its single-agent session loop.

    This is the only place that touches ``Engineer`` internals, so if the engineer's helper
    names change, this adapter is the one thing to update.
    """

    def __init__(self, env: KernelEnv, rng: random.Random, skill: float) -> None:
        # The engineer already scales slips and bugs with skill; a team of mixed skill needs
        # a wider spread, so the base rates scale too (about 2.5x fewer mistakes at 0.95
        # than at 0.4, with the default rates near the mean skill of ~0.7).
        base = AgentProfile()
        spread = 1.6 - 0.9 * skill
        profile = AgentProfile(skill=skill, p_slip=base.p_slip * spread, p_bug=base.p_bug * spread)
        self._eng = Engineer(env, rng, 0, profile)

    @property
    def profile(self) -> AgentProfile:
        return self._eng.prof

    @property
    def hw_rung(self) -> Variant | None:
        return self._eng.hw_rung

    @property
    def wrong_hw(self) -> Variant | None:
        return self._eng.wrong_hw

    def defaults(self, v: Variant) -> Params:
        return self._eng._defaults(v)

    def neighbours(self, v: Variant, p: Params) -> list[tuple[Params, str, int]]:
        return self._eng._neighbors(v, p)

    def shrink(self, v: Variant, p: Params) -> Params | None:
        return self._eng._shrink_for_smem(v, p)

    def dress(self, v: Variant, p: Params, kind: str) -> Candidate:
        """The candidate as actually written: maybe with a slip or a planted bug."""
        return self._eng._maybe_mistake(v, p, kind)

    def notices_overflow(self) -> bool:
        return self._eng._notices_overflow()

    def durations(self, kind: str, sub: Submission, v: Variant) -> tuple[float, float, float]:
        return self._eng._durations(kind, sub, v)


@dataclass
class SwarmAgent:
    """One specialist of a team and what it has learnt during the episode."""

    id: str
    role: str
    skill: float
    rng: random.Random
    hands: Hands
    pace: float
    clock: float = 0.0
    #: candidates written so far (the ``tries`` of the card's agent entry)
    sent: int = 0
    #: own best verified time and params per variant tag
    own: dict[str, tuple[float, Params]] = field(default_factory=dict)
    #: configurations already submitted (or ruled out on paper) per variant tag
    tried: dict[str, set[ParamKey]] = field(default_factory=dict)
    #: where the agent starts tuning a variant it has not measured itself (handoffs)
    seeds: dict[str, Params] = field(default_factory=dict)
    #: best time and candidate count at the agent's last status report
    reported: float | None = None
    reported_tries: int = 0
    #: every time this agent has measured, per variant tag and configuration (verified or
    #: not: a median it was shown), and what one-notch moves did to it: the agent's only
    #: source for guessing a configuration's time (it never sees the model's prediction)
    seen: dict[str, dict[ParamKey, float]] = field(default_factory=dict)
    effects: dict[tuple[str, str, int], list[float]] = field(default_factory=dict)

    # -- behaviour knobs derived from skill -------------------------------------------
    @property
    def p_habit(self) -> float:
        """Chance of first reaching for the fancier rung this GPU cannot run."""
        return self.hands.profile.p_habit * (1.3 - self.skill)

    def p_catch(self, defect: str) -> float:
        """Chance that this agent, reviewing code, spots a defect of the given kind."""
        base = {
            "slip": (0.30, 0.60),
            "bug": (0.15, 0.55),
            "feature": (0.40, 0.55),
            "smem": (0.20, 0.60),
        }
        lo, span = base.get(defect, (0.2, 0.5))
        return min(0.97, lo + span * self.skill)

    # -- bookkeeping -------------------------------------------------------------------
    def record(self, v: Variant, p: Params, ok_time: float | None) -> None:
        self.tried.setdefault(v.tag, set()).add(param_key(p))
        if ok_time is not None:
            cur = self.own.get(v.tag)
            if cur is None or ok_time < cur[0]:
                self.own[v.tag] = (ok_time, dict(p))

    def observe(self, v: Variant, p: Params, time_ms: float) -> None:
        """Learn from a measured time: against every earlier measurement of the rung that
        differs in one parameter, the log time ratio of that move (its direction is the
        order of the two values)."""
        seen = self.seen.setdefault(v.tag, {})
        for k, t in seen.items():
            other = dict(k)
            diff = [d for d in p if other.get(d) != p[d]]
            if len(diff) != 1:
                continue
            d = diff[0]
            a, b = other.get(d), p[d]
            if not (isinstance(a, int | float) and isinstance(b, int | float)):
                continue
            sign = 1 if b > a else -1
            self.effects.setdefault((v.tag, d, sign), []).append(math.log(time_ms / t))
        seen[param_key(p)] = time_ms

    def estimate(self, v: Variant, p: Params, fallback_ms: float) -> float:
        """Own guess of ``p``'s time: the nearest configuration it has measured on this
        rung (fewest differing parameters, then the closest values, then the faster),
        moved by the effects it has measured for each differing parameter;
        ``fallback_ms`` with nothing measured."""
        seen = self.seen.get(v.tag)
        if not seen:
            return fallback_ms
        best: tuple[int, float, float, ParamKey] | None = None
        for k, t in seen.items():
            other = dict(k)
            diff = [d for d in p if other.get(d) != p[d]]
            gap = sum(_octaves(other.get(d), p[d]) for d in diff)
            if best is None or (len(diff), gap, t) < best[:3]:
                best = (len(diff), gap, t, k)
        assert best is not None
        _, _, t, k = best
        other = dict(k)
        log_t = math.log(t)
        for d, b in p.items():
            a = other.get(d)
            if a == b or not (isinstance(a, int | float) and isinstance(b, int | float)):
                continue
            e = self.effects.get((v.tag, d, 1 if b > a else -1))
            log_t += sum(e) / len(e) if e else 0.0
        return math.exp(log_t)

    def has_tried(self, v: Variant, p: Params) -> bool:
        return param_key(p) in self.tried.get(v.tag, set())

    def rule_out(self, v: Variant, p: Params) -> None:
        self.tried.setdefault(v.tag, set()).add(param_key(p))

    def best(self) -> tuple[float, str, Params] | None:
        """Own best over all variants: (time, tag, params)."""
        if not self.own:
            return None
        tag, (t, p) = min(self.own.items(), key=lambda kv: (kv[1][0], kv[0]))
        return t, tag, p

    def start_point(self, v: Variant) -> Params:
        if v.tag in self.own:
            return dict(self.own[v.tag][1])
        if v.tag in self.seeds:
            return dict(self.seeds[v.tag])
        return self.hands.defaults(v)

    # -- judgement ---------------------------------------------------------------------
    def pick(self, env: KernelEnv, v: Variant, options: list[Params], fallback_ms: float) -> Params:
        """Choose one option the way this agent would.

        A skilled agent weighs more options "in its head" and its hunch about each is less
        noisy. The estimate is its own (``estimate``: what it has measured on the rung and
        what each move did), never the simulator's prediction, so a proposal is only as
        good as the agent's measurements. ``env`` is unused: kept so callers need not
        change; the observation-only contract is tested by ``test_swarm_agents``.
        """
        del env
        k = 1 + int(self.rng.random() < self.skill) + int(self.rng.random() < self.skill * 0.6)
        k += int(self.skill > 0.85)
        opts = self.rng.sample(options, min(k, len(options)))
        sigma = 0.35 * (1.2 - self.skill)

        def guess(p: Params) -> float:
            return self.estimate(v, p, fallback_ms) * math.exp(self.rng.gauss(0.0, sigma))

        return min(opts, key=guess)

    def shortlist(
        self, env: KernelEnv, v: Variant, space: list[Params], n: int, fallback_ms: float
    ) -> list[Params]:
        """Up to ``n`` untried configs from ``space``, best-guess first.

        Configurations the agent works out on paper to overflow shared memory (the
        footprint follows from the tile sizes; ``env.fits``) are dropped and remembered
        when it notices, which skilled agents do more often. The ranking is the agent's
        own ``estimate``, never the simulator's prediction.
        """
        pool = [p for p in space if not self.has_tried(v, p)]
        self.rng.shuffle(pool)
        pool = pool[: 6 + int(10 * self.skill)]
        sigma = 0.35 * (1.2 - self.skill)
        scored: list[tuple[float, int, Params]] = []
        for i, p in enumerate(pool):
            if not env.fits(v, p) and self.hands.notices_overflow():
                self.rule_out(v, p)
                continue
            t = self.estimate(v, p, fallback_ms)
            scored.append((t * math.exp(self.rng.gauss(0.0, sigma)), i, p))
        scored.sort(key=lambda x: (x[0], x[1]))
        return [p for _, _, p in scored[:n]]

    def as_dict(self, tries: int, kept: int, best_ms: float | None) -> dict[str, Any]:
        return {
            "id": self.id,
            "role": self.role,
            "skill": self.skill,
            "tries": tries,
            "kept": kept,
            "best_ms": best_ms,
        }


def _octaves(a: Any, b: Any) -> float:
    """How far apart two parameter values are (|log2 ratio|; 1 for anything else)."""
    if isinstance(a, int | float) and isinstance(b, int | float) and a > 0 and b > 0:
        return abs(math.log2(b / a))
    return 1.0


def make_agent(
    env: KernelEnv, rng: random.Random, agent_id: str, role: str, skill: float
) -> SwarmAgent:
    """A specialist with its own random stream, hands and working pace."""
    pace = math.exp(rng.gauss(0.0, 0.22)) * (1.25 - 0.3 * skill)
    return SwarmAgent(agent_id, role, skill, rng, Hands(env, rng, skill), pace)


def draw_skill(rng: random.Random) -> float:
    """Skill in [0.30, 0.99], most agents competent (Beta(5, 2), mean ~0.71)."""
    return round(min(0.99, max(0.30, rng.betavariate(5.0, 2.0))), 2)
