"""What a reviewer sees when it reads a candidate before the harness compiles it.

A review happens *before* anything is compiled, so it may only use the submitted source,
the task (shape, dtype) and the target GPU the prompt names. ``read_candidate`` works out
from those:

* resources: shared memory from the code's ``kSmemBytes`` constant (line quoted) or, where
  the code has none (Triton, guard-less templates), the footprint of its tiles; the
  register budget ``__launch_bounds__`` leaves per thread and an estimate of what the
  kernel holds; whether each tile divides the extent it walks;
* gated features the target lacks (the arch is in the prompt);
* a concrete defect with its line, found by reading the lines that differ from what the
  rung's code has to be (a reviewer knows the pattern it is reviewing): a dropped
  semicolon, a misspelt identifier, a removed barrier or mask.

It never looks at the harness's ``Submission`` (diagnostic, slip record, status): that
output does not exist yet at review time. Resource overflows and missing features are
arithmetic, so every reviewer finds them; a slip or a planted bug is found with the
reviewer's skill-dependent probability (``SwarmAgent.p_catch``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..env import KernelEnv
from ..hardware import min_arch_for
from ..kernels import decode_dims, ew_elems, gemm_mnk, prefill_dims, row_dims
from ..variants import Params, Variant

_SMEM_CONST = re.compile(r"constexpr\s+int\s+kSmemBytes\s*=\s*(\d+)\s*;")
_BOUNDS = re.compile(r"__launch_bounds__\(\s*([A-Za-z_]\w*|\d+)\s*(?:,\s*([A-Za-z_]\w*|\d+))?\s*\)")
_TOKEN = re.compile(r"[A-Za-z_][\w.]*|\d+|;")
#: a defect is only "seen" in a few lines; a larger difference is not a single mistake
_MAX_CHANGED = 6
REGS_PER_SM = 65536
MAX_REGS = 255

#: The reviewer's words for each planted bug (keyed like ``codegen.FAMILY_BUGS``).
BUG_NOTES: dict[str, str] = {
    "missing_sync": "no barrier between the shared-memory tile store and its first read: a race",
    "no_tail_mask": "the last partial tile is loaded and stored without a bounds mask",
    "splitk_race": "split partials are summed into the output without atomics or a reduce pass",
    "no_rescale": "the running output is not rescaled when the running max changes",
    "eps_outside": "eps is added after the square root instead of inside it",
    "wrong_scale": "dequantisation applies the scale of the wrong group",
    "wrong_index": "the output offset swaps the row and column strides",
    "stale_max": "the threshold is taken from a block-local max instead of the row max",
    "state_reset": "the recurrent state is zeroed at every chunk boundary",
}


@dataclass(frozen=True)
class Tile:
    """One tile parameter against the extent it walks."""

    param: str
    size: int
    dim: str
    extent: int

    @property
    def rem(self) -> int:
        return self.extent % self.size


@dataclass
class Reading:
    """A reviewer's own analysis of one candidate (no harness output in it)."""

    smem: int
    smem_line: int | None
    cap: int
    threads: int
    reg_budget: int
    regs_est: int
    tiles: list[Tile] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    #: (kind, 1-based line in the submitted code, what is wrong there)
    defect: tuple[str, int, str] | None = None

    @property
    def over(self) -> bool:
        return self.smem > self.cap


def _code_const(lines: list[str], name: str) -> int | None:
    pat = re.compile(rf"constexpr\s+int\s+{re.escape(name)}\s*=\s*(\d+)\s*;")
    for ln in lines:
        m = pat.search(ln)
        if m:
            return int(m.group(1))
    return None


def _gemm_extents(op: Any, s: dict[str, int]) -> list[tuple[str, str, int]]:
    """A GEMM's tile parameters (CUDA and Triton names) against M, N and K."""
    m, n, k = gemm_mnk(op, s)
    return [
        ("BM", "M", m),
        ("BLOCK_M", "M", m),
        ("BN", "N", n),
        ("BLOCK_N", "N", n),
        ("BK", "K", k),
        ("BLOCK_K", "K", k),
        ("TB", "M", m),
    ]


