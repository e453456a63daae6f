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

Generator 1.7.0 splits the session into a *runner* (``Engineer.run``: owns the
``KernelEnv``, submits, records) and a *policy* (``Policy``: decides every step). The
policy is built from the task statement alone (op, shape, dtype, the GPU's spec sheet as
the prompt prints it, the rung ladder and parameter grids an engineer knows) and is fed
one ``Observation`` per step: status, the class of the diagnostic, the features it names,
the measured median and spread, the shared-memory bytes the harness printed. It holds no
environment, plan or prediction (``tests/unit/sim/test_agent_learns.py`` walks its object
graph), so it keeps its own noisy estimates: per-rung measured times and the measured
effect of each parameter move; shared-memory footprints scaled from the bytes the harness
reported (an overflow is resized from its byte count, a configuration estimated over the
cap or at a size that already overflowed is not submitted); re-benchmarks only a new best
whose gain is within the measured spread; abandons rungs measured well slower than the
best; and stops tuning at a plateau, or once the move it would make next is one its own
rules of thumb expect slower (``stop_rule.foreseen_slower``, 1.15.0); the session ends with
a re-benchmark of the best.
Skill sets how noisy its estimates are and how patient it is, not what it can see.
``Engineer`` keeps only the runner and the per-candidate craft the swarm's ``Hands`` wraps
(``_neighbors``, ``_shrink_for_smem``, ``_maybe_mistake``, ``_durations``...); the older
step-by-step engineer (``propose``/``submit`` and its hill-climber), which no generator had
called since 1.7.0, was removed (issue 34): the sessions and episodes are byte-identical.
"""

from __future__ import annotations

import math
import operator
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .codegen import FAMILY_BUGS, slip_kinds
from .env import ANY_BUG, COMPILE_ERROR, OK, WRONG_RESULT, Candidate, KernelEnv, Submission
from .failure_model import HANDS_SLIP_WEIGHT, MistakeMemory, bug_intent, slip_intent
from .kernels import plan
from .stop_rule import GAIN_NOISE, NOISE_FLOOR, Move, TuningRecord, foreseen_slower, settled
from .timing import inert_params
from .variants import (
    Params,
    Variant,
    default_params,
    features_used,
    hw_choice,
    ladder,
    param_pool,
    param_pool_keys,
    param_space,
    tempting_wrong_hw,
    valid,
)
from .verification import evidenced_rung, evidenced_rungs

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


def dequantised_fix(tag: str, params: dict, missing: tuple[str, ...] | set[str]) -> dict | None:
    """The fix for a rung whose only missing features are native low-precision MMAs:
    the same parameters with ``mma="f16"`` (dequantise to fp16), or None when that is not
    the fix. One rule for the legacy ``Engineer`` step and the observation-only policy."""
    only_lowp = not set(missing) - {"fp8_mma", "fp4_mma"}
    if only_lowp and "mma" in params and tag != "v4_wgmma_tma":
        return {**params, "mma": "f16"}
    return None


@dataclass(frozen=True)
class AgentProfile:
    """Behavioural knobs of one engineer."""

    skill: float = 0.8
    p_slip: float = 0.2
    p_bug: float = 0.112
    p_habit: float = 0.45
    p_smem_check: float = 0.8
    p_rebench: float = 0.035
    #: chance that a new rung is written without a tail mask because its tile divides the
    #: extent (a later tile that does not divide it gives a wrong result)
    p_skip_mask: float = 0.8
    #: the expected-gain stop and the settled-best rule of ``stop_rule`` (1.12.0); False
    #: keeps only the stop tests of 1.11.0, whose sessions each 1.12.0 session is a prefix of
    stop_rule: bool = True
    #: stop when the tuning move chosen is one its rules of thumb expect slower
    #: (``stop_rule.foreseen_slower``, 1.15.0); False keeps 1.14.0's sessions, of which each
    #: 1.15.0 session is a prefix (up to its closing re-benchmark)
    foresight_stop: bool = True


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
        # only rungs with execution evidence on this GPU's family (issue 39, 39b)
        rungs = evidenced_rungs(
            ladder(self.op.family, self.task.impl), self.op.name, self.task.impl, self.gpu.arch
        )
        self.base_rung = self.env.sound_baseline(rungs)
        self.hw_rung = evidenced_rung(
            hw_choice(self.op.family, self.task.impl, self.gpu),
            self.op.name,
            self.task.impl,
            self.gpu.arch,
        )
        self.wrong_hw = tempting_wrong_hw(self.op.family, self.task.impl, self.gpu)
        self.records: list[StepRecord] = []
        self.best_time = math.inf
        self.best_step = 0
        self.best_variant: Variant = self.base_rung
        self.best_params: Params = {}
        self.baseline_ms = math.inf

    # ------------------------------------------------------------------ helpers
    def _defaults(self, v: Variant) -> Params:
        return default_params(v, self.op, self.task.dtype, self.task.shape, self.gpu)

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
        # slips are rare (``failure_model``, 1.10.0); semantic bugs keep their 1.9.0 rates
        p_slip = slip_intent(kind, prof.p_slip, prof.skill, HANDS_SLIP_WEIGHT)
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
        """One session: the policy decides from observations, the runner executes."""
        pol = Policy(self.task, self.gpu, self.rng, self.n, self.prof, self.base_rung)
        # a bug the code of a rung carries without showing yet (a tail mask left out while
        # the tile divides the extent): part of the engineer's source, not of its knowledge,
        # so the runner keeps writing it until a tile reveals it and a fix removes it
        latent: dict[str, str] = {}
        carry: tuple[Candidate, str] | None = None
        memory = MistakeMemory()  # what it was shown and fixed stays fixed (issue 39)
        while len(self.records) < self.n:
            d = pol.decide(self.n - len(self.records))
            if d is None:
                break
            cand = d.cand
            tag = cand.variant.tag
            if tag in latent and cand.bug is None and d.kind in ("tune", "rebench"):
                cand = Candidate(cand.variant, cand.params, cand.slip, latent[tag])
            elif carry is not None and d.kind == "fix" and cand.params == carry[0].params:
                # fixing the typo leaves the logic bug written beside it in place
                cand = Candidate(cand.variant, cand.params, cand.slip, carry[1])
            carry = None
            base = self.records[d.base].sub.code if d.base is not None else None
            runs = 1000 if d.kind == "rebench" else 200
            sub = self.env.submit(
                cand, self.rng, runs=runs, base_code=base, avoid=memory.avoid(tag)
            )
            rec = self._record(d.kind, cand, sub)
            if sub.status == WRONG_RESULT and sub.error_kind == "bug":
                memory.shown(tag, str(sub.extra.get("bug") or ""), None)
            elif sub.status == COMPILE_ERROR and sub.slip is not None:
                memory.shown(tag, None, sub.slip.kind)
            if sub.status == COMPILE_ERROR and sub.extra.get("bug"):
                carry = (cand, str(sub.extra["bug"]))
            if sub.status == OK and sub.extra.get("bug"):
                latent[tag] = str(sub.extra["bug"])
            elif sub.status == WRONG_RESULT or d.kind == "fix":
                latent.pop(tag, None)
            pol.observe(observe(rec))
        return self.records

    def _record(self, kind: str, cand: Candidate, sub: Submission) -> StepRecord:
        v = cand.variant
        p = cand.param_dict
        kept = False
        step = len(self.records)
        if sub.status == OK and kind != "rebench":
            t = sub.time_ms or math.inf
            if kind == "baseline":
                kept = True
                self.baseline_ms = t
                self.best_time, self.best_step, self.best_variant, self.best_params = t, 0, v, p
            elif t < self.best_time * 0.997:
                kept = True
                self.best_time, self.best_step, self.best_variant, self.best_params = t, step, v, p
        think, comp, bench = self._durations(kind, sub, v)
        rec = StepRecord(step, v, kind, p, sub, kept, "", think, comp, bench, self.best_step)
        self.records.append(rec)
        return rec

    def _notices_overflow(self) -> bool:
        return self.rng.random() < self.prof.p_smem_check * (0.6 + 0.4 * self.prof.skill)


# ======================================================================================
# The observation-only policy (generator 1.7.0)
# ======================================================================================

_SMEM_IN_TEXT = re.compile(r"\((\d+) B\) exceeds the opt-in|Required: (\d+), Hardware limit")


@dataclass(frozen=True)
class Observation:
    """One step as the engineer reads the harness's reply (nothing the reply lacks)."""

    step: int
    tag: str
    params: tuple[tuple[str, object], ...]
    kind: str
    status: str  # ok (also unverified) | compile_error | wrong_result
    error: str | None  # the diagnostic's class: feature | slip | smem | bug | rung
    missing: tuple[str, ...]  # features the diagnostic names
    time_ms: float | None  # the measured median
    spread_pct: float  # the measured spread
    smem_bytes: int | None  # bytes the overflow message or the ok resource line prints
    #: an ok the harness checked correct (False: printed "unverified", never a best)
    verified: bool = True
    #: the waves of the printed resource line (grid over the resident slots of the GPU)
    waves: float | None = None
    #: the registers per thread ptxas printed (CUDA; None for Triton, which prints none)
    regs: int | None = None


