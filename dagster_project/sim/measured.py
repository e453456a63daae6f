"""What the measurement oracle's answers say about the simulator (issue 36).

Each shipped answer (``oracle``) is a kernel a simulated session wrote, compiled with the
prompt's flags and run at the session's own shape and dtype on a real GPU. Here they are
set beside the model: ``model_points`` predicts each timed kernel on the measuring GPU
(same op, shape, dtype, rung and launch parameters: the prediction the kernel would get
had its session been on that GPU) and ``speedup_pairs`` compares, per session whose
baseline and best kernels were both timed, the measured speedup with the modelled one.
No answer was used to fit the model, so every figure here is out of sample.

``region_failures`` groups the correctness verdicts by the parameter regions the issue
names (2-CTA clusters; split-K with a tile taller than the problem) for the labels.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import codemodel
from .codegen import render_candidate
from .hardware import get_gpu
from .memory import footprint_bytes
from .ops import get_op
from .oracle import Answer, answers_path, online_answers_path, read_answers
from .rewrites import canonical
from .timing import InfeasibleConfig, Prediction, predict
from .variants import default_params, get_variant
from .verification import region_of

#: The session id's GPU field: ``<impl>_<op>-<gpu>-<shape>-<dtype>-s<seed>``.
_SID_GPU = 1


@dataclass(frozen=True)
class Point:
    """One timed kernel: measured and modelled device time on the measuring GPU."""

    key: str
    op: str
    impl: str
    variant: str
    uses: tuple[tuple[str, int, str], ...]
    measured_ms: float
    modelled_ms: float
    #: ``codemodel.FEATURES`` of the kernel's own source and launch (``model_points(...,
    #: code=True)``); empty when not read.
    features: tuple[float, ...] = ()
    #: The GPU that measured it (the model predicts it on that GPU).
    gpu: str = "h100"

    @property
    def kernel_key(self) -> codemodel.KernelKey:
        """(op, impl, rung tag): what the code model's offsets are kept by."""
        return (self.op, self.impl, self.variant)

    @property
    def log_err(self) -> float:
        """log(modelled / measured): > 0 the model is slow, < 0 it is fast."""
        return math.log(self.modelled_ms / self.measured_ms)


def _uses(text: str) -> tuple[tuple[str, int, str], ...]:
    out = []
    for u in text.split():
        sid, _, rest = u.rpartition("@")
        step, _, role = rest.partition(":")
        out.append((sid, int(step), role))
    return tuple(out)


def _params(row: dict[str, str], render_gpu: str) -> dict[str, Any]:
    """The launch parameters the kernel was rendered with: the step's own, or for a
    baseline (whose trace stores none) the rung's defaults for its session's GPU."""
    params: dict[str, Any] = json.loads(row["params"])
    if params:
        return params
    op = get_op(row["op"])
    v = get_variant(op.family, row["impl"], row["variant"])
    return dict(default_params(v, op, row["dtype"], json.loads(row["shape"]), get_gpu(render_gpu)))


def load_rows(gpu: str) -> list[dict[str, str]]:
    """The shipped answers of ``gpu`` as CSV rows (with the question's metadata)."""
    import csv

    path = answers_path(gpu)
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def render(row: dict[str, str]) -> str:
    """The answered kernel's source as its session's environment renders it (same op,
    rung, launch parameters, shape, dtype and session GPU, the task's own author): the
    code the session's step carried, up to the generator's comment and guard wording."""
    uses = _uses(row["uses"])
    render_gpu = uses[0][0].split("-")[_SID_GPU] if uses else "h100"
    op = get_op(row["op"])
    v = get_variant(op.family, row["impl"], row["variant"])
    shape = json.loads(row["shape"])
    params = _params(row, render_gpu)
    # the canonical text: answers are keyed by it (``rewrites``), not by an author's variant
    return render_candidate(op, render_gpu, row["dtype"], shape, v, params, rewrite_axes=())


def _features(row: dict[str, str], pred: Prediction, gpu: str) -> tuple[float, ...]:
    """``codemodel.FEATURES`` of one answered kernel: its rendered source and launch."""
    return kernel_features(
        row["op"], row["impl"], row["variant"], json.loads(row["shape"]), row["dtype"],
        render(row), pred, gpu,
    )  # fmt: skip


