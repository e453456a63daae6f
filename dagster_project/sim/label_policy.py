"""Which speedup labels of simulated sessions may be published as modelled (issue 36, 36o).

The code model (``codemodel.py``) corrects a kernel's modelled time from its source and
launch, but its clean test put only 62 % of session speedup labels within 2x of the measured
speedup: a label is the ratio of two kernels' times, and their errors are uncorrelated, so
one good model per kernel does not make a good ratio. Most labels are good; the misses are
concentrated where the model's own cross-validated errors are wide. So, as the gains
extractor's publication policy did for issue 40, a label is published only where the
model's out-of-sample evidence says it is reliable:

* a **measured** label (baseline and best both answered on the session's GPU: the measured
  tier) is always published;
* a **modelled** label is published when the session's GPU has cross-validated residuals at
  all and the label's error scale is at most :data:`THRESHOLD`. A kernel's scale is the
  root mean square of the held-out residuals (``log(measured / code model)``, leaving whole
  sessions out: ``measured.cross_validate``) of the measured kernels of its (op, impl, rung),
  shrunk towards its (op, impl)'s and those towards every kernel's (:data:`K`, the code
  model's own prior of two kernels: a rung one kernel measured barely moves off its op's
  scale); a kernel answered exactly has scale 0. The label's scale is the two kernels'
  scales combined as independent errors (``hypot``);
* anything else is **unknown**, with the reason: no cross-validated residuals on that GPU
  (not the same as no measured kernel: the H200's measured kernels label its replayed
  sessions ``measured`` but were never cross-validated), no correct best, a kernel the
  model cannot time, a modelled kernel whose own (op, impl, rung) no answer covers
  (:data:`MIN_NEIGHBOURS`), or a scale above the threshold.

:data:`THRESHOLD` is a figure, not a guess: the largest label scale at which the 95 %
Wilson lower bound of the share of cross-validated labels within 2x, among those at or
below it, is still at least :data:`TARGET` (``fit_threshold``; fitted by
``benchmarks/device/sim_label_policy_fresh.py --fit`` on the answers shipped when the rule
was written, so its own figures are in sample; the script's default mode is the clean test
on answers measured after it was frozen). The shipped residuals live in
``data/measured/<gpu>_cv_residuals.csv``; the rule is versioned (:data:`LABEL_POLICY_VERSION`,
part of every decision's provenance).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagster_project.gains.policy import wilson_lower

from .oracle import answers_path

if TYPE_CHECKING:
    from .codemodel import CodeModel

#: Version of the rule (kernel scale, combination, threshold); a change that can move any
#: decision bumps it. 1.1.0 (before any use of 1.0.0): a measured neighbour of each modelled
#: kernel's own rung (``MIN_NEIGHBOURS``), threshold refitted. 1.2.0: threshold refitted on
#: code model 1.2.0's cross-validated residuals. 1.3.0 (36q): threshold refitted on code model
#: 1.3.0's, over the evidence and the H100 online tier's kernels (478 labels, 120 of them
#: sessions whose best the device picked). 1.4.0: threshold refitted on code model 1.3.0's
#: residuals over the answers as they stand after the cold H100 gather re-time (stop 44:
#: 2,607 timed kernels, 473 labels), frozen before any session measured after it; its
#: ``no evidence`` reason says what is missing (cross-validated residuals on the GPU), not
#: that no kernel was measured there (false for the H200); no decision differs from that.
LABEL_POLICY_VERSION = "1.4.0"

#: Share of published modelled labels that must be within 2x: the acceptance's 90 %, held
#: as the Wilson lower bound on the cross-validated labels, not as their point share.
TARGET = 0.90

#: Measured kernels of a modelled kernel's own (op, impl, rung) a label needs: a rung no
#: answer covers takes its scale from its op's other rungs, which says nothing about it
#: (fixed in advance, as the issue's "measured neighbours").
MIN_NEIGHBOURS = 1

#: Prior weight, in kernels, of the parent level's mean square (rung -> op -> all kernels);
#: fixed in advance, not tuned here (the code model's own prior was 2 kernels until its
#: 1.2.0, which uses 1: this one is the policy's and stays).
K = 2.0

#: Largest label scale published as modelled: ``fit_threshold`` on the cross-validated labels
#: of code model 1.3.0 over the H100 answers after the cold gather re-time (evidence and
#: online tier: 2,607 timed kernels, 473 labels) gave 0.3846, rounded down (1.3.0: 0.46 on
#: 2,535 kernels / 478 labels with the warm gathers; 1.2.0: 0.52; 1.1.0: 0.58). In sample:
#: 166 of those 473 labels published at 0.38, 94.6 % of them within 2x (84.1 % of all 473). The
#: same residuals at 1.3.0's 0.46 publish 246 labels, 91.9 % within 2x: a Wilson lower bound
#: under the target, which is why the threshold moves.
THRESHOLD = 0.38

#: Within 2x, as a log.
LOG2 = math.log(2.0)

#: Provenance of a label.
MEASURED = "measured"
MODELLED = "modelled"
UNKNOWN = "unknown"

#: A kernel's (op, impl, rung tag).
KernelKey = tuple[str, str, str]

#: Columns of ``data/measured/<gpu>_cv_residuals.csv``.
RESIDUAL_FIELDS = (
    "key",
    "op",
    "impl",
    "variant",
    "fold",
    "log_resid",
    "labels",
    "codemodel_version",
)


@dataclass(frozen=True)
class Residual:
    """One timed kernel's held-out residual: log(measured / code model fitted without its
    session component ``fold``); ``labels``: the (session, ``baseline`` or ``best``) it is
    a kernel of, so the policy's own cross-validation needs nothing but this file."""

    key: str
    kernel: KernelKey
    fold: str
    log_resid: float
    labels: tuple[tuple[str, str], ...] = ()