def observe(rec: StepRecord) -> Observation:
    """The runner's transcription of a step's feedback into an ``Observation``."""
    sub = rec.sub
    smem: int | None = None
    if sub.status == COMPILE_ERROR and sub.error_kind == "smem":
        m = _SMEM_IN_TEXT.search(sub.detail)
        smem = int(m.group(1) or m.group(2)) if m else None
    elif sub.status == OK and sub.prediction is not None:
        smem = sub.prediction.plan.smem  # the "N B smem" of the printed resource line
    return Observation(
        rec.step,
        rec.tag,
        tuple(rec.params.items()),
        rec.kind,
        sub.status,
        sub.error_kind,
        tuple(sub.missing) if sub.status == COMPILE_ERROR else (),
        # the median as the harness prints it (4 significant digits), as the engineer reads it
        float(f"{sub.time_ms:.4g}") if sub.status == OK and sub.time_ms is not None else None,
        sub.spread_pct,
        smem,
        sub.verified or sub.status != OK,
        sub.prediction.waves if sub.status == OK and sub.prediction is not None else None,
        _printed_regs(sub),
    )


def _printed_regs(sub: Submission) -> int | None:
    """The "N registers" of an ok CUDA step's ptxas line (capped at 255 as printed)."""
    if sub.status != OK or sub.prediction is None or "__global__" not in sub.code:
        return None
    return min(sub.prediction.plan.regs, 255)


#: A session has at least this many steps (the card's floor) unless nothing is left to try
#: or its gains sit inside the noise (``Policy._in_the_noise``).
MIN_STEPS = 30
#: Stop rule (issue 39): the steps without a gain beyond the noise that end the tuning, as
#: a share of the step of the last such gain, and their floor.
STOP_SHARE = 0.5
#: (``GAIN_NOISE`` and ``NOISE_FLOOR``, what counts as a gain beyond the measured noise,
#: live in ``stop_rule`` with the expected-gain test since 1.12.0.)
STOP_MIN = 12
STOP_IDLE = 6
#: A rung whose best is this many times the session's best is not reopened.
SLOW_RUNG = 1.3
#: A rung is tuned only while its best is within this factor of the session's best.
TUNE_RUNG = 1.15
#: The occupancy rule of thumb (``Policy._occupancy_hunch``): waves under which a grid is
#: underfilled, over which it can afford bigger tiles, and the hunch's size (log ratio).
UNDERFILLED = 0.5
OVERFILLED = 8.0
HUNCH = 0.08
#: Registers per thread from which a bigger tile is expected to spill.
REG_HEAVY = 128
#: Dimensions that raise the grid when increased, and tile dimensions that lower it.
_SPLIT_DIMS = frozenset({"splits", "split_k", "SPLIT_K", "NUM_SPLITS"})
_TILE_DIMS = frozenset(
    {"BM", "BN", "BLOCK_M", "BLOCK_N", "rows", "ROWS", "BLOCK", "tile", "TB", "BLOCK_D"}
)
#: Parameters that can be inert (``timing.inert_params``): a move of only these is checked.
_MAYBE_INERT = frozenset({"GROUP_M", "minb"})


