"""Does a change touch the body of a kernel, or only the code around it?

The reference found that 58% of Triton rows change only launch wrappers, configs or host
logic outside every ``@triton.*`` function (§2, "content-level issues"). ``touches_kernel_body``
is the flag users filter on: True when a removed line (old side) lies inside a kernel
function of before_code, or an added line (new side) lies inside one of after_code.
Changed lines, not hunk extents, are used: a hunk's three context lines can reach into a
neighbouring kernel the commit never changed. Formatting is not a body change (issue 41, v3):
when the changed lines inside kernels read the same on both sides once comments and all
whitespace are dropped (a re-indent, a reflowed call, a comment edited), the flag is False;
16 mined rows changed only whitespace or comments and 5 of them were flagged before.

What counts as a kernel function:

* Python (Triton, CuTe DSL): a function whose decorator is ``@triton.*`` or ``@cute.*``
  (``jit``, ``autotune``, ``heuristics``, ``kernel`` …; a bare ``@jit`` too when imported
  from triton), from its first such decorator to its last line. Decorator arguments
  (autotune configs) are part of the kernel. Decorated classes (``@cute.struct``) are not.
* CUDA / C++: a function declared ``__global__`` or ``__device__`` (also through the
  CUTLASS/CuTe/FlashInfer macros that expand to them, e.g. ``CUTLASS_DEVICE``), from the
  qualifier to the closing brace. C++ files are held to the same rule, so a CPU kernel
  without device code is never "kernel body"; ``touches_cpu_kernel`` is the flag for
  those (a CPU-kernel C++ file changed inside a function body).

Speed: ``ast.parse`` of both sides costs ~10 ms per Triton file (~20 ms for the big CuTe
DSL files), several seconds over the dataset, more than all of git's work. So Python ranges
come from a scan that blanks strings and comments with one regex and then cuts each
decorated function at its first dedented statement that is not inside open brackets;
``python_kernel_ranges_ast`` is the reference implementation, and the tests and the
benchmark check that the two agree on every real file. When asked about specific changed
lines, both scanners stop after the last changed line and skip functions that cannot
contain one.
"""

from __future__ import annotations

import ast
import heapq
import re
from bisect import bisect_left
from collections.abc import Iterator, Sequence

from dagster_project.mining.commits.diffs import ChangedLines, changed_lines
from dagster_project.mining.commits.languages import CPP, CUDA, CUTE_DSL, TRITON

#: Version of which changed lines count as a kernel body. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "3"

Range = tuple[int, int]  # 1-based, inclusive line numbers


class _LineCounter:
    """Offset → 1-based line number by counting newlines from the previous query.

    Queries arrive almost in order, so the total work is about one pass of C-speed
    ``str.count`` (building a table of line starts costs more than all the queries).
    """

    def __init__(self, text: str, first_line: int = 1) -> None:
        self.text = text
        self.pos = 0
        self.line = first_line

    def line_of(self, offset: int) -> int:
        if offset >= self.pos:
            self.line += self.text.count("\n", self.pos, offset)
        else:
            self.line -= self.text.count("\n", offset, self.pos)
        self.pos = offset
        return self.line


def _hits(lines: Sequence[int], ranges: Sequence[Range]) -> bool:
    """Whether any of the sorted ``lines`` falls inside any range."""
    for a, b in ranges:
        k = bisect_left(lines, a)
        if k < len(lines) and lines[k] <= b:
            return True
    return False


# -- Python -------------------------------------------------------------------------------
KERNEL_DECORATOR_ROOTS = frozenset({"triton", "cute"})
# Patterns that begin with a literal ("@", "\n") let the regex engine skip ahead with a
# substring search; a leading ``^`` would be tried at every character (10-20x slower).
_DECORATOR_RE = re.compile(r"@(?:triton|cute)\.\w")
_BARE_JIT_RE = re.compile(r"@jit\b")
_TRITON_JIT_IMPORT_RE = re.compile(
    r"^[ \t]*from[ \t]+triton[ \t]+import[ \t][^\n]*\bjit\b", re.MULTILINE
)


