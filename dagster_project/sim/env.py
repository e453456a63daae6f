"""The simulated compile → verify → benchmark environment for one task.

``KernelEnv.submit`` takes a ``Candidate`` (rung, params, optional slip/bug), renders its
source, decides the outcome in the order a real harness would meet problems (compiler:
missing arch features, then slips, then the shared-memory guard; correctness; timing)
and returns a ``Submission`` with the code and the diagnostic/benchmark text. It holds no
agent policy, so a multi-agent generator can drive the same environment from several
agents (each with its own rng) without forking it.

**Causal mistakes** (generator 1.7.0). A candidate's slip or planted bug is the agent's
intent to err; where it lands is decided here, from what the step actually rewrote. Given
``base_code`` (the source the engineer edited), ``touched_lines`` are the lines of the new
clean source whose digit-normalised text is not in the base (an edit that only changes
numbers, i.e. a parameter-only ``tune``, touches none). A slip is typed only on a touched
line, a bug is planted only where all of its lines are touched; with no room the candidate
is written correctly. So a parameter-only edit can fail only for what its numbers cause
(shared memory over the cap), and a line fixed earlier never breaks again unless the step
rewrites it. ``base_code=None`` (a first submission, the swarm's callers) touches every line.
"""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .codegen import FAMILY_BUGS, BugProbe, Slip, inject_slip, render_candidate, slip_kinds
from .feedback import cluster_error, failure_report, feature_error, smem_error, wrong_result
from .hardware import GPU, get_gpu, nvcc_arch_flag
from .kernels import KernelPlan, plan
from .memory import fits_memory, footprint_bytes, oom_report
from .ops import OpSpec, get_op
from .oracle import Answer, StepOracle, measured_verdict
from .tasks import TaskSpec
from .timing import Prediction, benchmark, predict
from .variants import Params, Variant, features_used, get_variant, knob
from .verification import mismatch_report, step_status

OK = "ok"
COMPILE_ERROR = "compile_error"
WRONG_RESULT = "wrong_result"
#: An ok whose rung has no execution evidence on this arch family (``sim.rung_verification``):
#: it compiled and has a modelled time, but nobody ran it against a reference there.
UNVERIFIED = "unverified"
#: ``Candidate.bug`` value meaning "the engineer plants some bug": the environment picks one
#: that this rung's source has a place for, inside the lines the step touched.
ANY_BUG = "?"

_DIGITS = re.compile(r"\d+")


class _LineMemo(dict[str, str]):
    """Raw line -> its digit-normalised, stripped text, filled on first sight.

    Safe to share by every text and session: the value is a pure function of the line.
    Renders of one template share most of their lines (across rungs, params and tasks), so
    a lookup replaces a regex pass over nearly every line of a file.
    """

    def __missing__(self, ln: str) -> str:
        if len(self) > _LINE_MEMO_MAX:
            self.clear()  # bounded: the memo only ever saves work
        out = self[ln] = _DIGITS.sub("#", ln).strip()
        return out


_LINE_MEMO_MAX = 200_000
_LINE_NORM = _LineMemo()


@lru_cache(maxsize=4096)
def _normalised(code: str) -> tuple[str, ...]:
    """Digit-normalised, stripped lines of a source text. Every step diffs its parent's
    source, which was the previous step's new source: normalising each text once instead
    of once per diff removes about a third of a diff's cost."""
    # line by line through the shared memo: the same as one substitution over the file,
    # since a digit run never spans a newline and stripping a line commutes with it
    return tuple(map(_LINE_NORM.__getitem__, code.split("\n")))


def _changes(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int, int, int]]:
    """The non-equal opcodes ``(i1, i2, j1, j2)`` of a line diff from ``a`` to ``b``.

    The common head and tail are matched first and only the middle goes to ``difflib``:
    an edit or a mistake rewrites a few lines of a file of hundreds, so this is mostly a
    diff of a handful of lines instead of the whole file. It could align a repeated line
    differently from a whole-file ``SequenceMatcher`` (which prefers the longest block
    anywhere), never wrongly: every line it calls equal is. On the 40-session sample and
    the row-hash build it gives the same lines as the whole-file diff.
    """
    n = min(len(a), len(b))
    head = 0
    while head < n and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < n - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    ma, mb = a[head : len(a) - tail], b[head : len(b) - tail]
    if not ma and not mb:
        return []
    if not ma or not mb:
        return [(head, head + len(ma), head, head + len(mb))]
    return [
        (head + i1, head + i2, head + j1, head + j2)
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
            None, ma, mb, autojunk=False
        ).get_opcodes()
        if tag != "equal"
    ]


