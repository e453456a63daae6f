"""A competent kernel engineer: the policy that drives a ``KernelEnv``.

The engineer writes a naive baseline first, climbs the variant ladder (tiled → vectorised /
tensor cores → pipelined → the hardware-specific rung of its GPU), then hill-climbs launch
parameters around the best rung, occasionally revisiting the runner-up, re-benchmarking
the incumbent and finally plateauing. It makes the mistakes engineers make (typos, a
missing cast, the legacy shuffle intrinsic, reaching for wgmma or TMA on a GPU without
them, native FP8 MMA on Ampere, tiles or stages past the shared-memory cap, planted logic
bugs such as a missing ``__syncthreads``) and fixes them on the next step.

``AgentProfile.skill`` (0..1) scales how well it guesses promising parameters and how
rarely it slips, so a multi-agent generator can field specialists of different skill on
the same environment.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from .codegen import slip_kinds
from .env import COMPILE_ERROR, OK, WRONG_RESULT, Candidate, KernelEnv, Submission
from .variants import (
    Params,
    Variant,
    default_params,
    features_used,
    hw_choice,
    iter_params,
    ladder,
    param_space,
    tempting_wrong_hw,
    valid,
)
from .verification import sound_baseline

#: Parameters that grow shared memory when increased (first ones are cut first on overflow).
_SMEM_DIMS = (
    "stages",
    "num_stages",
    "BN",
    "BM",
    "BLOCK_N",
    "BLOCK_M",
    "BK",
    "BLOCK_K",
    "chunk",
    "rows",
    "ROWS",
    "tile",
    "CHUNK",
    "BLOCK_D",
    "items",
    "radix_bits",
)


@dataclass(frozen=True)
class AgentProfile:
    """Behavioural knobs of one engineer."""

    skill: float = 0.8
    p_slip: float = 0.2
    p_bug: float = 0.112
    p_habit: float = 0.45
    p_smem_check: float = 0.8
    p_rebench: float = 0.035


@dataclass
class StepRecord:
    """One step of a session before timestamps are fixed."""

    step: int
    variant: Variant
    kind: str
    params: Params
    sub: Submission
    kept: bool
    body: str
    think_s: float
    compile_s: float
    bench_s: float
    best_step: int = 0
    t_elapsed_s: float = 0.0

    @property
    def status(self) -> str:
        return self.sub.status

    @property
    def tag(self) -> str:
        return self.variant.tag


@dataclass
class _RungState:
    best_params: Params | None = None
    best_time: float = math.inf
    tried: set[tuple[tuple[str, object], ...]] = field(default_factory=set)
    good_dir: dict[str, int] = field(default_factory=dict)


class Engineer:
    """Runs one session of ``n_steps`` steps (step 0 is the baseline)."""

    def __init__(
        self, env: KernelEnv, rng: random.Random, n_steps: int, profile: AgentProfile | None = None
    ) -> None:
        self.env = env
        self.rng = rng
        self.n = n_steps
        self.prof = profile or AgentProfile()
        self.op = env.op
        self.task = env.task
        self.gpu = env.gpu
        rungs = ladder(self.op.family, self.task.impl)
        self.base_rung = sound_baseline(rungs, self.op.name, self.task.impl, self.gpu.arch)
        self.mid_rungs = [v for v in rungs if 1 <= v.level <= 3]
        self.hw_rung = hw_choice(self.op.family, self.task.impl, self.gpu)
        self.wrong_hw = tempting_wrong_hw(self.op.family, self.task.impl, self.gpu)
        self.state: dict[str, _RungState] = {}
        self.records: list[StepRecord] = []
        self.best_time = math.inf
        self.best_step = 0
        self.best_variant: Variant = self.base_rung
        self.best_params: Params = {}
        self.baseline_ms = math.inf
        self.pending: Candidate | None = None  # the fix to submit next
        self.pending_kind = "fix"
        self.explore: list[Variant] = []
        self.steps_since_rebench = 0
        self.avoid: set[str] = set()  # features a compile error taught this engineer to avoid
        self.bad_rungs: set[str] = set()  # rungs whose result was wrong as written
        self._last_dir: tuple[str, str, int, float] = ("", "", 0, math.inf)

    # ------------------------------------------------------------------ helpers
    def _rs(self, v: Variant) -> _RungState:
        return self.state.setdefault(v.tag, _RungState())

    def _defaults(self, v: Variant) -> Params:
        return default_params(v, self.op, self.task.dtype, self.task.shape, self.gpu)

    def _key(self, p: Params) -> tuple[tuple[str, object], ...]:
        return tuple(sorted(p.items()))

    def _neighbors(self, v: Variant, p: Params) -> list[tuple[Params, str, int]]:
        out = []
        for dim in param_space(v, self.op, self.task.dtype):
            if dim.name not in p or len(dim.values) < 2:
                continue
            i = dim.values.index(p[dim.name]) if p[dim.name] in dim.values else 0
            for d in (-1, 1):
                j = i + d
                if 0 <= j < len(dim.values):
                    q = dict(p)
                    q[dim.name] = dim.values[j]
                    if valid(v, self.op, self.task.dtype, q):
                        out.append((q, dim.name, d))
        return out

    def _shrink_for_smem(self, v: Variant, p: Params) -> Params | None:
        names = {d.name: d.values for d in param_space(v, self.op, self.task.dtype)}
        for dim in _SMEM_DIMS:
            if dim in p and dim in names:
                vals = names[dim]
                i = vals.index(p[dim]) if p[dim] in vals else 0
                if i > 0:
                    q = dict(p)
                    q[dim] = vals[i - 1]
                    if valid(v, self.op, self.task.dtype, q):
                        return q
        return None

    def _maybe_mistake(self, v: Variant, p: Params, kind: str) -> Candidate:
        prof = self.prof
        mult = {"variant": 1.6, "tune": 0.55, "fix": 0.3}.get(kind, 0.0)
        p_slip = prof.p_slip * mult * (1.35 - 0.7 * prof.skill)
        if self.rng.random() < p_slip:
            return Candidate.of(v, p, slip=self.rng.choice(slip_kinds(self.task.impl)))
        if kind not in ("variant", "tune"):
            return Candidate.of(v, p)
        pb = prof.p_bug * (2.2 if kind == "variant" else 0.6) * (1.3 - 0.6 * prof.skill)
        if self.rng.random() < pb:
            bugs = self.env.bugs_for(v, p)  # only bugs that would show up in this rung's output
            if bugs:
                return Candidate.of(v, p, bug=self.rng.choice(bugs))
        return Candidate.of(v, p)

    # ------------------------------------------------------------------ timing model
    def _durations(self, kind: str, sub: Submission, v: Variant) -> tuple[float, float, float]:
        r = self.rng
        think = {
            "baseline": r.uniform(240, 600),
            "variant": r.lognormvariate(math.log(170), 0.5),
            "tune": r.lognormvariate(math.log(20), 0.6),
            "fix": r.lognormvariate(math.log(45), 0.5),
            "rebench": r.uniform(5, 20),
        }[kind]
        if self.task.impl == "cuda":
            compile_s = (
                16 + 8 * v.level + (25 if "wgmma" in v.features else 0)
            ) * r.lognormvariate(0, 0.25)
        else:
            compile_s = (3 + 2 * v.level) * r.lognormvariate(0, 0.3)
        if kind == "rebench":
            compile_s = 0.0
        if sub.status == COMPILE_ERROR:
            if sub.error_kind == "slip":
                compile_s *= 0.35
            bench = 0.0
        elif sub.status == WRONG_RESULT:
            bench = r.uniform(4, 12)
        else:
            bench = r.uniform(4, 10) + (
                r.uniform(20, 50) if kind == "rebench" else r.uniform(5, 25)
            )
        return think, compile_s, bench

    # ------------------------------------------------------------------ main loop
    def run(self) -> list[StepRecord]:
        self._baseline()
        self.explore = self._plan_ladder()
        while len(self.records) < self.n - 1:
            self._one_step()
        if len(self.records) < self.n:
            self._rebench(final=True)
        return self.records

    def _plan_ladder(self) -> list[Variant]:
        rungs = list(self.mid_rungs)
        if rungs and rungs[0].level == 1 and self.rng.random() < 0.35 * self.prof.skill:
            rungs = rungs[1:]  # experienced: skip the textbook tiled rung
        if self.hw_rung is not None:
            rungs.append(self.hw_rung)
        return rungs

    # ------------------------------------------------------------------ public hooks
    # A multi-agent generator drives several engineers step by step instead of ``run``:
    # ``propose`` asks for the next candidate (optionally on an assigned rung) and
    # ``submit`` evaluates it in the shared environment and updates this engineer's state.

    def propose(self, variant: Variant | None = None) -> Candidate | None:
        """Next candidate: the pending fix, else a tuning move on ``variant`` (or own choice)."""
        if self.pending is not None:
            cand, self.pending = self.pending, None
            return cand
        if variant is None:
            return self._propose_tune()
        if variant.tag not in self.state:
            return self._maybe_mistake(variant, self._defaults(variant), "variant")
        return self._propose_on(variant, self._rs(variant))

    def submit(self, cand: Candidate, kind: str = "tune") -> StepRecord:
        """Evaluate ``cand`` in the environment and record the outcome (timestamps unset)."""
        if not self.records:
            return self._submit("baseline", cand)
        return self._submit(kind, cand)

    def _record(self, kind: str, cand: Candidate, sub: Submission) -> StepRecord:
        v = cand.variant
        p = cand.param_dict
        kept = False
        step = len(self.records)
        rs = self._rs(v)
        if sub.status == OK and kind != "rebench":
            t = sub.time_ms or math.inf
            if kind == "baseline":
                kept = True
                self.baseline_ms = t
                self.best_time, self.best_step, self.best_variant, self.best_params = t, 0, v, p
            elif t < self.best_time * 0.997:
                kept = True
                self.best_time, self.best_step, self.best_variant, self.best_params = t, step, v, p
            if t < rs.best_time:
                rs.best_time, rs.best_params = t, p
        rs.tried.add(self._key(p))
        think, comp, bench = self._durations(kind, sub, v)
        rec = StepRecord(step, v, kind, p, sub, kept, "", think, comp, bench, self.best_step)
        self.records.append(rec)
        return rec

    def _submit(self, kind: str, cand: Candidate) -> StepRecord:
        sub = self.env.submit(cand, self.rng, runs=1000 if kind == "rebench" else 200)
        rec = self._record(kind, cand, sub)
        self._plan_fix(cand, sub)
        if kind == "rebench":
            self.steps_since_rebench = 0
        else:
            self.steps_since_rebench += 1
        return rec

    def _baseline(self) -> None:
        v = self.base_rung
        self._submit("baseline", Candidate.of(v, self._defaults(v)))

    def _rebench(self, final: bool = False) -> None:
        self._submit("rebench", Candidate.of(self.best_variant, self.best_params))

    def _plan_fix(self, cand: Candidate, sub: Submission) -> None:
        self.pending = None
        v, p = cand.variant, cand.param_dict
        if sub.status == OK:
            return
        if sub.error_kind == "feature":
            self.avoid |= set(sub.missing)
            only_lowp = not set(sub.missing) - {"fp8_mma", "fp4_mma"}
            if only_lowp and "mma" in p and v.tag != "v4_wgmma_tma":
                # native low-precision MMA is missing: dequantise to fp16 instead
                q = dict(p)
                q["mma"] = "f16"
                self.pending = Candidate.of(v, q)
                return
            target = self.hw_rung or self.best_variant
            if target.tag == v.tag:
                target = self.best_variant
            params = (
                self._defaults(target)
                if target is not self.best_variant
                else dict(self.best_params)
            )
            if not self.env.fits(target, params):
                params = self._shrink_for_smem(target, params) or params
            self.pending = Candidate.of(target, params)
            if target in self.explore:
                self.explore.remove(target)
            return
        if sub.error_kind == "rung":
            # the rung itself computes the wrong answer (measured on a real GPU): no config
            # fixes it, so the engineer drops it and goes on from the best kernel so far
            self.bad_rungs.add(v.tag)
            self.explore = [x for x in self.explore if x.tag != v.tag]
            return
        if sub.error_kind == "smem":
            q = self._shrink_for_smem(v, p)
            if q is not None:
                self.pending = Candidate.of(v, q)
            return
        # slips and bugs: same config, fixed
        self.pending = Candidate.of(v, p)

    def _one_step(self) -> None:
        if self.pending is not None:
            cand = self.pending
            self.pending = None
            self._submit("fix", self._maybe_mistake(cand.variant, cand.param_dict, "fix"))
            return
        if self.explore:
            v = self.explore.pop(0)
            # habit: reach for the fancier rung this GPU cannot run
            if (
                v is self.hw_rung
                and self.wrong_hw is not None
                and self.rng.random() < self.prof.p_habit
            ):
                wv = self.wrong_hw
                wp = self._defaults(wv)
                # they do know their GPU's shared memory, just not its instruction set
                for _ in range(6):
                    if self.env.fits(wv, wp) or self.rng.random() < 0.25:
                        break
                    wp = self._shrink_for_smem(wv, wp) or wp
                self._submit("variant", self._maybe_mistake(wv, wp, "variant"))
                return
            p = self._defaults(v)
            if "mma" in p and p["mma"] == "f16" and self.rng.random() < self.prof.p_habit * 0.6:
                dims = {d.name: d.values for d in param_space(v, self.op, self.task.dtype)}
                native = [x for x in dims["mma"] if x != "f16"]
                if native:
                    p = dict(p)
                    p["mma"] = native[0]
            if not self.env.fits(v, p):
                q = self._shrink_for_smem(v, p)
                if q is not None and self.rng.random() < 0.5 + 0.4 * self.prof.skill:
                    p = q
            self._submit("variant", self._maybe_mistake(v, p, "variant"))
            return
        # tuning phase
        if self.steps_since_rebench > 10 and self.rng.random() < self.prof.p_rebench * 3:
            self._rebench()
            return
        cand = self._propose_tune()
        if cand is None:
            self._rebench()
            return
        rs_before = self._last_dir
        self._submit("tune", cand)
        last = self.records[-1]
        tag, dim, sign, before = rs_before
        rs = self._rs(last.variant)
        if last.status == OK and last.variant.tag == tag:
            if (last.sub.time_ms or math.inf) < before:
                rs.good_dir[dim] = sign
            else:
                rs.good_dir.pop(dim, None)
        if last.kept and last.sub.time_ms and self.rng.random() < 0.4:
            prev = min(
                (r.sub.time_ms for r in self.records[:-1] if r.kept and r.sub.time_ms),
                default=math.inf,
            )
            if (
                prev < math.inf
                and last.sub.time_ms > prev * 0.97
                and len(self.records) < self.n - 1
            ):
                self._rebench()

    def _tunable_rungs(self) -> list[tuple[Variant, _RungState]]:
        out = []
        for tag, rs in self.state.items():
            if rs.best_params is None or tag == self.base_rung.tag or tag in self.bad_rungs:
                continue
            out.append((self.env.variant(tag), rs))
        out.sort(key=lambda x: x[1].best_time)
        return out

    def _propose_tune(self) -> Candidate | None:
        rungs = self._tunable_rungs()
        if not rungs:
            rungs = [(self.best_variant, self._rs(self.best_variant))]
        r = self.rng.random()
        first = (
            0
            if r < 0.8 or len(rungs) == 1
            else (1 if r < 0.95 or len(rungs) == 2 else self.rng.randrange(len(rungs)))
        )
        order = [rungs[first]] + [x for i, x in enumerate(rungs) if i != first]
        for v, rs in order:
            cand = self._propose_on(v, rs)
            if cand is not None:
                return cand
        return None

    def _avoided(self, v: Variant, q: Params) -> bool:
        return bool(self.avoid) and bool(features_used(v, self.op, self.task.dtype, q) & self.avoid)

    def _notices_overflow(self) -> bool:
        return self.rng.random() < self.prof.p_smem_check * (0.6 + 0.4 * self.prof.skill)

    def _propose_on(self, v: Variant, rs: _RungState) -> Candidate | None:
        p = rs.best_params or self._defaults(v)
        neigh = []
        for q, d, s in self._neighbors(v, p):
            if self._key(q) in rs.tried or self._avoided(v, q):
                continue
            if not self.env.fits(v, q) and self._notices_overflow():
                rs.tried.add(self._key(q))  # worked out the footprint, never submitted
                continue
            neigh.append((q, d, s))
        if not neigh:
            # plateau: an untried random config of the rung (a longer jump)
            pool = iter_params(v, self.op, self.task.dtype)
            for _ in range(24):
                q = pool[self.rng.randrange(len(pool))]
                if self._key(q) in rs.tried or self._avoided(v, q):
                    continue
                if not self.env.fits(v, q) and self._notices_overflow():
                    rs.tried.add(self._key(q))
                    continue
                self._last_dir = (v.tag, "", 0, rs.best_time)
                return self._maybe_mistake(v, q, "tune")
            return None
        # skill: weigh a few options "in the head" and keep the most promising
        k = (
            1
            + int(self.rng.random() < self.prof.skill)
            + int(self.rng.random() < self.prof.skill * 0.5)
        )
        opts = self.rng.sample(neigh, min(k, len(neigh)))
        for q, d, s in opts:
            if rs.good_dir.get(d) == s:
                opts = [(q, d, s)]
                break

        def guess(o: tuple[Params, str, int]) -> float:
            pred = self.env.predicted(v, o[0])
            t = pred.time_ms if pred else self.best_time
            return t * self.rng.lognormvariate(0, 0.25 * (1.2 - self.prof.skill))

        q, d, s = min(opts, key=guess)
        self._last_dir = (v.tag, d, s, rs.best_time)
        return self._maybe_mistake(v, q, "tune")
