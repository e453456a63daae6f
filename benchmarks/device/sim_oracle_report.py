"""What the measurement oracle's shipped answers say (issue 36), GPU-less.

Regenerates every session the answers name (current generator, default seed), replays it
against the answers (``measured.replay``: each step ``measured`` or ``modelled``; the
baseline and best must be answered, else ``OracleMiss``), writes the measured tier
(sessions whose baseline and best were both timed) to
``dagster_project/sim/data/measured/<gpu>_tier.csv`` and prints the figures of
``benchmarks/RESULTS.md``: answers by status, model vs measured device time (all out of
sample), speedup label vs measured speedup, the (impl, rung level) refit and the code model
(``sim/codemodel.py``: features of each kernel's own source and launch) validated leaving
whole sessions and whole ops out, per op and overall, and the parameter-region evidence::

    .venv/bin/python benchmarks/device/sim_oracle_report.py --gpu h100
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dagster_project.sim import GENERATOR_VERSION  # noqa: E402
from dagster_project.sim.kernelinfer import build_tasks, simulate_session  # noqa: E402
from dagster_project.sim.measured import (  # noqa: E402
    TIER_FIELDS,
    all_points,
    cross_validate_methods,
    error_summary,
    fit_code_model,
    load_rows,
    model_points,
    pair_summary,
    read_timing_model_summary,
    region_failures,
    replay,
    speedup_pairs,
    step_times,
    summary_path,
    tier_path,
    timing_model_summary,
)
from dagster_project.sim.oracle import Oracle, OracleMiss  # noqa: E402


def _tier(
    gpu: str, rows: list[dict[str, str]], pairs: list[Any], model: Any
) -> list[dict[str, Any]]:
    """Replay the sessions of the timed pairs; the tier rows of those that replay (and the
    count of their steps timed by measurement, by the code model, or not at all)."""
    oracle = Oracle(gpu)
    tasks = {t.session_id: t for t in build_tasks()[0]}
    modelled = {p.session_id: p.modelled for p in pairs}
    out, misses = [], 0
    prov: collections.Counter[str] = collections.Counter()
    for sid in sorted(modelled):
        if sid not in tasks:  # the current task draw no longer holds this session
            misses += 1
            continue
        s = simulate_session(tasks[sid])
        try:
            r = replay(s, gpu, oracle)
        except OracleMiss:
            misses += 1  # the current generator no longer writes the measured kernels
            continue
        if r["measured_speedup"] is None:
            continue
        prov.update(p for _ms, p in step_times(s, gpu, oracle, model))
        out.append(
            {
                "session_id": sid,
                "session_gpu": s["gpu"],
                "measured_on": gpu,
                "op": s["op"],
                "impl": s["impl"],
                "num_steps": s["num_steps"],
                "measured_steps": r["provenance"].count("measured"),
                "baseline_step": 0,
                "best_step": s["best"]["step"],
                "baseline_key": r["baseline_key"],
                "best_key": r["best_key"],
                "label_speedup": s["best"]["speedup"],
                "measured_speedup": round(r["measured_speedup"], 4),
                "modelled_speedup_on_measuring_gpu": round(modelled[sid], 4),
                "generator_version": GENERATOR_VERSION,
            }
        )
    print(f"tier: {len(out)} sessions replay their measured baseline and best; {misses} miss")
    print(f"tier steps by provenance (code model for unmeasured steps): {dict(prov)}")
    return out


def _figs(pts: list[Any], pairs: list[Any]) -> str:
    e, p = error_summary(pts)["all"], pair_summary(pairs)
    return (
        f"step med|log|={e['median_abs_log_err']} <=2x={e['within_2x']} "
        f"<=1.5x={e['within_1_5x']} | speedup <=2x={p.get('within_2x')} "
        f"(n={p['n']}, under {p.get('understated')}, over {p.get('overstated')})"
    )


def _compare(pooled: list[Any], gpu: str, jobs: int = 1) -> dict[tuple[str, str], Any]:
    """Raw model, per-rung refit and code model, each held out by session and by op:
    overall, per op, and the worst held-out kernels of the code model. The folds run over
    every measuring GPU's points (``pooled``: another GPU's kernels train the fit too); the
    figures are ``gpu``'s."""
    pts = [p for p in pooled if p.gpu == gpu]
    runs: dict[tuple[str, str], tuple[list[Any], list[Any]]] = {}
    methods = ("rung", "ridge", "learner", "code")
    for by in ("session", "op"):
        # every method over the same folds, spread over ``jobs`` processes (measured.py)
        res = cross_validate_methods(pooled, by, methods, jobs=jobs)
        for method in methods:
            held, pairs = res[method]
            runs[(by, method)] = (
                [p for p in held if p.gpu == gpu],
                [q for q in pairs if q.gpu == gpu],
            )
    print(
        f"timing models, {len(pts)} timed kernels (held out = fitted without them; ridge = "
        "code features, ridge alone; learner = the code model's learner alone (boosted "
        "trees since 1.2.0); code = that learner plus op and rung offsets):"
    )
    print(f"  raw model (never fitted)   {_figs(pts, speedup_pairs(pts))}")
    for (by, method), (held, hp) in runs.items():
        print(f"  {method:5s} held out by {by:7s} {_figs(held, hp)}")
    per = {"raw": error_summary(pts)["per_op"]}
    per |= {f"{m}/{b}": error_summary(h)["per_op"] for (b, m), (h, _) in runs.items()}
    print("  per op, med|log| (<=2x):", " | ".join(per))
    for op in per["raw"]:
        cells = [
            f"{v[op]['median_abs_log_err']:.2f} ({v[op]['within_2x']:.2f})" for v in per.values()
        ]
        print(f"    {op:22s} n={per['raw'][op]['n']:2d} " + " | ".join(cells))
    for by in ("session", "op"):
        held = runs[(by, "code")][0]
        for p in sorted(held, key=lambda p: abs(p.log_err))[-5:]:
            print(
                f"  worst code/{by}: {p.op} {p.impl} {p.variant} measured {p.measured_ms:.4g} ms "
                f"corrected {p.modelled_ms:.4g}"
            )
        for pr in sorted(runs[(by, "code")][1], key=lambda p: abs(math.log(p.ratio)))[-3:]:
            print(
                f"  worst speedup code/{by}: {pr.session_id} measured {pr.measured:.3g}x "
                f"corrected {pr.modelled:.3g}x"
            )
    print(
        "  the shipped fit: "
        f"{type(fit_code_model(pooled).learner).__name__} + offsets "
        f"(pooled over {sorted({p.gpu for p in pooled})}, {len(pooled)} kernels)"
    )
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--no-tier", action="store_true", help="skip regenerating sessions")
    ap.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="processes for the folds",
    )
    a = ap.parse_args()
    rows = load_rows(a.gpu)
    print(f"answers: {len(rows)}", dict(collections.Counter(r["status"] for r in rows)))
    print(f"timed: {sum(1 for r in rows if r['ms'])}")
    pts = model_points(rows, a.gpu, code=True)
    summ = error_summary(pts)
    print("model vs measured device time (out of sample):", summ["all"])
    for impl in ("cuda", "triton"):
        print(f"  {impl}:", error_summary([p for p in pts if p.impl == impl])["all"])
    for op, f in summ["per_op"].items():
        print(f"  {op:22s} n={f['n']} med|log|={f['median_abs_log_err']} <=2x={f['within_2x']}")
    worst = sorted(pts, key=lambda p: abs(p.log_err))[-5:]
    for p in worst:
        print(f"  worst: {p.op} {p.impl} {p.variant} {p.measured_ms:.4g} ms vs {p.modelled_ms:.4g}")
    pairs = speedup_pairs(pts)
    print("speedup, modelled vs measured (same GPU):", pair_summary(pairs))
    for p in sorted(pairs, key=lambda p: abs(math.log(p.ratio)))[-5:]:
        print(f"  worst: {p.session_id} measured {p.measured:.3g}x modelled {p.modelled:.3g}x")
    pooled = all_points()
    runs = _compare(pooled, a.gpu, a.jobs)
    held = {by: runs[(by, "code")] for by in ("session", "op")}
    summary = timing_model_summary(pts, len(rows), held)
    old = read_timing_model_summary(a.gpu) or {}
    if old.get("fresh", {}).get("codemodel_version") == summary["codemodel_version"]:
        summary["fresh"] = old["fresh"]  # sim_codemodel_fresh.py --write's clean test
    summary_path(a.gpu).write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    print(f"wrote {summary_path(a.gpu).relative_to(ROOT)}: {summary}")
    for k, v in sorted(region_failures(rows).items()):
        print("region", *k, v)
    if a.no_tier:
        return
    tier = _tier(a.gpu, rows, pairs, fit_code_model(pooled))
    ratios = [t["label_speedup"] / t["measured_speedup"] for t in tier if t["label_speedup"]]
    within = sum(abs(math.log(r)) <= math.log(2) for r in ratios)
    steps = sum(t["num_steps"] for t in tier)
    measured = sum(t["measured_steps"] for t in tier)
    print(
        f"tier label speedup within 2x of the measured one: {within}/{len(ratios)}; "
        f"steps measured {measured}/{steps} ({measured / max(steps, 1):.1%})"
    )
    path = tier_path(a.gpu)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(TIER_FIELDS))
        w.writeheader()
        w.writerows(tier)
    print(f"wrote {len(tier)} rows to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