def _decorators(text: str, bare_jit: bool) -> list[tuple[int, str]]:
    """(line-start offset, indent) of every kernel decorator that begins its line."""
    found = []
    pats = (_DECORATOR_RE, _BARE_JIT_RE) if bare_jit else (_DECORATOR_RE,)
    for pat in pats:
        for m in pat.finditer(text):
            line_start = text.rfind("\n", 0, m.start()) + 1
            indent = text[line_start : m.start()]
            if not indent.strip(" \t"):
                found.append((line_start, indent))
    return sorted(found)


def _imports_bare_jit(code: str) -> bool:
    return "from triton import" in code and _TRITON_JIT_IMPORT_RE.search(code) is not None


# Strings and comments, blanked so that brackets, quotes, ``#`` and decorator look-alikes
# inside them cannot mislead the scan (unrolled loops: no per-character alternation).
_PY_NOISE_RE = re.compile(
    r'"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""'
    r"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''"
    r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
    r"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'"
    r"|#[^\n]*",
    re.DOTALL,
)


def _blank(m: re.Match[str]) -> str:
    """A comment disappears; a string becomes ``S`` plus its newlines, and the text after
    a multi-line string keeps its column (indentation decides where functions end)."""
    s = m.group(0)
    if s[0] == "#":
        return ""
    k = s.count("\n")
    if not k:
        return "S"
    return "S" + "\n" * k + " " * (len(s) - s.rfind("\n") - 1)


