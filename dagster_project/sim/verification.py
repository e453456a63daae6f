"""Execution-grounded status of every rung the simulator can emit (``sim.rung_verification``).

The simulator may only say a candidate is *correct* when the rung it instantiates was
executed and checked on that arch family. This module joins the shipped evidence:

* ``data/verification/nvcc_compile.csv`` — every (op, CUDA rung, arch family) compiled
  here with the flags the prompt states (``benchmarks/device/sim_nvcc_check.py``), every Triton
  rung parsed with ``ast``;
* ``data/verification/h200_rung_exec.csv`` — rungs executed on the H200 against an fp32 /
  PyTorch reference (``benchmarks/device/sim_verify_rungs.py``): sm_90a renders at 3 shapes, the
  A100 / A10 renders as ``compute_80`` / ``compute_86`` PTX the H200's driver compiles (the
  code an sm_80 / sm_86 build runs), the RTX 5090's non-FP4 renders built for compute_90;
* ``data/calibration/h200_compile_check.csv`` — the calibration run's sm_90a points
  (``benchmarks/device/gpu_calibrate.py``, 7 ops × 3 shapes).

and decides, per (op, impl, rung, family):

``verified``  executed correct on the family (sm_90a: on ≥ ``MIN_SHAPES`` shapes; other
              families: their own render ran correct and the Hopper render is verified;
              Triton rungs, which JIT for the GPU they run on, by the Hopper evidence and
              their ``ast`` check) and never measured wrong, and no compile failure under
              the family's flags;
``wrong``     measured wrong or faulting on the family (a wrong rung on sm_90a is wrong on
              every family whose render shares the code: its mismatch is reported there too);
``unverified`` everything else (no reference for the op yet, not reached by a run, FP4 MMA
              that no GPU here can execute).

A measured failure only counts where the same reference passed another rung of the op:
an op whose every rung "fails" points at the reference, not at the kernels.

Pure Python on the shipped CSVs (no dagster, no GPU), cached once per process.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

#: Bump when a rule below or the evidence files change what is verified.
VERIFICATION_VERSION = "1.1.0"
#: Shapes a rung must pass on the H200 to count as verified on sm_90a.
MIN_SHAPES = 3
#: The simulator's arch families (``GPU.arch``).
FAMILIES: tuple[str, ...] = ("sm_80", "sm_86", "sm_90a", "sm_120")

VERIFIED = "verified"
WRONG = "wrong"
UNVERIFIED = "unverified"

#: Execution statuses that mean the kernel itself is wrong (not the reference, not time).
_BAD = ("wrong_result", "fault")


@dataclass
class RungStatus:
    """What the evidence says about one (op, impl, rung, family)."""

    op: str
    impl: str
    variant: str
    family: str
    status: str = UNVERIFIED
    compile_status: str = "unchecked"  # ok | error | unchecked
    compile_flags: str = ""
    compile_cases: int = 0
    exec_correct_shapes: int = 0
    exec_wrong: int = 0
    exec_runs: int = 0
    worst_rel_err: float | None = None
    mismatch: str = ""  # the measured report of a wrong rung
    h200_ms: str = ""  # "shape=ms; ..." of the correct sm_90a runs
    evidence: list[str] = field(default_factory=list)
    #: some clean build of this rung on this family takes the block-scaled FP4 MMA path
    #: (``mma=e2m1``): code no GPU here executes, so no other evidence covers it
    fp4_mma: bool = False

    @property
    def verified(self) -> bool:
        return self.status == VERIFIED

    @property
    def wrong(self) -> bool:
        return self.status == WRONG

    def row(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "impl": self.impl,
            "variant": self.variant,
            "family": self.family,
            "status": self.status,
            "compile_status": self.compile_status,
            "compile_flags": self.compile_flags,
            "compile_cases": self.compile_cases,
            "exec_correct_shapes": self.exec_correct_shapes,
            "exec_wrong": self.exec_wrong,
            "exec_runs": self.exec_runs,
            "worst_rel_err": self.worst_rel_err,
            "mismatch": self.mismatch,
            "h200_ms": self.h200_ms,
            "evidence": "; ".join(self.evidence),
            "verification_version": VERIFICATION_VERSION,
        }


def _read(*parts: str) -> list[dict[str, str]]:
    ref = resources.files(__package__).joinpath("data", *parts)
    if not ref.is_file():
        return []
    # Traversable.open hands text options to TextIOWrapper (the documented contract, and
    # what csv needs); typeshed's protocol lists only encoding and errors
    with ref.open(newline="") as fh:  # type: ignore[call-overload]  # typeshed omits newline
        return list(csv.DictReader(fh))


def _evidence_rows() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(compile rows, execution rows) from the shipped files, in one common shape."""
    comp = _read("verification", "nvcc_compile.csv")
    exe = []
    for r in _read("verification", "h200_rung_exec.csv"):
        status = r.get("status", "")
        if status == "error" and "cudaError" in r.get("error", ""):
            status = "fault"  # a failed launch is the kernel's, like a fault
        exe.append({**r, "status": status, "source": "sim_verify_rungs"})
    for r in _read("calibration", "h200_compile_check.csv"):
        if r.get("kind") != "calib" or r.get("impl") not in ("cuda", "triton"):
            continue
        ran = r.get("ran", "")
        status = {"ok": "ok", "wrong_result": "wrong_result", "crash": "timeout"}.get(ran, ran)
        err = r.get("errors", "")
        if ran == "error":
            # a fault or a failed launch is the kernel's; anything else is the harness's
            status = "fault" if ("CUDA error" in err or "cudaError" in err) else "error"
        exe.append(
            {
                "op": r["op"],
                "impl": r["impl"],
                "variant": r["variant"],
                "family": "sm_90a",
                "shape": r["shape"],
                "status": status,
                "max_rel_err": r.get("max_rel_err", ""),
                "error": err,
                "ms": "",
                "source": "gpu_calibrate",
            }
        )
    return comp, exe


