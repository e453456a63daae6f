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

1.1.0 (39e) adds forms of declarations and calls, because 39d's statement forms have one or two
sites in a small kernel, and sessions sharing a kernel then drew the same form: CUDA specifier
order, ``typedef``, ``class`` template parameters, ``__launch_bounds__`` before the return type,
``static constexpr``, loop steps spelled out, C casts; Triton masks in parentheses, load / store
/ zeros / full arguments by position (names and constants only, see below), ``tl.range`` for an
option-less ``range`` (``CUDA_AXES`` / ``TRITON_AXES`` say which is which).

Each author (``styles.Style``) has its own set of axes (``author_axes``), so sessions by
different engineers differ in structure, consistently within a session.

Evidence (``data/verification/rewrite_identity.csv``, written by
``benchmarks/sim_rewrite_evidence.py``): for CUDA, nvcc's PTX of the canonical render and of
the render with every axis applied, compiled with the prompt's flags for the rung's arch,
must be identical (names and debug lines aside) for every case compiled; identical PTX is the
same SASS for a given ptxas. For Triton, the rewritten source must be the same program to
Triton's front end: the same ``ast`` once ``x op= e`` is read as ``x = x op e`` (what
Triton 3.6's ``CodeGenerator.visit_AugAssign`` does) and call arguments are bound to
parameter names, with the IR-emitting arguments kept in the order Triton evaluates them
(keywords before positional arguments: moving a mask expression from one to the other reorders
its ops, and a probe compiled to different PTX), and a Triton 3.6 compile of probe kernels
shows the forms give identical PTX. A render takes the axes its (op, impl, rung, arch) has
such evidence for (``allowed_axes``); anywhere else it keeps the canonical text.

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
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from pathlib import Path

#: Bump when a rewrite, the axes an author draws or the gating rule changes (renders change).
REWRITES_VERSION = "1.1.0"

#: 1.0.0's axes (39d); their functions are unchanged since, so 1.0.0's evidence rows still
#: prove them (``EVIDENCE_VERSIONS``)
CUDA_AXES_1_0: tuple[str, ...] = ("aug", "postinc", "braces", "noconst", "cast")
TRITON_AXES_1_0: tuple[str, ...] = ("aug", "axispos", "kworder", "tocast", "pidkw")
#: the axes in the order they are applied (an author's draw of the 1.0.0 axes is unchanged:
#: new axes take the next bits of the author's hash, ``author_axes``)
CUDA_AXES: tuple[str, ...] = (
    *CUDA_AXES_1_0,
    "specorder",  # ``__device__ __forceinline__`` as ``__forceinline__ __device__``
    "typedef",  # ``using T = U;`` as ``typedef U T;``
    "classt",  # ``template <typename T>`` as ``template <class T>``
    "lbpos",  # ``__global__ __launch_bounds__(n) void k(...)``
    "staticcx",  # file-scope ``constexpr`` constants declared ``static constexpr``
    "stepaug",  # a loop header's ``i += s`` as ``i = i + s``
    "ccast",  # ``static_cast<T>(e)`` of an arithmetic T as the C cast ``(T)(e)``
)
TRITON_AXES: tuple[str, ...] = (
    *TRITON_AXES_1_0,
    "maskparen",  # ``mask=a < b`` as ``mask=(a < b)`` (the same Python ast)
    "loadpos",  # ``tl.load(p, mask=m, other=o)`` as ``tl.load(p, m, o)``
    "storepos",  # ``tl.store(p, v, mask=m)`` as ``tl.store(p, v, m)``
    "dtypepos",  # ``tl.zeros(s, dtype=t)`` / ``tl.full(s, x, dtype=t)`` with t by position
    "tlrange",  # ``for i in range(a, b, c)`` as ``for i in tl.range(a, b, c)`` (no options)
)
#: rewrites versions whose evidence rows are still valid: a row proves the axes it lists,
#: compiled together, with the functions of its version (none of 1.0.0's changed in 1.1.0)
EVIDENCE_VERSIONS: tuple[str, ...] = ("1.0.0", REWRITES_VERSION)

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


def _c_specorder(ln: str) -> str:
    """Declaration specifiers in the other order (the language does not order them)."""
    return ln.replace("__device__ __forceinline__", "__forceinline__ __device__")


_C_USING = re.compile(r"^using ([A-Za-z_]\w*) = ([^;=]+);")


def _c_typedef(ln: str) -> str:
    """A file-scope type alias as a ``typedef`` (the same declaration)."""
    return _C_USING.sub(r"typedef \2 \1;", ln)


_C_TEMPLATE = re.compile(r"\btemplate <([^<>]*)>")