def _decorator_root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Call):
        node = node.func
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def python_kernel_ranges_ast(code: str) -> list[Range] | None:
    """Kernel function ranges from ``ast`` (None when the file does not parse)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    bare_jit = _imports_bare_jit(code)
    ranges: list[Range] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        starts = []
        for dec in node.decorator_list:
            root = _decorator_root(dec)
            kernel = root in KERNEL_DECORATOR_ROOTS and not isinstance(dec, ast.Name)
            if kernel or (bare_jit and root == "jit" and not isinstance(dec, ast.Attribute)):
                starts.append(dec.lineno)
        if starts and node.end_lineno is not None:
            ranges.append((min(starts), node.end_lineno))
    return sorted(ranges)


def _balanced(region: str) -> bool:
    return (
        region.count("(") == region.count(")")
        and region.count("[") == region.count("]")
        and region.count("{") == region.count("}")
    )


def _change_ahead(
    decs: list[tuple[int, str]],
    i: int,
    first: int,
    clean: str,
    changed: Sequence[int],
) -> str:
    """Whether the kernel decorated at ``decs[i]`` (first line ``first``) may hold a change:
    ``"stop"`` when every change lies above it (no later kernel can hold one either),
    ``"skip"`` when the next statement at its indent starts before the next change, else
    ``"scan"``."""
    start, indent = decs[i]
    k = bisect_left(changed, first)
    if k == len(changed):
        return "stop"
    # A later decorator at the same or a shallower indent starts a new statement,
    # so this function ends before it: skip it when no change lies in between.
    nxt = next((d for d, ind in decs[i + 1 :] if len(ind) <= len(indent)), None)
    if nxt is not None and first + clean.count("\n", start, nxt) <= changed[k]:
        return "skip"
    return "scan"


def _function_stop(clean: str, start: int, body_at: int, indent: str) -> int:
    """Offset just past the function whose decorators start at ``start`` and whose ``def``
    line ends at ``body_at``: the first later line indented no deeper than ``indent`` that
    starts a statement outside open brackets (the end of the text when none)."""
    end_re = re.compile(rf"\n[ \t]{{0,{len(indent)}}}[^\s)\]}}]")
    nl = clean.find("\n", body_at)
    stop = len(clean)
    pos = nl if nl != -1 else len(clean)
    while pos < len(clean):
        e = end_re.search(clean, pos)
        if e is None:
            break
        if _balanced(clean[start : e.start()]):
            stop = e.start() + 1
            break
        pos = e.end() - 1
    return stop


def _trim_trailing(orig_lines: list[str], first: int, last: int) -> int:
    """The last line of a function without its trailing blank and comment lines (as ast)."""
    while last > first and (
        not orig_lines[last - 1].strip() or orig_lines[last - 1].lstrip().startswith("#")
    ):
        last -= 1
    return last


def python_kernel_ranges(code: str, changed: Sequence[int] | None = None) -> list[Range]:
    """Kernel function ranges of Python source, equal to what ``ast`` reports.

    With strings and comments blanked, a function ends before the first later line that
    is indented no deeper than its first decorator, starts a statement (not a closing
    bracket) and is not inside open brackets. Trailing blank and comment lines are not
    part of the function, as in ``ast``.

    With ``changed`` (sorted line numbers), only ranges that may contain one of them are
    computed: the scan stops after the last one.
    """
    if changed is not None and not changed:
        return []
    bare_jit = _imports_bare_jit(code)
    raw = _decorators(code, bare_jit)
    if not raw:
        return []
    if changed is not None and code.count("\n", 0, raw[0][0]) + 1 > changed[-1]:
        return []  # every change sits above the first kernel
    clean = _PY_NOISE_RE.sub(_blank, code)
    decs = _decorators(clean, bare_jit)
    lines = _LineCounter(clean)
    orig_lines = code.split("\n")
    ranges: list[Range] = []
    seen_defs: set[int] = set()
    for i, (start, indent) in enumerate(decs):
        first = lines.line_of(start)
        if changed is not None:
            ahead = _change_ahead(decs, i, first, clean, changed)
            if ahead == "stop":
                break
            if ahead == "skip":
                continue
        d = re.compile(rf"\n{re.escape(indent)}(?:(?:async[ \t]+)?def|(class))[ \t]").search(
            clean, start
        )
        if d is None or d.group(1) or d.start() in seen_defs:
            continue  # nothing decorated, or a decorated class (``@cute.struct``)
        seen_defs.add(d.start())
        stop = _function_stop(clean, start, d.end(), indent)
        last = first + clean.count("\n", start, max(stop - 1, start))
        ranges.append((first, _trim_trailing(orig_lines, first, last)))
    return sorted(ranges)


# -- CUDA / C++ -------------------------------------------------------------------------
DEVICE_QUALIFIERS = (
    "__global__",
    "__device__",
    "CUTLASS_DEVICE",
    "CUTLASS_HOST_DEVICE",
    "CUTLASS_GLOBAL",
    "CUTE_DEVICE",
    "CUTE_HOST_DEVICE",
    "FLASHINFER_INLINE",
)
# One literal-prefixed pattern per family (fast substring search); word boundaries are
# checked by hand in ``_qualifiers``.
_QUALIFIER_RES = (
    re.compile(r"__(?:global|device)__"),
    re.compile(r"CUTLASS_(?:HOST_DEVICE|DEVICE|GLOBAL)"),
    re.compile(r"CUTE_(?:HOST_)?DEVICE"),
    re.compile(r"FLASHINFER_INLINE"),
)


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _qualifiers(text: str, pos: int = 0) -> Iterator[tuple[int, int]]:
    """(start, end) of each device qualifier at or after ``pos``, in order, lazily (the
    caller usually stops at the first one, or after the last changed line)."""
    streams = [(m.span() for m in pat.finditer(text, pos)) for pat in _QUALIFIER_RES]
    for a, b in heapq.merge(*streams):
        if (a == 0 or not _is_word(text[a - 1])) and (b == len(text) or not _is_word(text[b])):
            yield a, b


def _balanced_braces_re(depth: int) -> re.Pattern[str]:
    """A regex matching one ``{…}`` block nested at most ``depth`` deep, so the closing
    brace of a function is found in C rather than by a Python loop over every brace."""
    inner = r"\{[^{}]*\}"
    for _ in range(depth - 1):
        inner = r"\{[^{}]*(?:" + inner + r"[^{}]*)*\}"
    return re.compile(inner)


_BLOCK_RE = _balanced_braces_re(24)
# Comments, string/char literals and preprocessor lines, replaced by their newlines only
# (line numbers survive; braces and qualifiers inside them are not seen). Every branch
# starts with one of / " ' # so the engine skips ahead by character class; outside
# comments and literals, ``#`` only ever starts a preprocessor directive.
_CPP_NOISE_RE = re.compile(
    r"//[^\n]*"
    r"|/\*.*?\*/"
    r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
    r"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'"
    r"|#(?:[^\n]*\\\n)*[^\n]*",
    re.DOTALL,
)
_BRACE_RE = re.compile(r"[{};]")
_CURLY_RE = re.compile(r"[{}]")


def _newlines(m: re.Match[str]) -> str:
    return " " + "\n" * m.group(0).count("\n")


def _in_comment(code: str, pos: int) -> bool:
    """Whether ``pos`` sits in a ``//`` line comment, a ``/* */`` block or a directive."""
    line_start = code.rfind("\n", 0, pos) + 1
    prefix = code[line_start:pos]
    if "//" in prefix or prefix.lstrip().startswith("#"):
        return True
    return code.rfind("/*", 0, pos) > code.rfind("*/", 0, pos)


