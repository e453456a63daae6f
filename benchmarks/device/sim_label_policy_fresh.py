"""The label publication policy of issue 36 (``dagster_project/sim/label_policy.py``):
its fit, in sample, and its clean test on answers measured after it was frozen. GPU-less.

``--fit`` (in sample): cross-validates the code model leaving whole session components out
(``measured.cross_validate``, about 15 minutes on two busy cores), ships each timed kernel's
held-out residual (``data/measured/<gpu>_cv_residuals.csv``), then cross-validates the
policy itself on the labels of the sessions whose baseline and best were both timed (each
label's scale from the residuals of the other session components), prints the threshold
``label_policy.fit_threshold`` picks (copy it into ``THRESHOLD`` by hand: one home) and
writes the figures the kernelinfer card prints (``<gpu>_label_policy.json``)::

    .venv/bin/python benchmarks/device/sim_label_policy_fresh.py --fit
    .venv/bin/python benchmarks/device/sim_label_policy_fresh.py --fit --reuse  # as shipped

Default (the clean test, held out): the code model fitted on the kernels timed at
``--before`` (the freeze), the policy's residuals as shipped at ``--before``, the rule as it
is now (its version is printed; it must be the frozen one); scored on every session whose
baseline and best are timed now and at least one of them was not at ``--before``. A kernel
timed at ``--before`` keeps its measured time (as a build at the freeze would have used it);
the other is the code model's. Since stop 45 the frozen set is every answer shipped at
``--before``, the online tier's too (before, an online kernel counted as fresh however old),
and the sessions scored include the online tier's, each kernel's role from
``h100_online_roles.csv`` (after collecting new sessions, re-write it with
``codemodel_dev_cv.py --write-roles <that file>``). Prints coverage (share of those labels
published as modelled), the share within 2x of the measured speedup among the published,
and among all, the reasons for ``unknown``, and the fresh kernels' step error::

    .venv/bin/python benchmarks/device/sim_label_policy_fresh.py --before <frozen sha>
    .venv/bin/python benchmarks/device/sim_label_policy_fresh.py --before <frozen sha> --write
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dagster_project.sim import label_policy as lp  # noqa: E402
from dagster_project.sim.codemodel import CODEMODEL_VERSION  # noqa: E402
from dagster_project.sim.measured import (  # noqa: E402
    Point,
    _components,
    all_points,
    code_corrections,
    cross_validate_methods,
    fit_code_model,
    load_rows,
)
from dagster_project.sim.oracle import answers_path, online_answers_path  # noqa: E402

GPU = "h100"


def _roles(rows: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    """session id -> {"baseline": key, "best": key} from the timed answers' ``uses`` (the
    pairs ``measured.speedup_pairs`` forms)."""
    out: dict[str, dict[str, str]] = collections.defaultdict(dict)
    for r in rows:
        if r["status"] != "ok" or not r["ms"]:
            continue
        for use in r["uses"].split():
            sid, _, rest = use.rpartition("@")
            role = rest.partition(":")[2]
            if role in ("baseline", "best"):
                out[sid][role] = r["key"]
    return out


def _point_rows(points: list[Point]) -> list[dict[str, str]]:
    """The timed kernels as answer rows for ``_roles``, each with the session roles the
    model's points carry: an evidence answer's own ``uses``, an online-tier kernel's
    replayed role (``h100_online_roles.csv``; re-write it with ``codemodel_dev_cv.py
    --write-roles`` after collecting new sessions), which its answer row does not hold."""
    return [
        {
            "key": p.key,
            "status": "ok",
            "ms": repr(p.measured_ms),
            "uses": " ".join(f"{sid}@{i}:{role}" for sid, i, role in p.uses),
        }
        for p in points
    ]


def _ms(rows: list[dict[str, str]]) -> dict[str, float]:
    """Measured ms of every ok, timed answer."""
    return {r["key"]: float(r["ms"]) for r in rows if r["status"] == "ok" and r["ms"]}


def _within(ratio: float) -> bool:
    return abs(math.log(ratio)) <= lp.LOG2


def fit(reuse: bool) -> None:
    rows = load_rows(GPU)
    path = lp.residuals_path(GPU)
    if reuse:
        residuals = lp.read_residuals(path)
    else:
        points = [p for p in all_points() if p.gpu == GPU]
        # the folds over every CPU (the same result as cross_validate, in the same order)
        jobs = os.cpu_count() or 1
        held = cross_validate_methods(points, "session", ("code",), jobs=jobs)["code"][0]
        fold = {p.key: c for p, c in zip(points, _components(points), strict=True)}
        labels = {p.key: tuple((s, r) for s, _i, r in p.uses if r != "step") for p in points}
        residuals = [
            lp.Residual(p.key, p.kernel_key, fold[p.key], -p.log_err, labels[p.key]) for p in held
        ]
        lp.write_residuals(path, residuals, CODEMODEL_VERSION)
        print(f"wrote {len(residuals)} residuals to {path.relative_to(ROOT)}")
    scored = lp.cv_labels(residuals)
    pairs = [(s, ok) for s, ok, _sid in scored]
    threshold = lp.fit_threshold(pairs)
    print(
        f"label policy {lp.LABEL_POLICY_VERSION}: fitted threshold {threshold:.4f} (module: "
        f"{lp.THRESHOLD}); target {lp.TARGET} (Wilson lower bound), K {lp.K}"
    )
    for t in sorted({0.3, 0.4, 0.5, 0.6, 0.7, threshold, lp.THRESHOLD}):
        print(f"  threshold {t:.3f}: {lp.coverage(pairs, t)}")
    figs = lp.coverage(pairs, lp.THRESHOLD)
    summary = {
        "label_policy_version": lp.LABEL_POLICY_VERSION,
        "codemodel_version": CODEMODEL_VERSION,
        "threshold": lp.THRESHOLD,
        "target": lp.TARGET,
        "residuals": len(residuals),
        "answers": len(rows),
        "cv": figs,
    }
    lp.summary_path(GPU).write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    print(f"wrote {lp.summary_path(GPU).relative_to(ROOT)}: {figs}")


def _at(rev: str, path: Path) -> str:
    """A shipped file's text at ``rev`` ("" when it did not exist)."""
    rel = path.relative_to(ROOT)
    run = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=ROOT, capture_output=True, text=True)
    return run.stdout if run.returncode == 0 else ""