@dataclass(frozen=True)
class Decision:
    """The next step: what to submit, as which kind, edited from which earlier step."""

    cand: Candidate
    kind: str
    base: int | None


@dataclass
class _Rung:
    times: dict[tuple[tuple[str, object], ...], float] = field(default_factory=dict)
    step_of: dict[tuple[tuple[str, object], ...], int] = field(default_factory=dict)
    best_key: tuple[tuple[str, object], ...] | None = None
    best_time: float = math.inf
    tried: set[tuple[tuple[str, object], ...]] = field(default_factory=set)
    #: reported footprints by the staging dimensions' values (``_SMEM_DIMS`` order)
    smem_seen: dict[tuple[Any, ...], int] = field(default_factory=dict)
    overflow_min: int | None = None
    #: the smallest staging volume (``_volume``) that overflowed on this rung
    overflow_volume: int | None = None
    smem_memo: dict[tuple[Any, ...], int] = field(default_factory=dict)
    stale: int = 0
    done: bool = False
    #: the harness printed this rung's times as unverified (tuned after the checked ones)
    unverified: bool = False
    #: waves and registers the resource line printed for the rung's best configuration
    best_waves: float | None = None
    best_regs: int | None = None


def _key(p: Params) -> tuple[tuple[str, object], ...]:
    return tuple(sorted(p.items()))


def _volume(qd: tuple[Any, ...]) -> int:
    """The product of a staging tuple's sizes: what the shared-memory footprint grows
    with (each tile dimension and the stage count enter it linearly)."""
    out = 1
    for x in qd:
        if isinstance(x, int) and not isinstance(x, bool) and x > 0:
            out *= x
    return out


def _staging(p: Params) -> tuple[Any, ...]:
    """The staging dimensions' values (``_SMEM_DIMS`` order): what moves the footprint."""
    return tuple(map(p.get, _SMEM_DIMS))


#: A tuning option: (own estimate of the log time ratio, params, the one-notch dimension
#: whose measured effect it tests or "", that move's sign or 0).
_Option = tuple[float, Params, str, int]


def _notch_moves(
    space: dict[str, tuple[Any, ...]], p: Params
) -> Iterator[tuple[str, int, int, Any]]:
    """(dim, sign, notches, value) of every in-grid move of one dimension of ``p`` by 1-3
    notches, in grid order (dimensions ``p`` lacks or with one value are skipped)."""
    for dim, vals in space.items():
        if dim not in p or len(vals) < 2:
            continue
        i = vals.index(p[dim]) if p[dim] in vals else 0
        for sgn in (-1, 1):
            for notch in (1, 2, 3):
                j = i + sgn * notch
                if 0 <= j < len(vals):
                    yield dim, sgn, notch, vals[j]


def _notched(
    space: dict[str, tuple[Any, ...]], p: Params, moves: tuple[tuple[str, int], ...]
) -> Params:
    """``p`` with each (dim, sign) of ``moves`` moved one notch along the rung's grid."""
    q = dict(p)
    for dd, ss in moves:
        vals = space[dd]
        q[dd] = vals[(vals.index(p[dd]) if p[dd] in vals else 0) + ss]
    return q