def _f(x: str) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if v == v else float("inf")  # NaN outputs are as wrong as it gets


_Key = tuple[str, str, str, str]


def _empty_table() -> dict[_Key, RungStatus]:
    """One unverified ``RungStatus`` per (op, impl, rung, family) the simulator can emit."""
    from .ops import OPS
    from .variants import ladder

    table: dict[_Key, RungStatus] = {}
    for name, spec in OPS.items():
        for impl in ("cuda", "triton"):
            for v in ladder(spec.family, impl):
                for fam in FAMILIES:
                    table[(name, impl, v.tag, fam)] = RungStatus(name, impl, v.tag, fam)
    return table


def _apply_compile_evidence(table: dict[_Key, RungStatus], comp: list[dict[str, str]]) -> None:
    """Fold the clean nvcc cases into each rung's compile status, flags and case count."""
    for r in comp:
        if r.get("inject") or r.get("stderr_head") == "timeout":
            continue  # an nvcc that timed out decided nothing
        st = table.get((r["op"], r["impl"], r["variant"], r["arch"]))
        if st is None:
            continue
        st.compile_cases += 1
        expected, actual = r["expected_ok"] == "True", r["actual_ok"] == "True"
        if not expected:
            continue  # a feature/cap error the simulator reports anyway
        st.fp4_mma = st.fp4_mma or json.loads(r.get("params") or "{}").get("mma") == "e2m1"
        if actual and st.compile_status != "error":
            st.compile_status = "ok"
        elif not actual:
            st.compile_status = "error"
            st.evidence.append(f"nvcc failed: {r.get('stderr_head', '')[:120]}")
        st.compile_flags = r.get("flags", "")


def _mark_triton_jit_failure(table: dict[_Key, RungStatus], r: dict[str, str]) -> None:
    """Triton JIT-compiled the render on the H200 and rejected it: the rung does not build
    on any family, whatever the simulator's compile model says (never claimed correct)."""
    for fam in FAMILIES:
        other = table.get((r["op"], r["impl"], r["variant"], fam))
        if other is not None and other.compile_status != "error":
            other.compile_status = "error"
            other.evidence.append(f"Triton JIT failed on the H200: {(r.get('error') or '')[:100]}")


