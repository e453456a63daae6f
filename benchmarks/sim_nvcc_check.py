"""Compile every simulator rung with the real nvcc (and parse every Triton rung) here.

Runs ``compile_check.stratified_cases`` — every (op, rung, arch family) class once (twice
where an ``mma`` choice exists), plus injected-slip, over-cap and planted-bug strata — with
the exact flags the prompt states (``nvcc -O3 -std=c++17 -arch=<sm_80|sm_86|sm_90a|sm_120a>
-c``), niced, at most 2 compiles at a time (the reference machine has 2 cores). Each
record is appended to a JSONL file as it finishes, so an interrupted run resumes where it
stopped. ``collect`` writes the committed table
``dagster_project/sim/data/verification/nvcc_compile.csv`` (one row per case, with the
nvcc version and the generator version it was measured under) and prints the agreement
of nvcc with the simulator's compile verdicts per stratum and arch family::

    nice -n 10 .venv/bin/python benchmarks/sim_nvcc_check.py run --jobs 2 --log /tmp/nvcc.jsonl
    .venv/bin/python benchmarks/sim_nvcc_check.py collect --log /tmp/nvcc.jsonl
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dagster_project.sim import GENERATOR_VERSION  # noqa: E402
from dagster_project.sim.compile_check import (  # noqa: E402
    CompileCase,
    nvcc_path,
    render_case,
    run_case,
    stratified_cases,
)

OUT_CSV = ROOT / "dagster_project" / "sim" / "data" / "verification" / "nvcc_compile.csv"
FIELDS = (
    "op",
    "impl",
    "variant",
    "arch",
    "gpu",
    "dtype",
    "params",
    "inject",
    "checker",
    "flags",
    "expected_ok",
    "actual_ok",
    "agree",
    "message_match",
    "stderr_head",
    "source_sha1",
    "toolchain",
    "generator_version",
)


def case_key(c: CompileCase) -> str:
    """A stable id of a case (op, impl, rung, arch, inject, params)."""
    return json.dumps(
        [c.op, c.impl, c.variant, c.arch, c.inject or "", sorted(c.params.items())], default=str
    )


def _nvcc_version(nvcc: str | None) -> str:
    if nvcc is None:
        return ""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1] if out.strip() else ""


def run(log: Path, jobs: int, seed: int) -> None:
    cases = stratified_cases(seed, impls=("cuda", "triton"))
    done: set[str] = set()
    if log.exists():
        done = {json.loads(ln)["key"] for ln in log.read_text().splitlines() if ln.strip()}
    # every clean (op, rung, arch) class first, interleaved so that a run cut short still
    # covers every arch family and op evenly; then the injected strata; Triton (ast) last
    rng = random.Random(seed)
    clean = [c for c in cases if c.impl == "cuda" and not c.inject]
    rng.shuffle(clean)
    # sm_90a builds are also made on the H200 by sim_verify_rungs: the other families,
    # whose only evidence this is, go first
    # and among those the rungs whose Hopper render is verified on the H200 (an nvcc build
    # is the last piece of their evidence on the other families)
    from dagster_project.sim.verification import rung_status

    clean.sort(
        key=lambda c: (
            c.arch == "sm_90a",
            not rung_status(c.op, c.impl, c.variant, "sm_90a").verified,
        )
    )
    injected = [c for c in cases if c.impl == "cuda" and c.inject]
    rng.shuffle(injected)
    # injected strata early enough that the agreement sample holds them: one in four
    ordered: list[CompileCase] = []
    while clean or injected:
        ordered.extend(clean[:3])
        del clean[:3]
        if injected:
            ordered.append(injected.pop())
    ordered += [c for c in cases if c.impl == "triton"]
    todo = [c for c in ordered if case_key(c) not in done]
    nvcc = nvcc_path()
    version = _nvcc_version(nvcc)
    print(f"{len(cases)} cases, {len(done)} already in {log}, {len(todo)} to run; {version}")
    lock = threading.Lock()
    work = Path(tempfile.mkdtemp(prefix="sim_nvcc_"))

    def one(c: CompileCase) -> None:
        code, _ = render_case(c)
        rec = run_case(c, work, nvcc)
        rec.update(
            key=case_key(c),
            source_sha1=hashlib.sha1(code.encode()).hexdigest()[:12],
            toolchain=version if c.impl == "cuda" else "python ast",
            flags=rec.get("nvcc_cmd", "ast.parse"),
        )
        with lock, log.open("a") as fh:
            fh.write(json.dumps(rec, default=str) + "\n")

    with ThreadPoolExecutor(max_workers=jobs) as ex:
        list(ex.map(one, todo))
    print("done")


def collect(logs: list[Path]) -> None:
    by_key: dict[str, dict[str, Any]] = {}
    for log in logs:  # a later log's record of a case replaces an earlier one
        for ln in log.read_text().splitlines():
            if ln.strip():
                r = json.loads(ln)
                by_key[r["key"]] = r
    recs = list(by_key.values())
    OUT_CSV.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for r in sorted(recs, key=lambda r: r["key"]):
        row: dict[str, Any] = {k: r.get(k, "") for k in FIELDS}
        row["params"] = json.dumps(r["params"], sort_keys=True)
        row["stderr_head"] = (r.get("stderr_head") or "").replace("\n", " | ")[:300]
        row["generator_version"] = GENERATOR_VERSION
        rows.append(row)
    with OUT_CSV.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(FIELDS))
        w.writeheader()
        w.writerows(rows)
    timeouts = [r for r in recs if r["impl"] == "cuda" and r.get("stderr_head") == "timeout"]
    # an nvcc that ran out of time (240 s on a loaded 2-core machine) decided nothing
    cu = [r for r in recs if r["impl"] == "cuda" and r.get("stderr_head") != "timeout"]
    print(f"wrote {len(rows)} rows to {OUT_CSV.relative_to(ROOT)}")
    print(f"nvcc timeouts (not counted either way): {len(timeouts)}")
    print(f"CUDA cases compiled by nvcc: {len(cu)}; agree {sum(r['agree'] for r in cu)}")
    by: Counter[str] = Counter()
    agree: Counter[str] = Counter()
    for r in cu:
        for k in (f"arch {r['arch']}", f"stratum {(r['inject'] or 'clean').split(':')[0]}"):
            by[k] += 1
            agree[k] += bool(r["agree"])
    for k in sorted(by):
        print(f"  {k:22s} {agree[k]:4d}/{by[k]:4d}")
    feat = [r for r in cu if not r["expected_ok"] and not r["inject"]]
    print(
        f"  arch-feature / cap errors expected: {len(feat)}, nvcc agreed on "
        f"{sum(r['agree'] for r in feat)}, message matched on {sum(r['message_match'] for r in feat)}"
    )
    tri = [r for r in recs if r["impl"] == "triton"]
    print(f"Triton candidates parsed: {sum(r['actual_ok'] for r in tri)}/{len(tri)}")
    for r in cu:
        if not r["agree"]:
            print(
                "  DISAGREE", r["op"], r["variant"], r["arch"], r["inject"], r["stderr_head"][:160]
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--log", type=Path, required=True)
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("collect")
    c.add_argument("--log", type=Path, action="append", required=True, help="repeatable")
    a = ap.parse_args()
    if a.cmd == "run":
        run(a.log, min(a.jobs, 2), a.seed)
    else:
        collect(a.log)


if __name__ == "__main__":
    main()