def touched_lines(base_code: str | None, code: str) -> set[int] | None:
    """0-based lines of ``code`` whose digit-normalised text the edit from ``base_code``
    rewrote (a pure deletion marks its neighbours); None = everything (no base)."""
    if base_code is None:
        return None
    out: set[int] = set()
    for _i1, _i2, j1, j2 in _changes(_normalised(base_code), _normalised(code)):
        if j2 > j1:
            out.update(range(j1, j2))
        else:
            out.update((j1 - 1, j1))
    return out


def mistake_lines(clean: str, bad: str) -> set[int]:
    """0-based lines of ``clean`` that ``bad`` changes or deletes (an insertion marks its
    neighbours): where a planted bug or slip sits, in the clean source's numbering."""
    out: set[int] = set()
    for i1, i2, _j1, _j2 in _changes(clean.split("\n"), bad.split("\n")):
        if i2 > i1:
            out.update(range(i1, i2))
        else:
            out.update((i1 - 1, i1))
    return out


@dataclass(frozen=True)
class Candidate:
    """What an agent submits: a rung with params, possibly carrying a mistake."""

    variant: Variant
    params: tuple[tuple[str, object], ...]
    slip: str | None = None
    bug: str | None = None

    @property
    def param_dict(self) -> Params:
        return dict(self.params)

    @staticmethod
    def of(
        variant: Variant, params: Params, slip: str | None = None, bug: str | None = None
    ) -> Candidate:
        return Candidate(variant, tuple(params.items()), slip, bug)


@dataclass
class Submission:
    """Outcome of one submitted candidate."""

    status: str
    code: str
    detail: str  # compiler diagnostic, wrong-result report, or "" for ok
    error_kind: str | None = None  # feature | slip | smem | bug | rung (measured wrong)
    missing: tuple[str, ...] = ()
    time_ms: float | None = None  # noisy measurement
    spread_pct: float = 0.0
    prediction: Prediction | None = None
    slip: Slip | None = None
    extra: dict[str, object] = field(default_factory=dict)
    #: ``ok`` only says it compiled and ran; ``verified`` says its rung was executed and
    #: checked correct on this arch family (``sim.rung_verification``). An unverified ok
    #: is reported as ``unverified``: its time is real to the model, its correctness is not.
    verified: bool = False