def _record_wrong(st: RungStatus, r: dict[str, str], status: str) -> None:
    """Count a wrong or faulting run: its relative error, and the first mismatch report."""
    st.exec_wrong += 1
    err = _f(r.get("max_rel_err", ""))
    if err is not None:
        st.worst_rel_err = max(st.worst_rel_err or 0.0, err)
    what = (
        f"max_rel_err {r['max_rel_err']}"
        if status == "wrong_result"
        else (r.get("error") or "fault")
    )
    st.mismatch = st.mismatch or (
        f"{status} at {r['shape']} on the H200 ({r['source']}): {what.splitlines()[0][:160]}"
    )


def _apply_exec_evidence(table: dict[_Key, RungStatus], exe: list[dict[str, str]]) -> None:
    """Fold the H200 runs into each rung: runs, wrong runs, correct shapes and timings.

    Only runs of ops whose reference passed at least one rung count (its failures then
    mean something).
    """
    trusted = {r["op"] for r in exe if r.get("status") == "ok"}
    shapes_ok: dict[_Key, set[str]] = {}
    ms: dict[_Key, list[str]] = {}
    for r in exe:
        key = (r["op"], r["impl"], r["variant"], r["family"])
        st = table.get(key)
        if st is None or r["op"] not in trusted:
            continue
        status = r.get("status", "")
        if status == "compile_error" and r["impl"] == "triton":
            _mark_triton_jit_failure(table, r)
            continue
        if status not in ("ok", *_BAD):
            continue  # timeouts, harness errors, cases not reached: no evidence either way
        st.exec_runs += 1
        if status == "ok":
            shapes_ok.setdefault(key, set()).add(r["shape"])
            if r.get("ms"):
                ms.setdefault(key, []).append(f"{r['shape']}={r['ms']}")
            continue
        _record_wrong(st, r, status)
    for key, st in table.items():
        st.exec_correct_shapes = len(shapes_ok.get(key, ()))
        st.h200_ms = "; ".join(ms.get(key, [])[:3])


def _verify_off_hopper(st: RungStatus, fam: str, impl: str) -> None:
    """A non-Hopper family whose Hopper render is verified: verified by its own correct run,
    by Triton's JIT, or by a clean build with the family's flags (same template code)."""
    if impl == "triton":
        st.status = VERIFIED
        st.evidence.append("Triton: ast + correct on the H200 (JIT for the GPU it runs on)")
    elif st.exec_correct_shapes >= 1:
        st.status = VERIFIED
        st.evidence.append(f"{fam} render executed correct on the H200 (PTX JIT)")
    elif st.compile_status == "ok":
        # no GPU of this family here: its build is checked with the family's own flags,
        # the template's arithmetic on the H200 (renders differ in tile constants only)
        st.status = VERIFIED
        st.evidence.append(
            f"compiled with {st.compile_flags or fam}; same template correct on sm_90a"
        )


def _decide(st: RungStatus, hopper: RungStatus, fam: str, impl: str) -> None:
    """The status of one rung on one family from its evidence and its Hopper render's."""
    if st.exec_wrong:
        st.status = WRONG
        return
    if hopper.exec_wrong:
        # the same template code: a rung measured wrong on Hopper is not claimed right
        # elsewhere (its render differs only in tile constants)
        st.status = WRONG
        st.mismatch = hopper.mismatch
        st.evidence.append("measured wrong on sm_90a (same template)")
        return
    if st.compile_status == "error":
        return
    if fam == "sm_90a":
        if st.exec_correct_shapes >= MIN_SHAPES:
            st.status = VERIFIED
            st.evidence.append(f"correct on the H200 at {st.exec_correct_shapes} shapes")
        return
    if hopper.exec_correct_shapes < MIN_SHAPES:
        return
    if st.fp4_mma:
        st.evidence.append(
            "its renders may take the FP4 MMA path (mma=e2m1), which no GPU here executes"
        )
        return
    _verify_off_hopper(st, fam, impl)


@lru_cache(maxsize=1)
def verification_table() -> dict[tuple[str, str, str, str], RungStatus]:
    """Every (op, impl, rung, family) the simulator can emit, with its status."""
    comp, exe = _evidence_rows()
    table = _empty_table()
    # compile evidence: clean cases only (injected slips/bugs/caps say nothing of the rung)
    comp = [r for r in comp if not _styled(r)]
    exe = [r for r in exe if not _styled(r)]
    _apply_compile_evidence(table, comp)
    _apply_exec_evidence(table, exe)
    for (op_name, impl, tag, fam), st in table.items():
        _decide(st, table[(op_name, impl, tag, "sm_90a")], fam, impl)
    return table