def kernel_features(
    op_name: str,
    impl: str,
    tag: str,
    shape: dict[str, int],
    dtype: str,
    code: str,
    pred: Prediction,
    gpu: str,
) -> tuple[float, ...]:
    """``codemodel.FEATURES`` of a kernel from its source and its prediction on ``gpu``."""
    op = get_op(op_name)
    v = get_variant(op.family, impl, tag)
    foot = footprint_bytes(op.bytes(shape, dtype), code, impl, shape, op.signature_for(dtype))
    feats = codemodel.features(code, impl, v.level, pred, get_gpu(gpu), foot)
    return tuple(codemodel.vector(feats))


#: GPUs whose shipped answers the code model is fitted on (each predicted on its own GPU).
MEASURING_GPUS = ("h100", "h200")


def all_points(code: bool = True, online: bool = True) -> list[Point]:
    """``model_points`` of every measuring GPU's shipped answers, pooled: one code model is
    fitted on them all (its features carry each GPU's launch shape and bandwidth), and
    figures are split by ``Point.gpu``. ``online`` (code model 1.3.0): the online tier's
    answers too, each kernel carrying the baseline / best role it plays in a tier session
    (``online_roles``), on whichever file's kernel it is."""
    out = []
    for g in MEASURING_GPUS:
        pts = model_points(load_rows(g), g, code)
        if online:
            roles = online_roles(g)
            pts = [
                dataclasses.replace(p, uses=p.uses + tuple(roles.get(p.key, ())))
                for p in pts + model_points(_online_rows(g), g, code)
            ]
        out += pts
    return out


#: Suffix of an online session's id in the roles its kernels carry: the tier's session of a
#: task is not the evidence session of the same task id.
ONLINE_SESSION = "~online"


def online_roles_path(gpu: str) -> Any:
    """The online sessions' baseline and best answer keys (``benchmarks/codemodel_dev_cv.py
    --write-roles``, from a replay under the generator the tier was measured with: a later
    generator cannot replay the tier, the roles stay)."""
    return answers_path(gpu).with_name(f"{gpu}_online_roles.csv")


def online_roles(gpu: str) -> dict[str, tuple[tuple[str, int, str], ...]]:
    """Per answer key, its (session, step, role) uses as a tier session's baseline or best."""
    import csv

    path = online_roles_path(gpu)
    out: dict[str, tuple[tuple[str, int, str], ...]] = defaultdict(tuple)
    if not path.exists():
        return out
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            sid = r["session_id"] + ONLINE_SESSION
            out[r["baseline_key"]] += ((sid, int(r["baseline_step"]), "baseline"),)
            out[r["best_key"]] += ((sid, int(r["best_step"]), "best"),)
    return out


def _online_rows(gpu: str) -> list[dict[str, str]]:
    import csv

    path = online_answers_path(gpu)
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def model_points(rows: Iterable[dict[str, str]], gpu: str, code: bool = False) -> list[Point]:
    """Every correct, timed answer beside the model's device time on ``gpu`` (``code``:
    with the code model's features of its source and launch)."""
    card = get_gpu(gpu)
    out = []
    for r in rows:
        if r["status"] != "ok" or not r["ms"]:
            continue
        uses = _uses(r["uses"])
        render_gpu = uses[0][0].split("-")[_SID_GPU] if uses else gpu
        op = get_op(r["op"])
        v = get_variant(op.family, r["impl"], r["variant"])
        try:
            pred = predict(op, json.loads(r["shape"]), r["dtype"], card, v, _params(r, render_gpu))
        except InfeasibleConfig:
            continue
        feats = _features(r, pred, gpu) if code else ()
        out.append(
            Point(
                r["key"],
                r["op"],
                r["impl"],
                r["variant"],
                uses,
                float(r["ms"]),
                pred.device_ms,
                feats,
                gpu,
            )
        )
    return out


@dataclass(frozen=True)
class Pair:
    """A session whose baseline and best kernels were both timed."""

    session_id: str
    op: str
    impl: str
    measured: float
    modelled: float
    #: The GPU both kernels were measured on.
    gpu: str = "h100"

    @property
    def ratio(self) -> float:
        """modelled speedup / measured speedup."""
        return self.modelled / self.measured


