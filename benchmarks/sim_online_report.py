"""The online measured tier beside the model (issue 36). GPU-less, about a minute.

    .venv/bin/python benchmarks/sim_online_report.py [--gpu h100]

1. Replays the shipped online sessions (strict oracle, digest check) and prints their
   statistics beside the modelled sessions of the same task ids (steps, statuses, best
   speedups, null bests, best = baseline), and its measured steps against the model's two
   physical floors: the launch-inclusive one (host-inclusive times only: graph replay pays
   no host launch, so many small kernels are under it) and the device-only one, which no
   device time may be under (``timing.device_floor_ms``; ``check_session`` enforces it).
2. A clean test of the shipped code model and label policy: the model is fitted on the
   evidence answers only (``<gpu>_answers.csv``); the online answers were measured after it
   and never fitted, so every figure here is held out. Per distinct timed kernel of the
   online sessions, the code model's device time against the measured one (median
   |log err|, share within 2x); per session, the speedup the model gives the session's own
   baseline and best against the measured one; and the label policy as a build applied it
   before the tier's answers shipped (only the evidence file's answers count as measured, the
   rest modelled where the policy publishes; a build now also reads the tier's answers, which
   would make these labels measured): share of published labels within 2x, coverage. Per
   op, and the worst sessions.
"""

from __future__ import annotations

import argparse
import collections
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dagster_project.sim import label_policy as lp  # noqa: E402
from dagster_project.sim.kernelinfer import build_tasks, simulate_session  # noqa: E402
from dagster_project.sim.measured import all_points, fit_code_model, step_times  # noqa: E402
from dagster_project.sim.online import replay_online, tier_stats  # noqa: E402
from dagster_project.sim.oracle import Oracle, answer_key, shipped_answers  # noqa: E402


def _within(a: float, b: float, f: float = 2.0) -> bool:
    return abs(math.log(a / b)) <= math.log(f)


def _kernel_errors(sessions: list[dict[str, Any]], gpu: str, model: Any) -> list[Any]:
    """(op, |log(model / measured)|) per distinct timed kernel of the sessions."""
    blind = Oracle(gpu, {})  # no answers: every step is the code model's
    seen: dict[str, tuple[str, float]] = {}
    for s in sessions:
        pred = step_times(s, gpu, blind, model)
        for i, t in enumerate(s["trace"]):
            ms, (pm, _how) = t.get("measured_ms"), pred[i]
            if ms is None or pm is None:
                continue
            key = answer_key(s["messages"][2 + 2 * i]["content"], s["shape"], s["dtype"], gpu)
            seen[key] = (s["op"], abs(math.log(pm / ms)))
    return list(seen.values())


def _labels(sessions: list[dict[str, Any]], gpu: str, model: Any) -> list[dict[str, Any]]:
    """Per session: measured speedup, the model's for the same kernels, the build's label."""
    blind = Oracle(gpu, {})
    evidence = Oracle(gpu, dict(shipped_answers(gpu)))
    scales = lp.shipped_scales(gpu)
    out = []
    for s in sessions:
        best = s["best"]["step"]
        if best in (None, 0):
            continue
        base_ms, best_ms = s["trace"][0]["measured_ms"], s["trace"][best]["measured_ms"]
        if base_ms is None or best_ms is None:  # a baseline that did not run: no speedup
            continue
        pred = step_times(s, gpu, blind, model)
        dec = lp.label_from_times(s, lp.label_times(s, gpu, evidence, model), gpu, scales)
        out.append(
            {
                "sid": s["session_id"],
                "op": s["op"],
                "measured": base_ms / best_ms,
                "model": (pred[0][0] / pred[best][0]) if pred[0][0] and pred[best][0] else None,
                "label": dec.speedup if dec.published else None,
                "provenance": dec.provenance,
            }
        )
    return out


def _floors(sessions: list[dict[str, Any]], gpu: str) -> list[tuple[str, float, float, float]]:
    """(op, measured ms, launch-inclusive floor, device-only floor) of every measured step:
    ``timing.physical_floor_ms`` is the model's host-inclusive floor, ``device_floor_ms``
    the one a graph-replay device time must clear (``check_session`` holds it to that)."""
    from dagster_project.sim.hardware import get_gpu
    from dagster_project.sim.kernelinfer import _baseline_params
    from dagster_project.sim.kernels import plan
    from dagster_project.sim.ops import get_op
    from dagster_project.sim.timing import device_floor_ms, physical_floor_ms
    from dagster_project.sim.variants import get_variant

    card = get_gpu(gpu)
    out = []
    for s in sessions:
        op = get_op(s["op"])
        for t in s["trace"]:
            if t.get("measured_ms") is None:
                continue
            v = get_variant(op.family, s["impl"], t["tag"])
            params = t["params"] if t["kind"] != "baseline" else _baseline_params(s, v)
            kp = plan(op, s["shape"], s["dtype"], card, v, params)
            host = physical_floor_ms(kp, card, s["impl"])
            device = device_floor_ms(kp, card, op, s["shape"], s["dtype"])
            out.append((s["op"], t["measured_ms"], host, device))
    return out