def _styled(r: dict[str, str]) -> bool:
    """A row measured on a non-1.6.0 structure (``styles``): evidence for that structure only."""
    return r.get("structure", "") not in ("", "reduce=xor", "loop=range")


@lru_cache(maxsize=1)
def _structure_evidence() -> dict[tuple[str, str, str, str, str], dict[str, Any]]:
    """(op, impl, rung, family, structure) -> correct shapes, wrong runs, compile verdicts
    of the renders in that structure (rows with a ``structure`` column)."""
    comp, exe = _evidence_rows()
    ev: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}

    def slot(op: str, impl: str, tag: str, fam: str, key: str) -> dict[str, Any]:
        return ev.setdefault(
            (op, impl, tag, fam, key), {"shapes": set(), "wrong": 0, "cc_ok": 0, "cc_err": 0}
        )

    for r in comp:
        if not _styled(r) or r.get("inject") or r.get("stderr_head") == "timeout":
            continue
        if r["expected_ok"] != "True":
            continue
        e = slot(r["op"], r["impl"], r["variant"], r["arch"], r["structure"])
        e["cc_ok" if r["actual_ok"] == "True" else "cc_err"] += 1
    for r in exe:
        if not _styled(r):
            continue
        e = slot(r["op"], r["impl"], r["variant"], r["family"], r["structure"])
        if r["status"] == "ok":
            e["shapes"].add(r["shape"])
        elif r["status"] in (*_BAD, "compile_error"):
            e["wrong"] += 1
    return ev


@lru_cache(maxsize=65536)
def structure_allowed(op: str, impl: str, variant: str, family: str, structure: str) -> bool:
    """May a render of this rung take ``structure`` (a ``styles`` key other than 1.6.0's)?

    The rung's label was earned by the 1.6.0 structure. A verified rung takes another
    structure only when that structure has its own evidence on the family, by the same
    rules as the rung (sm_90a: >= MIN_SHAPES correct H200 shapes; other CUDA families:
    their own render executed correct, or built with the family's flags, plus the sm_90a
    structure verified; Triton: the sm_90a evidence) and nothing in that structure was
    measured wrong or failed to build. A wrong rung keeps the code that was measured
    wrong. An unverified rung is unverified whatever its structure: any structure goes.
    """
    st = rung_status(op, impl, variant, family)
    if st.status == UNVERIFIED:
        return True
    if st.status == WRONG:
        return False
    ev = _structure_evidence()
    empty: dict[str, Any] = {"shapes": set(), "wrong": 0, "cc_ok": 0, "cc_err": 0}
    hop = ev.get((op, impl, variant, "sm_90a", structure), empty)
    own = ev.get((op, impl, variant, family, structure), empty)
    if hop["wrong"] or own["wrong"] or own["cc_err"] or hop["cc_err"]:
        return False
    if len(hop["shapes"]) < MIN_SHAPES:
        return False
    if family == "sm_90a" or impl == "triton":
        return True
    return bool(own["shapes"]) or own["cc_ok"] > 0


def structure_rows() -> list[dict[str, Any]]:
    """Per (op, impl, rung, family, structure) evidence and whether renders may use it."""
    out = []
    for (op, impl, tag, fam, key), e in sorted(_structure_evidence().items()):
        out.append(
            {
                "op": op,
                "impl": impl,
                "variant": tag,
                "family": fam,
                "structure": key,
                "correct_shapes": len(e["shapes"]),
                "wrong": e["wrong"],
                "compile_ok": e["cc_ok"],
                "compile_error": e["cc_err"],
                "allowed": structure_allowed(op, impl, tag, fam, key),
            }
        )
    return out


def rung_status(op: str, impl: str, variant: str, family: str) -> RungStatus:
    """The status of one rung on one arch family (``unverified`` for an unknown key)."""
    st = verification_table().get((op, impl, variant, family))
    return st if st is not None else RungStatus(op, impl, variant, family)


