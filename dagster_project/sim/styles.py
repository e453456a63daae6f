"""Authors: how one simulated engineer writes kernels (issue 20, diverse code).

Generator 1.6.0 rendered every session's kernels in one voice: 8.4% of assistant turns
also appeared verbatim in another session, and with digits normalised 180k turns came
from 18k bodies. A :class:`Style` is the engineer behind a session, drawn
deterministically from the session's task (``style_for_task``) or seed
(``style_for_seed``), so a shard is the same bytes whatever order it is built in. It has
two parts:

* **structure** (``reduce``, ``loop``) — changes the code the compiler sees: CUDA warp
  reductions as an xor butterfly loop, a ``__shfl_down_sync`` tree plus a lane-0
  broadcast, or a hand-unrolled butterfly; Triton strided loops as ``range(lo, hi, STEP)``
  or a trip count with the offset computed in the body. A structural choice other than the
  1.6.0 one is only emitted for a rung whose label cannot be wrong about it:
  ``verification.structure_allowed`` requires its own H200 execution evidence where the
  rung is verified (the label is keyed by structure), and otherwise the rung is
  unverified anyway.
* **voice** (names, comments, indentation, header) — never changes what is compiled:
  a per-author rename table for a few local variables (never a launch parameter, a
  keyword argument or anything the feedback reads), full-line comments kept or dropped,
  CUDA indented by 2 or 4, a header in the author's words naming the task's shape, and
  tuning notes that state each launch parameter's regime in words ("large tile").

Why hand-written transforms instead of more template branches: the voice applies to all
17 templates and their planted bugs uniformly, and the renderer stays one Jinja pass plus
a few regex substitutions (rendering is hot: ``bench_sim`` renders ~100k sources).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

from .rewrites import split_top_level

#: CUDA warp reductions: xor butterfly loop (1.6.0) | shfl_down tree + broadcast | unrolled
REDUCE_STYLES: tuple[str, ...] = ("xor", "down", "unrolled")
#: Triton strided loops: range(lo, hi, STEP) (1.6.0) | trip count, offset in the body
LOOP_STYLES: tuple[str, ...] = ("range", "count")
BASE_REDUCE = REDUCE_STYLES[0]
BASE_LOOP = LOOP_STYLES[0]

_HANDLES = (
    "ak", "bt", "cw", "dm", "el", "fr", "gs", "hn", "iv", "jk", "kp", "lm", "mo", "nr",
    "os", "pq", "rb", "sy", "tz", "uv", "vw", "wx", "yl", "zh",
)  # fmt: skip

#: local names an author may spell differently: base -> alternatives (one picked per author)
_CUDA_NAMES: dict[str, tuple[str, ...]] = {
    "acc": ("accum", "sum", "partial", "total"),
    "lane": ("lane_id", "ln"),
    "warp": ("warp_id", "wid"),
    "tid": ("t", "thr", "tx"),
    "row": ("r", "row_idx"),
    "col": ("c", "col_idx"),
    "ss": ("sumsq", "sq_sum"),
    "inv": ("rinv", "scale_inv"),
}
_TRITON_NAMES: dict[str, tuple[str, ...]] = {
    "acc": ("accum", "acc_tile", "partial"),
    "pid": ("prog", "prog_id", "program"),
    "rm": ("offs_m", "rows_m", "idx_m"),
    "rn": ("offs_n", "cols_n", "idx_n"),
    "ks": ("offs_k", "k_idx"),
    "offs": ("idx", "offsets", "o"),
    "cols": ("col_offs", "cidx"),
    "row": ("r", "row_id"),
}


@dataclass(frozen=True)
class Style:
    """One engineer's way of writing kernels (hashable: it is part of render cache keys)."""

    author: str = ""
    reduce: str = BASE_REDUCE
    loop: str = BASE_LOOP
    cuda_names: tuple[tuple[str, str], ...] = ()  # (base, replacement) renames
    triton_names: tuple[tuple[str, str], ...] = ()
    indent: int = 2  # CUDA spaces per level (templates are written with 2)
    comments: str = "keep"  # keep | drop
    header: int = 0  # index into the header phrasings (0: the 1.6.0 header)
    notes: int = 0  # tuning-notes phrasing, 0 = none

    @staticmethod
    def base() -> Style:
        """The 1.6.0 rendering: base structure, no voice."""
        return Style()

    def structure(self, impl: str) -> str:
        """The structural key of this style for one impl (what verification is keyed by)."""
        return f"reduce={self.reduce}" if impl == "cuda" else f"loop={self.loop}"

    @property
    def is_base_voice(self) -> bool:
        return (
            not self.cuda_names
            and not self.triton_names
            and self.indent == 2
            and self.comments == "keep"
            and self.header == 0
            and self.notes == 0
        )