def _first_code_qualifier_line(code: str) -> int:
    """Offset of the start of the line of the first device qualifier that is real code (not
    in a comment or directive); -1 when there is none."""
    for a, _ in _qualifiers(code):
        if not _in_comment(code, a):
            return code.rfind("\n", 0, a) + 1
    return -1


def _definition_close(clean: str, qb: int) -> int | None:
    """Offset of the closing brace of the function defined after the qualifier ending at
    ``qb``; ``None`` for a declaration (``;``), a stray ``}`` or a ``__device__`` variable
    with a brace initialiser (no parameter list before the brace)."""
    b = _BRACE_RE.search(clean, qb)
    if b is None or b.group(0) != "{":
        return None  # a declaration (";"), a stray "}" or nothing follows
    if "(" not in clean[qb : b.start()]:
        return None  # a __device__ variable with a brace initialiser
    block = _BLOCK_RE.match(clean, b.start())
    return block.end() - 1 if block else _closing_brace(clean, b.start())


def cuda_kernel_ranges(code: str, changed: Sequence[int] | None = None) -> list[Range]:
    """Ranges of ``__global__``/``__device__`` function definitions (declarations and
    ``__device__`` variables are skipped: no parameter list before the brace).

    Lexing starts at the line of the first qualifier that is real code, so the licence
    header and includes above it are never scanned. With ``changed``, the scan stops after
    the last changed line.
    """
    if changed is not None and not changed:
        return []
    start = _first_code_qualifier_line(code)
    if start < 0:
        return []
    first_line = code.count("\n", 0, start) + 1
    if changed is not None and first_line > changed[-1]:
        return []
    clean = _CPP_NOISE_RE.sub(_newlines, code[start:])
    lines = _LineCounter(clean, first_line)
    ranges: list[Range] = []
    covered = -1
    for qa, qb in _qualifiers(clean):
        if qa <= covered:
            continue  # nested __device__ lambdas are inside the previous range already
        line = lines.line_of(qa)
        if changed is not None and line > changed[-1]:
            break
        close = _definition_close(clean, qb)
        if close is None:
            continue
        ranges.append((line, lines.line_of(close)))
        covered = close
    return ranges


