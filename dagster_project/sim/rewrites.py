"""Structural rewrites that compile to the same machine code (issue 39, diverse structures).

Issue 39 counted 3,330 distinct *structures* in a default build once comments, digits and
identifiers are normalised (1,745 at generator 1.12.0): authors differ in names and comments,
hardly in how code is written. New template branches would need new device evidence and would
reset the measured tier of issue 36 (answers are keyed by the exact rendered source). A
rewrite here changes how a statement is written, never what the compiler makes of it:

* CUDA (``CUDA_AXES``): ``x += e;`` as ``x = x + (e);`` (``aug``), ``++i`` as ``i++`` in loop
  headers (``postinc``), one-statement ``if``/``for`` bodies in braces (``braces``), scalar
  locals declared without ``const`` (``noconst``), functional casts ``T(e)`` as
  ``static_cast<T>(e)`` (``cast``);
* Triton (``TRITON_AXES``): ``x += e`` as ``x = x + (e)`` (``aug``), the reduction axis passed
  by position (``axispos``), ``other=`` before ``mask=`` in ``tl.load`` (``kworder``),
  ``e.to(T)`` as ``tl.cast(e, T)`` (``tocast``: ``tensor.to`` is Triton 3.6's alias of
  ``cast``), ``tl.program_id(axis=0)`` for ``tl.program_id(0)`` (``pidkw``).

Each author (``styles.Style``) has its own set of axes (``author_axes``), so sessions by
different engineers differ in structure, consistently within a session.

Evidence (``data/verification/rewrite_identity.csv``, written by
``benchmarks/sim_rewrite_evidence.py``): for CUDA, nvcc's PTX of the canonical render and of
the render with every axis applied, compiled with the prompt's flags for the rung's arch,
must be identical (names and debug lines aside) for every case compiled; identical PTX is the
same SASS for a given ptxas. For Triton, the rewritten source must be the same program to
Triton's front end: the same ``ast`` once ``x op= e`` is read as ``x = x op e`` (what
Triton 3.6's ``CodeGenerator.visit_AugAssign`` does) and call arguments are bound to
parameter names (``_bind``), and a Triton 3.6 compile of probe kernels shows the forms give
identical PTX. A render takes the author's axes only for an (op, impl, rung, arch) with such
evidence and no counter-example (``allowed``); anywhere else it keeps the canonical text.

Measured answers (``oracle``) are keyed by exact source. ``canonical`` maps a rewritten
source back to the canonical text it was made from (recorded when it was rendered in this
process), so a variant reaches the answer measured for the code it compiles to.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import re
from collections import OrderedDict
from functools import lru_cache
from importlib import resources
from pathlib import Path

#: Bump when a rewrite, the axes an author draws or the gating rule changes (renders change).
REWRITES_VERSION = "1.0.0"

CUDA_AXES: tuple[str, ...] = ("aug", "postinc", "braces", "noconst", "cast")
TRITON_AXES: tuple[str, ...] = ("aug", "axispos", "kworder", "tocast", "pidkw")

#: Where the compile-identity evidence is shipped.
EVIDENCE_FILE = "rewrite_identity.csv"


def axes_of(impl: str) -> tuple[str, ...]:
    return CUDA_AXES if impl == "cuda" else TRITON_AXES


@lru_cache(maxsize=8192)
def author_axes(author_key: str, impl: str) -> tuple[str, ...]:
    """The rewrites one author uses in ``impl``: each axis on with probability 1/2, a pure
    function of the author (``repr`` of the session's ``Style``)."""
    h = int.from_bytes(
        hashlib.blake2b(
            f"kernelhouse-rewrites-v1/{impl}/{author_key}".encode(), digest_size=8
        ).digest(),
        "big",
    )
    return tuple(a for i, a in enumerate(axes_of(impl)) if (h >> i) & 1)


# --------------------------------------------------------------------------------------
# CUDA rewrites (line by line; preprocessor, comment and string-bearing lines untouched)
# --------------------------------------------------------------------------------------

_C_AUG = re.compile(r"(?<![\w.\])>])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?) ([+\-*])= ([^;{}]+);")
_C_POSTINC = re.compile(r";\s*\+\+([A-Za-z_]\w*)\s*\)")
_C_NOCONST = re.compile(
    r"^(\s*)const ((?:float|int|int64_t|uint32_t|unsigned|bool|size_t) [A-Za-z_]\w* =)"
)
_C_CAST = re.compile(r"(?<![\w<:.])(int64_t|uint32_t|int|float|unsigned)\(")
_SIMPLE = re.compile(r"^[A-Za-z_][\w.]*(?:\[[^\[\]]*\])?$|^[\d.]+f?$")


def _balanced_close(s: str, i: int) -> int:
    """Index just past the parenthesis group opening at ``s[i] == '('`` (-1 if unbalanced)."""
    depth = 0
    for j in range(i, len(s)):
        c = s[j]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j + 1
    return -1


def _operand(e: str) -> str:
    """``e`` as the right operand of ``x op e``: parenthesised unless it is one term (a
    name, member, indexed name, literal or call), so the evaluation order is unchanged."""
    e = e.strip()
    if _SIMPLE.match(e):
        return e
    m = re.match(r"^[A-Za-z_][\w.:<>]*\(", e)
    if m and _balanced_close(e, m.end() - 1) == len(e):
        return e
    return f"({e})"


def _c_aug(ln: str) -> str:
    def sub(m: re.Match[str]) -> str:
        x, op, e = m.group(1), m.group(2), m.group(3)
        if e.count("(") != e.count(")"):
            return m.group(0)
        return f"{x} = {x} {op} {_operand(e)};"

    return _C_AUG.sub(sub, ln)


def _c_braces(ln: str) -> str:
    """``if (c) s;`` / ``for (...) s;`` on one line -> the body in braces."""
    m = re.match(r"^(\s*)(if|for) \(", ln)
    if not m:
        return ln
    end = _balanced_close(ln, m.end() - 1)
    if end < 0:
        return ln
    body = ln[end:].strip()
    if not body.endswith(";") or body.count(";") != 1 or "{" in body or "}" in body:
        return ln
    if re.match(r"^(if|for|while|else)\b", body):
        return ln
    return f"{ln[:end]} {{ {body} }}"


def _c_noconst(ln: str) -> str:
    """``const float x = e;`` -> ``float x = e;`` (a scalar local, never a pointer)."""
    return _C_NOCONST.sub(r"\1\2", ln)


def _c_cast(ln: str) -> str:
    out, at = [], 0
    for m in _C_CAST.finditer(ln):
        close = _balanced_close(ln, m.end() - 1)
        if close < 0:
            continue
        out.append(ln[at : m.start()] + f"static_cast<{m.group(1)}>(")
        at = m.end()
    out.append(ln[at:])
    return "".join(out)


def _c_postinc(ln: str) -> str:
    return _C_POSTINC.sub(lambda m: f"; {m.group(1)}++)", ln)


_CUDA_FNS = {
    "aug": _c_aug,
    "postinc": _c_postinc,
    "braces": _c_braces,
    "noconst": _c_noconst,
    "cast": _c_cast,
}


def _cuda_line_ok(ln: str) -> bool:
    s = ln.lstrip()
    if not s or s.startswith(("#", "//", "/*", "*")):
        return False
    return '"' not in ln and "asm" not in ln


def rewrite_cuda(text: str, axes: tuple[str, ...]) -> str:
    """Rewrite device code only: lines before the host launch wrapper (``extern "C"``),
    whose allocations ``memory.footprint_bytes`` reads in their canonical form."""
    memo = _memo(("cuda", axes))
    out = []
    host = False
    for ln in text.split("\n"):
        host = host or ln.startswith('extern "C"')
        if not host:
            got = memo.get(ln)
            if got is None:
                got = memo[ln] = _cuda_line(ln, axes)
            ln = got
        out.append(ln)
    return "\n".join(out)


def _cuda_line(ln: str, axes: tuple[str, ...]) -> str:
    if not _cuda_line_ok(ln):
        return ln
    code, sep, comment = ln.partition("//")
    for a in CUDA_AXES:
        if a in axes:
            code = _CUDA_FNS[a](code)
    return code + sep + comment


#: per-(impl, axes) memo of rewritten lines: renders of one rung differ in a few lines
_LINES: dict[tuple[str, tuple[str, ...]], dict[str, str]] = {}
_LINES_MAX = 100_000


def _memo(key: tuple[str, tuple[str, ...]]) -> dict[str, str]:
    memo = _LINES.get(key)
    if memo is None or len(memo) > _LINES_MAX:
        memo = _LINES[key] = {}
    return memo


# --------------------------------------------------------------------------------------
# Triton rewrites (only inside @triton.jit functions: the launch wrapper is plain Python)
# --------------------------------------------------------------------------------------

_T_AUG = re.compile(r"^(\s+)([A-Za-z_]\w*) ([+\-*])= (.+)$")
_T_REDUCE = re.compile(r"\btl\.(sum|max|min|argmax|argmin|cumsum|xor_sum)\(")
_T_LOAD = re.compile(r"\btl\.load\(")


def _split_top(s: str) -> list[str] | None:
    depth, cur, out = 0, "", []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return None if depth else out


def _calls(ln: str, pat: re.Pattern[str], edit: object) -> str:
    """Apply ``edit(args) -> args | None`` to every call of ``pat`` on the line."""
    out, at = [], 0
    for m in pat.finditer(ln):
        if m.start() < at:
            continue
        close = _balanced_close(ln, m.end() - 1)
        if close < 0:
            continue
        args = _split_top(ln[m.end() : close - 1])
        new = edit(args) if args else None  # type: ignore[operator]
        if new is None:
            continue
        out.append(ln[at : m.end()] + ",".join(new) + ")")
        at = close
    out.append(ln[at:])
    return "".join(out)


def _axispos(args: list[str]) -> list[str] | None:
    if len(args) != 2:
        return None
    m = re.match(r"^\s*axis\s*=\s*(\S.*)$", args[1])
    return [args[0], f" {m.group(1).strip()}"] if m else None


def _kworder(args: list[str]) -> list[str] | None:
    kw = [i for i, a in enumerate(args) if re.match(r"^\s*(mask|other)\s*=", a)]
    if len(kw) != 2 or kw[1] != kw[0] + 1:
        return None
    i, j = kw
    out = list(args)
    a, b = out[i].strip(), out[j].strip()
    out[i], out[j] = (" " + b if out[i].startswith(" ") else b), " " + a
    return out


_T_PID = re.compile(r"\btl\.program_id\((\d)\)")
_T_TO = re.compile(r"\.to\(")


def _receiver_start(ln: str, end: int) -> int:
    """Start of the primary expression ending at ``ln[end]`` (a name, attribute chain, call
    or subscript, or a parenthesised group); -1 when there is none."""
    j = end
    while j > 0:
        c = ln[j - 1]
        if c in ")]":
            depth, k = 0, j - 1
            while k >= 0:
                if ln[k] in ")]":
                    depth += 1
                elif ln[k] in "([":
                    depth -= 1
                    if depth == 0:
                        break
                k -= 1
            if k < 0:
                return -1
            j = k
        elif c.isalnum() or c in "_.":
            j -= 1
        else:
            break
    return j if j < end and not ln[j].isdigit() else -1


def _tocast(ln: str) -> str:
    """``e.to(T)`` -> ``tl.cast(e, T)`` for one-argument ``.to`` calls (innermost first)."""
    for _ in range(8):  # a line holds a few casts at most
        done = True
        for m in _T_TO.finditer(ln):
            close = _balanced_close(ln, m.end() - 1)
            args = _split_top(ln[m.end() : close - 1]) if close > 0 else None
            start = _receiver_start(ln, m.start())
            if not args or len(args) != 1 or "=" in args[0] or start < 0:
                continue
            recv = ln[start : m.start()]
            if recv.startswith("tl.") and "(" not in recv:
                continue  # a dtype's own method, not a tensor's
            ln = f"{ln[:start]}tl.cast({recv}, {args[0].strip()}){ln[close:]}"
            done = False
            break
        if done:
            break
    return ln


def _t_line(ln: str, axes: tuple[str, ...]) -> str:
    if "aug" in axes:
        m = _T_AUG.match(ln)
        if m and "#" not in m.group(4):
            x, op = m.group(2), m.group(3)
            ln = f"{m.group(1)}{x} = {x} {op} {_operand(m.group(4))}"
    if "axispos" in axes:
        ln = _calls(ln, _T_REDUCE, _axispos)
    if "kworder" in axes:
        ln = _calls(ln, _T_LOAD, _kworder)
    if "tocast" in axes and ".to(" in ln:
        ln = _tocast(ln)
    if "pidkw" in axes:
        ln = _T_PID.sub(r"tl.program_id(axis=\1)", ln)
    return ln


def rewrite_triton(text: str, axes: tuple[str, ...]) -> str:
    """Rewrite the bodies of ``@triton.jit`` functions (a top-level ``def`` right after the
    decorator, up to the next top-level statement)."""
    memo = _memo(("triton", axes))
    out = []
    in_jit = pending = False
    for ln in text.split("\n"):
        s = ln.strip()
        top = bool(ln) and not ln[0].isspace()
        if top and s.startswith("@triton.jit"):
            pending = True
        elif top and s.startswith("def "):
            in_jit, pending = pending, False
        elif top and not s.startswith((")", "#")):
            in_jit = False
        elif in_jit and not top and s and not s.startswith("#"):
            got = memo.get(ln)
            if got is None:
                got = memo[ln] = _t_line(ln, axes)
            ln = got
        out.append(ln)
    return "\n".join(out)


def rewrite(text: str, impl: str, axes: tuple[str, ...]) -> str:
    """``text`` with the rewrites ``axes`` applied (no axes: ``text`` itself)."""
    if not axes:
        return text
    return rewrite_cuda(text, axes) if impl == "cuda" else rewrite_triton(text, axes)


# --------------------------------------------------------------------------------------
# Triton front-end identity: the same program to ``triton.compiler.code_generator``
# --------------------------------------------------------------------------------------

#: Parameter names of the calls whose positional arguments ``_bind`` names (Triton 3.6).
_TL_PARAMS: dict[str, tuple[str, ...]] = {
    "sum": ("input", "axis"),
    "max": ("input", "axis"),
    "min": ("input", "axis"),
    "argmax": ("input", "axis"),
    "argmin": ("input", "axis"),
    "cumsum": ("input", "axis"),
    "xor_sum": ("input", "axis"),
    "load": ("pointer", "mask", "other"),
    "cast": ("input", "dtype", "fp_downcast_rounding", "bitcast"),
    "program_id": ("axis",),
}


class _Normal(ast.NodeTransformer):
    """``x op= e`` -> ``x = x op e`` (Triton's own reading); ``tl.f(a, b)`` -> keywords,
    keywords sorted (Python binds them by name, so their order is not the program's)."""

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        load = (
            ast.Name(id=node.target.id, ctx=ast.Load())
            if isinstance(node.target, ast.Name)
            else node.target
        )
        return ast.Assign(targets=[node.target], value=ast.BinOp(load, node.op, node.value))

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if (  # ``e.to(T)`` is ``tl.cast(e, T)`` (Triton 3.6: ``tensor.to`` calls ``cast``)
            isinstance(f, ast.Attribute)
            and f.attr == "to"
            and not (isinstance(f.value, ast.Name) and f.value.id == "tl")
        ):
            node.args = [f.value, *node.args]
            node.func = f = ast.Attribute(
                value=ast.Name(id="tl", ctx=ast.Load()), attr="cast", ctx=ast.Load()
            )
        if (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f.value.id == "tl"
            and f.attr in _TL_PARAMS
        ):
            names = _TL_PARAMS[f.attr]
            kws = [ast.keyword(arg=n, value=a) for n, a in zip(names, node.args, strict=False)]
            node.args = node.args[len(names) :]
            node.keywords = kws + list(node.keywords)
        node.keywords = sorted(node.keywords, key=lambda k: k.arg or "")
        return node


def frontend_form(text: str) -> str:
    """The program Triton's front end sees, as a comparable string (``ast.dump`` of the
    normalised module, no positions)."""
    tree = _Normal().visit(ast.parse(text))
    return ast.dump(ast.fix_missing_locations(tree), include_attributes=False)


# --------------------------------------------------------------------------------------
# evidence and gating
# --------------------------------------------------------------------------------------


def evidence_path() -> Path:
    return Path(str(resources.files("dagster_project.sim") / "data" / "verification")) / (
        EVIDENCE_FILE
    )


@lru_cache(maxsize=1)
def _evidence() -> dict[tuple[str, str, str, str], tuple[int, int]]:
    """(impl, op, rung, arch) -> (cases compiled, cases identical), this version's rows."""
    path = evidence_path()
    out: dict[tuple[str, str, str, str], tuple[int, int]] = {}
    if not path.exists():
        return out
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            if r["rewrites_version"] != REWRITES_VERSION:
                continue
            k = (r["impl"], r["op"], r["variant"], r["arch"])
            n, same = out.get(k, (0, 0))
            out[k] = (n + 1, same + (r["identical"] == "1"))
    return out


def allowed(op: str, impl: str, variant: str, arch: str) -> bool:
    """May a render of this rung on this arch take its author's rewrites? Only with
    compile-identity evidence for the key (Triton: any arch, the front end's program is
    arch-free) and no case that compiled differently."""
    ev = _evidence()
    n, same = ev.get((impl, op, variant, arch if impl == "cuda" else "*"), (0, 0))
    return n > 0 and same == n


# --------------------------------------------------------------------------------------
# canonical text of a variant (what the measured answers are keyed by)
# --------------------------------------------------------------------------------------

_CANON: OrderedDict[str, str] = OrderedDict()
_CANON_MAX = 16384


def remember(variant: str, canonical_text: str) -> None:
    """Record that ``variant`` was rendered as a rewrite of ``canonical_text``."""
    if variant == canonical_text:
        return
    _CANON[variant] = canonical_text
    _CANON.move_to_end(variant)
    if len(_CANON) > _CANON_MAX:
        _CANON.popitem(last=False)


def canonical(code: str) -> str:
    """The canonical render a variant was made from (``code`` itself when it is not a
    variant rendered in this process: a miss is a miss, never another kernel's answer)."""
    return _CANON.get(code, code)
