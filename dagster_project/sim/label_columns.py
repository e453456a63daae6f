"""Speedup labels with their evidence at the row (issue 36, 36p).

A kernelinfer session's ``best.speedup`` is the simulator's: the ratio of two modelled
times, off by more than 2x for about half the sessions the measurement oracle checked. The
label publication policy (``label_policy``, one home) says which labels the shipped
evidence backs; this module writes its decision onto every session so a trainer reading
the export can tell a measured reward from a modelled or an unknown one:

* ``speedup_label``: the published figure: the measured speedup where the session's
  baseline and best were both timed on its GPU, the code model's where the policy publishes
  a modelled label, else null;
* ``speedup_provenance``: ``measured:<gpu>``, ``modelled:label-policy-<version>`` or
  ``unknown``;
* ``speedup_unknown_reason``: the policy's reason when the label is unknown;
* ``speedup_error_scale``: the cross-validated log-error scale of a modelled label (0 when
  the label is 1 by definition: nothing beat the baseline); null otherwise;
* per trace step ``timing`` (``measured`` where the step's exact source was timed on the
  session's GPU, ``modelled`` where ``time_ms`` is the simulator's alone, null where the
  step has no time) and ``measured_ms`` (that measured device time).

Everything comes from data shipped in the package (``data/measured/<gpu>_answers.csv``,
``<gpu>_cv_residuals.csv``) and the code model fitted on those answers at build time, so a
GPU-less build computes the same columns. A GPU with neither answers nor residuals (every GPU
but the H100 today) is never given code-model times: nothing the policy could publish there
depends on them (its labels are unknown for want of evidence, or 1 by definition), so its
steps keep the simulator's times, marked ``modelled``. No dagster import.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from . import label_policy as lp

if TYPE_CHECKING:
    from .codemodel import CodeModel

#: Session-level columns this module adds, in the order rows carry them.
SESSION_COLUMNS = (
    "speedup_label",
    "speedup_provenance",
    "speedup_unknown_reason",
    "speedup_error_scale",
)

#: Fields this module adds to every trace step.
STEP_FIELDS = ("timing", "measured_ms")

#: ``timing`` values.
MEASURED = lp.MEASURED
MODELLED = lp.MODELLED

#: Decimals of ``speedup_label`` and ``speedup_error_scale`` (``best.speedup`` keeps 2).
DECIMALS = 4


@dataclass(frozen=True)
class Evidence:
    """What the package ships for one GPU: its answers (``oracle``), the code model and the
    policy's scales (None when no residuals were shipped). Without the code model (a GPU with
    neither answers nor residuals, or no oracle toolchain) the scales are None too: they
    describe the code model's error, so no label may be published as modelled there."""

    gpu: str
    oracle: Any
    model: CodeModel | None
    scales: lp.Scales | None


@lru_cache(maxsize=1)
def shipped_code_model() -> CodeModel:
    """The code model fitted on every shipped answer: once per package content on this
    machine (``sim.model_cache``: a fit takes about 19 s quiet, near a minute under load),
    then read once per process."""
    from .model_cache import cached_code_model

    return cached_code_model()


@cache
def shipped_evidence(gpu: str) -> Evidence:
    """The evidence shipped for ``gpu`` (cached: a shard asks for each GPU once)."""
    from .oracle import TOOLCHAIN, Oracle, tier_answers

    scales = lp.shipped_scales(gpu)
    # every answer the package ships for the GPU, the online tier's included: a label is
    # measured wherever the session's own baseline and best sources were timed there
    oracle = Oracle(gpu, tier_answers(gpu)) if gpu in TOOLCHAIN else None
    if oracle is None or (not oracle.answers and scales is None):
        return Evidence(gpu, None, None, None)
    return Evidence(gpu, oracle, shipped_code_model(), scales)


