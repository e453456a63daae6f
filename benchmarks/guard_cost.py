"""What the reward guard costs per evaluation of a patch completion, against the same
reward without its defences and against another guard version (issue 37: the defences may
cost at most 1.5x the reward's time per evaluation).

One evaluation is one completion's reward when its prompt's before_code has been timed
already (a GRPO group shares it): ``guarded_patch_reward(task, before, completion, base=)``.
The completion is the suite's after_code (the honest reference, which runs every phase;
an exploit stopped early costs less).

* ``guarded``: that call's wall time, on the guard version importable in the process;
* ``unguarded``: the same candidate in a process of its own with the same number of calls
  (warm-up, the guard task's timed calls on fresh inputs, each timed with
  ``time.perf_counter``) and one output compared with a float64 reference in the parent:
  a reward with a process boundary and a correctness check and none of the guard's other
  defences (snapshots, held outputs, identities, paired baseline, unseen shapes);
* ``--other TREE``: the ``guarded`` figure again with ``dagster_project`` imported from
  ``TREE`` (e.g. ``git archive <sha> dagster_project | tar -x -C TREE`` of an older guard),
  alternated with this tree's rep by rep so both see the same machine.

Also printed: the after_code's timed median (``t_us``) under each version, so a change that
slows the timed calls themselves (holding outputs, snapshots) shows up apart from its cost.

    nice -n 10 .venv/bin/python benchmarks/guard_cost.py --other /tmp/g150 --reps 4
    nice -n 10 /tmp/venv-exec/bin/python benchmarks/guard_cost.py \\
        --task rmsnorm_linear_torch_cpu --other /tmp/g150 --reps 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: The unguarded reward's child: load, warm up, time ``n`` calls on fresh inputs, save one
#: call's inputs and output for the parent's check.
_UNGUARDED_CHILD = """
import importlib.util, json, sys, time
import numpy as np
from dagster_project.rewards.guard.backends import backend
from dagster_project.rewards.guard.tasks import EPS, TASKS

task = TASKS[sys.argv[1]]
be = backend(task.backend)
spec = importlib.util.spec_from_file_location("cand", sys.argv[2])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
fn = getattr(mod, task.entry)
for i, shape in enumerate(task.warmup):
    inp = be.inputs(shape, 1000 + i)
    fn(inp["x"], inp["w"], inp["W"], EPS)
walls = []
for i in range(int(sys.argv[3])):
    inp = be.inputs(task.timed, 2000 + i)
    be.sync()
    t0 = time.perf_counter()
    out = fn(inp["x"], inp["w"], inp["W"], EPS)
    be.sync()
    walls.append(time.perf_counter() - t0)
np.savez(sys.argv[4], out=be.host(out), **{k: be.host(v) for k, v in inp.items()})
print(json.dumps({"t_us": sorted(walls)[len(walls) // 2] * 1e6}))
"""


def unguarded(task_name: str, source: str) -> dict[str, Any]:
    """One evaluation without the guard's defences (see the module docstring)."""
    import numpy as np

    from dagster_project.rewards.guard.tasks import TASKS, reference

    task = TASKS[task_name]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="unguarded-") as tmp:
        cand = Path(tmp) / "candidate.py"
        cand.write_text(source)
        snap = Path(tmp) / "snap.npz"
        calls = task.timed_calls + 2  # the guard's mean: timed_calls + randrange(0, 4)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        proc = subprocess.run(
            [sys.executable, "-c", _UNGUARDED_CHILD, task_name, str(cand), str(calls), str(snap)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=True,
        )
        data = np.load(snap)
        ref = reference({k: data[k] for k in ("x", "w", "W")})
        ok = bool(np.allclose(data["out"], ref, rtol=2e-4, atol=2e-5 * np.abs(ref).max()))
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"seconds": time.monotonic() - started, "ok": ok, "t_us": out["t_us"]}


def inner(task_name: str, evaluations: int, with_unguarded: bool) -> dict[str, Any]:
    """Evaluations on the guard importable here (after one untimed warm-up evaluation)."""
    from dagster_project.rewards.exploits.bases import BASES
    from dagster_project.rewards.guard import GUARD_VERSION
    from dagster_project.rewards.guard.isolate import run_candidate
    from dagster_project.rewards.guard.patches import guarded_patch_reward
    from dagster_project.rewards.patch import oracle_edit

    before, after = BASES[task_name]
    completion = oracle_edit(before, after)
    base = run_candidate(task_name, before)
    guarded_patch_reward(task_name, before, completion, base=base)  # warm caches
    out: dict[str, Any] = {"guard": GUARD_VERSION, "guarded": [], "t_us": [], "unguarded": []}
    for _ in range(evaluations):
        t0 = time.monotonic()
        v = guarded_patch_reward(task_name, before, completion, base=base)
        out["guarded"].append(time.monotonic() - t0)
        out["t_us"].append(v.runtime.t_us if v.runtime else None)
        out["reward"] = v.reward
        if with_unguarded:
            out["unguarded"].append(unguarded(task_name, after))
    return out


def _run_tree(tree: Path, args: argparse.Namespace, with_unguarded: bool) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--inner", "--task", args.task]
    cmd += ["--evaluations", str(args.evaluations)] + (["--with-unguarded"] * with_unguarded)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: {proc.stderr[-2000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--task", default="rmsnorm_linear_np")
    p.add_argument("--reps", type=int, default=3, help="alternated rounds (this tree, other)")
    p.add_argument("--evaluations", type=int, default=2, help="timed evaluations per round")
    p.add_argument("--other", help="a tree holding another guard version's dagster_project")
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--with-unguarded", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.inner:
        print(json.dumps(inner(args.task, args.evaluations, args.with_unguarded)))
        return 0
    trees = {"this": ROOT} | ({"other": Path(args.other)} if args.other else {})
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
    for _ in range(args.reps):
        for name, tree in trees.items():
            runs[name].append(_run_tree(tree, args, with_unguarded=name == "this"))
    report: dict[str, Any] = {"task": args.task, "reps": args.reps, "evals": args.evaluations}
    for name, rs in runs.items():
        report[name] = {
            "guard": rs[0]["guard"],
            "guarded_s": statistics.median(s for r in rs for s in r["guarded"]),
            "t_us": statistics.median(t for r in rs for t in r["t_us"] if t),
            "reward": statistics.median(r["reward"] for r in rs),
        }
    ung = [u for r in runs["this"] for u in r["unguarded"]]
    report["unguarded_s"] = statistics.median(u["seconds"] for u in ung)
    report["unguarded_t_us"] = statistics.median(u["t_us"] for u in ung)
    report["unguarded_all_ok"] = all(u["ok"] for u in ung)
    report["ratio_vs_unguarded"] = report["this"]["guarded_s"] / report["unguarded_s"]
    if "other" in report:
        report["ratio_vs_other"] = report["this"]["guarded_s"] / report["other"]["guarded_s"]
        report["other_vs_unguarded"] = report["other"]["guarded_s"] / report["unguarded_s"]
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
