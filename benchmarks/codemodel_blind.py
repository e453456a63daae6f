"""The code model's blind test on an online tier (issue 36, item 3): one scoring per version.

    .venv/bin/python benchmarks/codemodel_blind.py --before 0b9851e --after <frozen sha>
    .venv/bin/python benchmarks/codemodel_blind.py --gpu h200 --before <sha> --after <frozen sha>

``--gpu h100`` (the default; code model 1.2.0's one scoring): for each commit, its tree is
exported to a temporary folder and that tree's ``benchmarks/sim_online_report.py`` runs
there: the code model is fitted on the evidence answers (``h100_answers.csv``) only and
scored on the H100 online tier's answers (``h100_online_answers.csv``). Since code model
1.3.0 those answers are development data (1.3.0 was fitted and chosen on them): this mode
now reproduces 1.2.0's scoring, nothing more.

``--gpu h200`` (the next blind set: a held-out GPU and held-out sessions): for each commit,
this file's scorer runs inside that commit's tree, with that tree's code model and
simulator: the model is fitted on ALL H100 answers (evidence and online tier, each online
session's baseline and best marked as in ``codemodel_dev_cv.py``), never on an H200 answer,
and scored on the H200 tier: the sessions ``h200_online.csv`` lists, replayed from
``h200_online_answers.csv``. Per distinct timed kernel of those sessions the model's time on
the H200 against the measured one (median |log err|, within 2x; per op); per session whose
best is not its baseline, the speedup the model gives the session's own baseline and best
against the measured one; the worst sessions; and the label policy's line with the H100
residuals' scales (the policy ships none for the H200; with H200 scales there are none to
apply). The tier is replayed once, with the working tree's generator (``--replay-at SHA``:
that commit's, with the tier's files from the working tree), and each version's model times
the same replayed sessions. ``--tier-gpu h100`` points the same scorer at the H100 tier
instead: a DRY RUN of the plumbing (in sample: those answers are in the fit), never a score.

The two outputs are printed whole, then the headline figures and the per-op table side by
side. CPU, a few minutes.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_KERNELS = re.compile(
    r"code model on (\d+) distinct timed kernels .*?([\d.]+), within 2x ([\d.]+%)"
)
_SPEEDUPS = re.compile(r"speedups of (\d+) sessions .*?model within 2x (\d+)/(\d+)")
_OP = re.compile(r"^\s{2}(\w+)\s+(\d+)\s+([\d.]+)\s+([\d.]+%)$")
#: The GPU whose answers the model is fitted on in the cross-GPU mode.
FIT_GPU = "h100"
LOG2 = math.log(2.0)


def _export(sha: str, tmp: str) -> None:
    tar = subprocess.run(
        ["git", "-C", str(ROOT), "archive", sha], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)


def report(sha: str, gpu: str, tier: Path | None) -> str:
    """The scoring's output on the tree of ``sha``: that tree's ``sim_online_report.py`` for
    the H100 mode, this file's ``score`` run inside that tree on the replayed tier ``tier``
    for another GPU."""
    with tempfile.TemporaryDirectory() as tmp:
        _export(sha, tmp)
        if tier is None:
            cmd = [sys.executable, "benchmarks/sim_online_report.py", "--gpu", gpu]
        else:
            here = Path(tmp) / "benchmarks" / "_codemodel_blind_scorer.py"
            here.write_bytes(Path(__file__).read_bytes())
            cmd = [sys.executable, str(here), "--score", str(tier), "--tree", tmp]
        out = subprocess.run(cmd, cwd=tmp, check=True, capture_output=True, text=True)
    return out.stdout


def replay_tier(gpu: str, path: Path, at: str | None) -> None:
    """Replay ``gpu``'s listed online sessions and write them to ``path`` (JSON), with the
    working tree's generator (the one the tier was measured with) or, with ``at``, the
    generator of that commit (the tier's two files are taken from the working tree): each
    version's model then times the same sessions' kernels, whatever generator its own
    commit carried."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = ROOT
        if at:
            tree = Path(tmp)
            _export(at, tmp)
            data = Path("dagster_project") / "sim" / "data" / "measured"
            for name in (f"{gpu}_online.csv", f"{gpu}_online_answers.csv"):
                if (ROOT / data / name).exists():
                    (tree / data / name).write_bytes((ROOT / data / name).read_bytes())
        cmd = [sys.executable, __file__, "--replay", gpu, str(path), "--tree", str(tree)]
        subprocess.run(cmd, cwd=tree, check=True)


def _replay(gpu: str, path: Path) -> None:
    """``replay_tier``'s work, inside the tree on ``sys.path``."""
    from dagster_project.sim.kernelinfer import build_tasks
    from dagster_project.sim.online import replay_online

    rep = replay_online(gpu, {t.session_id: t for t in build_tasks()[0]})
    lines = [f"online {gpu}: {rep.listed} listed, {rep.identical} replay identically"]
    lines += [f"  not replayed: {sid}: {why}" for sid, why in rep.failed]
    path.write_text(json.dumps({"gpu": gpu, "lines": lines, "sessions": rep.sessions}))
    print(lines[0])


# --------------------------------------------------------------------------------------
# the cross-GPU scorer (runs inside an exported tree: only that tree's modules are used)
# --------------------------------------------------------------------------------------


def _roles(measured: Any) -> dict[str, list[tuple[str, int, str]]]:
    """Per H100 answer key, its baseline / best roles in the online sessions: from the
    shipped ``h100_online_roles.csv`` where the tree has it (a later generator cannot replay
    the tier), else from a replay (``codemodel_dev_cv.online_roles``' rule: a session whose
    best is not its baseline and whose baseline ran)."""
    from dagster_project.sim.oracle import answer_key, online_answers_path

    roles: dict[str, list[tuple[str, int, str]]] = defaultdict(list)
    path = online_answers_path(FIT_GPU).with_name(f"{FIT_GPU}_online_roles.csv")
    if path.exists():
        with path.open(newline="") as fh:
            for r in csv.DictReader(fh):
                sid = r["session_id"] + "~online"
                roles[r["baseline_key"]].append((sid, int(r["baseline_step"]), "baseline"))
                roles[r["best_key"]].append((sid, int(r["best_step"]), "best"))
        return roles
    from dagster_project.sim.kernelinfer import build_tasks
    from dagster_project.sim.online import replay_online

    for s in replay_online(FIT_GPU, {t.session_id: t for t in build_tasks()[0]}).sessions:
        best = s["best"]["step"]
        if best in (None, 0) or s["trace"][0]["measured_ms"] is None:
            continue
        for step, role in ((0, "baseline"), (best, "best")):
            code = s["messages"][2 + 2 * step]["content"]
            key = answer_key(code, s["shape"], s["dtype"], FIT_GPU)
            roles[key].append((s["session_id"] + "~online", step, role))
    return roles


def _fit_points(measured: Any) -> list[Any]:
    """Every timed H100 kernel, evidence and online, the online sessions' baseline and best
    marked (``_roles``)."""
    from dagster_project.sim.oracle import online_answers_path

    with online_answers_path(FIT_GPU).open(newline="") as fh:
        online = measured.model_points(list(csv.DictReader(fh)), FIT_GPU, code=True)
    roles = _roles(measured)
    evidence = measured.model_points(measured.load_rows(FIT_GPU), FIT_GPU, code=True)
    return [
        dataclasses.replace(p, uses=p.uses + tuple(roles.get(p.key, ()))) for p in evidence + online
    ]


def _scored(sessions: list[dict[str, Any]], gpu: str, model: Any) -> tuple[list[Any], list[Any]]:
    """(op, |log err|) per distinct timed kernel; per session with a speedup: (sid, op,
    measured, model speedup, policy decision with the H100 scales)."""
    from dagster_project.sim import label_policy as lp
    from dagster_project.sim.measured import step_times
    from dagster_project.sim.oracle import Oracle, answer_key

    blind = Oracle(gpu, {})  # no answers: every step is the code model's
    scales = lp.shipped_scales(FIT_GPU)
    kernels: dict[str, tuple[str, float]] = {}
    labels = []
    for s in sessions:
        pred = step_times(s, gpu, blind, model)
        for i, t in enumerate(s["trace"]):
            ms, pm = t.get("measured_ms"), pred[i][0]
            if ms is not None and pm is not None:
                key = answer_key(s["messages"][2 + 2 * i]["content"], s["shape"], s["dtype"], gpu)
                kernels[key] = (s["op"], abs(math.log(pm / ms)))
        best = s["best"]["step"]
        base_ms = s["trace"][0]["measured_ms"]
        if best in (None, 0) or base_ms is None or s["trace"][best]["measured_ms"] is None:
            continue
        model_x = pred[0][0] / pred[best][0] if pred[0][0] and pred[best][0] else None
        dec = lp.label_from_times(s, pred, gpu, scales)
        measured_x = base_ms / s["trace"][best]["measured_ms"]
        labels.append((s["session_id"], s["op"], measured_x, model_x, dec))
    return list(kernels.values()), labels


def _within(a: float, b: float) -> bool:
    return abs(math.log(a / b)) <= LOG2


def score(tier: Path) -> None:
    """Fit on every H100 answer, score on the replayed tier in ``tier`` (inside a tree)."""
    from dagster_project.sim import codemodel, measured

    data = json.loads(tier.read_text())
    tier_gpu = data["gpu"]
    if tier_gpu == FIT_GPU:
        print("DRY RUN on the H100 tier: its answers are in the fit, so nothing here is a score")
    print("\n".join(data["lines"]))
    pts = _fit_points(measured)
    model = measured.fit_code_model(pts)
    print(f"code model {codemodel.CODEMODEL_VERSION} fitted on {len(pts)} timed {FIT_GPU} kernels")
    errs, labels = _scored(data["sessions"], tier_gpu, model)
    if not errs:
        print(f"no timed kernels in the {tier_gpu} tier")
        return
    logs = [e for _op, e in errs]
    held = "IN SAMPLE: dry run" if tier_gpu == FIT_GPU else "held out"
    print(
        f"code model on {len(errs)} distinct timed kernels ({held}): median |log err| "
        f"{statistics.median(logs):.3f}, within 2x {sum(e <= LOG2 for e in logs) / len(logs):.1%}"
    )
    ok = [r for r in labels if r[3]]
    pub = [r for r in labels if r[4].published]
    print(
        f"speedups of {len(labels)} sessions whose best is not the baseline: model within 2x "
        f"{sum(_within(r[3], r[2]) for r in ok)}/{len(ok)}; label policy ({FIT_GPU} scales) "
        f"publishes {len(pub)}, within 2x "
        f"{sum(_within(r[4].speedup, r[2]) for r in pub)}/{len(pub)}"
    )
    by_op: dict[str, list[float]] = defaultdict(list)
    for op, e in errs:
        by_op[op].append(e)
    print("per op (kernels, median |log err|, within 2x):")
    for op in sorted(by_op, key=lambda o: -statistics.median(by_op[o])):
        v = by_op[op]
        share = sum(e <= LOG2 for e in v) / len(v)
        print(f"  {op:24s} {len(v):4d} {statistics.median(v):6.3f} {share:6.1%}")
    s_op: dict[str, list[bool]] = defaultdict(list)
    for r in ok:
        s_op[r[1]].append(_within(r[3], r[2]))
    print(
        "per op, sessions (within 2x / n): "
        + ", ".join(
            f"{op} {sum(v)}/{len(v)}"
            for op, v in sorted(s_op.items(), key=lambda kv: sum(kv[1]) / len(kv[1]))
        )
    )
    print("worst sessions (model vs measured speedup):")
    for r in sorted(ok, key=lambda r: -abs(math.log(r[3] / r[2])))[:10]:
        print(f"  {r[0][:60]:60s} model {r[3]:8.2f} measured {r[2]:8.2f}")


def side_by_side(before: str, after: str, outs: dict[str, str]) -> None:
    """The headline figures and the per-op table of the two outputs."""
    print(f"===== side by side: {before} | {after} =====")
    for pat in (_KERNELS, _SPEEDUPS):
        cells = [m.groups() if (m := pat.search(outs[n])) else () for n in ("before", "after")]
        print(f"  {cells[0]} | {cells[1]}")
    ops: dict[str, list[tuple[str, ...]]] = {}
    for name in ("before", "after"):
        for line in outs[name].splitlines():
            if m := _OP.match(line):
                ops.setdefault(m.group(1), []).append(m.groups()[1:])
    print("  per op: kernels, median |log err|, within 2x (before | after)")
    for op, cells in sorted(ops.items(), key=lambda kv: -float(kv[1][0][1])):
        print(f"    {op:24s} " + " | ".join(" ".join(c) for c in cells))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", help="commit of the old version")
    ap.add_argument("--after", help="commit of the new version (frozen)")
    ap.add_argument("--gpu", default=FIT_GPU, help="the tier's GPU: h100 (1.2.0's) or h200")
    ap.add_argument("--tier-gpu", help="score this GPU's tier instead (h100: a dry run)")
    ap.add_argument("--replay-at", help="replay the tier with this commit's generator")
    ap.add_argument("--score", help=argparse.SUPPRESS)
    ap.add_argument("--replay", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--tree", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.score or a.replay:
        sys.path.insert(0, a.tree)
        if a.replay:
            _replay(a.replay[0], Path(a.replay[1]))
        else:
            score(Path(a.score))
        return 0
    if not (a.before and a.after):
        ap.error("--before and --after are required")
    tier_gpu = a.tier_gpu or a.gpu
    outs = {}
    with tempfile.TemporaryDirectory() as tmp:
        tier = None
        if a.gpu != FIT_GPU:
            tier = Path(tmp) / "tier.json"
            replay_tier(tier_gpu, tier, a.replay_at)
        for name, sha in (("before", a.before), ("after", a.after)):
            outs[name] = report(sha, a.gpu, tier)
            print(f"===== {name} {sha} =====\n{outs[name]}")
    side_by_side(a.before, a.after, outs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
