"""The child process of ``commit_exec.sandbox.run_candidate``: one candidate file against
the row's ``before`` file, through the row's harness spec.

``python -m dagster_project.commit_exec.device.candidate JOB.json FD`` with the parent's
token on stdin (read before any candidate code is imported). The job
names the row (repo, sha, path, id), the two files and how many fresh random shapes to
check. Every random shape is drawn here, from ``os.urandom``, after the candidate is
imported, so nothing in the candidate can know it. The candidate's outputs (and mutated
inputs) are compared with ``before``'s on each shape, then the two are timed by CUDA-graph
replay, interleaved, on those shapes. Writes one JSON object: ``status`` (``ok``,
``import_error``, ``run_error``, ``wrong_output``, ``no_spec``), ``speedup`` with its
interval (``stats.scope_interval``) and ``significant``, per-shape details with their samples
(a later rule can recompute the interval); the outputs of the timed calls themselves are
compared too (``runner._timed_outputs``), as one line ``{"token", "result"}`` on the
inherited pipe ``FD``; then the process ends at once (``os._exit``), so no exit handler or
thread a candidate left behind runs after the verdict. Imports only stdlib/torch/triton.
"""

from __future__ import annotations

import json
import os
import random
import sys
import traceback
from pathlib import Path
from typing import Any

from ..specs import shape_label, spec_for
from . import stats
from .loader import load_file, package_of
from .runner import check_shape, time_shape


def _time(
    spec: Any, sides: dict[str, Any], shapes: list[Any], out: dict[str, Any], device: Any
) -> bool:
    """Time every shape into ``out`` (per shape and scope the speedup and samples; the overall
    interval in the label's scope, ``stats.label_scope``); True when a timed call's output
    was wrong in either scope (the shape's ``why`` says so)."""
    timed: dict[str, list[dict[str, Any]]] = {scope: [] for scope in stats.SCOPES}
    for shape, entry in zip(shapes, out["shapes"][: len(shapes)], strict=True):
        both = time_shape(spec, sides["before"], sides["after"], shape, device)
        for scope in stats.SCOPES:
            t = both[scope]
            entry[f"{scope}_speedup"] = t.get("speedup")
            if "error" in t:
                entry[f"{scope}_error"] = t["error"]
            if t.get("timed_outputs_ok") is False:  # right when checked, wrong when timed
                entry["why"] = f"timed call ({scope}): {t.get('timed_outputs_why')}"
                return True
            if "samples_before" in t:
                timed[scope].append(t)
                entry[scope] = {k: t[k] for k in ("block_size", "samples_before", "samples_after")}
        entry["speedup"] = entry["graph_speedup"]
    # graph replay where it captured, else host wall time: the scope of the row's label, so
    # a launcher that cannot be captured (stop 42: 4 of 25 rows) still gets its speedup
    read = stats.label_scope({s: bool(ts) for s, ts in timed.items()})
    if read is not None:
        speedup, lo, hi = stats.scope_interval(timed[read], seed=1)
        out.update(
            scope=read, speedup=speedup, ci_lo=lo, ci_hi=hi, significant=stats.significant(lo, hi)
        )
    return False


def evaluate(job: dict[str, Any]) -> dict[str, Any]:
    """Run the job (see the module docstring); never raises."""
    spec = spec_for(job["repo"], job["sha"], job["path"])
    if spec is None:
        return {"status": "no_spec"}
    import torch

    package = package_of(job["path"])
    try:
        before = load_file(Path(job["before"]), f"_cand_before_{job['id']}", package)
        cand = load_file(Path(job["candidate"]), f"_cand_{job['id']}", package)
    except Exception as exc:  # noqa: BLE001 - a candidate that does not import is a result
        return {"status": "import_error", "error": f"{type(exc).__name__}: {exc}"[:400]}
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    # Checked: the spec's named shapes and fresh random ones no candidate can know. Timed:
    # the named shapes only, those the row's label is read over (stats.LABEL_ROLES), so the
    # reward and the shipped label measure the same thing; a random shape's speedup moves
    # with the draw (one commit's per-shape speedups span 0.5-3.8x), and pooled with the
    # named ones it decided whether some rows' gains were significant at all (stop 42).
    # (On the CPU, the interpreter's debug runs, nothing is timed: random shapes only.)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    named = list(spec.shapes) if job.get("named_shapes", device.type == "cuda") else []
    shapes = named + [spec.random_shape(rng) for _ in range(int(job.get("random_shapes", 2)))]
    sides = {
        "before": lambda x: spec.call(before, x, job["sha"]),
        "after": lambda x: spec.call(cand, x, job["sha"]),
    }
    out: dict[str, Any] = {"shapes": []}
    try:
        for shape in shapes:
            check = check_shape(spec, sides, shape, device)
            entry = {
                "shape": shape_label(shape),
                "equivalent": check["equivalent"],
                "why": check["after_vs_before"]["why"],
            }
            out["shapes"].append(entry)
            if not check["equivalent"]:
                return {**out, "status": "wrong_output"}
        if job.get("time", True) and device.type == "cuda":
            wrong = _time(spec, sides, named, out, device)
            if wrong:
                return {**out, "status": "wrong_output"}
    except Exception as exc:  # noqa: BLE001
        return {
            **out,
            "status": "run_error",
            "error": f"{type(exc).__name__}: {exc}"[:400],
            "traceback": traceback.format_exc()[-800:],
        }
    return {**out, "status": "ok"}


def main(argv: list[str]) -> int:
    token = sys.stdin.readline().strip()
    job = json.loads(Path(argv[0]).read_text())
    verdict = evaluate(job)
    message = (json.dumps({"token": token, "result": verdict}) + "\n").encode()
    fd = int(argv[1])
    while message:
        message = message[os.write(fd, message) :]
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