class KernelEnv:
    """Stateless per-task evaluator with a small render/prediction cache."""

    def __init__(self, task: TaskSpec, oracle: StepOracle | None = None) -> None:
        self.task = task
        #: the measuring harness (the online tier): every step that compiles gets the real
        #: verdict and time of its exact source; None = the model's (``submit``)
        self.oracle = oracle
        self.op: OpSpec = get_op(task.op)
        self.gpu: GPU = get_gpu(task.gpu)
        self.shape = task.shape
        self._pred: dict[tuple[str, tuple[tuple[str, object], ...]], Prediction | str] = {}
        self._code: dict[tuple[str, tuple[tuple[str, object], ...], str | None], str] = {}
        #: bug names each clean render's templates compared with (``BugProbe``)
        self._spots: dict[tuple[str, tuple[tuple[str, object], ...]], frozenset[object]] = {}
        self._plans: dict[tuple[str, tuple[tuple[str, object], ...]], KernelPlan] = {}

    # -- pure model queries -------------------------------------------------------------
    def variant(self, tag: str) -> Variant:
        return get_variant(self.op.family, self.task.impl, tag)

    def plan(self, variant: Variant, params: Params) -> KernelPlan:
        key = (variant.tag, tuple(params.items()))
        kp = self._plans.get(key)
        if kp is None:
            kp = self._plans[key] = plan(
                self.op, self.shape, self.task.dtype, self.gpu, variant, params
            )
        return kp

    def missing(self, variant: Variant, params: Params) -> list[str]:
        return sorted(
            f
            for f in features_used(variant, self.op, self.task.dtype, params)
            if f not in self.gpu.features
        )

    def smem(self, variant: Variant, params: Params) -> int:
        return self.plan(variant, params).smem

    def fits(self, variant: Variant, params: Params) -> bool:
        return self.smem(variant, params) <= self.gpu.smem_per_block_optin

    def predicted(self, variant: Variant, params: Params) -> Prediction | None:
        """Noise-free prediction, or None if the candidate cannot run here."""
        key = (variant.tag, tuple(params.items()))
        if key not in self._pred:
            if self.missing(variant, params) or not self.fits(variant, params):
                self._pred[key] = "infeasible"
            else:
                self._pred[key] = predict(
                    self.op, self.shape, self.task.dtype, self.gpu, variant, params
                )
        val = self._pred[key]
        return None if isinstance(val, str) else val

    def code(self, variant: Variant, params: Params, bug: str | None = None) -> str:
        key = (variant.tag, tuple(params.items()), bug)
        if key not in self._code:
            probe = BugProbe() if bug is None else None
            self._code[key] = render_candidate(
                self.op,
                self.gpu,
                self.task.dtype,
                self.shape,
                variant,
                params,
                bug if probe is None else probe,
            )
            if probe is not None:
                self._spots[key[:2]] = frozenset(probe.asked)
        return self._code[key]

    def has_spot(self, variant: Variant, params: Params, bug: str) -> bool:
        """Whether planting ``bug`` changes this candidate's source. The clean render's
        probe rules out the bugs its templates never asked about without rendering them."""
        clean = self.code(variant, params)
        if bug not in self._spots[(variant.tag, tuple(params.items()))]:
            return False
        return self.code(variant, params, bug) != clean

    def bugs_for(self, variant: Variant, params: Params) -> list[str]:
        """Bugs this candidate can plausibly carry: only those that would show up in the
        output (a missing tail mask is invisible when the tile divides the extent)."""
        out = []
        kp = self.plan(variant, params)
        split = knob(params, "split_k", "SPLIT_K", "splits", "NUM_SPLITS", default=1)
        for b in FAMILY_BUGS[self.op.family]:
            if b == "missing_sync" and kp.smem < 256:
                continue
            if b == "splitk_race" and (split or 1) <= 1:
                continue
            if b == "no_rescale" and variant.level == 0:
                continue
            if b == "eps_outside" and self.op.name != "rmsnorm":
                continue
            if b == "wrong_scale" and self.task.dtype not in ("int4", "fp4"):
                continue
            if b == "no_tail_mask" and not self._has_tail(variant, params):
                continue
            # the bug must actually change this rung's source (not every rung has the spot)
            if not self.has_spot(variant, params, b):
                continue
            out.append(b)
        return out

    def _has_tail(self, variant: Variant, params: Params) -> bool:
        """Whether the candidate's tiling leaves a partial tile along its masked extent."""
        from .kernels import decode_dims, ew_elems, gemm_mnk, prefill_dims, row_dims

        p, s, fam = params, self.shape, self.op.family
        if fam == "gemm":
            m, n, _ = gemm_mnk(self.op, s)
            bm = knob(p, "BM", "BLOCK_M", "TB", default=1)
            bn = knob(p, "BN", "BLOCK_N", "TB", default=1)
            return m % bm != 0 or n % bn != 0
        if fam == "gemv":
            rows = knob(p, "BLOCK_N", default=p.get("warps", 1) * p.get("rows", 1))
            return s["N"] % max(1, rows) != 0
        if fam == "attn_decode":
            return decode_dims(self.op, s)["Skv"] % p.get("BLOCK_N", 32) != 0
        if fam == "attn_prefill":
            return prefill_dims(self.op, s)["Skv"] % p.get("BLOCK_N", 16) != 0
        if fam == "rowwise":
            _, n = row_dims(self.op, s)
            return n % (knob(p, "threads", default=p.get("num_warps", 4) * 32) * 4) != 0
        if fam == "elementwise":
            return ew_elems(self.op, s) % knob(p, "threads", "BLOCK", default=128) != 0
        if fam == "sampling":
            return s["V"] % knob(p, "BLOCK", "threads", default=256) != 0
        return s["Din"] % knob(p, "BLOCK_D", "threads", default=64) != 0

    def sound_baseline(self, rungs: list[Variant]) -> Variant:
        """The first rung of a ladder that is not measured wrong on this family, whose
        default configuration the oracle did not see fail at this shape, and which fits the
        card's memory at this shape (a naive rung that
        materialises a ``B·L·Din·N`` state cannot even allocate on an 80 GB card); the
        verification module's choice when none fits."""
        from .variants import default_params
        from .verification import sound_baseline

        fallback = sound_baseline(rungs, self.op.name, self.task.impl, self.gpu.arch)
        for v in rungs:
            if step_status(self.op.name, self.task.impl, v.tag, self.gpu.arch, {}, {}).wrong:
                continue
            params = default_params(v, self.op, self.task.dtype, self.shape, self.gpu)
            if self.missing(v, params) or not self.fits(v, params):
                continue
            code = self.code(v, params)
            if fits_memory(self._footprint(code), self.gpu.mem_gb) and self._measured(code) is None:
                return v
        return fallback

    def _footprint(self, code: str) -> float:
        """Device bytes the candidate needs: the op's tensors plus its own allocations."""
        return footprint_bytes(
            self.op.bytes(self.shape, self.task.dtype),
            code,
            self.task.impl,
            self.shape,
            self.task.signature,
        )

    def _measured(self, code: str) -> Answer | None:
        """The oracle's failure verdict on this exact source at this shape, if it ran one.
        Correctness carries between Hopper cards (same sm_90a code, same nvcc); a timeout
        does not (it may be a slow kernel, not a hung one) and neither does time."""
        if self.gpu.arch != "sm_90a":
            return None
        # a session of the online tier reads the evidence as the device did (``oracle``)
        return measured_verdict(code, self.shape, self.task.dtype, online=self.oracle is None)

    # -- the harness --------------------------------------------------------------------
    def _ran(self, cand: Candidate, code: str, pred: Prediction) -> Submission | None:
        """What running a compiled candidate says before the model's own checks: an
        allocation beyond the card is a runtime error (issue 36), and with a measuring
        harness (``oracle``) the device's answer for this exact source decides."""
        footprint = self._footprint(code)
        if not fits_memory(footprint, self.gpu.mem_gb):
            # the harness cannot even allocate it: a runtime error, never ok (issue 36)
            detail = oom_report(footprint, self.gpu.mem_gb)
            return Submission(WRONG_RESULT, code, detail, "oom", prediction=pred)
        if self.oracle is None:
            return None
        meta: dict[str, Any] = {"op": self.op.name, "impl": self.task.impl}
        meta["variant"] = cand.variant.tag
        meta["params"] = cand.param_dict
        ans = self.oracle.ask(code, self.shape, self.task.dtype, meta)
        return None if ans is None else _answered_submission(self, ans, cand, code, pred)

    def place_bug(
        self,
        variant: Variant,
        params: Params,
        want: str | None,
        touched: set[int] | None,
        avoid: frozenset[str] = frozenset(),
    ) -> str | None:
        """The bug the candidate really carries: ``want`` (or, for ``ANY_BUG``, one of the
        rung's visible bugs, else a tail mask left out while the tile still divides the
        extent: a latent bug a later tile reveals) if all of its lines lie in ``touched``;
        else None. A bug in ``avoid`` (one the engineer already fixed in this rung's code)
        is never written again."""
        if want is None or (touched is not None and not touched) or want in avoid:
            return None
        clean = self.code(variant, params)
        if want == ANY_BUG:
            bugs = self.bugs_for(variant, params)
            if not bugs and "no_tail_mask" in FAMILY_BUGS[self.op.family]:
                bugs = ["no_tail_mask"]
        else:
            bugs = [want]
        bugs = [b for b in bugs if b not in avoid and self.has_spot(variant, params, b)]
        if touched is not None:
            bugs = [
                b for b in bugs if mistake_lines(clean, self.code(variant, params, b)) <= touched
            ]
        if not bugs:
            return None
        return bugs[0] if len(bugs) == 1 else bugs[_pick(len(bugs), variant.tag, params)]

    def _placed(
        self,
        cand: Candidate,
        params: Params,
        base_code: str | None,
        avoid: frozenset[str] = frozenset(),
    ) -> tuple[Candidate, set[int] | None]:
        """The candidate with the bug it really carries, and the lines its edit rewrote.

        Only a candidate carrying a mistake needs to know where it may go: the lines are
        None (anywhere) unless ``base_code`` is given and the candidate has a slip or a bug.
        """
        v = cand.variant
        touched = None
        if base_code is not None and (cand.slip or cand.bug):
            touched = touched_lines(base_code, self.code(v, params))
        bug = cand.bug
        if bug is not None and (bug == ANY_BUG or touched is not None or bug in avoid):
            bug = self.place_bug(v, params, bug, touched, avoid)
            if bug != cand.bug:
                cand = Candidate(cand.variant, cand.params, cand.slip, bug)
        return cand, touched

    def _slip_error(
        self,
        cand: Candidate,
        code: str,
        touched: set[int] | None,
        base_code: str | None,
        rng: random.Random,
        flag: str,
        missing: list[str],
        avoid: frozenset[str] = frozenset(),
    ) -> Submission | None:
        """The compile error of a candidate typed with a slip; None when it has none, its
        edit rewrote no line, or the source has room for no slip at all (slips in
        ``avoid``, ones the engineer already fixed in this session, are not typed again)."""
        if not cand.slip or cand.slip in avoid:
            return None
        if touched is not None:
            if cand.bug:  # the slip goes into the source as written, bug included
                touched = touched_lines(base_code, code)
            if not touched:
                return None  # nothing rewritten: no slip
        # fall back to another slip the source has room for (the engineer slipped somewhere)
        kinds = [cand.slip] + [
            k for k in slip_kinds(self.task.impl) if k != cand.slip and k not in avoid
        ]
        res = None
        for kind in kinds:
            res = inject_slip(code, self.task.impl, kind, rng, touched)
            if res is not None:
                break
        if res is None:
            return None
        bad_code, slip = res
        cuda = self.task.impl == "cuda"
        head = f"nvcc -O3 -std=c++17 -arch={flag} -c candidate.cu\n" if cuda else ""
        return Submission(
            COMPILE_ERROR,
            bad_code,
            head + slip.diagnostic,
            "slip",
            tuple(missing),
            slip=slip,
            extra={"bug": cand.bug} if cand.bug else {},
        )

    def submit(
        self,
        cand: Candidate,
        rng: random.Random,
        runs: int = 200,
        base_code: str | None = None,
        avoid: frozenset[str] = frozenset(),
    ) -> Submission:
        """Compile, check and time a candidate. ``rng`` drives only noise and messages;
        ``base_code`` is the source the candidate was edited from (see the module doc);
        ``avoid`` names the bugs and slips the engineer remembers fixing (never written
        again: the fixed code stays fixed)."""
        params = cand.param_dict
        v = cand.variant
        cand, touched = self._placed(cand, params, base_code, avoid)
        code = self.code(v, params, cand.bug)
        feats = features_used(v, self.op, self.task.dtype, params)
        flag = nvcc_arch_flag(self.gpu.arch, feats)
        missing = self.missing(v, params)
        kp = self.plan(v, params)
        over = kp.smem > self.gpu.smem_per_block_optin
        int_mma = self.op.mma_path == "int8"
        tensor_maps = self.op.family in ("gemm", "attn_decode", "attn_prefill")
        cuda = self.task.impl == "cuda"
        # Triton rejects unsupported types while compiling, before resources are checked.
        if missing and not cuda:
            detail = feature_error(missing, self.gpu, "triton", flag, rng)
            return Submission(COMPILE_ERROR, code, detail, "feature", tuple(missing))
        slipped = self._slip_error(cand, code, touched, base_code, rng, flag, missing, avoid)
        if slipped is not None:
            return slipped
        # nvcc's front end (the shared-memory static_assert) runs before ptxas sees any PTX
        if over:
            detail, _key = smem_error(self.task.impl, kp.smem, self.gpu, flag, code)
            return Submission(COMPILE_ERROR, code, detail, "smem", tuple(missing))
        if missing and "tma_multicast" in missing and self.gpu.arch in ("sm_80", "sm_86"):
            detail, _key = cluster_error(code, flag)  # clusters do not exist before sm_90
            return Submission(COMPILE_ERROR, code, detail, "feature", tuple(missing))
        if missing:
            detail = feature_error(missing, self.gpu, "cuda", flag, rng, int_mma, tensor_maps)
            return Submission(COMPILE_ERROR, code, detail, "feature", tuple(missing))
        pred = self.predicted(v, params)
        assert pred is not None
        ran = self._ran(cand, code, pred)
        if ran is not None:
            return ran
        if cand.bug and cand.bug in self.bugs_for(v, params):
            name, dims = self.op.out(self.shape)
            tail = tuple(d - 1 for d in dims)
            detail = wrong_result(cand.bug, name, dims, rng, tail)
            bug: dict[str, object] = {"bug": cand.bug}
            return Submission(WRONG_RESULT, code, detail, "bug", prediction=pred, extra=bug)
        rung = step_status(
            self.op.name, self.task.impl, v.tag, self.gpu.arch, params, self.shape, self.task.dtype
        )
        if rung.wrong:
            # measured wrong on a Hopper GPU (the rung, or the rung in this parameter
            # region): the harness reports the real mismatch, never ok
            name, dims = self.op.out(self.shape)
            detail = mismatch_report(rung, name, dims)
            return Submission(WRONG_RESULT, code, detail, "rung", prediction=pred)
        measured = self._measured(code)
        if measured is not None:
            # this very source was run at this shape and failed: the measured failure
            name, dims = self.op.out(self.shape)
            detail = measured_failure_report(measured, name, dims)
            return Submission(WRONG_RESULT, code, detail, "rung", prediction=pred)
        t, spread = benchmark(pred.time_ms, rng, pred.floor_ms)
        return Submission(
            OK,
            code,
            "",
            None,
            time_ms=t,
            spread_pct=spread,
            prediction=pred,
            verified=rung.verified,
            extra={"bug": cand.bug} if cand.bug else {},
        )