def _c_classt(ln: str) -> str:
    """``typename`` template parameters as ``class`` (the same meaning in a parameter list)."""
    return _C_TEMPLATE.sub(
        lambda m: "template <" + re.sub(r"\btypename ", "class ", m.group(1)) + ">", ln
    )


_C_LAUNCH = re.compile(r"^__global__ void (__launch_bounds__\()")


def _c_lbpos(ln: str) -> str:
    """``__launch_bounds__`` before the return type instead of after it."""
    m = _C_LAUNCH.match(ln)
    close = _balanced_close(ln, m.end() - 1) if m else -1
    if m is None or close < 0:
        return ln
    return "__global__ " + ln[len("__global__ void ") : close] + " void" + ln[close:]


def _c_staticcx(ln: str) -> str:
    """A file-scope ``constexpr`` constant (internal linkage already) declared ``static``."""
    return "static " + ln if ln.startswith("constexpr ") else ln


_C_FOR = re.compile(r"\bfor \(")
_C_STEP = re.compile(r"^\s*([A-Za-z_]\w*) ([+\-*])= (.+?)\s*$")


def _c_stepaug(ln: str) -> str:
    """A loop header's increment ``i += s`` as ``i = i + s`` (one increment, no comma)."""
    m = _C_FOR.search(ln)
    close = _balanced_close(ln, m.end() - 1) if m else -1
    if m is None or close < 0:
        return ln
    parts = ln[m.end() : close - 1].split(";")
    step = _C_STEP.match(parts[2]) if len(parts) == 3 and "," not in parts[2] else None
    if step is None:
        return ln
    x, op, e = step.groups()
    parts[2] = f" {x} = {x} {op} {_operand(e)}"
    return ln[: m.end()] + ";".join(parts) + ln[close - 1 :]


_C_STATIC_CAST = re.compile(r"\bstatic_cast<(int64_t|uint32_t|int|float|unsigned)>\(")
#: lines ``memory.py`` evaluates (constants and integer locals): their casts stay C++ casts
_C_EVALUATED = re.compile(r"\bconstexpr\b|\bconst (?:int|int64_t|long|size_t|unsigned) \w+ =")


def _c_ccast(ln: str) -> str:
    """``static_cast<T>(e)`` of an arithmetic ``T`` as ``(T)(e)``: for arithmetic types the
    C cast is that static_cast. Parenthesised whole where a postfix operator follows, whose
    precedence would otherwise differ."""
    if _C_EVALUATED.search(ln):
        return ln
    out, at = [], 0
    for m in _C_STATIC_CAST.finditer(ln):
        close = _balanced_close(ln, m.end() - 1)
        if m.start() < at or close < 0:
            continue
        cast = f"({m.group(1)})({ln[m.end() : close - 1]})"
        nxt = ln[close : close + 2]
        if nxt[:1] in ("[", ".", "(") or nxt in ("->", "++", "--"):
            cast = f"({cast})"
        out.append(ln[at : m.start()] + cast)
        at = close
    out.append(ln[at:])
    return "".join(out)


_CUDA_FNS = {
    "aug": _c_aug,
    "postinc": _c_postinc,
    "braces": _c_braces,
    "noconst": _c_noconst,
    "cast": _c_cast,
    "specorder": _c_specorder,
    "typedef": _c_typedef,
    "classt": _c_classt,
    "lbpos": _c_lbpos,
    "staticcx": _c_staticcx,
    "stepaug": _c_stepaug,
    "ccast": _c_ccast,
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


def split_top_level(s: str) -> list[str] | None:
    """``s`` split at its top-level commas (not inside brackets), pieces unstripped; None
    when the brackets do not balance. One home for the renderer's argument splitting
    (``styles`` strips the pieces it gets from here)."""
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


def _calls(ln: str, pat: re.Pattern[str], edit: Callable[[list[str]], list[str] | None]) -> str:
    """Apply ``edit(args) -> args | None`` to every call of ``pat`` on the line."""
    out, at = [], 0
    for m in pat.finditer(ln):
        if m.start() < at:
            continue
        close = _balanced_close(ln, m.end() - 1)
        if close < 0:
            continue
        args = split_top_level(ln[m.end() : close - 1])
        new = edit(args) if args else None
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
            args = split_top_level(ln[m.end() : close - 1]) if close > 0 else None
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


_T_KW = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)\s*(.*)$", re.S)


def _pure_text(expr: str) -> bool:
    """``_pure`` of an argument's text (False where it does not parse alone)."""
    try:
        return _pure(ast.parse(expr.strip(), mode="eval").body)
    except SyntaxError:
        return False