def _fresh_labels(
    rows: list[dict[str, str]],
    before_ms: dict[str, float],
    times: dict[str, float],
    scales: lp.Scales,
    kernels: dict[str, lp.KernelKey],
) -> list[tuple[str, lp.LabelDecision, float, float]]:
    """(session, decision, modelled label, measured speedup) of every session whose
    baseline and best are timed now with at least one of them timed after ``--before``."""
    ms = _ms(rows)
    out = []
    for sid, roles in sorted(_roles(rows).items()):
        b, x = roles.get("baseline"), roles.get("best")
        if b not in ms or x not in ms or (b in before_ms and x in before_ms):
            continue
        if b not in times or x not in times:
            continue  # a kernel the model cannot time (no features): not a label either way
        kt = {k: lp.KernelTime(kernels[k], k in before_ms, times[k]) for k in (b, x)}
        d = lp.decide(scales, kt[b], kt[x], GPU)
        out.append((sid, d, times[b] / times[x], ms[b] / ms[x]))
    return out


def fresh(before: str, write: bool, residuals_at: str) -> None:
    rev = subprocess.run(
        ["git", "rev-parse", "--short", before], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    # frozen: every answer shipped at the freeze, the online tier's too (they were in the
    # fit and the residuals); fresh: answered since, from either file
    old = [
        r
        for path in (answers_path(GPU), online_answers_path(GPU))
        for r in csv.DictReader(io.StringIO(_at(before, path)))
    ]
    before_ms = _ms(old)
    points = [p for p in all_points() if p.gpu == GPU]
    rows = _point_rows(points)
    train = [p for p in points if p.key in before_ms]
    new = [p for p in points if p.key not in before_ms]
    model = fit_code_model(train)
    fixes = code_corrections(model, new) if new else []
    corr = dict(zip([p.key for p in new], fixes, strict=True))
    times = {p.key: p.modelled_ms * math.exp(corr[p.key]) for p in new}
    times |= {p.key: p.measured_ms for p in train}
    shipped = _at(residuals_at, lp.residuals_path(GPU))
    residuals = lp.parse_residuals(csv.DictReader(io.StringIO(shipped)))
    scales = lp.Scales(residuals)
    kernels = {p.key: p.kernel_key for p in points}
    labels = _fresh_labels(rows, before_ms, times, scales, kernels)
    step = [abs(math.log(times[p.key] / p.measured_ms)) for p in new]
    figs = _fresh_figures(labels, step)
    print(
        f"label policy {lp.LABEL_POLICY_VERSION} (threshold {lp.THRESHOLD}), code model "
        f"{CODEMODEL_VERSION}; frozen at {rev}: {len(train)} timed kernels, {len(residuals)} "
        f"residuals; fresh: {len(new)} timed kernels, {len(labels)} labels"
    )
    for k, v in figs.items():
        print(f"  {k}: {v}")
    for sid, d, mod, meas in sorted(labels, key=lambda t: -abs(math.log(t[2] / t[3])))[:8]:
        print(
            f"  worst: {d.provenance:8s} {sid} modelled {mod:.3g}x measured {meas:.3g}x "
            f"({d.reason})"
        )
    if write and residuals_at == before:
        path = lp.summary_path(GPU)
        data = json.loads(path.read_text()) if path.exists() else {}
        data["fresh"] = {"before": rev, "label_policy_version": lp.LABEL_POLICY_VERSION, **figs}
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")


def _fresh_figures(
    labels: list[tuple[str, lp.LabelDecision, float, float]], step: list[float]
) -> dict[str, Any]:
    """Coverage and within-2x among the published labels and all of them; step error."""
    pub = [_within(mod / meas) for _s, d, mod, meas in labels if d.published]
    return {
        "labels": len(labels),
        "published": len(pub),
        "coverage": round(len(pub) / len(labels), 3) if labels else None,
        "within_2x_published": round(sum(pub) / len(pub), 3) if pub else None,
        "within_2x_all": round(sum(_within(m / t) for _s, _d, m, t in labels) / len(labels), 3)
        if labels
        else None,
        "unknown_reasons": dict(
            collections.Counter(d.kind for _s, d, _m, _t in labels if not d.published)
        ),
        "kernels": len(step),
        "step_median_abs_log_err": round(statistics.median(step), 3) if step else None,
        "step_within_2x": round(sum(e <= lp.LOG2 for e in step) / len(step), 3) if step else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--fit", action="store_true", help="in sample: residuals, threshold, card")
    ap.add_argument("--reuse", action="store_true", help="with --fit: the shipped residuals")
    ap.add_argument("--before", help="the clean test: git revision of the frozen policy")
    ap.add_argument("--write", action="store_true", help="store the clean test for the card")
    ap.add_argument(
        "--residuals-at",
        help="dry runs only: take the residuals at this revision instead of --before's",
    )
    a = ap.parse_args()
    if a.fit:
        fit(a.reuse)
    elif a.before:
        fresh(a.before, a.write, a.residuals_at or a.before)
    else:
        ap.error("--fit or --before REV")


if __name__ == "__main__":
    main()
