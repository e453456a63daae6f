"""The code model's clean test (issue 36): fitted on the answers shipped at ``--before``
(a git revision), scored on the timed kernels answered since — a batch no choice of the
model ever saw. Prints raw vs code-model step error and speedup-label agreement on it,
per measuring GPU (the fit pools every GPU's answers at ``--before``)::

    .venv/bin/python benchmarks/device/sim_codemodel_fresh.py --before 'HEAD~1'

``--write`` stores the figures in the shipped timing-model summary (``fresh`` of
``<gpu>_timing_model.json``), which the kernelinfer card prints as the out-of-sample error.
The test is clean only with ``--before`` at or after the commit that froze the model's
current version (no kernel answered since took part in any choice of it).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dagster_project.sim.codemodel import CODEMODEL_VERSION  # noqa: E402
from dagster_project.sim.measured import (  # noqa: E402
    MEASURING_GPUS,
    Point,
    _moved,
    code_corrections,
    error_summary,
    fit_code_model,
    load_rows,
    model_points,
    pair_summary,
    speedup_pairs,
    summary_path,
)
from dagster_project.sim.oracle import answers_path  # noqa: E402


def _old_keys(rev: str, gpu: str) -> set[str]:
    """Keys of ``gpu``'s answers shipped at ``rev`` (none if the file did not exist)."""
    rel = answers_path(gpu).relative_to(ROOT)
    run = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=ROOT, capture_output=True, text=True)
    if run.returncode != 0:
        return set()
    return {r["key"] for r in csv.DictReader(io.StringIO(run.stdout))}


def _score(pts: list[Point], fresh: list[Point], fixed: list[Point]) -> dict[str, Any]:
    """Raw and code-model figures of the fresh kernels and of the sessions they touch
    (the other kernel of a pair may be a training one: counted as fitted)."""
    sessions = {sid for p in fresh for sid, _s, _r in p.uses}
    by_key = {p.key: p for p in fixed}
    all_fixed = [by_key.get(p.key, p) for p in pts]
    raw_pairs = [q for q in speedup_pairs(pts) if q.session_id in sessions]
    code_pairs = [q for q in speedup_pairs(all_fixed) if q.session_id in sessions]
    return {
        "kernels": len(fresh),
        "raw_steps": error_summary(fresh)["all"],
        "code_steps": error_summary(fixed)["all"],
        "raw_sessions": pair_summary(raw_pairs),
        "code_sessions": pair_summary(code_pairs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--before", required=True, help="git revision of the training answers")
    ap.add_argument("--write", action="store_true", help="store figures in the summary json")
    ap.add_argument("--note", default="", help="with --write: a caveat the card prints")
    a = ap.parse_args()
    rev = subprocess.run(
        ["git", "rev-parse", "--short", a.before], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    pts: dict[str, list[Point]] = {}
    train: list[Point] = []
    fresh: dict[str, list[Point]] = {}
    for gpu in MEASURING_GPUS:
        rows = load_rows(gpu)
        if not rows:
            continue
        old = _old_keys(a.before, gpu)
        pts[gpu] = model_points(rows, gpu, code=True)
        train += [p for p in pts[gpu] if p.key in old]
        fresh[gpu] = [p for p in pts[gpu] if p.key not in old]
    model = fit_code_model(train)
    print(f"code model {CODEMODEL_VERSION}; train: {len(train)} timed kernels at {a.before}")
    for gpu, fr in fresh.items():
        if not fr:
            print(f"{gpu}: no fresh timed kernel")
            continue
        fixed = [_moved(p, c) for p, c in zip(fr, code_corrections(model, fr), strict=True)]
        figs = _score(pts[gpu], fr, fixed)
        print(f"{gpu}: fresh {len(fr)} timed kernels")
        for k in ("raw_steps", "code_steps", "raw_sessions", "code_sessions"):
            print(f"  {k:14s}", figs[k])
        if a.write:
            path = summary_path(gpu)
            data = json.loads(path.read_text()) if path.exists() else {}
            data["fresh"] = {
                "before": rev,
                "codemodel_version": CODEMODEL_VERSION,
                "note": a.note,
                **figs,
            }
            path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
            print(f"  wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