# --------------------------------------------------------------------------------------
# parameter regions (issue 36): a rung verified on three random points does not cover
# the parameter values sessions pick. The measurement oracle ran the sessions' own
# kernels at their own shapes (``data/measured/<gpu>_answers.csv``); where it found a
# rung failing inside a named region, that region is not the rung's verified one.
# --------------------------------------------------------------------------------------

#: Bump with the region rules (it is part of ``VERIFICATION_VERSION``'s meaning).
REGION_RULES_VERSION = "1.0.0"
#: Answer statuses that mean the kernel failed at its own shape and parameters.
_REGION_BAD = ("wrong_result", "fault", "timeout")


def region_of(params: dict[str, Any], shape: dict[str, int]) -> str | None:
    """The named region a kernel's launch parameters fall in: a thread-block cluster of
    more than one CTA (``cluster_m>1``), or split-K (``split_k>1``); None for neither."""
    del shape  # the regions are parameter regions; the shape only shows in the evidence
    if (params.get("cluster_m") or 1) > 1:
        return "cluster_m>1"
    if (params.get("split_k") or params.get("SPLIT_K") or 1) > 1:
        return "split_k>1"
    return None


@dataclass(frozen=True)
class RegionEvidence:
    """The oracle's verdicts in one (op, impl, rung, region): counts and the first failure."""

    ok: int
    bad: int
    first_bad: str


@lru_cache(maxsize=1)
def region_evidence() -> dict[tuple[str, str, str, str], RegionEvidence]:
    """(op, impl, rung, region) -> what the shipped answers measured there."""
    from .oracle import answers_path

    acc: dict[tuple[str, str, str, str], list[Any]] = {}
    for gpu in ("h100", "h200"):
        path = answers_path(gpu)
        if not path.exists():
            continue
        with path.open(newline="") as fh:
            for r in csv.DictReader(fh):
                reg = region_of(json.loads(r["params"]), json.loads(r["shape"]))
                if reg is None:
                    continue
                a = acc.setdefault((r["op"], r["impl"], r["variant"], reg), [0, 0, ""])
                if r["status"] == "ok":
                    a[0] += 1
                elif r["status"] in _REGION_BAD:
                    a[1] += 1
                    if not a[2]:
                        err = r["max_rel_err"] or r["error"] or "no output"
                        a[2] = (
                            f"{r['status']} ({err}) at {r['shape']} with {r['params']} "
                            f"on {r['device']} (sim_oracle)"
                        )
    return {k: RegionEvidence(a[0], a[1], a[2]) for k, a in acc.items()}


def _template_fails(impl: str, variant: str, region: str) -> str:
    """The first failure measured in this region by any op sharing the rung's template."""
    for (_op, i, v, reg), ev in sorted(region_evidence().items()):
        if (i, v, reg) == (impl, variant, region) and ev.bad:
            return ev.first_bad
    return ""


@lru_cache(maxsize=65536)
def _region_status(op: str, impl: str, variant: str, family: str, region: str) -> RungStatus:
    base = rung_status(op, impl, variant, family)
    if base.wrong:
        return base
    ev = region_evidence().get((op, impl, variant, region))
    if ev is not None and ev.bad:
        # measured failing at the sessions' own parameters: wrong on sm_90a where it ran;
        # on other families the same code is at best unverified in this region
        status = WRONG if family == "sm_90a" else UNVERIFIED
        return RungStatus(
            op,
            impl,
            variant,
            family,
            status=status,
            exec_wrong=ev.bad,
            mismatch=f"{region}: {ev.first_bad}",
            evidence=[*base.evidence, f"region {region}: {ev.ok} ok, {ev.bad} failed"],
        )
    if base.verified and (ev is None or not ev.ok) and _template_fails(impl, variant, region):
        # another op's kernels from the same template fail in this region and nothing
        # measured this op there: the rung's verification does not reach it
        return RungStatus(
            op,
            impl,
            variant,
            family,
            status=UNVERIFIED,
            evidence=[*base.evidence, f"region {region}: unmeasured, template fails there"],
        )
    return base