def _closing_brace(clean: str, open_pos: int) -> int:
    """The matching ``}`` by counting (only for nesting deeper than ``_BLOCK_RE`` allows,
    or unbalanced files, where the function runs to the end)."""
    depth = 0
    for mark in _CURLY_RE.finditer(clean, open_pos):
        depth += 1 if mark.group(0) == "{" else -1
        if depth == 0:
            return mark.start()
    return len(clean) - 1


# -- CPU kernels (C++) ------------------------------------------------------------------
# CPU kernels (vLLM csrc/cpu, SGLang sgl-kernel/csrc/cpu) have no device qualifier: every
# function is a host function, so the rule above never counts them, and a 400-line CPU
# kernel rewrite reads as "no kernel body". ``touches_cpu_kernel`` is the separate flag:
# a C++ file that is a CPU kernel (a ``cpu`` path segment, or SIMD/OpenMP/ATen-vec code)
# whose changed lines fall inside a function body rather than in includes, declarations,
# registration tables or comments.
_CPU_PATH_RE = re.compile(r"(^|/)(cpu|cpu_kernels?|x86|avx\w*|neon|sve)(/|_)", re.IGNORECASE)
#: Literals that only CPU SIMD / OpenMP / ATen-vectorised code contains (plain substring
#: tests: a regex over whole files costs ~50x more).
_CPU_CODE_MARKERS = (
    "immintrin.h",
    "x86intrin.h",
    "arm_neon.h",
    "arm_sve.h",
    "__m128",
    "__m256",
    "__m512",
    "_mm_",
    "_mm256_",
    "_mm512_",
    "at::vec::",
    "Vectorized<",
    "#pragma omp",
    "at::parallel_for",
    "svfloat32_t",
    "float32x4_t",
)
# A brace that opens a scope, not a function body: namespaces, linkage, types, enums.
_SCOPE_BEFORE_RE = re.compile(
    r"(\bnamespace(\s+[\w:]+)?|\bextern\s*\S*|\b(class|struct|union|enum)\b[^;{}()]*)\s*$"
)
_MACRO_CALL_RE = re.compile(r"^\s*[A-Z_][A-Z0-9_]*\s*\(")  # TORCH_LIBRARY(...) { ... }
_FUNC_TAIL_RE = re.compile(r"\)\s*(const|noexcept|override|final|->\s*[\w:<>,\s*&]+|\s)*$")


def is_cpu_kernel_file(path: str, code: str) -> bool:
    """A C++ source that implements CPU kernels (see the section comment)."""
    if _CPU_PATH_RE.search(path) is not None:
        return True
    return any(k in code for k in _CPU_CODE_MARKERS)


def cpp_function_ranges(code: str) -> list[Range]:
    """Line ranges of C++ function definitions at namespace/class scope (bodies of
    methods included); comments, strings and directives are blanked first."""
    clean = _CPP_NOISE_RE.sub(_newlines, code)
    lines = _LineCounter(clean)
    ranges: list[Range] = []
    scope_ends: list[int] = []  # closing positions of the transparent scopes we are in
    pos = 0
    while True:
        m = _CURLY_RE.search(clean, pos)
        if m is None:
            break
        while scope_ends and m.start() > scope_ends[-1]:
            scope_ends.pop()
        if m.group(0) == "}":
            pos = m.end()
            continue
        prev_stop = max(
            clean.rfind(";", 0, m.start()),
            clean.rfind("}", 0, m.start()),
            clean.rfind("{", 0, m.start()),
        )
        head = clean[prev_stop + 1 : m.start()]
        close = _closing_brace(clean, m.start())
        if _SCOPE_BEFORE_RE.search(head):
            scope_ends.append(close)
            pos = m.end()  # look inside: functions live in namespaces and classes
            continue
        if _FUNC_TAIL_RE.search(head) and "(" in head and not _MACRO_CALL_RE.match(head):
            ranges.append((lines.line_of(m.start()), lines.line_of(close)))
        pos = close + 1  # a function body, an initialiser or a lambda: skip it whole
    return ranges