def _answered_submission(
    env: KernelEnv, ans: Answer, cand: Candidate, code: str, pred: Prediction
) -> Submission:
    """A step of the online tier: the device's verdict and time of this exact source at
    this shape. A planted bug is whatever the measurement says it is (a bug that does not
    show at this shape runs ok, as it would for an engineer); an ok is verified (executed
    and checked here) and its time is the measured median with its spread."""
    extra: dict[str, object] = {"bug": cand.bug} if cand.bug else {}
    if ans.status == "ok":
        assert ans.ms is not None  # StepOracle.ask returns only usable answers
        extra["measured_rel_err"] = ans.max_rel_err
        # what the harness text says about the measurement: its repeats, method and check
        extra["measured_runs"] = ans.n_timed
        extra["measured_how"] = ans.timing or "timed calls"
        extra["measured_check"] = ans.check or "vs the fp32 reference"
        return Submission(
            OK,
            code,
            "",
            None,
            time_ms=ans.ms,
            spread_pct=ans.spread_pct or 0.0,
            prediction=pred,
            verified=True,
            extra=extra,
        )
    if ans.status == "compile_error":
        # the planted bugs are semantic and compile; a source the device's compiler rejects
        # is the rung's (its template under this toolchain): the engineer drops the rung
        # rather than "fixing" code that would fail the same way (and no bug is carried
        # into a fix: that looped on one source for 199 steps in s08b)
        log = ans.compile_log or ans.error or "compilation failed"
        return Submission(COMPILE_ERROR, code, log, "rung")
    name, dims = env.op.out(env.shape)
    kind = "bug" if cand.bug else "rung"
    return Submission(
        WRONG_RESULT, code, measured_failure_report(ans, name, dims), kind, prediction=pred,
        extra=extra,
    )  # fmt: skip


def measured_failure_report(ans: Answer, out_name: str, dims: tuple[int, ...]) -> str:
    """The wrong-result text of a source the oracle ran at this shape and saw fail: its own
    error figure or CUDA error; the device and toolchain stamp stays in the shipped answers."""
    rel = ans.max_rel_err if ans.status == "wrong_result" else None
    return failure_report(out_name, dims, rel, ans.error or ans.status)


def _pick(n: int, tag: str, params: Params) -> int:
    """A deterministic choice among ``n`` placeable bugs (no rng draw, so placing a bug
    does not shift the session's random stream)."""
    h = 0
    for ch in tag + repr(sorted(params.items())):
        h = (h * 131 + ord(ch)) % 1_000_003
    return h % n
