"""The code model's clean test (issue 36): fitted on the answers shipped at ``--before``
(a git revision), scored on the timed kernels answered since — a batch no choice of the
model ever saw. Prints raw vs code-model step error and speedup-label agreement on it::

    .venv/bin/python benchmarks/device/sim_codemodel_fresh.py --before 'HEAD~1' --gpu h100
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dagster_project.sim.measured import (  # noqa: E402
    _moved,
    error_summary,
    fit_code_model,
    load_rows,
    model_points,
    pair_summary,
    speedup_pairs,
)
from dagster_project.sim.oracle import answers_path  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--before", required=True, help="git revision of the training answers")
    ap.add_argument("--gpu", default="h100")
    a = ap.parse_args()
    rel = answers_path(a.gpu).relative_to(ROOT)
    old_csv = subprocess.run(
        ["git", "show", f"{a.before}:{rel}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    old_keys = {r["key"] for r in csv.DictReader(io.StringIO(old_csv))}
    pts = model_points(load_rows(a.gpu), a.gpu, code=True)
    train = [p for p in pts if p.key in old_keys]
    fresh = [p for p in pts if p.key not in old_keys]
    model = fit_code_model(train)
    fixed = [
        _moved(p, c) for p, c in zip(fresh, model.predict([p.features for p in fresh]), strict=True)
    ]
    fresh_sessions = {sid for p in fresh for sid, _s, _r in p.uses}
    # pairs of sessions with a fresh kernel; the other kernel may be an old (training) one,
    # whose corrected time is then in sample: reported separately
    by_key = {p.key: p for p in fixed}
    all_fixed = [by_key.get(p.key, p) for p in pts]
    raw_pairs = [q for q in speedup_pairs(pts) if q.session_id in fresh_sessions]
    code_pairs = [q for q in speedup_pairs(all_fixed) if q.session_id in fresh_sessions]
    both_new = {
        sid
        for sid in fresh_sessions
        if sum(1 for p in fresh for s, _st, r in p.uses if s == sid and r in ("baseline", "best"))
        == 2
    }
    print(f"train: {len(train)} timed kernels (answers at {a.before}); fresh: {len(fresh)}")
    print("fresh steps, raw model :", error_summary(fresh)["all"])
    print("fresh steps, code model:", error_summary(fixed)["all"])
    print("fresh sessions, raw model :", pair_summary(raw_pairs))
    print("fresh sessions, code model:", pair_summary(code_pairs))
    print(
        "  of which baseline and best both fresh:",
        pair_summary([q for q in raw_pairs if q.session_id in both_new]),
        pair_summary([q for q in code_pairs if q.session_id in both_new]),
    )


if __name__ == "__main__":
    main()
