"""Check the simulator's compile verdicts against the real toolchain.

Every CUDA template instantiation class (op × variant × arch) is rendered with random
valid params and compiled with ``nvcc -O3 -std=c++17 -arch=<target> -c`` — the flag the
task prompt states (``sm_80``, ``sm_86``, ``sm_90a``, ``sm_120a``;
``hardware.nvcc_arch_flag``); the simulator's expectation (compiles unless a feature is
missing, the tile ring is over the opt-in shared memory cap, or a slip was injected) must
match nvcc's exit status. Injected slips and over-cap configs are added as their own
strata, and their simulated diagnostic is checked for the key phrase real nvcc/ptxas
prints. Planted logic bugs must still compile (they fail at run time). Triton candidates
are checked with ``ast.parse``.

``compile_sample`` is what an asset calls; ``stratified_cases`` is the full plan.

**Cache.** nvcc's answer depends only on the rendered source, the flags and the
toolchain, so :class:`NvccCache` keeps it (exit status and stderr) under
``sha256(toolchain, flags, source)`` in the kernelhouse home
(``<home>/cache/nvcc/``): a rebuild whose templates rendered the same sources skips
nvcc, and a changed template renders a different source, hence a new key, hence a
real compile. The *verdict* (agree, message_match) is recomputed from the cached
stderr every time, so a changed expectation is never hidden by the cache. Timeouts
are not cached (they say how loaded the machine was, not what nvcc thinks).

**Shipped answers.** The same answers for the default build's sample, measured with
one nvcc build, ship with the package (``data/verification/nvcc_answers.csv``, written by
``benchmarks/device/ship_nvcc_answers.py``). The toolchain part of the key is nvcc's own
``--version`` text (release and build id), not its path, so on any machine with that
same nvcc build and templates that render the same source the key is the same and the
shipped answer is nvcc's answer: a cold build need not compile again what was compiled
when the package was made. Another nvcc, other flags or a changed template give another
key and a real compile. Each record says where its answer came from (``answer``:
``nvcc``, ``home cache`` or ``shipped``; ``ast`` for a Triton case).
"""

from __future__ import annotations

import ast
import csv
import functools
import hashlib
import json
import os
import random
import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagster_project import progress

from .codegen import CUDA_SLIPS, FAMILY_BUGS, TRITON_SLIPS, inject_slip, render_candidate
from .feedback import feature_key
from .hardware import get_gpu, nvcc_arch_flag
from .kernels import plan
from .ops import OPS, get_op
from .rng import derive_seed, stream
from .variants import Params, default_params, features_used, get_variant, iter_params, ladder

#: One GPU per arch (they share features and caps).
ARCH_GPU = {"sm_80": "a100", "sm_86": "a10", "sm_90a": "h100", "sm_120": "rtx_5090"}
NVCC_FLAGS = ("-O3", "-std=c++17")


@dataclass
class CompileCase:
    """One instantiation to compile (or parse) and the simulator's expectation for it."""

    op: str
    impl: str
    variant: str
    arch: str
    dtype: str
    shape: dict[str, int]
    params: Params
    inject: str | None = None  # "slip:<kind>" | "bug:<name>" | "smem" | None
    expected_ok: bool = True
    expected_key: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def gpu(self) -> str:
        return ARCH_GPU[self.arch]

    @property
    def stratum(self) -> str:
        kind = (self.inject or "clean").split(":")[0]
        return f"{self.impl}/{get_op(self.op).family}/{kind}"


def nvcc_path() -> str | None:
    """The nvcc on PATH (or /usr/local/bin, /usr/local/cuda/bin), None if absent."""
    for cand in (shutil.which("nvcc"), "/usr/local/bin/nvcc", "/usr/local/cuda/bin/nvcc"):
        if cand and Path(cand).exists():
            return cand
    return None


#: nvcc answers shipped with the package (see the module doc).
SHIPPED_ANSWERS = Path(__file__).parent / "data" / "verification" / "nvcc_answers.csv"
SHIPPED_COLUMNS = ("key", "returncode", "stderr", "toolchain", "generator_version", "measured_at")