def speedup_pairs(points: Iterable[Point]) -> list[Pair]:
    """Measured vs modelled speedup (baseline time / best time) per session and measuring
    GPU (a session's kernels timed on two GPUs make two pairs, never a mixed one)."""
    by: dict[tuple[str, str], dict[str, Point]] = defaultdict(dict)
    for p in points:
        for sid, _step, role in p.uses:
            if role in ("baseline", "best"):
                by[(sid, p.gpu)][role] = p
    out = []
    for (sid, gpu), roles in sorted(by.items()):
        if len(roles) == 2:
            b, best = roles["baseline"], roles["best"]
            out.append(
                Pair(
                    sid,
                    b.op,
                    b.impl,
                    b.measured_ms / best.measured_ms,
                    b.modelled_ms / best.modelled_ms,
                    gpu,
                )
            )
    return out


def error_summary(points: list[Point]) -> dict[str, Any]:
    """Median |log err|, share within 1.5x and 2x, overall and per op."""

    def figs(ps: list[Point]) -> dict[str, float]:
        errs = [abs(p.log_err) for p in ps]
        return {
            "n": len(ps),
            "median_abs_log_err": round(statistics.median(errs), 3) if errs else math.nan,
            "within_1_5x": round(sum(e <= math.log(1.5) for e in errs) / len(errs), 3)
            if errs
            else math.nan,
            "within_2x": round(sum(e <= math.log(2) for e in errs) / len(errs), 3)
            if errs
            else math.nan,
        }

    per: dict[str, list[Point]] = defaultdict(list)
    for p in points:
        per[p.op].append(p)
    return {"all": figs(points), "per_op": {op: figs(ps) for op, ps in sorted(per.items())}}


def pair_summary(pairs: list[Pair]) -> dict[str, Any]:
    """Share of sessions whose modelled speedup is within 2x of the measured one."""
    if not pairs:
        return {"n": 0}
    within = [abs(math.log(p.ratio)) <= math.log(2) for p in pairs]
    return {
        "n": len(pairs),
        "ops": len({p.op for p in pairs}),
        "within_2x": round(sum(within) / len(pairs), 3),
        "understated": sum(p.ratio < 0.5 for p in pairs),
        "overstated": sum(p.ratio > 2 for p in pairs),
        "median_ratio": round(statistics.median(p.ratio for p in pairs), 3),
    }


