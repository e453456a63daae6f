"""The measurement oracle's answers: real compile, correctness and device time of a rendered
kernel, looked up by content (issue 36).

A question is (rendered source, shape, dtype, GPU + toolchain); its key is the sha256 of
those, so a kernel two sessions both wrote is measured once and a source that changed by
one character is a different question. ``benchmarks/device/sim_oracle.py`` asks the
questions on the device (nvcc with the prompt's flags, every output and mutated buffer
against an fp32 / PyTorch reference at the session's own shape and dtype, CUDA-graph
replay over input sets rotated past L2, repeats with their spread) and ``collect`` writes
the answers to ``data/measured/<gpu>_answers.csv`` with the toolchain each was measured
under. Nothing here imports torch or dagster: a GPU-less build reads the answers and
``measured.py`` replays sessions against them.
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

#: Version of the device harness and answer format; an answer measured under another
#: version is a different answer (it is part of the key).
ORACLE_VERSION = "1.0.0"

#: The toolchain a GPU's questions are asked under (part of the key): the prompt's compile
#: flags and the compilers the device image holds. A different toolchain asks anew.
TOOLCHAIN: dict[str, str] = {
    "h100": "sm_90a|nvcc -O3 -std=c++17 -arch=sm_90a|nvcc 13|torch 2.11|triton 3.6",
    "h200": "sm_90a|nvcc -O3 -std=c++17 -arch=sm_90a|nvcc 13|torch 2.11|triton 3.6",
}

#: Statuses an answer can carry. ``ok`` = compiled, ran and matched the reference at the
#: session's shape and dtype; every other one is a real failure of that source there.
ANSWER_STATUSES = (
    "ok",
    "wrong_result",
    "compile_error",
    "fault",
    "timeout",
    "error",
)

#: Columns of the shipped answers file, in order.
ANSWER_FIELDS = (
    "key",
    "op",
    "impl",
    "variant",
    "dtype",
    "shape",
    "params",
    "status",
    "max_rel_err",
    "check",
    "error",
    "ms",
    "spread_pct",
    "n_timed",
    "timing",
    "compile_s",
    "compile_log",
    "device",
    "driver",
    "nvcc",
    "torch",
    "triton",
    "oracle_version",
    "measured_at",
    "uses",
    "code_sha",
)

#: Harness failures that say nothing about the kernel (``collect`` drops them: no answer).
#: Out-of-memory while five checking workers shared the card, a cudaMallocAsync failure
#: inside a launch wrapper under the same sharing, and a dtype the reference harness lacks.
HARNESS_FAILURES = ("OutOfMemoryError", "launch returned cudaError 2", "KeyError: 'fp8'")
#: Timing-phase errors that are the harness's: a CUDA-graph capture that failed once leaves
#: the timing worker's generator in capture state, and every later case in that process
#: fails with this message (seen on the H100, stop 35). The kernel was already checked
#: correct; the answer keeps its verdict and has no time.
TIMING_HARNESS_FAILURES = ("Offset increment outside graph capture", "OutOfMemoryError")


class OracleMiss(KeyError):
    """A question the shipped answers do not hold: replay must not invent a measurement."""


def answer_key(code: str, shape: dict[str, int], dtype: str, gpu: str) -> str:
    """The content address of a question: sha256 over the exact rendered source (for an
    author's compile-identical rewrite, the source it was rewritten from: ``rewrites``), the
    shape (sorted), the dtype, the GPU, its toolchain and the oracle version."""
    from .rewrites import canonical

    # a compile-identical rewrite of a rendered source asks the question of the source it
    # was rewritten from (``rewrites``: same PTX, so the same answer)
    payload = json.dumps(
        [canonical(code), sorted(shape.items()), dtype, gpu, TOOLCHAIN[gpu], ORACLE_VERSION],
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class Answer:
    """What the device said about one question."""

    key: str
    op: str
    impl: str
    variant: str
    status: str
    ms: float | None
    spread_pct: float | None
    max_rel_err: float | None
    error: str
    stamp: str
    #: nvcc's log of a source that did not build (paths stripped; empty otherwise)
    compile_log: str = ""
    #: how the time was taken: timed repeats, the method ("graph replay", "events, L2
    #: flushed") and the check that passed ("rel L2 vs fp32", ...)
    n_timed: int | None = None
    timing: str = ""
    check: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def usable(self) -> bool:
        """A verdict a measured step can stand on: a failure, or an ok with its time (an ok
        whose timing the harness lost says nothing about the step's time)."""
        return self.status != "ok" or self.ms is not None


def _float(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def _answer(row: dict[str, str]) -> Answer:
    stamp = (
        f"{row['device']}, driver {row['driver']}, {row['nvcc']}, torch {row['torch']}, "
        f"triton {row['triton']}, oracle {row['oracle_version']}, {row['measured_at']}"
    )
    return Answer(
        key=row["key"],
        op=row["op"],
        impl=row["impl"],
        variant=row["variant"],
        status=row["status"],
        ms=_float(row["ms"]),
        spread_pct=_float(row["spread_pct"]),
        max_rel_err=_float(row["max_rel_err"]),
        error=row["error"],
        stamp=stamp,
        compile_log=row.get("compile_log") or "",
        n_timed=int(float(row["n_timed"])) if row.get("n_timed") else None,
        timing=row.get("timing") or "",
        check=row.get("check") or "",
    )


def answers_path(gpu: str) -> Path:
    """Where a GPU's shipped answers live inside the package."""
    return Path(str(resources.files("dagster_project.sim") / "data" / "measured")) / (
        f"{gpu}_answers.csv"
    )


def read_answers(path: Path) -> dict[str, Answer]:
    """Answers of one file by key (an absent file holds none)."""
    if not path.exists():
        return {}
    with path.open(newline="") as fh:
        return {r["key"]: _answer(r) for r in csv.DictReader(fh)}


@lru_cache(maxsize=8)
def shipped_answers(gpu: str) -> dict[str, Answer]:
    """The answers shipped for ``gpu`` (empty when none were measured). These are also the
    generator's *evidence* (rung regions, dtype coverage, measured failures read them), so
    adding to this file changes what the generator writes."""
    return read_answers(answers_path(gpu))


def online_answers_path(gpu: str) -> Path:
    """The online tier's answers (``sim.online``): measured for the tier's sessions and
    kept apart from the evidence file, so that growing the tier never changes the
    generator's evidence (and with it every session's trajectory)."""
    return answers_path(gpu).with_name(f"{gpu}_online_answers.csv")


@lru_cache(maxsize=8)
def tier_answers(gpu: str) -> dict[str, Answer]:
    """Every answer a measured step can stand on: the evidence file's and the tier's."""
    return {**shipped_answers(gpu), **read_answers(online_answers_path(gpu))}


def evidence_digest() -> str:
    """sha256 (16 hex) of the evidence answer files: an online session replays byte for
    byte only under the evidence it was generated with."""
    h = hashlib.sha256()
    for gpu in sorted(TOOLCHAIN):
        p = answers_path(gpu)
        h.update(gpu.encode() + b"\0" + (p.read_bytes() if p.exists() else b""))
    return h.hexdigest()[:16]


class Oracle:
    """Looks questions up in the shipped answers; ``strict`` makes a miss an error."""

    def __init__(self, gpu: str, answers: dict[str, Answer] | None = None) -> None:
        self.gpu = gpu
        self.answers = shipped_answers(gpu) if answers is None else answers

    def get(self, code: str, shape: dict[str, int], dtype: str) -> Answer | None:
        return self.answers.get(answer_key(code, shape, dtype, self.gpu))

    def require(self, code: str, shape: dict[str, int], dtype: str, what: str) -> Answer:
        ans = self.get(code, shape, dtype)
        if ans is None:
            raise OracleMiss(
                f"no measured answer for {what} on {self.gpu} "
                f"(key {answer_key(code, shape, dtype, self.gpu)[:16]}…): the shipped answers "
                "do not cover this source; measure it on the device or drop it from the tier"
            )
        return ans


class StepOracle:
    """The measuring harness behind a session's environment (the online tier, issue 36):
    every step that compiles is answered by a real measurement of its exact source at the
    session's shape and dtype on ``gpu``, and the engineer decides on that answer.

    ``strict`` (a GPU-less replay): a question the answers lack raises ``OracleMiss``, so a
    replayed session is either the measured one, byte for byte, or not in the tier.
    Provisional (the device driver, ``benchmarks/device/sim_online.py``): a missing answer
    is recorded in ``misses`` and the step falls back to the model, so the driver learns a
    session's next questions in one pass; it measures them and generates again until a pass
    asks nothing new. ``unusable`` are keys whose answer cannot carry a step (an ok without
    a time): asking them again would not help, so such a session never completes."""

    def __init__(self, gpu: str, answers: dict[str, Answer], strict: bool = True) -> None:
        self.gpu = gpu
        self.answers = answers
        self.strict = strict
        self.misses: list[dict[str, Any]] = []
        self.unusable: set[str] = set()

    def ask(
        self, code: str, shape: dict[str, int], dtype: str, meta: dict[str, Any]
    ) -> Answer | None:
        """The answer for this step's source, or None (provisional mode) when there is none
        yet; ``meta`` (op, impl, variant, params) describes the question for the device."""
        from .rewrites import canonical

        key = answer_key(code, shape, dtype, self.gpu)
        ans = self.answers.get(key)
        if ans is not None and ans.usable:
            return ans
        if ans is not None:
            self.unusable.add(key)
        if self.strict:
            why = "its answer has no time" if ans is not None else "no measured answer"
            raise OracleMiss(f"{why} for a {meta.get('op')} step on {self.gpu} (key {key[:16]}…)")
        if ans is None:
            self.misses.append(
                {"key": key, **meta, "dtype": dtype, "shape": dict(shape), "code": canonical(code)}
            )
        return None


#: Answer statuses that say the source itself fails at its shape on any Hopper card.
_FAILED = ("wrong_result", "fault", "error", "compile_error")


@lru_cache(maxsize=2)
def _hopper_failures(online: bool = True) -> dict[tuple[str, str, str], Answer]:
    """(sha256 of source, shape, dtype) -> a failing answer measured on a Hopper card.
    ``online``: the online tier's answers too (a modelled session must not call ok a source
    the device saw fail at this shape, whichever tier asked). A session generated *in* the
    online tier reads the evidence file alone, as it did on the device: its own later
    answers must not change how it was generated (``evidence_digest`` covers that file)."""
    out: dict[tuple[str, str, str], Answer] = {}
    for gpu in ("h100", "h200"):
        paths = [answers_path(gpu)] + ([online_answers_path(gpu)] if online else [])
        for path in paths:
            if not path.exists():
                continue
            with path.open(newline="") as fh:
                for r in csv.DictReader(fh):
                    if r["status"] in _FAILED and r.get("code_sha"):
                        out[(r["code_sha"], r["shape"], r["dtype"])] = _answer(r)
    return out


def code_sha(code: str) -> str:
    """sha256 of a rendered source alone (the part of a question every GPU shares)."""
    return hashlib.sha256(code.encode()).hexdigest()


def measured_verdict(
    code: str, shape: dict[str, int], dtype: str, online: bool = True
) -> Answer | None:
    """A Hopper answer that this exact source failed at this shape and dtype, else None
    (``online``: see ``_hopper_failures``)."""
    fails = _hopper_failures(online)
    if not fails:
        return None
    from .rewrites import canonical

    return fails.get((code_sha(canonical(code)), json.dumps(shape, separators=(",", ":")), dtype))


def question(session: dict[str, Any], step: int, role: str) -> dict[str, Any]:
    """The device-side description of one step's kernel (what ``prepare`` writes)."""
    from .rewrites import canonical

    tr = session["trace"][step]
    code = session["messages"][2 + 2 * step]["content"]
    return {
        "key": answer_key(code, session["shape"], session["dtype"], session["gpu"]),
        "session_id": session["session_id"],
        "step": step,
        "role": role,
        "op": session["op"],
        "impl": session["impl"],
        "variant": tr["tag"],
        "params": tr["params"],
        "dtype": session["dtype"],
        "shape": session["shape"],
        # the text the key addresses: an author's rewrite is asked as its canonical source
        "code": canonical(code),
    }