def _floor_line(name: str, floors: list[tuple[str, float, float, float]], col: int) -> str:
    """How many measured steps are under one of the two floors, the ops with most, the
    lowest ratio of measured time to that floor."""
    under = [(f[0], f[1] / f[col]) for f in floors if f[col] and f[1] < f[col] * (1 - 2e-3)]
    most = sorted(collections.Counter(op for op, _r in under).items(), key=lambda x: -x[1])
    worst = min((r for _op, r in under), default=None)
    if under:
        return (
            f"  under the {name}: {len(under)} of {len(floors)} (most: {most[:5]}; "
            f"lowest measured/floor {worst:.3f})"
        )
    tight = min(f[1] / f[col] for f in floors if f[col])
    return f"  under the {name}: 0 of {len(floors)} (closest measured/floor {tight:.3f})"


def _stats_line(name: str, st: dict[str, Any]) -> str:
    return (
        f"{name:10s} {st['sessions']:4d} sessions {st['ops']:3d} ops {st['steps']:5d} steps "
        f"(median {st['median_steps']}) statuses {st['statuses']} null best {st['null_best']} "
        f"best=baseline {st['best_is_baseline']} median speedup {st['median_speedup']} "
        f"≥2x {st['speedup_ge_2x']}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", default="h100")
    a = ap.parse_args(argv)
    tasks = {t.session_id: t for t in build_tasks()[0]}
    rep = replay_online(a.gpu, tasks)
    print(f"online {a.gpu}: {rep.listed} listed, {rep.identical} replay identically")
    for sid, why in rep.failed:
        print(f"  not replayed: {sid}: {why}")
    online = rep.sessions
    modelled = [simulate_session(tasks[s["session_id"]]) for s in online]
    print(_stats_line("online", tier_stats(online)))
    print(_stats_line("modelled", tier_stats(modelled)))

    floors = _floors(online, a.gpu)
    print("measured steps against the model's physical floors:")
    print(_floor_line("launch-inclusive floor (host-inclusive times only)", floors, 2))
    print(_floor_line("device-only floor (graph replay; must be 0)", floors, 3))
    # the evidence files only (code model 1.3.0's build fit also reads the online tiers'
    # answers, which would make every figure below in sample)
    model = fit_code_model(all_points(online=False))
    errs = _kernel_errors(online, a.gpu, model)
    logs = [e for _op, e in errs]
    print(
        f"code model on {len(errs)} distinct timed kernels (held out): median |log err| "
        f"{statistics.median(logs):.3f}, "
        f"within 2x {sum(e <= math.log(2) for e in logs) / len(logs):.1%}"
    )
    labels = _labels(online, a.gpu, model)
    with_model = [r for r in labels if r["model"]]
    pub = [r for r in labels if r["label"] is not None]
    modelled_pub = [r for r in pub if r["provenance"] != "measured"]
    print(
        f"speedups of {len(labels)} sessions whose best is not the baseline: model within 2x "
        f"{sum(_within(r['model'], r['measured']) for r in with_model)}/{len(with_model)}; "
        f"label policy publishes {len(pub)} ({len(modelled_pub)} modelled), within 2x "
        f"{sum(_within(r['label'], r['measured']) for r in pub)}/{len(pub)} (modelled "
        f"{sum(_within(r['label'], r['measured']) for r in modelled_pub)}/{len(modelled_pub)})"
    )
    by_op: dict[str, list[float]] = defaultdict(list)
    for op, e in errs:
        by_op[op].append(e)
    print("per op (kernels, median |log err|, within 2x):")
    for op in sorted(by_op, key=lambda o: -statistics.median(by_op[o])):
        v = by_op[op]
        print(
            f"  {op:24s} {len(v):4d} {statistics.median(v):6.3f} "
            f"{sum(e <= math.log(2) for e in v) / len(v):6.1%}"
        )
    worst = sorted(with_model, key=lambda r: -abs(math.log(r["model"] / r["measured"])))[:8]
    print("worst sessions (model vs measured speedup):")
    for r in worst:
        print(f"  {r['sid'][:60]:60s} model {r['model']:8.2f} measured {r['measured']:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