@functools.lru_cache(maxsize=8)
def toolchain_id(nvcc: str) -> str:
    """What identifies the compiler for the cache: ``nvcc --version`` (release, build id).

    Not its path: two installs of one nvcc build give the same answers, and a path-free
    key is what lets answers measured elsewhere (the shipped ones) serve this machine.
    An nvcc that cannot say its version gets a key of its own path, never a shipped one.
    """
    try:
        out = subprocess.run(
            [nvcc, "--version"], capture_output=True, text=True, timeout=60
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    return out or f"unknown nvcc at {os.path.realpath(nvcc)}"


def toolchain_build(toolchain: str) -> str:
    """The short name of a toolchain id: its last line (``Build cuda_13.0.r13.0/…``)."""
    return toolchain.strip().splitlines()[-1] if toolchain.strip() else ""


@functools.lru_cache(maxsize=2)
def load_shipped_answers(path: Path = SHIPPED_ANSWERS) -> dict[str, tuple[int, str]]:
    """key → (exit status, stderr) of the shipped file; empty when there is none.

    A damaged file is an error naming it: silently compiling everything again would hide
    that the package is broken."""
    if not path.exists():
        return {}
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            return {
                row["key"]: (int(row["returncode"]), row["stderr"]) for row in csv.DictReader(fh)
            }
    except (KeyError, ValueError, csv.Error) as exc:
        raise ValueError(f"{path}: not a file of nvcc answers ({exc})") from exc


def write_shipped_answers(
    cache_dir: Path, toolchain: str, generator_version: str, measured_at: str, out: Path
) -> int:
    """Write every answer in ``cache_dir`` (one :class:`NvccCache` filled by one nvcc) as
    the shipped file ``out``, sorted by key; returns the number of answers."""
    rows = []
    for entry in sorted(Path(cache_dir).rglob("*.json")):
        data = json.loads(entry.read_text(encoding="utf-8"))
        rows.append((entry.stem, data["returncode"], data["stderr"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(SHIPPED_COLUMNS)
        build = toolchain_build(toolchain)
        w.writerows((k, rc, err, build, generator_version, measured_at) for k, rc, err in rows)
    return len(rows)


class NvccCache:
    """nvcc results on disk, one small JSON file per (toolchain, flags, source) hash.

    Files are written to a temporary name and renamed, so a build killed mid-write leaves
    no half file; an unreadable file is a miss (and is overwritten by the next compile).
    Safe for the threads of :func:`compile_sample`: each key is its own file.
    """

    def __init__(self, root: str | Path, shipped: dict[str, tuple[int, str]] | None = None) -> None:
        self.root = Path(root)
        self.shipped = shipped or {}
        self.hits = 0
        self.misses = 0
        self.shipped_hits = 0

    @staticmethod
    def key(source: str, cmd_flags: Iterable[str], toolchain: str) -> str:
        h = hashlib.sha256()
        for part in (toolchain, "\0".join(cmd_flags), source):
            h.update(part.encode("utf-8"))
            h.update(b"\x00\x01")
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer (``returncode``, ``stderr``, ``answer``: where it came
        from), from the home first, then from the shipped answers; None on a miss."""
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and isinstance(data.get("returncode"), int):
            self.hits += 1
            return {**data, "answer": "home cache"}
        if key in self.shipped:
            self.shipped_hits += 1
            rc, err = self.shipped[key]
            return {"returncode": rc, "stderr": err, "answer": "shipped"}
        self.misses += 1
        return None

    def put(self, key: str, returncode: int, stderr: str) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps({"returncode": returncode, "stderr": stderr}), encoding="utf-8")
        os.replace(tmp, path)


def _expectation(case: CompileCase) -> tuple[bool, str, str]:
    """(expected_ok, key phrase, -arch flag) from the simulator's own model."""
    op = get_op(case.op)
    gpu = get_gpu(case.gpu)
    v = get_variant(op.family, case.impl, case.variant)
    feats = features_used(v, op, case.dtype, case.params)
    flag = nvcc_arch_flag(gpu.arch, feats)
    missing = sorted(f for f in feats if f not in gpu.features)
    over = plan(op, case.shape, case.dtype, gpu, v, case.params).smem > gpu.smem_per_block_optin
    if case.inject and case.inject.startswith("slip:"):
        return False, "", flag  # key filled in from the injected slip
    if case.impl == "cuda":
        if over:
            return False, "static assertion failed", flag
        if "tma_multicast" in missing and gpu.arch in ("sm_80", "sm_86"):
            return False, "__cluster_dims__ is not supported", flag
        if missing:
            return (
                False,
                feature_key(missing, op.family in ("gemm", "attn_decode", "attn_prefill")),
                flag,
            )
    return True, "", flag


def _case_params(
    rng: random.Random,
    v: Any,
    op: Any,
    dtype: str,
    shape: dict[str, int],
    gpu_id: str,
    fit: bool | None,
) -> Params | None:
    """Random valid params of a rung; ``fit`` True/False asks for (not) fitting the smem cap."""
    gpu = get_gpu(gpu_id)
    pool = iter_params(v, op, dtype)
    rng.shuffle(pool)
    for p in pool[:400]:
        over = plan(op, shape, dtype, gpu, v, p).smem > gpu.smem_per_block_optin
        if fit is None or fit != over:
            return p
    return None


def _dtype_for(rng: Any, op: Any, arch: str) -> str:
    """A random dtype of the op that the arch can run (no fp8 attention on Ampere)."""
    return rng.choice(
        [
            d
            for d in op.dtypes
            if not (op.fp8_attention and d == "fp8" and arch in ("sm_80", "sm_86"))
        ]
    )


def _mma_alternatives(v: Any, op: Any, dtype: str, p: Params) -> list[Params]:
    """``p`` and, where it has an ``mma`` choice, a copy per other ``mma`` value (native and
    dequant are compiled apart)."""
    variants_of_p = [p]
    if "mma" in p:
        dims = [x for x in (set(q["mma"] for q in iter_params(v, op, dtype))) if x != p["mma"]]
        for other in sorted(dims):
            q = dict(p)
            q["mma"] = other
            variants_of_p.append(q)
    return variants_of_p


def _class_cases(rng: Any, impl: str, op: Any) -> list[CompileCase]:
    """Every (variant, arch) class of the op once, with fitting random params (twice or
    more where an ``mma`` choice exists)."""
    cases: list[CompileCase] = []
    for v in ladder(op.family, impl):
        for arch, gpu_id in ARCH_GPU.items():
            shape = op.sample(rng)
            dtype = _dtype_for(rng, op, arch)
            p = _case_params(rng, v, op, dtype, shape, gpu_id, True)
            if p is None:
                p = default_params(v, op, dtype, shape, get_gpu(gpu_id))
            for q in _mma_alternatives(v, op, dtype, p):
                cases.append(CompileCase(op.name, impl, v.tag, arch, dtype, shape, q))
    return cases


def _slip_cases(rng: Any, impl: str, op: Any, slips_per_op: int) -> list[CompileCase]:
    """Injected slips on a random rung/arch."""
    cases: list[CompileCase] = []
    slip_kinds = CUDA_SLIPS if impl == "cuda" else TRITON_SLIPS
    for _ in range(slips_per_op):
        v = rng.choice(ladder(op.family, impl))
        arch = rng.choice(list(ARCH_GPU))
        shape = op.sample(rng)
        dtype = _dtype_for(rng, op, arch)
        p = _case_params(rng, v, op, dtype, shape, ARCH_GPU[arch], True) or default_params(
            v, op, dtype, shape, get_gpu(ARCH_GPU[arch])
        )
        kind = rng.choice(slip_kinds)
        cases.append(
            CompileCase(op.name, impl, v.tag, arch, dtype, shape, p, inject=f"slip:{kind}")
        )
    return cases


def _over_cap_case(rng: Any, impl: str, op: Any) -> CompileCase | None:
    """An over-cap config of a staged rung on a 99 KB part (the first staged rung that
    yields one whose features the part has)."""
    for v in ladder(op.family, impl):
        if not any(d.name in ("stages", "num_stages") for d in v.dims):
            continue
        arch = "sm_86"
        shape = op.sample(rng)
        dtype = rng.choice([d for d in op.dtypes if not (op.fp8_attention and d == "fp8")])
        p = _case_params(rng, v, op, dtype, shape, ARCH_GPU[arch], False)
        if p is not None and not [
            f for f in features_used(v, op, dtype, p) if f not in get_gpu(ARCH_GPU[arch]).features
        ]:
            return CompileCase(op.name, impl, v.tag, arch, dtype, shape, p, inject="smem")
    return None


def _bug_cases(rng: Any, impl: str, op: Any) -> list[CompileCase]:
    """One planted logic bug per family bug, on a random low-level (or Ampere) rung."""
    cases: list[CompileCase] = []
    for bug in FAMILY_BUGS[op.family]:
        v = rng.choice([x for x in ladder(op.family, impl) if x.level < 4 or x.hw == "ampere"])
        arch = rng.choice(["sm_80", "sm_86", "sm_90a", "sm_120"])
        shape = op.sample(rng)
        dtype = _dtype_for(rng, op, arch)
        p = _case_params(rng, v, op, dtype, shape, ARCH_GPU[arch], True) or default_params(
            v, op, dtype, shape, get_gpu(ARCH_GPU[arch])
        )
        cases.append(CompileCase(op.name, impl, v.tag, arch, dtype, shape, p, inject=f"bug:{bug}"))
    return cases


def stratified_cases(
    seed: int = 0,
    impls: Iterable[str] = ("cuda",),
    slips_per_op: int = 1,
    bugs: bool = True,
    over_cap: bool = True,
) -> list[CompileCase]:
    """The full plan: every (op, variant, arch) class once (twice where an ``mma`` choice
    exists, native and dequant), plus slip / over-cap / planted-bug strata."""
    rng = stream("compile_check", seed)
    cases: list[CompileCase] = []
    for impl in impls:
        for op in OPS.values():
            cases.extend(_class_cases(rng, impl, op))
            cases.extend(_slip_cases(rng, impl, op, slips_per_op))
            if impl == "cuda" and over_cap:
                case = _over_cap_case(rng, impl, op)
                if case is not None:
                    cases.append(case)
            if bugs:
                cases.extend(_bug_cases(rng, impl, op))
    for case in cases:
        ok, key, flag = _expectation(case)
        case.expected_ok, case.expected_key = ok, key
        case.extra["flag"] = flag
    return cases


def render_case(case: CompileCase) -> tuple[str, str]:
    """(source, key phrase) of a case; slips are applied deterministically."""
    op = get_op(case.op)
    v = get_variant(op.family, case.impl, case.variant)
    bug = case.inject.split(":", 1)[1] if case.inject and case.inject.startswith("bug:") else None
    code = render_candidate(op, case.gpu, case.dtype, case.shape, v, case.params, bug)
    key = case.expected_key
    if case.inject and case.inject.startswith("slip:"):
        kind = case.inject.split(":", 1)[1]
        kinds = [kind] + [
            k for k in (CUDA_SLIPS if case.impl == "cuda" else TRITON_SLIPS) if k != kind
        ]
        rng = stream("compile_check", "slip", case.op, case.variant, case.arch)
        for k in kinds:
            res = inject_slip(code, case.impl, k, rng)
            if res is not None:
                code, slip = res
                key = slip.key
                case.extra["slip_line"] = slip.line
                case.extra["slip_kind"] = k
                break
        else:
            case.expected_ok = True  # nowhere to slip: the clean source compiles
    return code, key


def nvcc_compile(
    code: str,
    cmd: list[str],
    workdir: Path,
    *,
    timeout: int = 240,
    cache: NvccCache | None = None,
) -> tuple[bool, str, str]:
    """``(compiled, stderr, answer)`` of ``code`` written as ``candidate.cu`` in
    ``workdir`` and compiled with ``cmd`` (``cmd[0]`` is nvcc); ``answer`` says where the
    answer came from: ``nvcc`` (compiled now), ``home cache`` or ``shipped``.

    The cache key is the source text itself (with flags and toolchain), so any change to
    a template that changes what it renders is a new key and a real compile.
    """
    ckey = NvccCache.key(code, cmd[1:], toolchain_id(cmd[0])) if cache is not None else ""
    hit = cache.get(ckey) if cache is not None else None
    if hit is not None:
        return hit["returncode"] == 0, str(hit.get("stderr", "")), str(hit["answer"])
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "candidate.cu").write_text(code)
    try:
        proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, "timeout", "nvcc"
    if cache is not None:
        cache.put(ckey, proc.returncode, proc.stderr)
    return proc.returncode == 0, proc.stderr, "nvcc"


def run_case(
    case: CompileCase,
    workdir: str | Path,
    nvcc: str | None = None,
    timeout: int = 240,
    cache: NvccCache | None = None,
) -> dict[str, Any]:
    """Compile (CUDA) or parse (Triton) one case and compare with the expectation.

    With ``cache``, nvcc's exit status and stderr come from it when the same source was
    compiled with the same flags and toolchain before (``cached`` says so in the record).
    """
    code, key = render_case(case)
    rec: dict[str, Any] = {
        "op": case.op,
        "impl": case.impl,
        "variant": case.variant,
        "arch": case.arch,
        "gpu": case.gpu,
        "dtype": case.dtype,
        "params": dict(case.params),
        "inject": case.inject or "",
        "expected_ok": case.expected_ok,
        "expected_key": key,
    }
    t0 = time.perf_counter()
    if case.impl == "triton":
        try:
            ast.parse(code)
            actual, err = True, ""
        except SyntaxError as e:
            actual, err = False, f"SyntaxError: {e.msg} (line {e.lineno})"
        # Triton diagnostics (slips, unsupported types) happen at JIT time, which needs a GPU;
        # here every candidate, slipped or not, must at least be valid Python.
        rec.update(
            checker="ast",
            compile_expected_ok=case.expected_ok,
            expected_ok=True,
            actual_ok=actual,
            agree=actual,
            stderr_head=err,
            message_match=True,
            cached=False,
            answer="ast",
            seconds=round(time.perf_counter() - t0, 3),
        )
        return rec
    nvcc = nvcc or nvcc_path()
    if nvcc is None:
        raise RuntimeError("nvcc not found")
    flag = case.extra.get("flag", case.arch)
    cmd = [nvcc, *NVCC_FLAGS, f"-arch={flag}", "-c", "candidate.cu", "-o", "candidate.o"]
    tag = derive_seed(case.inject, sorted(case.params.items())) % 10**8
    d = Path(workdir) / f"{case.op}-{case.variant}-{case.arch}-{tag}"
    actual, stderr, answer = nvcc_compile(code, cmd, d, timeout=timeout, cache=cache)
    match = actual == case.expected_ok and (actual or not key or key in stderr)
    if "slip_line" in case.extra and not actual:
        match = match and f"candidate.cu({case.extra['slip_line']})" in stderr
    rec.update(
        checker="nvcc",
        nvcc_cmd=" ".join(cmd[1:]),
        actual_ok=actual,
        agree=actual == case.expected_ok,
        message_match=bool(match),
        stderr_head="\n".join(stderr.splitlines()[:6]),
        cached=answer != "nvcc",
        answer=answer,
        seconds=round(time.perf_counter() - t0, 3),
    )
    return rec


def _stratified_pick(cases: list[CompileCase], n: int, seed: int) -> list[CompileCase]:
    rng = stream("compile_check", "pick", seed)
    strata: dict[str, list[CompileCase]] = {}
    for c in cases:
        strata.setdefault(c.stratum, []).append(c)
    for lst in strata.values():
        rng.shuffle(lst)
    keys = sorted(strata)
    out: list[CompileCase] = []
    while len(out) < n and any(strata.values()):
        for k in keys:
            if strata[k] and len(out) < n:
                out.append(strata[k].pop())
    return out


def compile_sample(
    n: int | None,
    seed: int,
    workdir: str | Path,
    *,
    impls: Iterable[str] = ("cuda", "triton"),
    jobs: int | None = None,
    cache_dir: str | Path | None = None,
    shipped: dict[str, tuple[int, str]] | None = None,
) -> list[dict[str, Any]]:
    """Compile a stratified sample of ``n`` instantiations (all of them when ``n`` is None).

    Returns one record per case: op, variant, arch, inject, expected_ok, actual_ok, agree,
    message_match, stderr_head (first lines of nvcc's output), cached, seconds.
    ``cache_dir`` keeps nvcc's answers between builds (:class:`NvccCache`); ``shipped``
    answers (:func:`load_shipped_answers`) are used where the home has none.
    """
    cache = NvccCache(cache_dir, shipped) if cache_dir is not None else None
    cases = stratified_cases(seed, impls=impls)
    picked = cases if n is None or n >= len(cases) else _stratified_pick(cases, n, seed)
    nvcc = nvcc_path() if any(c.impl == "cuda" for c in picked) else None
    if nvcc is None:
        picked = [c for c in picked if c.impl != "cuda"]
    Path(workdir).mkdir(parents=True, exist_ok=True)
    task = f"compile check ({'nvcc + ast' if nvcc else 'ast'})"
    done = [0]

    def one(case: CompileCase) -> dict[str, Any]:
        record = run_case(case, workdir, nvcc, cache=cache)
        done[0] += 1  # only read for display; a lost update just shows one case less
        progress.report(task, done[0], len(picked))
        return record

    progress.report(task, 0, len(picked))
    with ThreadPoolExecutor(max_workers=jobs or max(1, os.cpu_count() or 1)) as ex:
        return list(ex.map(one, picked))


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Agreement rates overall and per stratum."""
    out: dict[str, Any] = {"cases": len(records)}
    if not records:
        return out
    out["agreement"] = sum(r["agree"] for r in records) / len(records)
    out["answers"] = dict(sorted(Counter(r.get("answer", "nvcc") for r in records).items()))
    out["message_match"] = sum(r["message_match"] for r in records) / len(records)
    by: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by.setdefault(f"{r['impl']}/{(r['inject'] or 'clean').split(':')[0]}", []).append(r)
    out["by_stratum"] = {
        k: {"cases": len(v), "agreement": sum(x["agree"] for x in v) / len(v)}
        for k, v in sorted(by.items())
    }
    out["disagreements"] = [
        {
            k: r[k]
            for k in ("op", "variant", "arch", "inject", "expected_ok", "actual_ok", "stderr_head")
        }
        for r in records
        if not r["agree"]
    ][:20]
    return out


__all__ = [
    "CompileCase",
    "NvccCache",
    "compile_sample",
    "nvcc_compile",
    "run_case",
    "stratified_cases",
    "summarize",
    "nvcc_path",
]