def residuals_path(gpu: str) -> Path:
    """Where a GPU's cross-validated residuals are shipped."""
    return answers_path(gpu).with_name(f"{gpu}_cv_residuals.csv")


def summary_path(gpu: str) -> Path:
    """Where the policy's figures (in sample, and its clean test) are shipped for the card."""
    return answers_path(gpu).with_name(f"{gpu}_label_policy.json")


def read_summary(gpu: str) -> dict[str, Any] | None:
    """The shipped figures of the policy on ``gpu`` (None when none were written)."""
    path = summary_path(gpu)
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def read_residuals(path: Path) -> list[Residual]:
    """The residuals of one file (an absent file holds none)."""
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return parse_residuals(csv.DictReader(fh))


def parse_residuals(rows: Iterable[Mapping[str, str]]) -> list[Residual]:
    """Residuals from CSV rows (``RESIDUAL_FIELDS``)."""
    return [
        Residual(
            r["key"],
            (r["op"], r["impl"], r["variant"]),
            r["fold"],
            float(r["log_resid"]),
            tuple(_label(u) for u in r["labels"].split()),
        )
        for r in rows
    ]


def _label(text: str) -> tuple[str, str]:
    """``session@role`` -> (session, role)."""
    sid, _, role = text.rpartition("@")
    return sid, role


def write_residuals(path: Path, residuals: Sequence[Residual], version: str) -> None:
    """Ship ``residuals`` (sorted by key, so a rerun on the same answers is byte-identical)."""
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(RESIDUAL_FIELDS), lineterminator="\n")
        w.writeheader()
        for r in sorted(residuals, key=lambda r: r.key):
            op, impl, variant = r.kernel
            w.writerow(
                {
                    "key": r.key,
                    "op": op,
                    "impl": impl,
                    "variant": variant,
                    "fold": r.fold,
                    "log_resid": f"{r.log_resid:.5f}",
                    "labels": " ".join(f"{sid}@{role}" for sid, role in r.labels),
                    "codemodel_version": version,
                }
            )


class Scales:
    """Per-kernel error scales from cross-validated residuals (one GPU's), optionally
    leaving one session component out (the policy's own cross-validation)."""

    def __init__(self, residuals: Sequence[Residual], leave_out: str | None = None) -> None:
        use = [r for r in residuals if r.fold != leave_out]
        self.available = bool(use)
        sq = [r.log_resid**2 for r in use]
        self.all_ms = sum(sq) / len(sq) if sq else math.inf
        self._op: dict[tuple[str, str], list[float]] = {}
        self._rung: dict[KernelKey, list[float]] = {}
        for r, s in zip(use, sq, strict=True):
            self._op.setdefault(r.kernel[:2], []).append(s)
            self._rung.setdefault(r.kernel, []).append(s)

    def kernel(self, key: KernelKey) -> float:
        """A modelled kernel's scale: shrunk RMS residual of its rung, op, all kernels."""
        op_sq = self._op.get(key[:2], [])
        op_ms = (sum(op_sq) + K * self.all_ms) / (len(op_sq) + K)
        rung_sq = self._rung.get(key, [])
        return math.sqrt((sum(rung_sq) + K * op_ms) / (len(rung_sq) + K))

    def neighbours(self, key: KernelKey) -> int:
        """Measured kernels of the same (op, impl, rung) behind the scale."""
        return len(self._rung.get(key, []))


