"""Compile-identity evidence for the simulator's structural rewrites (issue 39, 39d).

``dagster_project/sim/rewrites.py`` lets an author write a statement another way only where
the rewritten kernel is the same program to the compiler. This script gathers that evidence
and writes ``dagster_project/sim/data/verification/rewrite_identity.csv``:

* CUDA: per (op, rung, arch) a kernel of the default task pool (its shape, dtype, author and a
  launch parameter set drawn from the rung's pool) is rendered canonically and with every
  CUDA rewrite applied; both are compiled by this machine's nvcc with the prompt's flags
  (``-O3 -std=c++17`` and the arch flag the prompt names) to PTX, and the PTX, with comment
  and debug-location lines dropped, must be identical. ``--tier`` adds the exact kernels of
  the measured tier (``data/measured/h100_tier.csv``): each session's baseline and best with
  its own author's axes, against the canonical text whose H100 answer it will reach;
* Triton: per (op, rung) several renders, canonical vs every Triton rewrite, must give the same
  ``rewrites.frontend_form`` (the program Triton's front end builds); ``--probe PYTHON`` also
  compiles probe kernels in each rewritten form with Triton (``PYTHON`` must import triton
  3.6, e.g. /tmp/venv-exec/bin/python) and prints whether their PTX matches.

    .venv/bin/python benchmarks/sim_rewrite_evidence.py --impl triton
    .venv/bin/python benchmarks/sim_rewrite_evidence.py --impl cuda --arch sm_90a --tier --jobs 3
    .venv/bin/python benchmarks/sim_rewrite_evidence.py --probe /tmp/venv-exec/bin/python
    .venv/bin/python benchmarks/sim_rewrite_evidence.py --triton-ptx /tmp/venv-exec/bin/python
    # on a machine with more cores (SASS, every arch): prepare here, compare there, collect
    .venv/bin/python benchmarks/sim_rewrite_evidence.py --arch sm_90a --arch sm_86 --arch sm_80 \
        --arch sm_120 --tier --per-key 3 --prepare .rewrites
    bash benchmarks/device/sim_structure_sass.sh .rewrites $OUT   # (device) -> $OUT/sass.csv
    .venv/bin/python benchmarks/sim_rewrite_evidence.py --collect .rewrites OUT/sass.csv

Rows are appended (a key already in the file for this ``REWRITES_VERSION`` is skipped), so
runs can be split by arch and resumed. Each row lists the axes compiled together
(``rewrites.allowed_axes`` reads them); since 1.1.0 a pool case tries up to four kernels of its
key until the canonical one builds (one kernel left 103 keys without evidence in 1.0.0).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dagster_project.sim import rewrites  # noqa: E402
from dagster_project.sim.codegen import render_candidate  # noqa: E402
from dagster_project.sim.hardware import get_gpu, nvcc_arch_flag  # noqa: E402
from dagster_project.sim.kernelinfer import build_tasks, simulate_session  # noqa: E402
from dagster_project.sim.ops import get_op  # noqa: E402
from dagster_project.sim.styles import style_for_task  # noqa: E402
from dagster_project.sim.variants import (  # noqa: E402
    default_params,
    features_used,
    get_variant,
    iter_params,
    ladder,
)  # noqa: E402

FIELDS = (
    "impl", "op", "variant", "arch", "gpu", "dtype", "shape", "params", "axes", "case",
    "canonical_sha", "variant_sha", "stage", "identical", "toolchain", "rewrites_version",
)  # fmt: skip

_PTX_DROP = re.compile(r"^\s*(//|\.loc\b|\.file\b)")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


#: internal-linkage and anonymous-namespace names carry a hash of the translation unit
#: (``_INTERNAL_<8 hex>_``, ``_GLOBAL__N__<8 hex>_``): names, not code (libcu++ emits such
#: globals)
_INTERNAL = re.compile(r"(_INTERNAL_|_GLOBAL__N__)[0-9a-f]{8}_")


def ptx_norm(ptx: str) -> str:
    """PTX without comments, debug locations and blank lines (what ptxas compiles), the
    per-file hash of internal names normalised."""
    out = []
    for ln in ptx.split("\n"):
        if not ln.strip() or _PTX_DROP.match(ln):
            continue
        out.append(_INTERNAL.sub(r"\1", ln.split("//")[0].rstrip()))
    return "\n".join(out)


def nvcc_version() -> str:
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release [\d.]+, (V[\d.]+)", out)
    return f"nvcc {m.group(1) if m else '?'}"


def nvcc_ptx(code: str, flag: str) -> str:
    """PTX of ``code`` under the prompt's flags ('' when nvcc refuses it)."""
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "candidate.cu"
        src.write_text(code)
        r = subprocess.run(
            ["nvcc", "-O3", "-std=c++17", f"-arch={flag}", "-ptx", str(src), "-o", f"{d}/k.ptx"],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            return ""
        return ptx_norm((Path(d) / "k.ptx").read_text())


def _existing(path: Path) -> set[tuple[str, ...]]:
    if not path.exists():
        return set()
    with path.open(newline="") as fh:
        return {
            (r["impl"], r["op"], r["variant"], r["arch"], r["case"])
            for r in csv.DictReader(fh)
            if r["rewrites_version"] == rewrites.REWRITES_VERSION
        }


def _pool_cases(impl: str, archs: set[str], per_key: int) -> list[dict[str, Any]]:
    """Per (op, rung, arch): ``per_key`` kernels of the default task pool's tasks."""
    tasks, _ = build_tasks()
    rng = random.Random(39)
    by_key: dict[tuple[str, str], list[Any]] = {}
    for t in tasks:
        if t.impl == impl and get_gpu(t.gpu).arch in archs:
            by_key.setdefault((t.op, get_gpu(t.gpu).arch), []).append(t)
    cases = []
    for (op_name, _arch), ts in sorted(by_key.items()):
        op = get_op(op_name)
        for v in ladder(op.family, impl):
            for k in range(per_key):
                alts = []  # 1.1.0: other kernels of the key, tried where the first does not build
                for _ in range(4):
                    t = rng.choice(ts)
                    ps = iter_params(get_variant(op.family, impl, v.tag), op, t.dtype)
                    if ps:
                        alts.append((t, dict(rng.choice(ps))))
                if not alts:
                    continue
                t, params = alts[0]
                cases.append(
                    {"task": t, "variant": v, "params": params, "case": f"pool{k}", "alts": alts}
                )
    return cases


def _render_pair(c: dict[str, Any], axes: tuple[str, ...]) -> tuple[str, str]:
    t, v = c["task"], c["variant"]
    canon = render_candidate(t.op, t.gpu, t.dtype, t.shape, v, c["params"], rewrite_axes=())
    return canon, rewrites.rewrite(canon, v.impl, axes)


def _row(c: dict[str, Any], axes: tuple[str, ...], canon: str, var: str) -> dict[str, Any]:
    t, v = c["task"], c["variant"]
    return {
        "impl": v.impl,
        "op": t.op,
        "variant": v.tag,
        "arch": get_gpu(t.gpu).arch if v.impl == "cuda" else "*",
        "gpu": t.gpu,
        "dtype": t.dtype,
        "shape": json.dumps(t.shape, separators=(",", ":")),
        "params": json.dumps(c["params"], separators=(",", ":"), default=str),
        "axes": "+".join(axes),
        "case": c["case"],
        "canonical_sha": _sha(canon)[:16],
        "variant_sha": _sha(var)[:16],
    }


def run_cuda(cases: list[dict[str, Any]], out: Path, jobs: int, deadline: float) -> None:
    tool = nvcc_version()
    done = _existing(out)

    def one(c: dict[str, Any]) -> dict[str, Any] | None:
        for task, params in c.get("alts") or [(c["task"], c["params"])]:
            r = _one({**c, "task": task, "params": params})
            if r is not None:
                return r if r else None
        return None

    def _one(c: dict[str, Any]) -> dict[str, Any] | None:
        """A row; ``{}``: nothing to show or already done (no other kernel is tried);
        None: the canonical render does not build here (the next kernel is tried)."""
        if time.time() > deadline:
            return {}
        axes = c.get("axes") or rewrites.CUDA_AXES
        canon, var = c.get("texts") or _render_pair(c, axes)
        row = _row(c, axes, canon, var)
        if (row["impl"], row["op"], row["variant"], row["arch"], row["case"]) in done:
            return {}
        if canon == var:
            return {}  # no site for any axis: nothing to show
        t, v = c["task"], c["variant"]
        op = get_op(t.op)
        flag = nvcc_arch_flag(get_gpu(t.gpu).arch, features_used(v, op, t.dtype, c["params"]))
        a, b = nvcc_ptx(canon, flag), nvcc_ptx(var, flag)
        if not a:
            return None  # the canonical render does not build here: no evidence either way
        return {
            **row,
            "stage": f"ptx -arch={flag}",
            "identical": int(a == b),
            "toolchain": tool,
            "rewrites_version": rewrites.REWRITES_VERSION,
        }

    _write(out, cases, one, jobs)


def _write(out: Path, cases: list[dict[str, Any]], one: Any, jobs: int) -> None:
    new = not out.exists()
    n = same = 0
    with out.open("a", newline="") as fh, ThreadPoolExecutor(jobs) as ex:
        w = csv.DictWriter(fh, FIELDS)
        if new:
            w.writeheader()
        for r in ex.map(one, cases):
            if r is None:
                continue
            w.writerow(r)
            fh.flush()
            n += 1
            same += int(r["identical"])
            if r["identical"] != 1:
                print(f"  DIFFERENT: {r['op']} {r['variant']} {r['arch']} {r['axes']}", flush=True)
    print(f"{n} cases written, {same} identical")


def triton_rows(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for c in cases:
        canon, var = _render_pair(c, rewrites.TRITON_AXES)
        if canon == var:
            continue
        rows.append(
            {
                **_row(c, rewrites.TRITON_AXES, canon, var),
                "stage": "triton frontend ast (3.6 AugAssign, keyword binding)",
                "identical": int(rewrites.frontend_form(canon) == rewrites.frontend_form(var)),
                "toolchain": "python ast",
                "rewrites_version": rewrites.REWRITES_VERSION,
            }
        )
    return rows


#: Probe kernels for ``--probe``: each written canonically, the rewritten form is made by
#: ``rewrites.rewrite_triton`` (the renderer's own function), both compiled by Triton.
PROBE_KERNELS = """
import triton
import triton.language as tl


@triton.jit
def probe_rows(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    stat = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
        stat += tl.sum(x * x, axis=0)
    rstd = 1.0 / tl.sqrt(stat / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * n_cols + offs, (x * rstd * w).to(tl.float16), mask=offs < n_cols)


@triton.jit
def probe_tile(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    m_max = tl.full((BM,), float("-inf"), tl.float32)
    for k in range(0, K, BK):
        ks = k + tl.arange(0, BK)
        a_mask = (rm[:, None] < M) & (ks[None, :] < K)
        b_mask = (ks[:, None] < K) & (rn[None, :] < N)
        a = tl.load(a_ptr + rm[:, None] * K + ks[None, :], mask=a_mask, other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + rn[None, :], mask=b_mask, other=0.0)
        acc += tl.dot(a, b)
        m_max = tl.maximum(m_max, tl.max(a.to(tl.float32), axis=1))
    acc *= 0.5
    acc -= m_max[:, None]
    c_mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=c_mask)
"""

PROBE_DRIVER = """
import importlib.util, json, os, sys
os.environ["TRITON_DISABLE_LINE_INFO"] = "1"
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

def ptx(fn, sig, const):
    src = ASTSource(fn, sig, const)
    asm = triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    keep = []
    for ln in asm.split("\\n"):
        s = ln.strip()
        if s and not s.startswith(("//", ".loc", ".file")):
            keep.append(ln.split("//")[0].rstrip())
    return "\\n".join(keep)

a, b = load(sys.argv[1], "canon"), load(sys.argv[2], "variant")
rows = {"x_ptr": "*fp16", "w_ptr": "*fp16", "out_ptr": "*fp16", "n_cols": "i32", "eps": "fp32",
        "BLOCK": "constexpr"}
tile = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
        "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
out = {"triton": triton.__version__}
for name, sig, const in (
    ("probe_rows", rows, {"BLOCK": 1024}),
    ("probe_tile", tile, {"BM": 64, "BN": 64, "BK": 32}),
):
    out[name] = ptx(getattr(a, name), sig, const) == ptx(getattr(b, name), sig, const)
print(json.dumps(out))
"""


def run_probe(python: str) -> dict[str, Any]:
    """Compile the probe kernels canonically and with every Triton rewrite (``python`` must
    import Triton); whether each pair's PTX (sm_90, no line info) is identical."""
    variant = rewrites.rewrite_triton(PROBE_KERNELS, rewrites.TRITON_AXES)
    assert variant != PROBE_KERNELS
    with tempfile.TemporaryDirectory() as d:
        for name, text in (
            ("canon.py", PROBE_KERNELS),
            ("variant.py", variant),
            ("drv.py", PROBE_DRIVER),
        ):
            (Path(d) / name).write_text(text)
        r = subprocess.run(
            [python, f"{d}/drv.py", f"{d}/canon.py", f"{d}/variant.py"],
            capture_output=True,
            text=True,
        )
    if r.returncode != 0:
        raise SystemExit(r.stderr[-2000:])
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def _ptx_cases(tmp: Path, out: Path) -> dict[str, list[tuple[str, dict[str, str], str, str]]]:
    """The Triton front-end rows of case ``pool0`` (one render per rung), rendered again and
    written for ``sim_rewrite_triton_ptx.py``, by op."""
    by_op: dict[str, list[tuple[str, dict[str, str], str, str]]] = {}
    with out.open(newline="") as fh:
        rows = [
            r
            for r in csv.DictReader(fh)
            if r["impl"] == "triton"
            and r["case"] == "pool0"
            and r["rewrites_version"] == rewrites.REWRITES_VERSION
        ]
    for i, r in enumerate(rows):
        op = get_op(r["op"])
        v = get_variant(op.family, "triton", r["variant"])
        shape = json.loads(r["shape"])
        params = json.loads(r["params"])
        canon = render_candidate(op, r["gpu"], r["dtype"], shape, v, params, rewrite_axes=())
        if _sha(canon)[:16] != r["canonical_sha"]:
            continue  # not the text the row checked
        var = rewrites.rewrite(canon, "triton", tuple(r["axes"].split("+")))
        d = tmp / r["op"] / f"{i:05d}"
        d.mkdir(parents=True)
        (d / "canon.py").write_text(canon)
        (d / "variant.py").write_text(var)
        sig = op.signature_for(r["dtype"])
        meta = {"op": r["op"], "variant": r["variant"], "sig": sig, "shape": shape}
        (d / "meta.json").write_text(json.dumps(meta))
        by_op.setdefault(r["op"], []).append((f"{i:05d}", r, canon, var))
    return by_op


def _ptx_verdicts(python: str, folder: Path, per_op_s: float) -> dict[str, str]:
    """Case id -> verdict from one driver process (what it printed before a timeout too)."""
    driver = str(Path(__file__).with_name("sim_rewrite_triton_ptx.py"))
    try:
        cmd = [python, driver, str(folder)]
        lines = subprocess.run(cmd, capture_output=True, text=True, timeout=per_op_s).stdout
    except subprocess.TimeoutExpired as ex:
        lines = ex.stdout.decode() if isinstance(ex.stdout, bytes) else ex.stdout or ""
    recs = [json.loads(ln) for ln in lines.splitlines() if ln.startswith("{")]
    return {r["id"]: r["verdict"] for r in recs}


def run_triton_ptx(python: str, out: Path, per_op_s: float) -> None:
    """Compile the ``pool0`` render of every Triton rung, canonical and rewritten, to PTX with
    the Triton of ``python`` (``sim_rewrite_triton_ptx.py``: meta-tensor launches, sm_90), one
    process per op under ``per_op_s`` seconds; append a row (case ``ptx0``) per case that
    compiled, identical or not."""
    cmd = [python, "-c", "import triton; print(triton.__version__)"]
    tool = subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    rows, tally = [], {"same": 0, "different": 0, "harness": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for op, items in sorted(_ptx_cases(Path(tmp), out).items()):
            got = _ptx_verdicts(python, Path(tmp) / op, per_op_s)
            for cid, r, _canon, _var in items:
                verdict = got.get(cid, "harness")
                tally[verdict] += 1
                print(f"  {op} {r['variant']}: {verdict}", flush=True)
                if verdict != "harness":
                    rows.append(
                        {
                            **r,
                            "case": "ptx0",
                            "stage": "triton ptx sm_90 (cpu compile, meta-tensor launch)",
                            "identical": int(verdict == "same"),
                            "toolchain": f"triton {tool}",
                            "rewrites_version": rewrites.REWRITES_VERSION,
                        }
                    )
    done = _existing(out)
    with out.open("a", newline="") as fh:
        w = csv.DictWriter(fh, FIELDS)
        for row in rows:
            if (row["impl"], row["op"], row["variant"], row["arch"], row["case"]) not in done:
                w.writerow(row)
    print(f"triton ptx: {tally}")


def tier_cases(archs: set[str]) -> list[dict[str, Any]]:
    """The measured tier's baseline and best kernels, each with its author's axes."""
    from dagster_project.sim.measured import tier_path

    with tier_path("h100").open(newline="") as fh:
        tier = list(csv.DictReader(fh))
    tasks = {t.session_id: t for t in build_tasks()[0]}
    cases = []
    for row in tier:
        t = tasks.get(row["session_id"])
        if t is None or t.impl != "cuda" or get_gpu(t.gpu).arch not in archs:
            continue
        s = simulate_session(t)
        op = get_op(t.op)
        for step in sorted({0, int(s["best"]["step"])}):
            tr = s["trace"][step]
            v = get_variant(op.family, t.impl, tr["tag"])
            params = tr["params"] or dict(default_params(v, op, t.dtype, t.shape, get_gpu(t.gpu)))
            # the text the answer measured (the session may already write its variant)
            canon = rewrites.canonical(s["messages"][2 + 2 * step]["content"])
            st = style_for_task(t.op, t.gpu, t.dtype, t.shape)
            axes = rewrites.author_axes(repr(st), t.impl)
            cases.append(
                {
                    "task": t,
                    "variant": v,
                    "params": params,
                    "case": f"tier:{row['session_id'][-8:]}@{step}",
                    "axes": axes,
                    "texts": (canon, rewrites.rewrite(canon, t.impl, axes)),
                }
            )
    return cases


def _key(c: dict[str, Any]) -> tuple[str, str, str]:
    return (c["task"].op, c["variant"].tag, get_gpu(c["task"].gpu).arch)


def _ordered(
    tier: list[dict[str, Any]], archs: list[str], per_key: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(first, later): one tier kernel per key, then each arch's pool cases (archs in the
    order given) for keys the tier does not cover, ops with more sessions first; the other
    tier kernels come later (their keys already have a case)."""
    first: list[dict[str, Any]] = []
    later: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    for c in tier:
        (later if _key(c) in seen else first).append(c)
        seen.add(_key(c))
    tasks, _ = build_tasks()
    weight: dict[tuple[str, str], int] = {}
    for t in tasks:
        k = (t.op, get_gpu(t.gpu).arch)
        weight[k] = weight.get(k, 0) + 1
    for arch in archs or ["sm_90a"]:
        pool = [c for c in _pool_cases("cuda", {arch}, per_key) if _key(c) not in seen]
        pool.sort(key=lambda c: -weight.get((c["task"].op, arch), 0))
        first += pool
    return first, later


def prepare(cases: list[dict[str, Any]], out: Path) -> None:
    """Write each CUDA case (canonical and rewritten source, the prompt's arch flag) for
    ``benchmarks/device/sim_structure_sass.sh``, which compares their SASS on a machine with
    more cores; ``--collect`` reads its answers back."""
    manifest = []
    for i, c in enumerate(cases):
        axes = c.get("axes") or rewrites.CUDA_AXES
        canon, var = c.get("texts") or _render_pair(c, axes)
        if canon == var:
            continue
        t, v = c["task"], c["variant"]
        flag = nvcc_arch_flag(
            get_gpu(t.gpu).arch, features_used(v, get_op(t.op), t.dtype, c["params"])
        )
        d = out / "cases" / f"{i:05d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "canon.cu").write_text(canon)
        (d / "variant.cu").write_text(var)
        (d / "flag").write_text(flag)
        manifest.append({"id": f"{i:05d}", "flag": flag, **_row(c, axes, canon, var)})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=0))
    print(f"{len(manifest)} cases under {out}")


def collect(prepared: Path, answers: Path, out: Path) -> None:
    """Append the device's SASS verdicts (``id,identical,nvcc`` lines) as evidence rows."""
    manifest = {m["id"]: m for m in json.loads((prepared / "manifest.json").read_text())}
    done = _existing(out)
    new = not out.exists()
    n = 0
    with out.open("a", newline="") as fh:
        w = csv.DictWriter(fh, FIELDS)
        if new:
            w.writeheader()
        for line in answers.read_text().splitlines():
            cid, identical, tool = (line.split(",", 2) + ["", ""])[:3]
            m = manifest.get(cid)
            if m is None or identical not in ("0", "1"):
                continue  # the canonical source did not build there: no evidence either way
            row = {k: m[k] for k in FIELDS if k in m}
            if (row["impl"], row["op"], row["variant"], row["arch"], row["case"]) in done:
                continue
            row.update(
                stage=f"sass -arch={m['flag']}",
                identical=identical,
                toolchain=tool,
                rewrites_version=rewrites.REWRITES_VERSION,
            )
            w.writerow(row)
            n += 1
    print(f"{n} rows appended to {out}")


def recheck(out: Path, jobs: int) -> None:
    """Compile again every CUDA row marked different (after a change of the comparison, such
    as name normalisation) and rewrite its verdict."""
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    tasks = {}
    for t in build_tasks()[0]:
        tasks.setdefault((t.op, t.gpu, t.dtype, json.dumps(t.shape, separators=(",", ":"))), t)

    def one(r: dict[str, str]) -> None:
        if r["impl"] != "cuda" or r["identical"] != "0":
            return
        op = get_op(r["op"])
        v = get_variant(op.family, "cuda", r["variant"])
        canon = render_candidate(
            op, r["gpu"], r["dtype"], json.loads(r["shape"]), v, json.loads(r["params"]),
            rewrite_axes=(),
        )  # fmt: skip
        if _sha(canon)[:16] != r["canonical_sha"]:
            return  # not the text the row compiled: leave it
        var = rewrites.rewrite(canon, "cuda", tuple(r["axes"].split("+")))
        flag = r["stage"].split("-arch=")[-1]
        a, b = nvcc_ptx(canon, flag), nvcc_ptx(var, flag)
        if a:
            r["identical"] = str(int(a == b))
            print(f"  {r['op']} {r['variant']} {r['arch']} {r['case']}: {r['identical']}")
        else:
            print(f"  {r['op']} {r['variant']} {r['arch']} {r['case']}: canonical does not build")

    with ThreadPoolExecutor(jobs) as ex:
        list(ex.map(one, rows))
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, FIELDS)
        w.writeheader()
        w.writerows(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=("cuda", "triton"), default="cuda")
    ap.add_argument("--arch", action="append", default=[], help="CUDA archs (default sm_90a)")
    ap.add_argument("--per-key", type=int, default=1, help="kernels per (op, rung, arch)")
    ap.add_argument("--tier", action="store_true", help="add the measured tier's kernels")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--budget", type=float, default=3000, help="seconds")
    ap.add_argument("--out", default=str(rewrites.evidence_path()))
    ap.add_argument("--probe", default="", help="a Python with Triton: compile the probes")
    ap.add_argument("--triton-ptx", default="", help="a Python with torch + Triton: real renders")
    ap.add_argument("--per-op-s", type=float, default=240, help="--triton-ptx: seconds per op")
    ap.add_argument("--prepare", default="", help="write the CUDA cases here for the device")
    ap.add_argument("--recheck", action="store_true", help="compile the rows marked 0 again")
    ap.add_argument("--collect", nargs=2, default=[], help="PREPARED_DIR DEVICE_ANSWERS")
    args = ap.parse_args()
    if args.probe:
        print(json.dumps(run_probe(args.probe)))
        return
    out = Path(args.out)
    if args.triton_ptx:
        run_triton_ptx(args.triton_ptx, out, args.per_op_s)
        return
    if args.recheck:
        recheck(out, args.jobs)
        return
    if args.collect:
        collect(Path(args.collect[0]), Path(args.collect[1]), out)
        return
    archs = set(args.arch or ["sm_90a"])
    if args.impl == "triton":
        rows = triton_rows(_pool_cases("triton", {"sm_90a", "sm_80", "sm_86", "sm_120"}, 3))
        done = _existing(out)
        new = not out.exists()
        with out.open("a", newline="") as fh:
            w = csv.DictWriter(fh, FIELDS)
            if new:
                w.writeheader()
            for r in rows:
                if (r["impl"], r["op"], r["variant"], r["arch"], r["case"]) not in done:
                    w.writerow(r)
        print(f"triton: {len(rows)} cases, {sum(r['identical'] for r in rows)} identical")
        return
    cases, rest = _ordered(tier_cases(archs) if args.tier else [], args.arch, args.per_key)
    cases += rest
    if args.prepare:
        prepare(cases, Path(args.prepare))
        return
    print(f"{len(cases)} CUDA cases ({sum(1 for c in cases if 'texts' in c)} tier kernels)")
    run_cuda(cases, out, args.jobs, time.time() + args.budget)


if __name__ == "__main__":
    main()