class Policy:
    """Decides each step of a session from the observations so far (see module doc)."""

    def __init__(
        self,
        task: Any,
        gpu: Any,
        rng: random.Random,
        n_steps: int,
        profile: AgentProfile,
        base_rung: Variant,
    ) -> None:
        from .ops import get_op

        self.rng = rng
        self.n = n_steps
        self.prof = profile
        self.task = task
        self.op = get_op(task.op)
        self.dtype = task.dtype
        self.shape = dict(task.shape)
        # the spec sheet the prompt prints: instruction set and KB of shared memory
        self.features = frozenset(gpu.features)
        self.cap = gpu.smem_cap_kb * 1024
        self._gpu_sheet = gpu
        rungs = evidenced_rungs(ladder(self.op.family, task.impl), task.op, task.impl, gpu.arch)
        self.base_rung = base_rung
        self.hw_rung = evidenced_rung(
            hw_choice(self.op.family, task.impl, gpu), task.op, task.impl, gpu.arch
        )
        self.wrong_hw = tempting_wrong_hw(self.op.family, task.impl, gpu)
        self.variants = {v.tag: v for v in rungs}
        if self.hw_rung is not None:
            self.variants[self.hw_rung.tag] = self.hw_rung
        if self.wrong_hw is not None:
            self.variants[self.wrong_hw.tag] = self.wrong_hw
        mid = [v for v in rungs if 1 <= v.level <= 3]
        if mid and mid[0].level == 1 and rng.random() < 0.35 * profile.skill:
            mid = mid[1:]
        self.explore: list[Variant] = mid + ([self.hw_rung] if self.hw_rung else [])
        self.hist: list[Observation] = []
        self.rungs: dict[str, _Rung] = {}
        self.avoid: set[str] = set()
        self._spaces: dict[str, dict[str, tuple[Any, ...]]] = {}  # per rung; read only
        self._pos: dict[str, dict[str, dict[Any, int]]] = {}
        self.overflowed: set[tuple[Any, ...]] = set()  # staging sizes seen over the cap
        self.overflow_floor: int | None = None  # the smallest footprint seen over the cap
        self.bad: set[str] = set()
        self.pending: Decision | None = None
        # measured effect of moving one parameter one notch: log(t_new / t_old)
        self.effects: dict[tuple[str, str, int], list[float]] = {}
        self.best_time = math.inf
        self.best_step: int | None = None
        self.best_spread = 0.0
        self.rebench_due: int | None = None
        self.n_rebench = 0
        self.last_move: tuple[str, int, tuple[tuple[str, object], ...], float] | None = None
        self.patience = int(round(6 + 10 * profile.skill))
        self.finished = False
        #: the last step whose time beat the session's best by more than the measured noise
        self.last_gain = 0
        #: the last step that beat the best at all (the dataset's "kept")
        self.last_improve = 0
        #: tuning tries and their gains beyond the noise (``stop_rule``, 1.12.0)
        self.tuning = TuningRecord()
        #: the move chosen was one it expects slower: tuning has ended (1.15.0)
        self.tuning_over = False

    # ------------------------------------------------------------------ knowledge
    def _defaults(self, v: Variant) -> Params:
        return default_params(v, self.op, self.dtype, self.shape, self._gpu_sheet)

    def _space(self, v: Variant) -> dict[str, tuple[Any, ...]]:
        space = self._spaces.get(v.tag)
        if space is None:
            space = self._spaces[v.tag] = {
                d.name: tuple(d.values) for d in param_space(v, self.op, self.dtype)
            }
        return space

    def _positions(self, v: Variant) -> dict[str, dict[Any, int]]:
        """Each dimension's values by their first position in the rung's grid (what
        ``tuple.index`` answers, looked up instead of searched)."""
        pos = self._pos.get(v.tag)
        if pos is None:
            pos = self._pos[v.tag] = {}
            for dim, vals in self._space(v).items():
                at: dict[Any, int] = {}
                for n, x in enumerate(vals):
                    at.setdefault(x, n)
                pos[dim] = at
        return pos

    def _rung(self, tag: str) -> _Rung:
        # get-then-insert rather than ``setdefault(tag, _Rung())``: the same entry (a missing
        # rung is still added, at the end) without building a throw-away _Rung per call
        rs = self.rungs.get(tag)
        if rs is None:
            rs = self.rungs[tag] = _Rung()
        return rs

    def _avoided(self, v: Variant, q: Params) -> bool:
        if not self.avoid:
            return False
        return bool(features_used(v, self.op, self.dtype, q) & self.avoid)

    def _smem_estimate(self, tag: str, q: Params, qd: tuple[Any, ...] | None = None) -> int | None:
        """Own footprint estimate: the nearest reported footprint of this rung, scaled by
        the ratio of each staging dimension (tiles and stages enter linearly). ``qd`` is
        ``_staging(q)`` when the caller has it already."""
        rs = self.rungs.get(tag)
        if qd is None:
            qd = _staging(q)
        if rs is None or not rs.smem_seen:
            # a rung not measured yet: the same staging sizes overflowed on another rung
            hits = [o for r in self.rungs.values() if (o := r.smem_seen.get(qd)) is not None]
            return max(hits) if hits else None
        memo = rs.smem_memo.get(qd)  # an int, never None
        if memo is not None:
            return memo
        # nearest by the staging dimensions only (the others do not move the footprint)
        best: tuple[int, tuple[Any, ...], int] | None = None
        for pd, b in rs.smem_seen.items():
            dist = sum(map(operator.ne, pd, qd))  # differing staging dimensions
            if best is None or dist < best[0]:
                best = (dist, pd, b)
                if not dist:
                    break  # the first exact match: nothing later is strictly nearer
        assert best is not None
        _, pd, b = best
        est = float(b)
        for a, c in zip(pd, qd, strict=True):
            # ``a != c`` first: it rules out most dimensions (equal, or both unused: None)
            if a != c and isinstance(a, int) and isinstance(c, int) and a > 0 and c > 0:
                est *= c / a
        rs.smem_memo[qd] = int(est)
        return int(est)

    def _inert_move(self, v: Variant, p: Params, q: Params) -> bool:
        """Whether ``q`` differs from ``p`` only in parameters that provably do nothing for
        both (``timing.inert_params``: GROUP_M over one row of tiles, a ``minb`` the
        registers ptxas printed already fit): the same kernel, not worth a step."""
        moved = {k for k in q if q.get(k) != p.get(k)}
        if not moved or not moved <= _MAYBE_INERT:
            return False
        gpu = self._gpu_sheet
        inert_p = inert_params(plan(self.op, self.shape, self.dtype, gpu, v, p), p)
        inert_q = inert_params(plan(self.op, self.shape, self.dtype, gpu, v, q), q)
        return moved <= (inert_p & inert_q)

    def _fits_own(self, tag: str, q: Params) -> bool:
        """Whether the engineer expects ``q`` to fit (an estimate that has already
        overflowed is never resubmitted; past the cap it checks with ``p_smem_check``)."""
        qd = _staging(q)
        if qd in self.overflowed:
            return False  # these staging sizes overflowed (on this rung or another)
        rs0 = self.rungs.get(tag)
        if (
            rs0 is not None
            and rs0.overflow_volume is not None
            and _volume(qd) >= rs0.overflow_volume
        ):
            # as much staging (tiles times stages) as a configuration of this rung that
            # overflowed: the same bytes rearranged (64x128 for 128x64, 4x32 for 2x64)
            return False
        est = self._smem_estimate(tag, q, qd)
        if est is None:
            return True
        rs = self._rung(tag)
        if rs.overflow_min is not None and est >= rs.overflow_min:
            return False
        if self.overflow_floor is not None and est >= self.overflow_floor:
            return False  # at or past a footprint that already overflowed somewhere
        if est > self.cap:
            return self.rng.random() >= self.prof.p_smem_check * (0.7 + 0.3 * self.prof.skill)
        return True

    def _shrink(self, v: Variant, p: Params, need: int) -> Params | None:
        """Resize from an overflow's byte count: step staging dimensions down (the first
        listed first) until the scaled footprint is under the cap."""
        space = self._space(v)
        q = dict(p)
        est = float(need)
        changed = False
        for dim in _SMEM_DIMS:
            while est > self.cap * 0.97 and dim in q and dim in space:
                vals = space[dim]
                i = vals.index(q[dim]) if q[dim] in vals else 0
                if i == 0:
                    break
                r = dict(q)
                r[dim] = vals[i - 1]
                if not valid(v, self.op, self.dtype, r):
                    break
                a, c = q[dim], r[dim]
                if isinstance(a, int) and isinstance(c, int) and a > 0:
                    est *= c / a
                q, changed = r, True
            if est <= self.cap * 0.97:
                break
        return q if changed else None

    def _sized(self, v: Variant, p: Params) -> Params:
        """``p`` resized when its own footprint estimate (from bytes it has seen reported,
        on this rung or another with the same staging sizes) is over the cap."""
        est = self._smem_estimate(v.tag, p)
        if est is not None and est > self.cap:
            return self._shrink(v, p, est) or p
        return p

    # ------------------------------------------------------------------ mistakes
    def _dress(self, v: Variant, p: Params, kind: str) -> Candidate:
        """Intent to err: a slip or a bug; the environment lands it only on lines the
        step rewrote (a digit-only edit has none, so it comes out clean)."""
        prof = self.prof
        # the failure mix of ``failure_model`` (1.10.0): semantic bugs common, slips rare
        slip = None
        if self.rng.random() < slip_intent(kind, prof.p_slip, prof.skill):
            slip = self.rng.choice(slip_kinds(self.task.impl))
        if kind not in ("variant", "tune"):
            return Candidate.of(v, p, slip=slip)
        # new code can hold a typo and a logic bug at once: the bug shows once it compiles
        if self.rng.random() < bug_intent(kind, prof.p_bug, prof.skill):
            return Candidate.of(v, p, slip=slip, bug=ANY_BUG)
        if slip is not None:
            return Candidate.of(v, p, slip=slip)
        if (
            kind == "variant"
            and "no_tail_mask" in FAMILY_BUGS[self.op.family]
            and self.rng.random() < prof.p_skip_mask * (1.3 - 0.6 * prof.skill)
        ):
            # a new rung written for the tile at hand: no tail mask (the code stays right
            # until a tuned tile stops dividing the extent)
            return Candidate.of(v, p, bug="no_tail_mask")
        return Candidate.of(v, p)

    # ------------------------------------------------------------------ observing
    def observe(self, o: Observation) -> None:
        self.hist.append(o)
        if o.kind == "tune":
            self.tuning.tried()
        p = dict(o.params)
        k = _key(p)
        rs = self._rung(o.tag)
        rs.tried.add(k)
        self.pending = None
        if o.smem_bytes is not None:
            dims = _staging(p)
            if rs.smem_seen.get(dims) != o.smem_bytes:
                rs.smem_seen[dims] = o.smem_bytes
                rs.smem_memo.clear()
        if o.status == OK and o.time_ms is not None:
            self._observe_time(o, rs, k, o.time_ms)
            return
        self._observe_error(o, rs, p)

    def _observe_time(
        self, o: Observation, rs: _Rung, k: tuple[tuple[str, object], ...], t: float
    ) -> None:
        """A measured step: the rung's and the session's best, the measured effect of the
        move, what is due a re-benchmark, and which rungs to abandon."""
        if o.kind == "rebench":
            # a longer run of the same code: trust it over the first measurement
            rs.times[k] = t
            if o.step and self.best_step is not None:
                self.best_time = min(self.best_time, t) if k == rs.best_key else self.best_time
            return
        if self.last_move is not None and self.last_move[2] == k:
            dim, sign, _, t0 = self.last_move
            if dim:
                self.effects.setdefault((o.tag, dim, sign), []).append(math.log(t / t0))
        rs.times[k] = t
        rs.step_of[k] = o.step
        rs.unverified = rs.unverified or not o.verified
        if t < rs.best_time:
            gain = rs.best_time / t - 1 if rs.best_time < math.inf else math.inf
            rs.best_time, rs.best_key, rs.best_waves, rs.best_regs = t, k, o.waves, o.regs
            rs.stale = 0 if gain > o.spread_pct / 100 else rs.stale + 1
        else:
            rs.stale += 1
        if t < self.best_time and o.verified:
            # only a time the harness checked correct can be the best (issue 39)
            gain = self.best_time / t - 1
            noise = GAIN_NOISE * max(o.spread_pct, self.best_spread) / 100
            if self.best_step is not None and gain < noise and o.kind != "baseline":
                self.rebench_due = o.step  # within the noise: measure it longer first
            else:
                self.last_gain = o.step
                if self.tuning.tries and o.kind in ("tune", "fix") and self.best_time < math.inf:
                    self.tuning.gained(self.best_time, t)
            self.last_improve = o.step
            self.best_time, self.best_step, self.best_spread = t, o.step, o.spread_pct
        self._abandon_slow()

    def _observe_error(self, o: Observation, rs: _Rung, p: Params) -> None:
        """A failed step: plan the fix its diagnostic calls for (or drop the rung)."""
        v = self.variants.get(o.tag) or self._variant(o.tag)
        if o.kind == "tune":
            rs.stale += 1
        if o.error == "feature":
            self._after_missing_feature(o, p, v)
            return
        if o.error in ("rung", "oom"):
            self.bad.add(o.tag)
            self.explore = [x for x in self.explore if x.tag != o.tag]
            return
        if o.error == "smem":
            self._after_overflow(o, rs, p, v)
            return
        # a slip or a bug: the same configuration, corrected
        self.pending = Decision(self._dress(v, p, "fix"), "fix", o.step)

    def _after_missing_feature(self, o: Observation, p: Params, v: Variant) -> None:
        """Avoid the named features from now on; fix by dequantising, else by moving to
        the GPU's own hardware rung if it is not measured yet."""
        self.avoid |= set(o.missing)
        q = dequantised_fix(o.tag, p, o.missing)
        if q is not None:
            self.pending = Decision(Candidate.of(v, q), "fix", o.step)
            return
        target = self.hw_rung if self.hw_rung is not None and self.hw_rung.tag != o.tag else None
        if target is not None and target.tag not in self.rungs:
            self.explore = [x for x in self.explore if x.tag != target.tag]
            q = self._sized(target, self._defaults(target))
            self.pending = Decision(Candidate.of(target, q), "fix", o.step)

    def _after_overflow(self, o: Observation, rs: _Rung, p: Params, v: Variant) -> None:
        """Learn the overflow's byte count and staging sizes; fix by shrinking to fit."""
        need = o.smem_bytes or int(self.cap * 1.5)
        self.overflowed.add(_staging(p))
        self.overflow_floor = (
            need if self.overflow_floor is None else min(self.overflow_floor, need)
        )
        rs.overflow_min = need if rs.overflow_min is None else min(rs.overflow_min, need)
        vol = _volume(_staging(p))
        rs.overflow_volume = vol if rs.overflow_volume is None else min(rs.overflow_volume, vol)
        q = self._shrink(v, p, need)
        if q is not None and _key(q) not in rs.tried:
            self.pending = Decision(self._dress(v, q, "fix"), "fix", o.step)

    def _variant(self, tag: str) -> Variant:
        from .variants import get_variant

        return get_variant(self.op.family, self.task.impl, tag)

    def _abandon_slow(self) -> None:
        """Drop rungs measured well slower than the best (after a fair try)."""
        for rs in self.rungs.values():
            if rs.done or rs.best_time == math.inf or self.best_time == math.inf:
                continue
            ratio = rs.best_time / self.best_time
            if ratio > 1.6 or (ratio > 1.3 and len(rs.times) >= 3):
                rs.done = True

    # ------------------------------------------------------------------ deciding
    def decide(self, remaining: int) -> Decision | None:
        if not self.hist:
            v = self.base_rung
            return Decision(Candidate.of(v, self._defaults(v)), "baseline", None)
        last = self.hist[-1].step
        if remaining <= 1:
            return self._final_rebench(last)
        if self.pending is not None:
            pending, self.pending = self.pending, None
            return pending
        if self.tuning_over:
            return None
        if self.rebench_due is not None:
            step, self.rebench_due = self.rebench_due, None
            o = self.hist[step]
            if self.n_rebench + 1 <= 0.15 * len(self.hist) and o.step == self.best_step:
                self.n_rebench += 1
                v = self.variants.get(o.tag) or self._variant(o.tag)
                return Decision(Candidate.of(v, dict(o.params)), "rebench", step)
        if self.explore:
            return self._next_rung(last)
        if self._in_the_noise():
            return self._final_rebench(last)
        return self._tune_or_stop(last)

    def _tune_or_stop(self, last: int) -> Decision | None:
        """The next tuning move, or the end of tuning: nothing promising is left, or the
        move chosen is one the engineer expects slower (``_foreseen_slower``, 1.15.0)."""
        d = self._tune(last)
        if d is None and len(self.hist) < MIN_STEPS - 1:
            d = self._keep_looking()
        if d is not None and self._foreseen_slower(d):
            # nothing promising is left: the session ends here (after the closing
            # re-benchmark and any fix it calls for), whatever a later draw would pick
            self.tuning_over = True
            return self._final_rebench(last)
        if d is None:
            return self._final_rebench(last)
        return d

    def _foreseen_slower(self, d: Decision) -> bool:
        """Whether the tuning move chosen is one the engineer's own rules of thumb expect to
        be slower than the kernel it edits (``stop_rule.foreseen_slower``): then nothing
        promising is left and tuning ends. Reads the move and the rung; no random draw."""
        if not self.prof.foresight_stop or d.kind != "tune":
            return False
        tag = d.cand.variant.tag
        rs = self.rungs.get(tag)
        if rs is None or rs.best_key is None:
            return False
        p = dict(rs.best_key)
        at = self._positions(d.cand.variant)
        moves = []
        for dim, new in d.cand.params:
            old = p.get(dim)
            if new == old:
                continue
            pos = at.get(dim, {})
            sign = 1 if pos.get(new, 0) > pos.get(old, 0) else -1
            measured = (tag, dim, sign) in self.effects
            moves.append(Move(dim, old, new, measured, self._occupancy_hunch(tag, dim, sign)))
        return foreseen_slower(moves) is not None

    def _in_the_noise(self) -> bool:
        """Tuning stops once its gains sit inside the measured noise: no step has beaten
        the best by more than the noise for ``STOP_SHARE`` of the steps it took to get
        there (at least ``STOP_MIN``, at most twice ``patience``), or ``STOP_IDLE`` steps
        in a row have not beaten it at all. An engineer who found its best quickly gives up
        sooner; one still finding gains late keeps going. (Tuning moves themselves need an
        expected gain beyond the noise: ``_tune_rung``.) Since 1.12.0 it also stops once
        its own tuning record expects the next try to gain no more than the measured noise
        of the best (``stop_rule.TuningRecord.in_the_noise``)."""
        last = len(self.hist) - 1
        if last - self.last_improve >= STOP_IDLE:
            return True
        if self.prof.stop_rule and self.tuning.in_the_noise(self.best_spread):
            return True
        wait = max(STOP_MIN, min(2 * self.patience, round(STOP_SHARE * self.last_gain)))
        return last - self.last_gain >= wait

    def _keep_looking(self) -> Decision | None:
        """Before ``MIN_STEPS`` a plateau does not end the session: the engineer reopens
        every rung it has measured (slow ones too) and tries its best-estimated untried
        configuration at any estimate."""
        for rs in self.rungs.values():
            if rs.best_time > SLOW_RUNG * self.best_time:
                continue  # measured much slower: no new reason to go back
            rs.done = False
            rs.stale = 1
        keep = self.patience
        self.patience = 1  # the bar fully open
        try:
            return self._tune(self.hist[-1].step)
        finally:
            self.patience = keep

    def _final_rebench(self, last: int) -> Decision | None:
        if self.finished or self.best_step is None:
            return None
        self.finished = True
        if any(
            h.kind == "rebench"
            and h.params == self.hist[self.best_step].params
            and h.tag == self.hist[self.best_step].tag
            for h in self.hist
        ):
            return None  # the best was already measured at length
        if self.prof.stop_rule and self._settled():
            return None  # its lead is beyond the noise: a longer run cannot change the rank
        o = self.hist[self.best_step]
        v = self.variants.get(o.tag) or self._variant(o.tag)
        self.n_rebench += 1
        self.pending = None
        self.explore = []
        return Decision(Candidate.of(v, dict(o.params)), "rebench", self.best_step)

    def _settled(self) -> bool:
        """Whether the best's lead over every other kernel measured is beyond the noise."""
        b = self.hist[self.best_step] if self.best_step is not None else None
        if b is None or b.time_ms is None:
            return False
        others = [
            h.time_ms
            for h in self.hist
            if h.kind != "rebench"
            and h.status == OK
            and h.verified
            and h.time_ms is not None
            and (h.tag, h.params) != (b.tag, b.params)
        ]
        return settled(b.time_ms, min(others, default=math.inf), self.best_spread)

    def _next_rung(self, last: int) -> Decision:
        v = self.explore.pop(0)
        if (
            v is self.hw_rung
            and self.wrong_hw is not None
            and self.rng.random() < self.prof.p_habit
        ):
            wv = self.wrong_hw  # habit: the fancier rung this GPU cannot run
            wp = self._sized(wv, self._defaults(wv))
            return Decision(self._dress(wv, wp, "variant"), "variant", last)
        p = self._defaults(v)
        if "mma" in p and p["mma"] == "f16" and self.rng.random() < self.prof.p_habit * 0.6:
            native = [x for x in self._space(v).get("mma", ()) if x != "f16"]
            if native and not ({"fp8_mma", "fp4_mma"} & self.avoid):
                p = dict(p)
                p["mma"] = native[0]
        p = self._sized(v, p)
        self.last_move = None
        return Decision(self._dress(v, p, "variant"), "variant", last)

    def _estimate(self, tag: str, dim: str, sign: int) -> float:
        """Own estimate of a one-notch move's log time ratio (0 when never measured; a
        skilled engineer's hunch is less noisy)."""
        e = self.effects.get((tag, dim, sign))
        mean = sum(e) / len(e) if e else -0.02 + self._occupancy_hunch(tag, dim, sign)
        return mean + self.rng.gauss(0.0, 0.12 * (1.25 - self.prof.skill))

    def _won(self, tag: str, dim: str, sign: int) -> bool:
        """Whether this one-notch move was measured faster on average."""
        e = self.effects.get((tag, dim, sign))
        return e is not None and len(e) > 0 and sum(e) < 0

    def _occupancy_hunch(self, tag: str, dim: str, sign: int) -> float:
        """What the printed waves suggest of an unmeasured move (issue 39): a grid that
        fills under half a wave wants more parallelism (more splits, smaller tiles); one of
        many waves can afford bigger tiles; more splits for a grid that already fills the GPU
        only add reduction traffic; a bigger tile with registers already at 128 or more per
        thread spills. An engineer's rule of thumb, not a model."""
        rs = self.rungs.get(tag)
        w = rs.best_waves if rs is not None else None
        if w is None or rs is None:
            return 0.0
        if sign > 0 and dim in _TILE_DIMS and (rs.best_regs or 0) >= REG_HEAVY:
            return 2 * HUNCH
        if dim in _SPLIT_DIMS:
            after = w * 2.0**sign  # one notch about doubles or halves the grid
        elif dim in _TILE_DIMS:
            after = w * 2.0**-sign
        else:
            return 0.0
        if after > w and dim in _SPLIT_DIMS:
            # more splits for an underfilled grid (smaller tiles cost reuse); a full one
            # only pays the extra partial sums
            return -HUNCH if w < UNDERFILLED else (HUNCH if w >= 1.0 else 0.0)
        if after < w and after < 1.0:
            return HUNCH  # a grid left under one wave: idle SMs
        if after < w and w > OVERFILLED:
            return -0.5 * HUNCH  # bigger tiles with waves to spare
        return 0.0

    def _tune(self, last: int) -> Decision | None:
        live = [
            (tag, rs)
            for tag, rs in self.rungs.items()
            if rs.best_key is not None
            and not rs.done
            and tag not in self.bad
            and (tag != self.base_rung.tag or len(self.rungs) == 1)
            # issue 39: a rung well behind the best is not tuned further without a reason
            and rs.best_time <= TUNE_RUNG * self.best_time
        ]
        live.sort(key=lambda x: (x[1].unverified, x[1].best_time))
        # the runner-up gets a turn only while it is close to the best
        close = len(live) > 1 and live[1][1].best_time <= 1.15 * live[0][1].best_time
        if close and self.rng.random() < 0.12:
            live = [live[1], live[0], *live[2:]]
        for tag, rs in live:
            d = self._tune_rung(tag, rs)
            if d is not None:
                return d
            rs.done = True  # plateau: nothing left that its own estimates call promising
        return None

    def _jump_terms(self, v: Variant, tag: str, p: Params) -> dict[tuple[str, Any], float]:
        """Each ``(dim, value)``'s term in a long jump's own estimate from ``p``: the mean
        measured one-notch effect in that direction times the notches moved.

        Worked out once per tuning step for every value of the rung's grid instead of once
        per drawn configuration (60 draws of ~8 dimensions each). A pair with no entry adds
        nothing, exactly where the per-draw sum skipped it (a dimension outside the grid,
        ``p``'s own value, a value ``p`` or the draw has off the grid), and the terms are the
        same floats added in the same order, so the estimate is bit-for-bit the same.
        """
        out: dict[tuple[str, Any], float] = {}
        for dim, at_dim in self._positions(v).items():
            cur = p.get(dim)
            a = at_dim.get(cur)
            if a is None:
                continue  # p's value is off the grid: no dimension value has a term
            for val, b in at_dim.items():
                if cur == val:
                    continue
                steps_ = b - a
                e = self.effects.get((tag, dim, 1 if steps_ > 0 else -1))
                if e:  # a direction never measured has no term: a jump along it is blind
                    out[(dim, val)] = sum(e) / len(e) * abs(steps_)
        return out

    def _tune_rung(self, tag: str, rs: _Rung) -> Decision | None:
        v = self.variants.get(tag) or self._variant(tag)
        assert rs.best_key is not None
        p = dict(rs.best_key)
        base_step = rs.step_of.get(rs.best_key)
        # issue 39: a move is worth a step only when its own estimate gains more than the
        # measured noise (1.9.0 lowered the bar as the rung went stale, to moves it expected
        # 40% slower); once no move looks like a gain beyond the noise, the rung is done
        if rs.stale >= 10 * self.patience:
            return None
        bar = -max(NOISE_FLOOR, GAIN_NOISE * self.best_spread / 100)
        opts, singles = self._single_moves(v, tag, rs, p, bar)
        # two dimensions at once, along moves not measured slower
        opts += self._pair_moves(v, tag, rs, p, singles)
        # a longer jump: untried configurations whose every changed dimension moves in a
        # direction not measured slower (its own estimate is the sum of those effects)
        if not any(o[0] < bar for o in opts):
            opts += self._jump_moves(v, tag, rs, p, bar)
        # a move its own measurements call slower by more than the noise is not tried
        opts = [o for o in opts if o[0] < bar]
        if not opts:
            return None
        est, q, dim, sgn = min(opts, key=lambda o: o[0])
        self.last_move = (dim, sgn, _key(q), rs.best_time)
        return Decision(self._dress(v, q, "tune"), "tune", base_step)

    def _single_moves(
        self, v: Variant, tag: str, rs: _Rung, p: Params, bar: float
    ) -> tuple[list[_Option], list[tuple[str, int, int]]]:
        """(options, singles): every submittable 1-3 notch move of one dimension with its
        own estimate, and the one-notch moves estimated under ``bar`` (worth combining)."""
        opts: list[_Option] = []
        singles: list[tuple[str, int, int]] = []  # (dim, sign, notches) moves worth trying
        pk = _key(p)
        at = {name: n for n, (name, _) in enumerate(pk)}
        for dim, sgn, notch, val in _notch_moves(self._space(v), p):
            if notch > 1 and (tag, dim, sgn) not in self.effects:
                continue  # issue 39: a long stride only along a direction already measured
            q = dict(p)
            q[dim] = val
            est = self._estimate(tag, dim, sgn) * notch
            if notch == 1 and est < bar:
                singles.append((dim, sgn, 1))
            n = at[dim]  # _key(q): p's sorted items with this one replaced
            k = (*pk[:n], (dim, val), *pk[n + 1 :])
            if k in rs.tried or not valid(v, self.op, self.dtype, q):
                continue
            if self._avoided(v, q) or self._inert_move(v, p, q):
                continue
            if not self._fits_own(tag, q):
                rs.tried.add(k)  # worked out the footprint: over the cap
                continue
            opts.append((est + 0.01 * (notch - 1), q, dim if notch == 1 else "", sgn))
        return opts, singles

    def _pair_moves(
        self, v: Variant, tag: str, rs: _Rung, p: Params, singles: list[tuple[str, int, int]]
    ) -> list[_Option]:
        """Two promising one-notch moves of different dimensions at once."""
        space = self._space(v)
        opts: list[_Option] = []
        for a in range(len(singles)):
            for b in range(a + 1, len(singles)):
                (d1, s1, _), (d2, s2, _) = singles[a], singles[b]
                if d1 == d2 or not (self._won(tag, d1, s1) and self._won(tag, d2, s2)):
                    continue  # issue 39: combine only moves each measured faster
                q = _notched(space, p, ((d1, s1), (d2, s2)))
                k = _key(q)
                if k in rs.tried or not valid(v, self.op, self.dtype, q):
                    continue
                if self._avoided(v, q) or not self._fits_own(tag, q):
                    continue
                est = self._estimate(tag, d1, s1) + self._estimate(tag, d2, s2) + 0.01
                opts.append((est, q, "", 0))
        return opts

    def _jump_moves(self, v: Variant, tag: str, rs: _Rung, p: Params, bar: float) -> list[_Option]:
        """Up to 60 random untried configurations of the rung whose summed measured
        one-notch effects (plus a noisy hunch) are under ``bar``."""
        pool = param_pool(v, self.op, self.dtype)
        keys = param_pool_keys(v, self.op, self.dtype)  # _key of each, in pool order
        terms = self._jump_terms(v, tag, p)
        opts: list[_Option] = []
        for _ in range(min(len(pool), 60)):
            r = self.rng.randrange(len(pool))
            if keys[r] in rs.tried or (self.avoid and self._avoided(v, dict(pool[r]))):
                continue
            est = 0.02
            blind = False
            for dim, val in pool[r]:
                tv = terms.get((dim, val))
                if tv is not None:
                    est += tv
                elif p.get(dim) != val:
                    blind = True  # issue 39: no jump along a direction never measured
                    break
            if not blind and est < bar and not self._inert_move(v, p, dict(pool[r])):
                q = dict(pool[r])
                if self._fits_own(tag, q):
                    opts.append(
                        (est + self.rng.gauss(0.0, 0.1 * (1.25 - self.prof.skill)), q, "", 0)
                    )
        return opts