@dataclass(frozen=True)
class KernelTime:
    """A label's kernel: its (op, impl, rung), and whether its time is a measurement (an
    answer on the session's GPU) or the code model's; ``ms`` None when it has neither."""

    kernel: KernelKey
    measured: bool
    ms: float | None


@dataclass(frozen=True)
class LabelDecision:
    """A session's speedup label with its provenance (``measured``, ``modelled`` or
    ``unknown``), the error scale behind it (log units; 0 when measured) and the reason
    (``"<kind>: <detail>"``; ``kind`` groups the reasons)."""

    provenance: str
    speedup: float | None
    scale: float | None
    reason: str

    @property
    def published(self) -> bool:
        return self.provenance != UNKNOWN

    @property
    def kind(self) -> str:
        """The reason's kind (``too wide``, ``no evidence``, ``reliable`` ...)."""
        return self.reason.partition(":")[0]

    @property
    def stamp(self) -> str:
        """The provenance with the rule's version (``modelled:label-policy-1.1.0``)."""
        return f"{self.provenance}:label-policy-{LABEL_POLICY_VERSION}"


def label_scale(scales: Scales, baseline: KernelTime, best: KernelTime) -> float:
    """The label's error scale: the two kernels' scales as independent errors."""
    parts = [0.0 if k.measured else scales.kernel(k.kernel) for k in (baseline, best)]
    return math.hypot(*parts)


def lonely(scales: Scales, baseline: KernelTime, best: KernelTime) -> list[str]:
    """The roles of the label's modelled kernels whose (op, impl, rung) has fewer than
    ``MIN_NEIGHBOURS`` measured kernels."""
    return [
        role
        for role, k in (("baseline", baseline), ("best", best))
        if not k.measured and scales.neighbours(k.kernel) < MIN_NEIGHBOURS
    ]


def decide(
    scales: Scales | None,
    baseline: KernelTime | None,
    best: KernelTime | None,
    gpu: str,
    best_is_baseline: bool = False,
) -> LabelDecision:
    """The label of one session on ``gpu`` (``scales``: the GPU's residuals; None or empty
    when no kernel was measured on it; ``best`` None when no step was checked correct;
    ``best_is_baseline``: nothing beat the baseline, so the label is 1 whatever its time)."""
    if best is None or baseline is None:
        return LabelDecision(UNKNOWN, None, None, "no best: no step was checked correct")
    if best_is_baseline:
        how = MEASURED if baseline.measured else MODELLED
        return LabelDecision(how, 1.0, 0.0, "baseline is best: speedup 1 by definition")
    if baseline.ms is None or best.ms is None or best.ms <= 0:
        return LabelDecision(UNKNOWN, None, None, "no time: a kernel of the label has none")
    speedup = baseline.ms / best.ms
    if baseline.measured and best.measured:
        return LabelDecision(MEASURED, speedup, 0.0, f"measured: baseline and best on {gpu}")
    if scales is None or not scales.available:
        return LabelDecision(
            UNKNOWN,
            None,
            None,
            f"no evidence: the code model's error was never cross-validated on {gpu}, so it"
            " is unknown",
        )
    scale = label_scale(scales, baseline, best)
    alone = lonely(scales, baseline, best)
    if alone:
        return LabelDecision(
            UNKNOWN,
            None,
            scale,
            f"no neighbours: no measured kernel of the {' and '.join(alone)}'s (op, impl, rung)",
        )
    if scale <= THRESHOLD:
        return LabelDecision(
            MODELLED, speedup, scale, f"reliable: scale {scale:.2f} <= {THRESHOLD}"
        )
    return LabelDecision(
        UNKNOWN,
        None,
        scale,
        f"too wide: scale {scale:.2f} > {THRESHOLD}, the model's held-out error on these "
        "kernels' (op, impl, rung)",
    )