def session_columns(session: dict[str, Any], evidence: Evidence) -> dict[str, Any]:
    """The label columns of one session (``SESSION_COLUMNS``) and its trace's
    ``STEP_FIELDS`` (under ``"trace"``: one dict per step)."""
    gpu = evidence.gpu
    if evidence.model is not None:
        times = lp.label_times(session, gpu, evidence.oracle, evidence.model)
    else:
        times = [(t["time_ms"], MODELLED) for t in session["trace"]]
    decision = lp.label_from_times(session, times, gpu, evidence.scales)
    steps = [_step(t, ms, how) for t, (ms, how) in zip(session["trace"], times, strict=True)]
    return {**label_fields(decision, gpu), "trace": steps}


def _step(step: dict[str, Any], ms: float | None, how: str) -> dict[str, Any]:
    if how == MEASURED and ms is not None:
        return {"timing": MEASURED, "measured_ms": ms}
    return {"timing": MODELLED if step["time_ms"] is not None else None, "measured_ms": None}


def label_fields(decision: lp.LabelDecision, gpu: str) -> dict[str, Any]:
    """A decision as the four session columns: a modelled label always carries its
    scale, an unknown one its reason and no figure."""
    if decision.provenance == lp.MEASURED:
        prov = f"{lp.MEASURED}:{gpu}"
    elif decision.provenance == lp.MODELLED:
        prov = decision.stamp
        if decision.scale is None:  # the policy never publishes a modelled label without one
            raise ValueError(f"a modelled label without an error scale: {decision}")
    else:
        prov = lp.UNKNOWN
    speedup = decision.speedup if decision.published else None
    published = speedup is not None
    return {
        "speedup_label": round(speedup, DECIMALS) if speedup is not None else None,
        "speedup_provenance": prov if published else lp.UNKNOWN,
        "speedup_unknown_reason": None if published else decision.reason,
        "speedup_error_scale": (
            round(decision.scale, DECIMALS)
            if decision.provenance == lp.MODELLED and decision.scale is not None
            else None
        ),
    }


def attach_labels(sessions: Iterable[dict[str, Any]]) -> None:
    """Write the label columns onto each session dict and its trace steps, in place (the
    generator's own fields are untouched; ``kernelinfer.session_frames`` stores them)."""
    for s in sessions:
        cols = session_columns(s, shipped_evidence(s["gpu"]))
        for step, extra in zip(s["trace"], cols.pop("trace"), strict=True):
            step.update(extra)
        s.update(cols)


def evidence_version() -> str:
    """What the label columns are a function of besides the session: the policy's and the
    code model's versions and a fingerprint of the shipped answers and residuals (part of
    a shard's data version, so new answers make a new one)."""
    from pathlib import Path

    from dagster_project.storage.versions import files_version

    from .codemodel import CODEMODEL_VERSION

    data = files_version(Path(__file__).parent, ("data/measured",))
    return f"policy-{lp.LABEL_POLICY_VERSION}+codemodel-{CODEMODEL_VERSION}+data.{data}"


def label_violations(session: dict[str, Any]) -> list[str]:
    """What a labelled session's columns must never say (part of the shard's blocking
    ``session_invariants`` check): a label without its evidence. A modelled label carries its
    error scale, an unknown one its reason and no figure, a measured one has its baseline and
    best steps timed on its GPU."""
    sid, prov = session["session_id"], session.get("speedup_provenance")
    if prov is None:
        return [f"{sid}: no speedup label was attached"]
    label, scale = session["speedup_label"], session["speedup_error_scale"]
    reason = session["speedup_unknown_reason"]
    kind = prov.partition(":")[0]
    out = []
    if (label is None) != (kind == lp.UNKNOWN) or (reason is None) == (kind == lp.UNKNOWN):
        out.append(f"{sid}: {prov} label {label!r} with reason {reason!r}")
    if (scale is not None) != (kind == MODELLED):
        out.append(f"{sid}: {prov} label with error scale {scale!r}")
    best = session["best"]["step"]
    if kind == MEASURED and (
        best is None or {session["trace"][i].get("timing") for i in (0, best)} != {MEASURED}
    ):
        out.append(f"{sid}: measured label whose baseline or best step is not measured")
    return out