def touches_cpu_kernel(
    language: str,
    path: str,
    before_code: str,
    after_code: str,
    diff: str,
    changed: ChangedLines | None = None,
) -> bool:
    """True when a C++ CPU-kernel file changes inside a function body (see above)."""
    if language != CPP or not (
        is_cpu_kernel_file(path, before_code) or is_cpu_kernel_file(path, after_code)
    ):
        return False
    changed = changed or changed_lines(diff)
    if changed.old and _hits(changed.old, cpp_function_ranges(before_code)):
        return True
    return bool(changed.new) and _hits(changed.new, cpp_function_ranges(after_code))


# -- both ---------------------------------------------------------------------------------
def kernel_ranges(language: str, code: str, changed: Sequence[int] | None = None) -> list[Range]:
    """Kernel function line ranges of one file version in ``language``."""
    if language in (TRITON, CUTE_DSL):
        return python_kernel_ranges(code, changed)
    if language in (CUDA, CPP):
        return cuda_kernel_ranges(code, changed)
    return []


#: A comment to the end of the line: ``#`` in Python, ``//`` in CUDA/C++ (block-comment lines
#: are caught by ``_CPP_COMMENT_LINE_RE``). Quotes before the marker keep the line whole.
_PY_COMMENT_RE = re.compile(r"#[^'\"]*$")
_CPP_COMMENT_RE = re.compile(r"//[^'\"]*$")
_CPP_COMMENT_LINE_RE = re.compile(r"^\s*(/\*|\*|\*/)")
_SPACE_RE = re.compile(r"\s+")


def _normalised(language: str, line: str) -> str:
    """A code line without its comment and without any whitespace: what formatting keeps."""
    if language in (TRITON, CUTE_DSL):
        line = _PY_COMMENT_RE.sub("", line)
    elif _CPP_COMMENT_LINE_RE.match(line):
        return ""
    else:
        line = _CPP_COMMENT_RE.sub("", line)
    return _SPACE_RE.sub("", line)


def _kernel_lines(language: str, code: str, lines: Sequence[int]) -> list[str]:
    """The text of those ``lines`` (sorted, 1-based) that lie inside a kernel of ``code``."""
    if not lines:
        return []
    ranges = kernel_ranges(language, code, lines)
    if not ranges:
        return []
    text = code.split("\n")
    return [text[n - 1] for n in lines if n <= len(text) and any(a <= n <= b for a, b in ranges)]


def _kernel_text(language: str, code: str) -> str:
    """Every kernel of ``code`` in file order, comments and whitespace dropped."""
    text = code.split("\n")
    return "".join(
        _normalised(language, text[n - 1])
        for a, b in kernel_ranges(language, code)
        for n in range(a, min(b, len(text)) + 1)
    )


def kernel_body_lines(
    language: str,
    before_code: str,
    after_code: str,
    diff: str,
    changed: ChangedLines | None = None,
) -> int:
    """How many changed lines lie inside kernel functions; 0 when the kernels differ only in
    formatting: all kernels of the file, in order, read the same on both sides once comments
    and whitespace are dropped (a statement moved inside or out of a kernel is a change)."""
    changed = changed or changed_lines(diff)
    old = _kernel_lines(language, before_code, changed.old)
    new = _kernel_lines(language, after_code, changed.new)
    if not old and not new:
        return 0
    if _kernel_text(language, before_code) == _kernel_text(language, after_code):
        return 0
    return len(old) + len(new)


def touches_kernel_body(
    language: str,
    before_code: str,
    after_code: str,
    diff: str,
    changed: ChangedLines | None = None,
) -> bool:
    """True when a changed line of ``diff`` lies inside a kernel function and the kernel lines
    change more than their formatting (see module doc).

    ``changed`` may pass ``changed_lines(diff)`` when the caller has it already.
    """
    return kernel_body_lines(language, before_code, after_code, diff, changed) > 0
