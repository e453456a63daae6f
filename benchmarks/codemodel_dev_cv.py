"""The code model's development figures (issue 36, item 3): 10 group folds of the H100
answers, by session and by op. CPU, ~2 min.

    .venv/bin/python benchmarks/codemodel_dev_cv.py [--before SHA] [--per-op] [--evidence-only]

The development data are the evidence answers (``h100_answers.csv``) and, since code model
1.3.0, the online tier's (``h100_online_answers.csv``: code model 1.2.0's blind set, spent on
its one scoring). An online session's baseline and best are read from its replay (the
answers' ``uses`` column says only ``online``), so its session speedup is scored like an
evidence session's: the model's speedup of the session's own baseline and best kernels
against the measured one. ``--evidence-only`` drops the online answers (1.2.0's folds).

Leaving one session component out at a time (``measured.cross_validate``, the card's
figures) fits the model hundreds of times; 10 folds of whole session components (or whole
ops), assigned by a fixed shuffle, fit it 10 times, so versions can be compared in minutes.
Each split prints the step figures (median |log err|, within 2x) and the session speedups
within 2x, pooled and per source (evidence / online); ``--per-op`` adds, per op, the step
figures and the session speedups (within 2x of n, median |log ratio|) and the worst sessions
with their baseline's and best's own errors (a speedup is a ratio: what counts is the two
errors together). ``--before SHA`` runs the same folds on the model of commit SHA (its tree
exported to a temporary folder), for a side-by-side with the working tree's model. Every
figure here is in sample for the version chosen on them.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import random
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FOLDS = 10
SEED = 0
GPU = "h100"
#: The online sessions' roles file (``--write-roles``; ``measured.online_roles`` reads it).
ROLES = f"{GPU}_online_roles.csv"
#: Its columns.
ROLE_FIELDS = ("session_id", "baseline_step", "best_step", "baseline_key", "best_key")
LOG2 = math.log(2.0)


def write_roles(gpu: str, path: Path) -> int:
    """Replay ``gpu``'s online sessions (this tree's generator must be the one they were
    generated with) and write, per session whose best is not its baseline and whose baseline
    ran, the two kernels' answer keys: the roles then no longer need a replay, which any
    later generator version breaks (the online list is pinned to its generator)."""
    from dagster_project.sim.kernelinfer import build_tasks
    from dagster_project.sim.online import replay_online
    from dagster_project.sim.oracle import answer_key

    rep = replay_online(gpu, {t.session_id: t for t in build_tasks()[0]})
    if rep.failed:
        raise SystemExit(f"{len(rep.failed)} sessions do not replay here: {rep.failed[0]}")
    rows = []
    for s in rep.sessions:
        best = s["best"]["step"]
        if best in (None, 0) or s["trace"][0]["measured_ms"] is None:
            continue
        keys = [
            answer_key(s["messages"][2 + 2 * i]["content"], s["shape"], s["dtype"], gpu)
            for i in (0, best)
        ]
        rows.append((s["session_id"], 0, best, *keys))
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(ROLE_FIELDS)
        w.writerows(sorted(rows))
    return len(rows)


def dev_points(online: bool = True) -> tuple[list[Any], set[str]]:
    """Every development kernel (``measured.all_points``: evidence, then online, with the
    online sessions' roles; the H100's alone) and the keys of the online answers."""
    from dagster_project.sim import measured

    try:
        pts = measured.all_points(online=online)
    except TypeError:  # a tree before 1.3.0 (``--before``): its points, the online ones here
        pts = _with_online(measured) if online else measured.all_points()
    # H100 answers only: another GPU's tier (the H200's) is a blind set, never development
    pts = [p for p in pts if p.gpu == GPU]
    evidence = {p.key for p in measured.model_points(measured.load_rows(GPU), GPU)}
    return pts, {p.key for p in pts if p.key not in evidence}


def _with_online(measured: Any) -> list[Any]:
    """``all_points`` and the online answers' points, with the online roles, for a tree
    whose ``all_points`` has none (the roles file is copied into its data folder by
    ``main``)."""
    path = measured.answers_path(GPU).with_name(f"{GPU}_online_answers.csv")
    with path.open(newline="") as fh:
        online = measured.model_points(list(csv.DictReader(fh)), GPU, code=True)
    roles: dict[str, list[tuple[str, int, str]]] = defaultdict(list)
    with path.with_name(ROLES).open(newline="") as fh:
        for r in csv.DictReader(fh):
            sid = r["session_id"] + "~online"
            roles[r["baseline_key"]].append((sid, int(r["baseline_step"]), "baseline"))
            roles[r["best_key"]].append((sid, int(r["best_step"]), "best"))
    return [
        dataclasses.replace(p, uses=p.uses + tuple(roles.get(p.key, ())))
        for p in measured.all_points() + online
    ]


def group_folds(points: list[Any], by: str, measured: Any) -> list[tuple[list[int], list[int]]]:
    """(train, test) index lists of ``FOLDS`` folds of whole session components or ops."""
    keys = measured._components(points) if by == "session" else [p.op for p in points]
    names = sorted(set(keys))
    random.Random(SEED).shuffle(names)
    fold_of = {n: i % FOLDS for i, n in enumerate(names)}
    out = []
    for j in range(FOLDS):
        test = [i for i, k in enumerate(keys) if fold_of[k] == j]
        out.append(([i for i, k in enumerate(keys) if fold_of[k] != j], test))
    return out


@dataclasses.dataclass(frozen=True)
class SessionErr:
    """One held-out session speedup: the log ratio of model to measured speedup and its two
    halves (log(model / measured) of the baseline and of the best)."""

    sid: str
    op: str
    source: str
    measured: float
    base_err: float
    best_err: float

    @property
    def log_ratio(self) -> float:
        return self.base_err - self.best_err


def session_errors(held: list[Any]) -> list[SessionErr]:
    """Per session whose baseline and best are both held-out kernels, its speedup error."""
    by: dict[str, dict[str, Any]] = defaultdict(dict)
    for p in held:
        for sid, _step, role in p.uses:
            if role in ("baseline", "best"):
                by[sid][role] = p
    out = []
    for sid, r in sorted(by.items()):
        if len(r) == 2:
            b, t = r["baseline"], r["best"]
            src = "online" if sid.endswith("~online") else "evidence"
            out.append(
                SessionErr(sid, b.op, src, b.measured_ms / t.measured_ms, b.log_err, t.log_err)
            )
    return out


def _share(errs: list[SessionErr]) -> str:
    n = len(errs)
    k = sum(abs(e.log_ratio) <= LOG2 for e in errs)
    return f"{k}/{n} ({k / n:.1%})" if n else "0/0"


def _step_line(held: list[Any]) -> str:
    e = [abs(p.log_err) for p in held]
    return f"{statistics.median(e):.3f}, within 2x {sum(v <= LOG2 for v in e) / len(e):.1%}"


def cross_validate(pts: list[Any], by: str) -> list[Any]:
    """Every point held out once, its time corrected by the model fitted on the other folds."""
    from dagster_project.sim import measured

    held: list[Any] = []
    for tr, te in group_folds(pts, by, measured):
        train, test = [pts[i] for i in tr], [pts[i] for i in te]
        fix = measured._code_fix(train, test, by, "code")
        held += [measured._moved(p, c) for p, c in zip(test, fix, strict=True)]
    return held


def _per_op(held: list[Any], sess: list[SessionErr]) -> None:
    by_op: dict[str, list[float]] = defaultdict(list)
    for p in held:
        by_op[p.op].append(abs(p.log_err))
    s_op: dict[str, list[SessionErr]] = defaultdict(list)
    for s in sess:
        s_op[s.op].append(s)
    print("    op                     kernels step-med ≤2x | sessions ≤2x  med|log ratio|")
    for op in sorted(by_op, key=lambda o: -statistics.median(by_op[o])):
        v, ss = by_op[op], s_op.get(op, [])
        sp = (
            f"{_share(ss):>14s} {statistics.median(abs(s.log_ratio) for s in ss):.3f}" if ss else ""
        )
        print(
            f"    {op:22s} {len(v):4d} {statistics.median(v):.3f} "
            f"{sum(e <= LOG2 for e in v) / len(v):4.0%} | {sp}"
        )
    print("    worst sessions: log(model/measured) speedup = baseline err - best err")
    for s in sorted(sess, key=lambda s: -abs(s.log_ratio))[:12]:
        print(
            f"      {s.sid[:58]:58s} {s.source:8s} measured {s.measured:7.2f}x "
            f"ratio {math.exp(s.log_ratio):6.2f} base {s.base_err:+.2f} best {s.best_err:+.2f}"
        )


def run(per_op: bool, online: bool) -> None:
    """The figures of the code model of this process's tree."""
    from dagster_project.sim import codemodel

    pts, online_keys = dev_points(online)
    print(
        f"code model {codemodel.CODEMODEL_VERSION}: {len(pts)} timed kernels "
        f"({len(pts) - len(online_keys)} evidence, {len(online_keys)} online)"
    )
    for by in ("session", "op"):
        held = cross_validate(pts, by)
        sess = session_errors(held)
        src = {s: [e for e in sess if e.source == s] for s in ("evidence", "online")}
        on = [p for p in held if p.key in online_keys]
        print(
            f"  by {by:7s} step median |log err| {_step_line(held)}; session speedups within "
            f"2x {_share(sess)} [evidence {_share(src['evidence'])}, "
            f"online {_share(src['online'])}]" + (f"; online steps {_step_line(on)}" if on else "")
        )
        if per_op:
            _per_op(held, sess)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", help="also run the model of this commit, first")
    ap.add_argument("--per-op", action="store_true")
    ap.add_argument("--evidence-only", action="store_true", help="without the online answers")
    ap.add_argument(
        "--write-roles",
        metavar="PATH",
        help="replay the H100 online sessions (in --tree) and write their roles to PATH",
    )
    ap.add_argument("--tree", default=str(ROOT), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.write_roles:
        sys.path.insert(0, a.tree)
        print(f"{write_roles(GPU, Path(a.write_roles))} sessions' roles written")
        return 0
    flags = (["--per-op"] if a.per_op else []) + (["--evidence-only"] if a.evidence_only else [])
    if a.before:
        with tempfile.TemporaryDirectory() as tmp:
            tar = subprocess.run(
                ["git", "-C", str(ROOT), "archive", a.before], check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)
            here = Path(tmp) / "benchmarks" / "codemodel_dev_cv.py"
            here.write_bytes(Path(__file__).read_bytes())
            data = Path("dagster_project") / "sim" / "data" / "measured" / ROLES
            (Path(tmp) / data).write_bytes((ROOT / data).read_bytes())
            subprocess.run([sys.executable, str(here), "--tree", tmp, *flags], check=True, cwd=tmp)
    sys.path.insert(0, a.tree)
    run(a.per_op, not a.evidence_only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