#: Element bytes of each dtype: evidence at one dtype covers another of the same width
#: (fp16 and bf16 renders differ only in the element type's name; fp32 or fp8 data read
#: by a kernel written for 16-bit elements is another program).
_WIDTH = {"fp16": 2.0, "bf16": 2.0, "fp32": 4.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5, "fp4": 0.5}


@lru_cache(maxsize=1)
def _dtype_coverage() -> dict[tuple[str, str, str], frozenset[float]]:
    """(op, impl, rung) -> element widths it ran correct at on a Hopper card: the rung
    executions (sm_90a) and the oracle's answers (each fed data of its own dtype)."""
    from .oracle import answers_path

    acc: dict[tuple[str, str, str], set[float]] = {}
    _comp, exe = _evidence_rows()
    for r in exe:
        if r.get("family") == "sm_90a" and r.get("status") == "ok" and r.get("dtype"):
            acc.setdefault((r["op"], r["impl"], r["variant"]), set()).add(
                _WIDTH.get(r.get("dtype", ""), 0.0)
            )
    for gpu in ("h100", "h200"):
        path = answers_path(gpu)
        if path.exists():
            with path.open(newline="") as fh:
                for r in csv.DictReader(fh):
                    if r["status"] == "ok":
                        acc.setdefault((r["op"], r["impl"], r["variant"]), set()).add(
                            _WIDTH.get(r["dtype"], 0.0)
                        )
    return {k: frozenset(v) for k, v in acc.items()}


@lru_cache(maxsize=65536)
def _dtype_status(op: str, impl: str, variant: str, family: str, dtype: str) -> RungStatus:
    base = rung_status(op, impl, variant, family)
    width = _WIDTH.get(dtype)
    if not base.verified or width is None:
        return base
    if width in _dtype_coverage().get((op, impl, variant), frozenset()):
        return base
    return RungStatus(
        op,
        impl,
        variant,
        family,
        status=UNVERIFIED,
        evidence=[*base.evidence, f"no correct run fed {dtype} data ({width:g}-byte elements)"],
    )


def step_status(
    op: str,
    impl: str,
    variant: str,
    family: str,
    params: dict[str, Any],
    shape: dict[str, int],
    dtype: str | None = None,
) -> RungStatus:
    """The status of a rung at a step's own parameters and dtype: ``rung_status``, narrowed
    by the parameter-region evidence of the measurement oracle (``region_of``) and, with
    ``dtype``, to the element widths it ran correct at (issue 36: sessions' fp32 samplers
    and fp8 caches had only 16-bit evidence)."""
    region = region_of(params, shape)
    st = (
        rung_status(op, impl, variant, family)
        if region is None
        else _region_status(op, impl, variant, family, region)
    )
    if dtype is None or not st.verified:
        return st
    return _dtype_status(op, impl, variant, family, dtype)


def sound_baseline(rungs: list[Any], op: str, impl: str, family: str) -> Any:
    """The first rung of a ladder not measured wrong on ``family``: the naive reference an
    engineer starts from must at least be right (the CUDA top-k sort baseline faults on the
    H200, so its sessions start from the next rung)."""
    for v in rungs:
        if not rung_status(op, impl, v.tag, family).wrong:
            return v
    return rungs[0]


def _status_at(op: str, impl: str, tag: str, family: str, dtype: str | None) -> str:
    """A rung's status on ``family``, narrowed to ``dtype``'s element width when given."""
    st = rung_status(op, impl, tag, family)
    if dtype is not None and st.verified:
        st = _dtype_status(op, impl, tag, family, dtype)
    return st.status


def _evidenced(op: str, impl: str, tag: str, family: str, dtype: str | None) -> bool:
    """Whether a rung has execution evidence on ``family`` (and, with ``dtype``, at the
    task's element width): verified there, or measured wrong (a wrong rung really fails)."""
    return _status_at(op, impl, tag, family, dtype) != UNVERIFIED