def base_structure(impl: str) -> str:
    return Style.base().structure(impl)


def structures(impl: str) -> tuple[str, ...]:
    """Every structural key the renderer can emit for an impl (base first)."""
    if impl == "cuda":
        return tuple(f"reduce={r}" for r in REDUCE_STYLES)
    return tuple(f"loop={x}" for x in LOOP_STYLES)


def with_structure(style: Style, key: str) -> Style:
    """``style`` with the structural choice ``key`` (``reduce=down``, ``loop=count``)."""
    axis, _, value = key.partition("=")
    if axis == "reduce" and value in REDUCE_STYLES:
        return Style(**{**style.__dict__, "reduce": value})
    if axis == "loop" and value in LOOP_STYLES:
        return Style(**{**style.__dict__, "loop": value})
    raise ValueError(f"unknown structure {key!r}")


def _u(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


@lru_cache(maxsize=8192)
def style_for_seed(seed: int | str) -> Style:
    """The author of a session: a pure function of its seed (no global RNG state)."""
    h = _u(f"kernelhouse-style-v1/{seed}")

    def pick(n: int) -> int:
        nonlocal h
        h, r = divmod(h, n)
        return r

    author = _HANDLES[pick(len(_HANDLES))]
    reduce = REDUCE_STYLES[pick(len(REDUCE_STYLES))]
    loop = LOOP_STYLES[pick(len(LOOP_STYLES))]
    renames: list[tuple[tuple[str, str], ...]] = []
    for table in (_CUDA_NAMES, _TRITON_NAMES):
        got = []
        for base, alts in table.items():
            r = pick(len(alts) + 2)  # some authors keep the short name
            if r < len(alts):
                got.append((base, alts[r]))
        renames.append(tuple(got))
    indent = (2, 4)[pick(2)]
    comments = ("keep", "keep", "drop")[pick(3)]
    header = pick(len(_HEADERS))
    notes = pick(len(_NOTES))
    return Style(author, reduce, loop, renames[0], renames[1], indent, comments, header, notes)


def style_for_task(op: str, gpu: str, dtype: str, shape: dict[str, int]) -> Style:
    """The author of the (unique) session that solves this task."""
    return style_for_seed(f"{op}/{gpu}/{dtype}/" + ",".join(f"{k}={v}" for k, v in shape.items()))


# --------------------------------------------------------------------------------------
# voice: text transforms that leave the compiled code unchanged
# --------------------------------------------------------------------------------------

#: header phrasings: (op, title, gpu, arch, dtype, shape, author) -> lines (no comment marker)
_HEADERS: tuple[str, ...] = (
    "",  # 0: keep the template's header
    "{op} — {title}\ntuned for {gpu} ({arch}); {dtype}, {shape}",
    "{title} ({op})\n{shape} {dtype} on {gpu}, {arch}",
    "{op}: {title}\nshape {shape} | dtype {dtype} | {gpu} {arch} | {author}",
    "{author}: {op}, {title}\ntarget {gpu} ({arch}) at {shape}, {dtype}",
    "kernel for {op} [{dtype}, {shape}]\napproach: {title}; built for {arch} ({gpu})",
)

#: Tuning notes are off (see ``notes_line``); the phrasings stay for older generator versions.
NOTES_ENABLED = False

_NOTES: tuple[str, ...] = ("", "knobs: {items}", "tuning: {items}", "launch choices: {items}")

_REGIMES: dict[str, tuple[str, str, str]] = {
    "tile": ("small tile", "medium tile", "large tile"),
    "warps": ("few warps", "some warps", "many warps"),
    "threads": ("narrow block", "mid-size block", "wide block"),
    "stages": ("shallow pipeline", "two-deep pipeline", "deep pipeline"),
    "split": ("few splits", "moderate split", "wide split"),
    "unroll": ("light unroll", "moderate unroll", "heavy unroll"),
    "vec": ("narrow vectors", "mid vectors", "wide vectors"),
    "other": ("low", "mid", "high"),
}


def _param_class(name: str) -> str:
    n = name.lower()
    if "warp" in n:
        return "warps"
    if "thread" in n:
        return "threads"
    if "stage" in n:
        return "stages"
    if "split" in n:
        return "split"
    if "unroll" in n or "ilp" in n:
        return "unroll"
    if "vec" in n:
        return "vec"
    if n.startswith(("block", "b", "tile", "t")) or n in ("rows", "bm", "bn", "bk"):
        return "tile"
    return "other"


def _regime(name: str, value: object, lo: int, hi: int) -> str:
    words = _REGIMES[_param_class(name)]
    if not isinstance(value, int) or isinstance(value, bool) or hi <= lo:
        return f"{name} {value}"
    # position of log2(value) within the rung's own range for this parameter
    import math

    span = math.log2(max(hi, 1)) - math.log2(max(lo, 1))
    pos = (math.log2(max(value, 1)) - math.log2(max(lo, 1))) / span if span > 0 else 0.5
    return f"{name}={value} ({words[0 if pos < 0.34 else 1 if pos < 0.67 else 2]})"


def notes_line(style: Style, params: dict[str, object], ranges: dict[str, tuple[int, int]]) -> str:
    """The author's note on the launch parameters of this candidate ('' for none).

    Since generator 1.11.0 (issue 39) no note is written: the regime words ("large tile")
    were each parameter's position inside the generator's own search range, a fingerprint
    of the simulator in every kernel, not something an engineer knows. ``Style.notes`` is
    still drawn so the other voice choices keep their values."""
    if not NOTES_ENABLED or not style.notes or not params:
        return ""
    items = tuple(sorted((k, v, *ranges.get(k, (0, 0))) for k, v in params.items()))
    try:
        return _notes(style.notes, items)
    except TypeError:  # an unhashable parameter value: no memo
        return _notes.__wrapped__(style.notes, items)


@lru_cache(maxsize=65536)
def _notes(kind: int, items: tuple[tuple[str, object, int, int], ...]) -> str:
    return _NOTES[kind].format(items=", ".join(_regime(k, v, lo, hi) for k, v, lo, hi in items))


def header_lines(
    style: Style, op: str, title: str, gpu: str, arch: str, dtype: str, shape: dict[str, int]
) -> list[str]:
    if not style.header:
        return []
    sh = " ".join(f"{k}={v}" for k, v in shape.items())
    text = _HEADERS[style.header].format(
        op=op, title=title, gpu=gpu, arch=arch, dtype=dtype, shape=sh, author=style.author
    )
    return text.split("\n")


_CUDA_KEEP_COMMENT = re.compile(r"^\s*//\s*(?:TMA|NOTE|expect|static_assert)", re.I)


#: per-(impl, renames, indent, comments) memo of transformed lines: renders of one rung
#: differ in a few numeric lines, so most lines of a render were transformed before
_LINE_MEMO: dict[tuple[object, ...], dict[str, str | None]] = {}
_LINE_MEMO_MAX = 200_000
#: lines held by all of ``_LINE_MEMO``'s tables, counted as they are added (summing the
#: tables' sizes on every render was a scan of every key's table per call)
_LINE_MEMO_SIZE = [0]


def apply_voice(
    text: str,
    impl: str,
    style: Style,
    header: list[str],
    note: str,
) -> str:
    """Rewrite ``text`` in the author's voice: header, notes, comments, names, indent.

    Line by line (each transform is local to a line once the renames are decided for
    the whole file), memoised: rendering is hot.
    """
    mark = "//" if impl == "cuda" else "#"
    lines = text.split("\n")
    if len(lines) > 2 and lines[0].startswith(mark) and lines[1].startswith(mark):
        head, lines = lines[:2], lines[2:]
        if header:
            head = [f"{mark} {h}" for h in header]
    else:
        head = []
    if note:
        head.append(f"{mark} {note}")
    live = _live_names(text, impl, style.cuda_names if impl == "cuda" else style.triton_names)
    key = (impl, tuple(live.items()), style.indent, style.comments)
    memo = _LINE_MEMO.get(key)
    if memo is None:
        if _LINE_MEMO_SIZE[0] > _LINE_MEMO_MAX:
            _LINE_MEMO.clear()
            _LINE_MEMO_SIZE[0] = 0
        memo = _LINE_MEMO[key] = {}
    pat = _rename_re(tuple(live), impl == "triton") if live else None
    out = head
    get = memo.get
    for ln in lines:
        # one lookup per line (``_UNSEEN``: None is a memoised "dropped" line)
        got = get(ln, _UNSEEN)
        if got is _UNSEEN:
            got = memo[ln] = _voice_line(ln, impl, style, live, pat)
            _LINE_MEMO_SIZE[0] += 1
        if got is not None:
            out.append(cast(str, got))
    return "\n".join(out)


#: a ``_LINE_MEMO`` miss (distinct from a memoised None)
_UNSEEN = object()


def _voice_line(
    ln: str, impl: str, style: Style, live: dict[str, str], pat: re.Pattern[str] | None
) -> str | None:
    """One line in the author's voice; None when the author drops it (a comment)."""
    if style.comments == "drop":
        s = ln.lstrip()
        if impl == "cuda":
            if s.startswith("//") and not _CUDA_KEEP_COMMENT.match(ln):
                return None
        elif s.startswith("# ") or s == "#":
            return None
    if pat is not None:
        kw = impl == "triton"

        def swap(x: re.Match[str]) -> str:
            if not _free(ln, x.start()):
                return x.group(0)
            return live.get(x.group(1), x.group(1)) + ((x.group(2) or "") if kw else "")

        ln = pat.sub(swap, ln)
    if impl == "cuda" and style.indent != 2:
        stripped = ln.lstrip(" ")
        n = len(ln) - len(stripped)
        if n:
            ln = " " * (n * style.indent // 2) + stripped
    return ln


@lru_cache(maxsize=4096)
def _rename_re(bases: tuple[str, ...], kw: bool) -> re.Pattern[str]:
    alts = "|".join(sorted(bases, key=len, reverse=True))
    # no look-behind: a pattern that starts with literals is scanned ~30x faster by ``re``;
    # the character before a hit is checked by the caller
    return re.compile(r"(" + alts + r")\b" + (r"(\s*=(?!=))?" if kw else ""))


@lru_cache(maxsize=4096)
def _word_re(name: str) -> re.Pattern[str]:
    return re.compile(name + r"\b")


def _free(text: str, start: int) -> bool:
    """Whether a hit at ``start`` begins a name (not the tail of one, not an attribute)."""
    if start == 0:
        return True
    ch = text[start - 1]
    return not (ch.isalnum() or ch in "_.")


def _uses(text: str, name: str) -> bool:
    if name not in text:
        return False
    return any(_free(text, m.start()) for m in _word_re(name).finditer(text))


def _live_names(text: str, impl: str, names: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """The renames that are safe in this file.

    A replacement that already names something in the file would capture it, so that
    rename is skipped. In Python ``name=`` inside brackets is a keyword argument (or a
    default), which must keep its spelling: a base name used that way is not renamed at
    all. Names inside comments and strings are renamed too, which changes no code: the
    table holds only short locals, and attribute uses (``x.row``, PTX ``.row.col``) are
    excluded by the check of the character before a hit.
    """
    table = _CUDA_NAMES if impl == "cuda" else _TRITON_NAMES
    live = {
        b: r
        for b, r in names
        if b in table and r in table[b] and _uses(text, b) and not _uses(text, r)
    }
    if live and impl == "triton":
        # bracket depth before each hit, counted on from the previous hit (hits come in
        # order): the same counts as over ``text[:start]``, without rescanning the prefix
        at = depth = 0
        for mt in _rename_re(tuple(live), True).finditer(text):
            name = mt.group(1)
            if mt.group(2) and name in live and _free(text, mt.start()):
                start = mt.start()
                depth += sum(text.count(c, at, start) for c in "([{")
                depth -= sum(text.count(c, at, start) for c in ")]}")
                at = start
                if depth > 0:  # a keyword argument or a default: keep this name as it is
                    live.pop(name)
    return live


def _rename(text: str, impl: str, names: tuple[tuple[str, str], ...]) -> str:
    """``text`` with the safe renames applied (whole-file form of the voice's renames)."""
    live = _live_names(text, impl, names)
    if not live:
        return text
    pat = _rename_re(tuple(live), impl == "triton")
    return "\n".join(_voice_line(ln, impl, Style(), live, pat) or "" for ln in text.split("\n"))


def _reindent(text: str, width: int) -> str:
    out = []
    for ln in text.split("\n"):
        stripped = ln.lstrip(" ")
        n = len(ln) - len(stripped)
        out.append(" " * (n * width // 2) + stripped if n else ln)
    return "\n".join(out)


# --------------------------------------------------------------------------------------
# structure: Triton loop form (CUDA reductions are a template macro choice)
# --------------------------------------------------------------------------------------

_FOR = re.compile(r"^(\s*)for (\w+) in range\((.*)\):\s*$")


def _split_args(s: str) -> list[str] | None:
    parts = split_top_level(s)
    return None if parts is None else [p.strip() for p in parts]


def counted_loops(text: str) -> str:
    """``for x in range(lo, hi, STEP):`` -> a trip count with ``x`` computed in the body.

    Same iterations in the same order (STEP > 0: every such loop in the templates strides
    by a positive block size or program count); loops with keyword arguments
    (``num_stages=``), a literal step or fewer than three arguments stay as they are.
    """
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        m = _FOR.match(ln)
        args = _split_args(m.group(3)) if m else None
        if (
            m
            and args
            and len(args) == 3
            and not any("=" in a for a in args)
            and not args[2].lstrip("-").isdigit()
            and i + 1 < len(lines)
        ):
            ind, var = m.group(1), m.group(2)
            lo, hi, step = args
            indent = re.match(r"^(\s*)", lines[i + 1])
            assert indent is not None  # ``\s*`` matches every string, the empty one included
            body_ind = indent.group(1)
            trips = f"tl.cdiv({hi} - {lo}, {step})" if lo != "0" else f"tl.cdiv({hi}, {step})"
            out.append(f"{ind}for _{var}_i in range(0, {trips}):")
            out.append(
                f"{body_ind}{var} = {lo} + _{var}_i * {step}"
                if lo != "0"
                else f"{body_ind}{var} = _{var}_i * {step}"
            )
            i += 1
            continue
        out.append(ln)
        i += 1
    return "\n".join(out)