def region_failures(rows: Iterable[dict[str, str]]) -> dict[tuple[str, str, str, str], Any]:
    """(op, impl, rung, region) -> status counts of the answers in that region."""
    out: dict[tuple[str, str, str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        reg = region_of(json.loads(r["params"]), json.loads(r["shape"]))
        if reg is not None:
            out[(r["op"], r["impl"], r["variant"], reg)][r["status"]] += 1
    return {k: dict(v) for k, v in out.items()}


def answers(gpu: str) -> dict[str, Answer]:
    """The shipped answers by key (re-exported for callers of this module)."""
    return read_answers(answers_path(gpu))


# --------------------------------------------------------------------------------------
# refit on session kernels, validated out of sample
# --------------------------------------------------------------------------------------


def _group(p: Point) -> tuple[str, int]:
    """What a correction is shared by: the implementation and the rung's level (the
    residuals split there: naive CUDA baselines run ~3x slower than modelled, Triton
    level-2 rungs within 1.2x)."""
    return (p.impl, get_variant(get_op(p.op).family, p.impl, p.variant).level)


def fit_corrections(points: Iterable[Point]) -> dict[tuple[str, int], float]:
    """Per group, the median log(measured / modelled): a multiplicative correction."""
    by: dict[tuple[str, int], list[float]] = defaultdict(list)
    for p in points:
        by[_group(p)].append(-p.log_err)
    return {g: statistics.median(v) for g, v in by.items()}


def corrected(p: Point, corr: dict[tuple[str, int], float]) -> Point:
    """The point with its modelled time moved by its group's correction (none: as is)."""
    return _moved(p, corr.get(_group(p), 0.0))


def _moved(p: Point, log_factor: float) -> Point:
    """The point with its modelled time times exp(``log_factor``)."""
    return Point(
        p.key,
        p.op,
        p.impl,
        p.variant,
        p.uses,
        p.measured_ms,
        p.modelled_ms * math.exp(log_factor),
        p.features,
        p.gpu,
    )


def _sessions_of(p: Point) -> set[str]:
    return {sid for sid, _s, _r in p.uses}


def _components(points: list[Point]) -> list[str]:
    """Per point, the name of its session component: points linked by a shared session
    (a kernel two sessions both wrote, a session's baseline and best) share one, so a fold
    made of whole components leaves every session it touches wholly out of the fit."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p in points:
        sids = sorted(_sessions_of(p)) or [p.key]
        for other in sids[1:]:
            parent[root(other)] = root(sids[0])
    return [root((sorted(_sessions_of(p)) or [p.key])[0]) for p in points]


def folds(points: list[Point], by: str) -> list[tuple[list[int], list[int]]]:
    """(train, test) index lists: one fold per session component (``by="session"``) or
    per op (``by="op"``). No training point shares a session (or op) with a test point."""
    if by not in ("session", "op"):
        raise ValueError(f"folds by session or op, not {by!r}")
    keys = _components(points) if by == "session" else [p.op for p in points]
    out = []
    for fold in sorted(set(keys)):
        test = [i for i, k in enumerate(keys) if k == fold]
        out.append(([i for i, k in enumerate(keys) if k != fold], test))
    return out


def _code_fix(train: list[Point], test: list[Point], by: str, method: str) -> list[float]:
    """The code model's log corrections of ``test``, fitted on ``train`` alone: ridge at
    the penalty group folds inside ``train`` choose (``"ridge"``), the code model's learner
    alone (``"learner"``: since 1.2.0 its boosted trees; 1.0.0 and 1.1.0 picked ridge or
    trees by nested folds), or that learner plus the op and rung offsets of ``train``
    (``"code"``); the inner groups are sessions or ops, as the outer split."""
    return _code_fixes(train, test, by, (method,))[method]


def _code_fixes(
    train: list[Point], test: list[Point], by: str, methods: tuple[str, ...]
) -> dict[str, list[float]]:
    """``_code_fix`` of several methods; ``"learner"`` and ``"code"`` read the same fitted
    code model (one ``fit_code`` call, the expensive part, for both)."""
    x = [p.features for p in train]
    y = [-p.log_err for p in train]
    groups = _components(train) if by == "session" else [p.op for p in train]
    out: dict[str, list[float]] = {}
    if "ridge" in methods:
        model = codemodel.fit(x, y, codemodel.choose_penalty(x, y, groups))
        out["ridge"] = model.predict([p.features for p in test])
    if "learner" in methods or "code" in methods:
        keys = [p.kernel_key for p in train]
        pairs = codemodel.pair_rows([p.uses for p in train])
        full = codemodel.fit_code(x, y, groups, keys, pairs)
        if "learner" in methods:
            out["learner"] = full.learner.predict([p.features for p in test])
        if "code" in methods:
            out["code"] = code_corrections(full, test)
    return out


def code_corrections(model: codemodel.CodeModel, points: list[Point]) -> list[float]:
    """The code model's log(measured / modelled) of each point."""
    return model.predict_kernels([p.features for p in points], [p.kernel_key for p in points])


def cross_validate(
    points: list[Point], by: str, method: str = "rung"
) -> tuple[list[Point], list[Pair]]:
    """Held-out corrected points and pairs: each session component (``by="session"``) or
    each op (``by="op"``) predicted from a fit on the rest, by the per-(impl, rung level)
    correction (``method="rung"``) or the code model (points need features): ridge alone
    (``"ridge"``), the code model's learner alone (``"learner"``), or that learner with the
    op and rung offsets (``"code"``, the one ``fit_code_model`` and ``step_times`` use)."""
    return cross_validate_methods(points, by, (method,))[method]


def cross_validate_methods(
    points: list[Point], by: str, methods: tuple[str, ...], jobs: int = 1
) -> dict[str, tuple[list[Point], list[Pair]]]:
    """``cross_validate`` of each of ``methods`` over the same folds, each fold's code
    model fitted once for ``"learner"`` and ``"code"`` together (its boosted trees are the
    expensive part: one fit per fold for both instead of two). ``jobs`` > 1 spreads the
    folds over that many processes (each fit is single-threaded; a session split has a few
    hundred folds of about ten seconds each); the result is the same in the same order."""
    unknown = [m for m in methods if m not in ("rung", "ridge", "learner", "code")]
    if unknown:
        raise ValueError(f"method rung, ridge, learner or code, not {unknown[0]!r}")
    splits = folds(points, by)
    if jobs > 1 and len(splits) > 1:
        import concurrent.futures

        with concurrent.futures.ProcessPoolExecutor(
            max_workers=jobs, initializer=_set_fold_points, initargs=(points,)
        ) as ex:
            per_fold = list(
                ex.map(
                    _fold_in_worker,
                    [(by, methods, tr, te) for tr, te in splits],
                    chunksize=max(1, len(splits) // (4 * jobs)),
                )
            )
    else:
        per_fold = [_fold_fixed(points, by, methods, tr, te) for tr, te in splits]
    out: dict[str, tuple[list[Point], list[Pair]]] = {m: ([], []) for m in methods}
    for fixed in per_fold:
        for m in methods:
            out[m][0].extend(fixed[m])
            out[m][1].extend(speedup_pairs(fixed[m]))
    return out


def _fold_fixed(
    points: list[Point], by: str, methods: tuple[str, ...], train_i: list[int], test_i: list[int]
) -> dict[str, list[Point]]:
    """One fold's held-out points, corrected by each method fitted on its training points."""
    train = [points[i] for i in train_i]
    test = [points[i] for i in test_i]
    fixed: dict[str, list[Point]] = {}
    code_methods = tuple(m for m in methods if m != "rung")
    if code_methods:
        for m, fix in _code_fixes(train, test, by, code_methods).items():
            fixed[m] = [_moved(p, c) for p, c in zip(test, fix, strict=True)]
    if "rung" in methods:
        corr = fit_corrections(train)
        fixed["rung"] = [corrected(p, corr) for p in test]
    return fixed


#: The points a fold worker process cross-validates (sent once per worker, not per fold).
_FOLD_POINTS: list[Point] = []


def _set_fold_points(points: list[Point]) -> None:
    _FOLD_POINTS[:] = points


def _fold_in_worker(
    job: tuple[str, tuple[str, ...], list[int], list[int]],
) -> dict[str, list[Point]]:
    by, methods, train_i, test_i = job
    return _fold_fixed(_FOLD_POINTS, by, methods, train_i, test_i)


def fit_code_model(points: list[Point]) -> codemodel.CodeModel:
    """The code model fitted on every point (learner and penalty chosen by group folds of
    session components; offsets of op and rung from its residuals). Points of several
    measuring GPUs fit one model: the features carry each GPU's launch and bandwidth."""
    x = [p.features for p in points]
    y = [-p.log_err for p in points]
    pairs = codemodel.pair_rows([p.uses for p in points])
    return codemodel.fit_code(x, y, _components(points), [p.kernel_key for p in points], pairs)


def _figures(points: list[Point], pairs: list[Pair]) -> dict[str, Any]:
    e, p = error_summary(points)["all"], pair_summary(pairs)
    return {
        "kernels": e["n"],
        "median_abs_log_err": e["median_abs_log_err"],
        "within_2x": e["within_2x"],
        "sessions": p["n"],
        "speedup_within_2x": p.get("within_2x"),
    }


def timing_model_summary(
    points: list[Point],
    answers: int,
    held: dict[str, tuple[list[Point], list[Pair]]] | None = None,
) -> dict[str, Any]:
    """The card's figures of the timing model on the measured session kernels: the raw
    model, and the code model held out by session and by op (``points`` need features;
    ``held``: those two cross-validations by scheme, when the caller already ran them)."""
    out: dict[str, Any] = {
        "codemodel_version": codemodel.CODEMODEL_VERSION,
        "answers": answers,
        "ops": len({p.op for p in points}),
        "raw": _figures(points, speedup_pairs(points)),
    }
    for by in ("session", "op"):
        run = (held or {}).get(by) or cross_validate(points, by, "code")
        out[f"code_held_out_by_{by}"] = _figures(*run)
    return out


def summary_path(gpu: str) -> Any:
    """Where the timing model's figures on ``gpu``'s answers are shipped (for the card)."""
    return answers_path(gpu).with_name(f"{gpu}_timing_model.json")


def read_timing_model_summary(gpu: str) -> dict[str, Any] | None:
    """The shipped figures of ``timing_model_summary`` (None when none were written)."""
    path = summary_path(gpu)
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


# --------------------------------------------------------------------------------------
# the measured tier: sessions whose baseline and best kernels were both timed
# --------------------------------------------------------------------------------------

#: Columns of ``data/measured/<gpu>_tier.csv``.
TIER_FIELDS = (
    "session_id",
    "session_gpu",
    "measured_on",
    "op",
    "impl",
    "num_steps",
    "measured_steps",
    "baseline_step",
    "best_step",
    "baseline_key",
    "best_key",
    "label_speedup",
    "measured_speedup",
    "modelled_speedup_on_measuring_gpu",
    "generator_version",
)


def tier_path(gpu: str) -> Any:
    """Where the measured tier of answers measured on ``gpu`` is shipped."""
    return answers_path(gpu).with_name(f"{gpu}_tier.csv")


def replay(session: dict[str, Any], gpu: str, oracle: Any) -> dict[str, Any]:
    """One regenerated session against the shipped answers: per step ``measured`` (its
    exact source was answered on ``gpu``) or ``modelled``; its baseline and best must be
    answered (``OracleMiss`` otherwise: the generator no longer writes what was measured)."""
    from .oracle import answer_key

    codes = [session["messages"][2 + 2 * i]["content"] for i in range(len(session["trace"]))]
    keys = [answer_key(c, session["shape"], session["dtype"], gpu) for c in codes]
    prov = ["measured" if k in oracle.answers else "modelled" for k in keys]
    best = session["best"]["step"]
    base = oracle.require(codes[0], session["shape"], session["dtype"], "baseline")
    top = oracle.require(codes[best], session["shape"], session["dtype"], f"best step {best}")
    return {
        "provenance": prov,
        "baseline_key": keys[0],
        "best_key": keys[best],
        "measured_speedup": (base.ms / top.ms) if base.ms and top.ms else None,
    }


#: The provenance of a step whose time is the code model's (``step_times``): the rule and
#: its version, so a row says which correction it carries.
CODE_MODELLED = f"modelled:codemodel-{codemodel.CODEMODEL_VERSION}"


def step_times(
    session: dict[str, Any], gpu: str, oracle: Any, model: codemodel.CodeModel
) -> list[tuple[float | None, str]]:
    """Per step of a regenerated session on ``gpu``: (device ms, provenance). A step whose
    exact source was answered is ``measured`` (its answer's time, None if it did not run
    correctly); any other step that ran is timed by the code model (``CODE_MODELLED``: the
    roofline prediction on ``gpu`` times the fitted correction of its source and launch);
    a step that did not run has no time (``modelled``)."""
    op = get_op(session["op"])
    card = get_gpu(gpu)
    out: list[tuple[float | None, str]] = []
    for i, tr in enumerate(session["trace"]):
        code = session["messages"][2 + 2 * i]["content"]
        ans = oracle.get(code, session["shape"], session["dtype"])
        if ans is not None:
            out.append((ans.ms, "measured"))
            continue
        if tr["time_ms"] is None:
            out.append((None, "modelled"))
            continue
        v = get_variant(op.family, session["impl"], tr["tag"])
        params = tr["params"] or dict(
            default_params(v, op, session["dtype"], session["shape"], get_gpu(session["gpu"]))
        )
        try:
            pred = predict(op, session["shape"], session["dtype"], card, v, params)
        except InfeasibleConfig:
            out.append((None, "modelled"))
            continue
        feats = kernel_features(
            session["op"], session["impl"], tr["tag"], session["shape"], session["dtype"],
            canonical(code), pred, gpu,
        )  # fmt: skip
        corr = model.predict_kernels([feats], [(session["op"], session["impl"], tr["tag"])])[0]
        out.append((round(pred.device_ms * math.exp(corr), 6), CODE_MODELLED))
    return out