def evidenced_rungs(
    rungs: list[Any], op: str, impl: str, family: str, dtype: str | None = None
) -> list[Any]:
    """The rungs of a ladder an engineer is given on ``family`` at ``dtype``: those with
    execution evidence there (``_evidenced``), so a session shows no run whose output
    nobody could check (issue 39). A ladder without a verified rung comes back whole (an
    engineer must have something that can run correct); the task pools avoid drawing one
    (``can_verify``)."""
    kept = [v for v in rungs if _evidenced(op, impl, v.tag, family, dtype)]
    if not any(_status_at(op, impl, v.tag, family, dtype) == VERIFIED for v in kept):
        return list(rungs)  # nothing here could be correct: the whole ladder, as before
    return kept


def evidenced_rung(v: Any, op: str, impl: str, family: str, dtype: str | None = None) -> Any:
    """``v`` when it has execution evidence on ``family`` at ``dtype`` (see
    ``evidenced_rungs``), else None: the architecture-specific rung an engineer reaches for
    is offered only then."""
    if v is None or not _evidenced(op, impl, v.tag, family, dtype):
        return None
    return v


@lru_cache(maxsize=4096)
def can_verify(op: str, impl: str, family: str, dtype: str | None = None) -> bool:
    """Whether any rung of (op, impl) is verified on ``family`` (at ``dtype``'s element
    width, when given): a task without one could only produce runs nobody checked, so
    ``tasks.build_pool`` writes it in the other implementation instead."""
    for o, i, tag, fam in verification_table():
        if (o, i, fam) != (op, impl, family):
            continue
        st = rung_status(op, impl, tag, family)
        if st.verified and (dtype is None or _dtype_status(op, impl, tag, family, dtype).verified):
            return True
    return False


def verification_rows() -> list[dict[str, Any]]:
    """The ``sim.rung_verification`` table, one row per (op, impl, rung, family)."""
    return [st.row() for _, st in sorted(verification_table().items())]


def summary() -> dict[str, Any]:
    """Counts by status, impl and family (for asset metadata and RESULTS)."""
    out: dict[str, Any] = {"rows": 0, VERIFIED: 0, WRONG: 0, UNVERIFIED: 0}
    by: dict[str, dict[str, int]] = {}
    for (_, impl, _, fam), st in verification_table().items():
        out["rows"] += 1
        out[st.status] += 1
        slot = by.setdefault(f"{impl}/{fam}", {VERIFIED: 0, WRONG: 0, UNVERIFIED: 0})
        slot[st.status] += 1
    out["by_impl_family"] = by
    out["wrong_rungs"] = sorted(
        f"{op}/{impl}/{tag}/{fam}"
        for (op, impl, tag, fam), st in verification_table().items()
        if st.status == WRONG and fam == "sm_90a"
    )
    return out


def best_kernel_violations(
    rows: Iterable[tuple[str, str, str, str, str]],
) -> list[str]:
    """Sessions/episodes whose best kernel is a rung not verified on its family.

    ``rows`` are (id, op, impl, best rung tag, arch family); a best of ``None`` (no
    verified kernel) is not a violation."""
    bad = []
    for sid, op, impl, tag, fam in rows:
        if not tag:
            continue
        st = rung_status(op, impl, tag, fam)
        if not st.verified:
            bad.append(f"{sid}: best kernel {op}/{impl}/{tag} is {st.status} on {fam}")
    return bad


def mismatch_report(st: RungStatus, out_name: str, dims: tuple[int, ...]) -> str:
    """The wrong-result text of a rung measured wrong, at the session's own shape.

    The magnitude is the measured one (the rung's worst relative error, or the runtime's
    own CUDA error); where and on which card it was measured stays in ``sim.rung_verification``
    and the step's status, never in the text a model reads (issue 39)."""
    from .feedback import failure_report

    return failure_report(out_name, dims, st.worst_rel_err, st.mismatch)


__all__ = [
    "FAMILIES",
    "MIN_SHAPES",
    "UNVERIFIED",
    "VERIFICATION_VERSION",
    "VERIFIED",
    "WRONG",
    "RungStatus",
    "best_kernel_violations",
    "can_verify",
    "evidenced_rung",
    "evidenced_rungs",
    "mismatch_report",
    "region_evidence",
    "region_of",
    "rung_status",
    "sound_baseline",
    "step_status",
    "structure_allowed",
    "structure_rows",
    "summary",
    "verification_rows",
    "verification_table",
]