def _by_position(params: tuple[str, ...]) -> Callable[[list[str]], list[str] | None]:
    """An ``edit`` for ``_calls``: the keyword arguments that name the parameters right after
    the positional ones (in the function's own order) passed by position, where each is a
    name or a constant: Python binds them to the same parameters, and as they emit no IR
    Triton's evaluation order (keywords first) is not changed (``frontend_form`` checks both)."""

    def edit(args: list[str]) -> list[str] | None:
        pos: list[str] = []
        kws: dict[str, str] = {}
        for a in args:
            m = _T_KW.match(a)
            if m:
                kws[m.group(1)] = m.group(2).strip()
            elif kws:
                return None
            else:
                pos.append(a)
        n = len(pos)
        while len(pos) < len(params) and _pure_text(kws.get(params[len(pos)], "(")):
            pos.append(" " + kws.pop(params[len(pos)]))
        if len(pos) == n:
            return None
        return pos + [a for a in args if (m := _T_KW.match(a)) and m.group(1) in kws]

    return edit


def _t_maskparen(ln: str) -> str:
    """``mask=<comparison or & / | of masks>`` as ``mask=(...)`` (parentheses are not in the
    Python ast the front end reads)."""
    out, at = [], 0
    for m in re.finditer(r"\bmask=", ln):
        j = k = m.end()
        depth = 0
        while k < len(ln) and not (depth == 0 and ln[k] in ",)]}"):
            depth += (ln[k] in "([{") - (ln[k] in ")]}")
            k += 1
        val = ln[j:k]
        whole = val.startswith("(") and _balanced_close(val, 0) == len(val)
        if whole or not re.search(r"[<>]|==|!=| & | \| ", val):
            continue
        out.append(f"{ln[at:j]}({val})")
        at = k
    out.append(ln[at:])
    return "".join(out)


_T_STORE = re.compile(r"\btl\.store\(")
_T_ZEROS = re.compile(r"\btl\.zeros\(")
_T_FULL = re.compile(r"\btl\.full\(")
_LOAD_POS = _by_position(("pointer", "mask", "other"))
_STORE_POS = _by_position(("pointer", "value", "mask"))
_ZEROS_POS = _by_position(("shape", "dtype"))
_FULL_POS = _by_position(("shape", "value", "dtype"))


def _t_aug(ln: str) -> str:
    m = _T_AUG.match(ln)
    if m is None or "#" in m.group(4):
        return ln
    x, op = m.group(2), m.group(3)
    return f"{m.group(1)}{x} = {x} {op} {_operand(m.group(4))}"


_T_RANGE = re.compile(r"^(\s+for [A-Za-z_]\w* in )range\(")


def _t_tlrange(ln: str) -> str:
    """``range(...)`` -> ``tl.range(...)`` when it has no keyword: Triton 3.6 ignores keywords
    of the builtin ``range`` (a ``num_stages=`` there does nothing) and honours ``tl.range``'s."""
    m = _T_RANGE.match(ln)
    close = _balanced_close(ln, m.end() - 1) if m else -1
    args = split_top_level(ln[m.end() : close - 1]) if m and close > 0 else None
    if m is None or not args or any(_T_KW.match(a) for a in args):
        return ln
    return f"{m.group(1)}tl.{ln[len(m.group(1)) :]}"


_TRITON_FNS: dict[str, Callable[[str], str]] = {
    "aug": _t_aug,
    "axispos": lambda ln: _calls(ln, _T_REDUCE, _axispos),
    "kworder": lambda ln: _calls(ln, _T_LOAD, _kworder),
    "tocast": lambda ln: _tocast(ln) if ".to(" in ln else ln,
    "pidkw": lambda ln: _T_PID.sub(r"tl.program_id(axis=\1)", ln),
    "maskparen": lambda ln: _t_maskparen(ln) if "mask=" in ln else ln,
    "loadpos": lambda ln: _calls(ln, _T_LOAD, _LOAD_POS),
    "storepos": lambda ln: _calls(ln, _T_STORE, _STORE_POS),
    "dtypepos": lambda ln: (
        _calls(_calls(ln, _T_ZEROS, _ZEROS_POS), _T_FULL, _FULL_POS) if "dtype=" in ln else ln
    ),
    "tlrange": lambda ln: _t_tlrange(ln),
}


def _t_line(ln: str, axes: tuple[str, ...]) -> str:
    for a in TRITON_AXES:
        if a in axes:
            ln = _TRITON_FNS[a](ln)
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
    # 1.1.0: the calls whose arguments ``loadpos`` / ``storepos`` / ``dtypepos`` pass by position
    "store": ("pointer", "value", "mask", "boundary_check", "cache_modifier", "eviction_policy"),
    "zeros": ("shape", "dtype"),
    "full": ("shape", "value", "dtype"),
}