def _prefill_extents(op: Any, s: dict[str, int]) -> list[tuple[str, str, int]]:
    """Prefill attention's query and key/value tiles against Sq and Skv."""
    d = prefill_dims(op, s)
    return [("BLOCK_M", "Sq", d["Sq"]), ("BLOCK_N", "Skv", d["Skv"])]


#: Per family: (tile parameter, the extent's name, the extent) for the task's shape.
_TILE_EXTENTS: dict[str, Callable[[Any, dict[str, int]], list[tuple[str, str, int]]]] = {
    "gemm": _gemm_extents,
    "attn_decode": lambda op, s: [("BLOCK_N", "Skv", decode_dims(op, s)["Skv"])],
    "attn_prefill": _prefill_extents,
    "rowwise": lambda op, s: [("BLOCK", "row", row_dims(op, s)[1])],
    "elementwise": lambda op, s: [("BLOCK", "elements", ew_elems(op, s))],
    "sampling": lambda op, s: [("BLOCK", "V", s["V"])],
    "gemv": lambda op, s: [("BLOCK_N", "N", s["N"]), ("BLOCK_K", "K", s.get("K", 0))],
}


def _tiles(env: KernelEnv, p: Params) -> list[Tile]:
    """Tile parameters of the candidate and the extents they divide (or do not)."""
    extents = _TILE_EXTENTS.get(env.op.family)
    if extents is None:
        return []
    out: list[Tile] = []
    for name, dim, extent in extents(env.op, env.shape):
        size = p.get(name)
        if isinstance(size, int) and size > 1 and extent > 0:
            out.append(Tile(name, size, dim, extent))
    return out


def _defect(clean: str, code: str, bug: str | None) -> tuple[str, int, str] | None:
    """The changed lines of ``code`` against the rung's pattern, in the reviewer's words."""
    if code == clean:
        return None
    a, b = clean.split("\n"), code.split("\n")
    ops = [
        o
        for o in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        if o[0] != "equal"
    ]
    if not ops or sum(max(i2 - i1, j2 - j1) for _, i1, i2, j1, j2 in ops) > _MAX_CHANGED:
        return None
    tag, i1, i2, j1, j2 = ops[0]
    line = j1 + 1
    if bug is not None:
        where = b[j1].strip() if j1 < len(b) else ""
        note = BUG_NOTES.get(bug, bug.replace("_", " "))
        if tag == "delete":
            return "bug", line, f"{note}; `{a[i1].strip()[:70]}` is missing before line {line}"
        return "bug", line, f"{note} (line {line}: `{where[:70]}`)"
    if tag == "delete":
        return "slip", line, f"`{a[i1].strip()[:70]}` is missing before line {line}"
    return _slip_words(a[i1] if i1 < i2 else "", b[j1], line)


def _slip_words(old: str, new: str, line: int) -> tuple[str, int, str]:
    """A slip on a changed line, named by the tokens it lost and gained (a dropped `;`, a
    misspelt identifier, ...)."""
    gone = [t for t in _TOKEN.findall(old) if t not in _TOKEN.findall(new)]
    added = [t for t in _TOKEN.findall(new) if t not in _TOKEN.findall(old)]
    if gone == [";"] and not added:
        return (
            "slip",
            line,
            f"line {line} ends without the `;` of its statement: `{new.strip()[:70]}`",
        )
    near = [(g, x) for g in gone for x in added if g.startswith(x) or x.startswith(g)]
    if near:
        return (
            "slip",
            line,
            (
                f"line {line} uses `{near[0][1]}` where the kernel needs `{near[0][0]}`: "
                f"`{new.strip()[:70]}`"
            ),
        )
    if len(gone) == 1 and len(added) == 1:
        return (
            "slip",
            line,
            (
                f"line {line} uses `{added[0]}` where the code means `{gone[0]}`: "
                f"`{new.strip()[:70]}`"
            ),
        )
    if gone and not added:
        return "slip", line, f"line {line} lost `{' '.join(gone)[:40]}`: `{new.strip()[:70]}`"
    if added and not gone:
        return "slip", line, f"line {line} adds `{' '.join(added)[:40]}`: `{new.strip()[:70]}`"
    return "slip", line, f"line {line} does not match the rest of the kernel: `{new.strip()[:70]}`"


