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

    nice -n 10 .venv/bin/python benchmarks/device/sim_nvcc_check.py run --jobs 2 \
        --log /tmp/nvcc.jsonl
    .venv/bin/python benchmarks/device/sim_nvcc_check.py collect --log /tmp/nvcc.jsonl
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

ROOT = Path(__file__).resolve().parents[2]
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
    "structure",
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
        f"{sum(r['agree'] for r in feat)}, "
        f"message matched on {sum(r['message_match'] for r in feat)}"
    )
    tri = [r for r in recs if r["impl"] == "triton"]
    print(f"Triton candidates parsed: {sum(r['actual_ok'] for r in tri)}/{len(tri)}")
    for r in cu:
        if not r["agree"]:
            print(
                "  DISAGREE", r["op"], r["variant"], r["arch"], r["inject"], r["stderr_head"][:160]
            )


# --------------------------------------------------------------------------------------
# authors' styles (issue 20): every clean CUDA case again, in each structure of
# ``styles`` and a random author's voice; compiled where there are cores (the device)
# --------------------------------------------------------------------------------------


def styles_prepare(out: Path, seed: int) -> None:
    """Render every clean CUDA (op, rung, arch) case of ``stratified_cases`` in every
    structure (1.6.0's included, now in an author's voice) to ``out`` with a manifest; the
    run needs only nvcc and the standard library."""
    import shutil

    from dagster_project.sim.codegen import render_candidate
    from dagster_project.sim.hardware import compile_command
    from dagster_project.sim.ops import get_op
    from dagster_project.sim.styles import structures, style_for_seed, with_structure
    from dagster_project.sim.variants import get_variant

    if out.exists():
        shutil.rmtree(out)
    (out / "src").mkdir(parents=True)
    man = []
    seen: set[str] = set()
    for c in stratified_cases(seed, impls=("cuda",)):
        if c.inject or not c.expected_ok:
            continue
        op = get_op(c.op)
        v = get_variant(op.family, c.impl, c.variant)
        for key in structures("cuda"):
            st = with_structure(style_for_seed(f"nvcc/{case_key(c)}/{key}"), key)
            code = render_candidate(
                op, c.gpu, c.dtype, c.shape, v, c.params, style=st, gate_structure=False
            )
            sha = hashlib.sha1(code.encode()).hexdigest()[:12]
            if sha in seen:
                continue
            seen.add(sha)
            rel = f"src/{len(man):05d}.cu"
            (out / rel).write_text(code)
            cmd = compile_command(c.arch).split()[1:]  # drop "nvcc"
            man.append(
                {
                    "file": rel,
                    "op": c.op,
                    "impl": "cuda",
                    "variant": c.variant,
                    "arch": c.arch,
                    "gpu": c.gpu,
                    "dtype": c.dtype,
                    "params": c.params,
                    "structure": key,
                    "author": st.author,
                    "flags": " ".join(["nvcc", *cmd, "-o", "candidate.o"])[5:],
                    "source_sha1": sha,
                }
            )
    # one build per (op, rung, arch, structure); structures that need evidence (not
    # 1.6.0's) on rungs verified on the H200 first, so a run cut short keeps those
    from dagster_project.sim.verification import rung_status

    uniq: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for m in man:
        uniq.setdefault((m["op"], m["variant"], m["arch"], m["structure"]), m)
    man = sorted(
        uniq.values(),
        key=lambda m: (
            m["structure"] == "reduce=xor",
            not rung_status(m["op"], "cuda", m["variant"], "sm_90a").verified,
            m["arch"] == "sm_90a",
            m["file"],
        ),
    )
    (out / "manifest.json").write_text(json.dumps(man))
    print(f"wrote {len(man)} styled CUDA sources to {out}")