def _pure(node: ast.AST) -> bool:
    """Does evaluating this argument emit no IR in Triton's front end? Constants, names,
    attribute chains (``tl.float32``, ``p.dtype.element_ty``), a sign on one, ``float("inf")``;
    an operation or subscript on a tensor emits an op where it is evaluated."""
    if isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, ast.Attribute):
        return _pure(node.value)
    if isinstance(node, ast.UnaryOp):
        return _pure(node.operand)
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("float", "int")
        and not node.keywords
        and all(isinstance(a, ast.Constant) for a in node.args)
    )


def _evaluation_order(node: ast.Call) -> list[ast.AST]:
    """The arguments of a call that emit IR, in the order Triton 3.6 evaluates them
    (``CodeGenerator.visit_Call``: the callee, e.g. the receiver of ``e.to(T)``, then the
    keyword arguments as written, then the positional ones)."""
    f = node.func
    head = [f.value] if isinstance(f, ast.Attribute) and f.attr == "to" else []
    args = [*head, *(k.value for k in node.keywords), *node.args]
    return [a for a in args if not _pure(a)]


class _Normal(ast.NodeTransformer):
    """``x op= e`` -> ``x = x op e`` (Triton's own reading); ``tl.f(a, b)`` -> keywords,
    keywords sorted (Python binds them by name, so their order is not the program's), and
    the call's IR-emitting arguments in Triton's evaluation order kept beside them (1.1.0:
    Triton evaluates keyword arguments before positional ones, so moving an expression from
    one to the other reorders the ops it emits; 1.0.0's check missed that)."""

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
        order = [ast.dump(a) for a in _evaluation_order(node)]
        f = node.func
        if (  # ``tl.range(a, b, c)`` without options: Triton 3.6's ``visit_For`` makes the
            # same loop as for ``range`` (bounds and step alike, no stage/unroll attributes)
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f.value.id == "tl"
            and f.attr == "range"
            and not node.keywords
            and len(node.args) <= 3
        ):
            node.func = f = ast.Name(id="range", ctx=ast.Load())
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
        if len(order) > 1:
            node.keywords.append(ast.keyword(arg="~order", value=ast.Constant("\n".join(order))))
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
def _evidence() -> dict[tuple[str, str, str, str], tuple[frozenset[str], list[frozenset[str]]]]:
    """(impl, op, rung, arch) -> (axes of the rows that compiled identically, the axis sets of
    the rows that did not), over the rows of ``EVIDENCE_VERSIONS``. A 1.0.0 row stands for
    all 1.0.0 axes, as 1.0.0 read it (its tier rows compiled an author's subset); a later row
    for the axes it lists, compiled together."""
    path = evidence_path()
    out: dict[tuple[str, str, str, str], tuple[frozenset[str], list[frozenset[str]]]] = {}
    if not path.exists():
        return out
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            if r["rewrites_version"] not in EVIDENCE_VERSIONS or (
                r["impl"] == "triton" and r["rewrites_version"] == "1.0.0"
            ):  # 1.0.0's Triton check ignored the evaluation order; 1.1.0 checked every key
                continue
            k = (r["impl"], r["op"], r["variant"], r["arch"])
            same, bad = out.get(k, (frozenset(), []))
            axes = frozenset(r["axes"].split("+"))
            if r["rewrites_version"] == "1.0.0":
                axes = frozenset(CUDA_AXES_1_0 if r["impl"] == "cuda" else TRITON_AXES_1_0)
            out[k] = (same | axes, bad) if r["identical"] == "1" else (same, [*bad, axes])
    return out


def allowed_axes(op: str, impl: str, variant: str, arch: str) -> frozenset[str]:
    """The rewrites a render of this rung on this arch may take (Triton: any arch, the front
    end's program is arch-free): the axes of its cases that compiled identically, less every
    axis of a case that compiled differently although each of its axes was shown identical
    elsewhere. A counter-example with an axis never shown identical (sm_120 stream-K GEMMs:
    every axis with ``noconst``; the same set without it identical) blames that axis, which is
    not allowed anyway."""
    same, bad = _evidence().get(
        (impl, op, variant, arch if impl == "cuda" else "*"), (frozenset(), [])
    )
    blocked = frozenset().union(*(b for b in bad if b <= same))
    return same - blocked


def allowed(op: str, impl: str, variant: str, arch: str) -> bool:
    """May a render of this rung on this arch take any of its author's rewrites?"""
    return bool(allowed_axes(op, impl, variant, arch))


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