def session_label(
    session: dict[str, Any], gpu: str, oracle: Any, model: CodeModel, scales: Scales | None
) -> LabelDecision:
    """A regenerated session's speedup label on ``gpu`` with its provenance: the hook where
    a label gets one. Its kernels' times are ``label_times``'; ``decide`` says whether the
    label is ``measured``, ``modelled`` or ``unknown``."""
    if session["best"]["step"] is None:
        return decide(scales, None, None, gpu)
    return label_from_times(session, label_times(session, gpu, oracle, model), gpu, scales)


def label_times(
    session: dict[str, Any], gpu: str, oracle: Any, model: CodeModel
) -> list[tuple[float | None, str]]:
    """Per step of a regenerated session, the time a label on ``gpu`` uses and where it
    comes from: ``measured.step_times``' (an answer where the exact source was answered on
    ``gpu`` and timed, else the code model ``model``: a kernel checked correct but never
    timed is modelled like an unanswered one). Exposed so a row can say, per step, which of
    its times were measured (``label_columns``) with the same answers its label used."""
    from .measured import step_times
    from .oracle import Oracle

    timed = {k: a for k, a in oracle.answers.items() if not a.ok or a.ms is not None}
    return step_times(session, gpu, Oracle(gpu, timed), model)


def label_from_times(
    session: dict[str, Any],
    times: Sequence[tuple[float | None, str]],
    gpu: str,
    scales: Scales | None,
) -> LabelDecision:
    """``decide`` on a session's baseline and best, given its steps' (time, provenance)
    (``label_times``; a step is measured where its provenance is ``measured``)."""
    best = session["best"]["step"]
    if best is None:
        return decide(scales, None, None, gpu)
    kernels = [
        KernelTime(
            (session["op"], session["impl"], session["trace"][i]["tag"]),
            times[i][1] == MEASURED,
            times[i][0],
        )
        for i in (0, best)
    ]
    return decide(scales, kernels[0], kernels[1], gpu, best_is_baseline=best == 0)


def shipped_scales(gpu: str) -> Scales | None:
    """The scales of ``gpu``'s shipped residuals (None when none were shipped)."""
    residuals = read_residuals(residuals_path(gpu))
    return Scales(residuals) if residuals else None


def cv_labels(residuals: Sequence[Residual]) -> list[tuple[float, bool, str]]:
    """The policy's own cross-validation: (label scale, modelled label within 2x, session)
    of every session whose baseline and best both have a held-out residual (in one session
    component), the scale from the residuals of the other components alone (infinite where
    a kernel has no measured neighbour there: never published)."""
    roles: dict[str, dict[str, Residual]] = {}
    for r in residuals:
        for sid, role in r.labels:
            roles.setdefault(sid, {})[role] = r
    out = []
    for sid, got in sorted(roles.items()):
        b, x = got.get("baseline"), got.get("best")
        if b is None or x is None or b.fold != x.fold:
            continue
        scales = Scales(residuals, leave_out=b.fold)
        kb, kx = KernelTime(b.kernel, False, None), KernelTime(x.kernel, False, None)
        scale = math.inf if lonely(scales, kb, kx) else label_scale(scales, kb, kx)
        # log(modelled / measured speedup) = residual of the best - residual of the baseline
        out.append((scale, abs(x.log_resid - b.log_resid) <= LOG2, sid))
    return out


def fit_threshold(scored: Sequence[tuple[float, bool]], target: float = TARGET) -> float:
    """The largest scale at which the Wilson lower bound of the within-2x share of the
    labels at or below it is at least ``target`` (``scored``: (label scale, within 2x) of
    cross-validated labels); 0.0 when none qualifies (then only measured labels publish)."""
    best = 0.0
    n = hits = 0
    ordered = sorted(scored)
    for i, (scale, ok) in enumerate(ordered):
        n, hits = n + 1, hits + ok
        tied = i + 1 < len(ordered) and ordered[i + 1][0] == scale
        if not tied and wilson_lower(hits, n) >= target:
            best = scale
    return best


def coverage(scored: Sequence[tuple[float, bool]], threshold: float) -> dict[str, float]:
    """Share of labels published at ``threshold`` and the within-2x share among them."""
    pub = [ok for s, ok in scored if s <= threshold]
    return {
        "labels": len(scored),
        "published": len(pub),
        "coverage": round(len(pub) / len(scored), 3) if scored else math.nan,
        "within_2x_published": round(sum(pub) / len(pub), 3) if pub else math.nan,
        "within_2x_all": round(sum(ok for _s, ok in scored) / len(scored), 3)
        if scored
        else math.nan,
    }