def styles_run(src: Path, out: Path, jobs: int) -> None:
    """Compile the prepared sources with the prompt's flags (stdlib only; for the device)."""
    import os
    import shutil
    import time

    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    version = _nvcc_version(nvcc)
    man = json.loads((src / "manifest.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    lock = threading.Lock()
    log = out / "nvcc_styles.jsonl"

    def one(m: dict[str, Any]) -> None:
        d = Path(tempfile.mkdtemp(prefix="kh_cc_"))
        (d / "candidate.cu").write_text((src / m["file"]).read_text())
        args = [nvcc, *m["flags"].split()[:-2], "-o", "candidate.o"]
        try:
            p = subprocess.run(args, cwd=d, capture_output=True, text=True, timeout=300)
            ok, err = p.returncode == 0, (p.stderr or "")[:300]
        except subprocess.TimeoutExpired:
            ok, err = False, "timeout"
        shutil.rmtree(d, ignore_errors=True)
        with lock, log.open("a") as fh:
            fh.write(
                json.dumps({**m, "actual_ok": ok, "stderr_head": err, "toolchain": version}) + "\n"
            )

    with ThreadPoolExecutor(max_workers=jobs) as ex:
        list(ex.map(one, man))
    print(
        f"{len(man)} compiled in {time.time() - t0:.0f} s with {jobs} jobs ({version}); "
        f"cpus {os.cpu_count()}"
    )


def styles_collect(log: Path) -> None:
    """Append the styled builds to nvcc_compile.csv (replacing earlier styled rows)."""
    recs = [json.loads(ln) for ln in log.read_text().splitlines() if ln.strip()]
    with OUT_CSV.open(newline="") as fh:
        old = [r for r in csv.DictReader(fh) if not r.get("structure")]
    rows = [{k: r.get(k, "") for k in FIELDS} for r in old]
    for r in sorted(recs, key=lambda r: r["file"]):
        timeout = r["stderr_head"] == "timeout"
        rows.append(
            {
                **{k: "" for k in FIELDS},
                **{k: r[k] for k in ("op", "impl", "variant", "arch", "gpu", "dtype", "structure")},
                "params": json.dumps(r["params"], sort_keys=True),
                "inject": "",
                "checker": "nvcc",
                "flags": r["flags"],
                "expected_ok": True,
                "actual_ok": r["actual_ok"],
                "agree": r["actual_ok"] or timeout,
                "message_match": True,
                "stderr_head": r["stderr_head"].replace("\n", " | ")[:300],
                "source_sha1": r["source_sha1"],
                "toolchain": r["toolchain"],
                "generator_version": GENERATOR_VERSION,
            }
        )
    with OUT_CSV.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(FIELDS))
        w.writeheader()
        w.writerows(rows)
    cu = [r for r in recs if r["stderr_head"] != "timeout"]
    by: Counter[str] = Counter()
    ok: Counter[str] = Counter()
    for r in cu:
        for k in (f"arch {r['arch']}", f"structure {r['structure']}"):
            by[k] += 1
            ok[k] += bool(r["actual_ok"])
    print(
        f"styled CUDA builds: {sum(ok[k] for k in ok if k.startswith('arch'))}/{len(cu)} "
        f"compiled ({len(recs) - len(cu)} timeouts)"
    )
    for k in sorted(by):
        print(f"  {k:28s} {ok[k]:4d}/{by[k]:4d}")
    for r in cu:
        if not r["actual_ok"]:
            print(
                "  FAILED", r["op"], r["variant"], r["arch"], r["structure"], r["stderr_head"][:160]
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
    sp = sub.add_parser("styles-prepare")
    sp.add_argument("--out", type=Path, default=ROOT / ".verify" / "nvcc_styles")
    sp.add_argument("--seed", type=int, default=0)
    sr = sub.add_parser("styles-run")
    sr.add_argument("--src", type=Path, default=ROOT / ".verify" / "nvcc_styles")
    sr.add_argument("--out", type=Path, required=True)
    sr.add_argument("--jobs", type=int, default=16)
    sc = sub.add_parser("styles-collect")
    sc.add_argument("--log", type=Path, required=True)
    a = ap.parse_args()
    if a.cmd == "styles-prepare":
        styles_prepare(a.out, a.seed)
    elif a.cmd == "styles-run":
        styles_run(a.src, a.out, a.jobs)
    elif a.cmd == "styles-collect":
        styles_collect(a.log)
    elif a.cmd == "run":
        run(a.log, min(a.jobs, 2), a.seed)
    else:
        collect(a.log)


if __name__ == "__main__":
    main()