def read_candidate(env: KernelEnv, v: Variant, p: Params, code: str, bug: str | None) -> Reading:
    """Everything a careful reviewer can work out from the submitted source alone."""
    lines = code.split("\n")
    kp = env.plan(v, p)  # the footprint of the code's tiles (test_truth checks code == plan)
    smem, smem_line = kp.smem, None
    for i, ln in enumerate(lines):
        m = _SMEM_CONST.search(ln)
        if m:
            smem, smem_line = int(m.group(1)), i + 1
            break
    threads, minb = kp.threads, 1
    for ln in lines:
        m = _BOUNDS.search(ln)
        if m:
            t = m.group(1)
            threads = int(t) if t.isdigit() else (_code_const(lines, t) or kp.threads)
            if m.group(2):
                mb = m.group(2)
                minb = int(mb) if mb.isdigit() else (_code_const(lines, mb) or 1)
            break
    budget = min(MAX_REGS, (REGS_PER_SM // max(1, threads * minb)) // 8 * 8)
    regs_est = -(-kp.regs // 8) * 8  # a reviewer counts live values, to allocation granularity
    clean = env.code(v, p)
    return Reading(
        smem=smem,
        smem_line=smem_line,
        cap=env.gpu.smem_per_block_optin,
        threads=threads,
        reg_budget=budget,
        regs_est=regs_est,
        tiles=_tiles(env, p),
        missing=env.missing(v, p),
        defect=_defect(clean, code, bug),
    )


def fail_note(r: Reading, arch: str) -> str:
    """Why the reviewer rejects the candidate: the arithmetic first, then the line."""
    parts = []
    if r.missing:
        miss = ", ".join(f"{f} (needs {min_arch_for(f)})" for f in r.missing)
        parts.append(f"uses {miss}, which {arch} does not have")
    if r.over:
        at = (
            f"kSmemBytes = {r.smem} on line {r.smem_line}"
            if r.smem_line
            else f"the tiles take {r.smem} B"
        )
        parts.append(
            f"{at}: {r.smem - r.cap} B over the {r.cap} B per-block opt-in limit of {arch}"
        )
    if r.defect is not None:
        parts.append(r.defect[2])
    return "; ".join(parts)


def pass_note(r: Reading) -> str:
    """What the reviewer checked and found in order, stated with its numbers."""
    parts = []
    head = r.cap - r.smem
    if r.smem == 0:
        parts.append("no shared memory")
    elif head < r.cap * 0.15:
        parts.append(f"{r.smem} B shared memory (limit {r.cap} B), only {head} B of headroom")
    else:
        where = f" (kSmemBytes, line {r.smem_line})" if r.smem_line else ""
        parts.append(f"{r.smem} B shared memory (limit {r.cap} B){where}")
    if r.regs_est > r.reg_budget:
        parts.append(
            f"~{r.regs_est} registers/thread wanted but {r.threads} threads leave {r.reg_budget}: "
            "expect spills"
        )
    else:
        parts.append(f"~{r.regs_est} of {r.reg_budget} registers/thread at {r.threads} threads")
    ragged = [t for t in r.tiles if t.rem]
    even = [t for t in r.tiles if not t.rem]
    if ragged:
        parts.append(
            ", ".join(
                f"{t.dim}={t.extent} leaves a {t.rem}-wide tail for {t.param}={t.size}"
                for t in ragged
            )
            + ": the tail needs its mask"
        )
    elif even:
        parts.append(", ".join(f"{t.param}={t.size} divides {t.dim}={t.extent}" for t in even))
    return "; ".join(parts)
