"""Render candidate kernels from the Jinja2 templates and inject realistic slips.

Templates live in ``templates/cuda/<family>.cu.j2`` and ``templates/triton/<family>.py.j2``
and emit a complete source file (kernel(s) plus launch wrapper). ``render_candidate``
builds the context from a task, a rung and its params (plus an optional planted bug that
produces a wrong result); ``inject_slip`` then mutates the rendered text the way a hurried
engineer does (a dropped semicolon, a misspelt identifier, a pointer missing its
reinterpret_cast, the pre-CUDA-9 shuffle intrinsic, a Triton kwarg typo...) and returns the
compiler diagnostic that mutation really produces (checked against nvcc by
``compile_check``).
"""

from __future__ import annotations

import bisect
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import jinja2

from . import rewrites
from .hardware import CUDA_ARCH_VALUE, GPU, get_gpu, nvcc_arch_flag
from .kernels import KernelPlan, plan
from .ops import OpSpec, get_op
from .styles import Style, apply_voice, counted_loops, header_lines, notes_line, style_for_task
from .variants import Params, Variant, features_used, param_pool

CUDA_FILE = "candidate.cu"
TRITON_FILE = "candidate.py"

#: Bugs each family's templates can plant (visible in the emitted code).
FAMILY_BUGS: dict[str, tuple[str, ...]] = {
    "gemm": ("missing_sync", "no_tail_mask", "splitk_race"),
    "gemv": ("no_tail_mask", "splitk_race", "wrong_scale"),
    "attn_decode": ("no_rescale", "no_tail_mask", "splitk_race"),
    "attn_prefill": ("no_rescale", "missing_sync", "no_tail_mask"),
    "rowwise": ("eps_outside", "no_tail_mask", "missing_sync"),
    "elementwise": ("no_tail_mask", "wrong_index"),
    "sampling": ("stale_max", "no_tail_mask"),
    "scan": ("state_reset", "no_tail_mask"),
}

CUDA_SLIPS = ("missing_semicolon", "undeclared_identifier", "vector_ptr_cast", "legacy_shfl")
TRITON_SLIPS = ("undefined_name", "bad_kwarg", "missing_constexpr", "non_pow2_block")


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    root = resources.files(__package__).joinpath("templates")
    loader = jinja2.FileSystemLoader(str(root))
    env = jinja2.Environment(
        loader=loader,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        auto_reload=False,
    )
    env.filters["cdiv"] = lambda a, b: -(-int(a) // int(b))
    env.filters["pow2"] = lambda n: 1 << max(0, (int(n) - 1).bit_length())
    env.filters["hexu"] = lambda n: f"0x{int(n):x}"
    return env


def template_name(family: str, impl: str) -> str:
    return f"cuda/{family}.cu.j2" if impl == "cuda" else f"triton/{family}.py.j2"


_CT = {
    "fp16": "__half",
    "bf16": "__nv_bfloat16",
    "fp32": "float",
    "fp8": "__nv_fp8_e4m3",
    "int8": "int8_t",
}
_TL = {
    "fp16": "tl.float16",
    "bf16": "tl.bfloat16",
    "fp32": "tl.float32",
    "fp8": "tl.float8e4nv",
    "int8": "tl.int8",
}
_TORCH = {
    "fp16": "torch.float16",
    "bf16": "torch.bfloat16",
    "fp32": "torch.float32",
    "fp8": "torch.float8_e4m3fn",
    "int8": "torch.int8",
}


def _types(op: OpSpec, dtype: str) -> dict[str, str]:
    """C / Triton / torch type names of activations, outputs and KV for a task."""
    act = (
        dtype
        if dtype in ("fp16", "bf16", "fp32")
        else ("bf16" if op.family == "attn_decode" else "fp16")
    )
    if op.name in ("mla_decode",):
        act = "bf16"
    out = act
    if op.name in ("fp8_blockwise_gemm", "fp8_gemm_persistent", "fp4_gemm"):
        out = "bf16"
    if op.name in ("int8_gemm", "w4a8_gemm", "fp8_gemm"):
        out = "fp16"
    kv = dtype if op.family in ("attn_decode",) and dtype == "fp8" else act
    w = {"int8": "int8", "fp8": "fp8"}.get(dtype, act)
    return {
        "act": act,
        "out": out,
        "kv": kv,
        "w": w,
        "act_t": _CT[act],
        "out_t": _CT[out],
        "kv_t": _CT[kv],
        "w_t": _CT.get(w, "uint8_t"),
        "act_tl": _TL[act],
        "out_tl": _TL[out],
        "kv_tl": _TL[kv],
        "act_torch": _TORCH[act],
        "out_torch": _TORCH[out],
    }


@dataclass(frozen=True)
class RenderSpec:
    """Everything a template needs; built once per candidate."""

    op: OpSpec
    gpu: GPU
    dtype: str
    shape: dict[str, int]
    variant: Variant
    params: Params
    bug: str | BugProbe | None = None
    #: the engineer writing it (``styles``); the caller's per-session author, or the
    #: task's own when None (deterministic either way)
    style: Style | None = None

    def author(self) -> Style:
        if self.style is not None:
            return self.style
        return style_for_task(self.op.name, self.gpu.name, self.dtype, self.shape)


def effective_style(rs: RenderSpec) -> Style:
    """The author's style with every structural choice this rung may not carry replaced by
    the 1.6.0 structure (``verification.structure_allowed``: a verified or wrong rung only
    takes a structure that was itself executed on the H200)."""
    return _effective(rs.author(), rs.op.name, rs.variant.impl, rs.variant.tag, rs.gpu.arch)


@lru_cache(maxsize=16384)
def _effective(st: Style, op: str, impl: str, tag: str, arch: str) -> Style:
    from .styles import base_structure, with_structure
    from .verification import structure_allowed

    key = st.structure(impl)
    if key != base_structure(impl) and not structure_allowed(op, impl, tag, arch, key):
        return with_structure(st, base_structure(impl))
    return st


@lru_cache(maxsize=4096)
def _param_ranges(op: str, impl: str, tag: str, dtype: str) -> dict[str, tuple[int, int]]:
    """(min, max) of each integer launch parameter over the rung's own search space.

    Reads the shared item tuples of ``param_pool`` (the same combinations, items in the
    same order as ``iter_params``' fresh dicts) instead of copying every one into a dict.
    """
    o = get_op(op)
    from .variants import get_variant

    v = get_variant(o.family, impl, tag)
    lo: dict[str, int] = {}
    hi: dict[str, int] = {}
    for p in param_pool(v, o, dtype):
        for k, x in p:
            if isinstance(x, int) and not isinstance(x, bool):
                lo[k] = min(lo.get(k, x), x)
                hi[k] = max(hi.get(k, x), x)
    return {k: (lo[k], hi[k]) for k in lo}


def context(rs: RenderSpec, style: Style | None = None) -> dict[str, Any]:
    kp: KernelPlan = plan(rs.op, rs.shape, rs.dtype, rs.gpu, rs.variant, rs.params)
    feats = features_used(rs.variant, rs.op, rs.dtype, rs.params)
    return {
        "op": rs.op.name,
        "family": rs.op.family,
        "desc": rs.op.desc,
        "signature": rs.op.signature_for(rs.dtype),
        "impl": rs.variant.impl,
        "arch": rs.gpu.arch,
        "arch_num": CUDA_ARCH_VALUE[rs.gpu.arch],
        "arch_flag": nvcc_arch_flag(rs.gpu.arch, feats),
        "gpu_name": rs.gpu.name,
        "sms": rs.gpu.sms,
        "dtype": rs.dtype,
        "s": dict(rs.shape),
        "ty": _types(rs.op, rs.dtype),
        "v": rs.variant,
        "tag": rs.variant.tag,
        "level": rs.variant.level,
        "p": dict(rs.params),
        "kp": kp,
        "feats": sorted(feats),
        "bug": rs.bug,
        "kname": f"{rs.op.name}_{rs.variant.tag.split('_', 1)[1]}",
        "st_reduce": (style or Style.base()).reduce,
    }


class BugProbe:
    """A ``bug`` value that renders exactly like None and records every planted-bug name
    the templates compare it with (they only ever ask ``bug == "x"`` / ``bug != "x"``).

    A bug the clean render never asked about cannot change the source: rendering with it
    takes every branch the clean render took. So one clean render with a probe says which
    bugs have a spot in this source, and the bug renders that would only come out equal
    to the clean text (about one in eight) are never made.
    """

    __slots__ = ("asked",)

    def __init__(self) -> None:
        self.asked: set[object] = set()

    def __eq__(self, other: object) -> bool:
        self.asked.add(other)
        return False

    def __ne__(self, other: object) -> bool:
        self.asked.add(other)
        return True

    def __bool__(self) -> bool:
        return False

    __hash__ = object.__hash__


def render_candidate(
    op: str | OpSpec,
    gpu: str | GPU,
    dtype: str,
    shape: dict[str, int],
    variant: Variant,
    params: Params,
    bug: str | BugProbe | None = None,
    style: Style | None = None,
    gate_structure: bool = True,
    rewrite_axes: tuple[str, ...] | None = None,
) -> str:
    """Render the full source of one candidate (no slip) as ``style``'s author writes it.

    ``style=None`` takes the task's own author (``styles.style_for_task``);
    ``Style.base()`` renders the 1.6.0 text. ``gate_structure=False`` renders the style's
    structure even where it has no evidence: only for the harnesses that gather it.
    ``rewrite_axes`` overrides the author's compile-identical rewrites (``rewrites``;
    ``()`` renders the canonical text, which measured answers are keyed by).
    """
    rs = RenderSpec(
        op=get_op(op) if isinstance(op, str) else op,
        gpu=get_gpu(gpu) if isinstance(gpu, str) else gpu,
        dtype=dtype,
        shape=dict(shape),
        variant=variant,
        params=dict(params),
        bug=bug,
        style=style,
    )
    st = effective_style(rs) if gate_structure else rs.author()
    text = _env().get_template(template_name(rs.op.family, variant.impl)).render(**context(rs, st))
    # collapse runs of blank lines left by conditional blocks (PEP 8 keeps two in Python);
    # str.replace until none is left is the regex ``\n{3,}`` → two (``\n{4,}`` → three)
    # without a regex scan of the whole file: each pass shortens every long run
    run, keep = ("\n\n\n", "\n\n") if variant.impl == "cuda" else ("\n\n\n\n", "\n\n\n")
    while run in text:
        text = text.replace(run, keep)
    if variant.impl == "triton" and st.loop == "count":
        text = counted_loops(text)
    if not st.is_base_voice:
        head = header_lines(
            st, rs.op.name, variant.title, rs.gpu.name, rs.gpu.arch, rs.dtype, rs.shape
        )
        note = (
            notes_line(
                st, rs.params, _param_ranges(rs.op.name, variant.impl, variant.tag, rs.dtype)
            )
            if st.notes
            else ""
        )
        text = apply_voice(text, variant.impl, st, head, note)
    return _rewritten(text, rs, rewrite_axes)


def _rewritten(text: str, rs: RenderSpec, axes: tuple[str, ...] | None) -> str:
    """The author's compile-identical rewrites of ``text`` where the rung has the evidence
    (``rewrites.allowed_axes``); the variant is remembered with its canonical text."""
    impl = rs.variant.impl
    if axes is None:
        author = rs.author()  # the engineer's own axes, whatever structure the rung allows
        if author == Style.base():
            return text
        ok = rewrites.allowed_axes(rs.op.name, impl, rs.variant.tag, rs.gpu.arch)
        axes = tuple(a for a in rewrites.author_axes(repr(author), impl) if a in ok)
    out = rewrites.rewrite(text, impl, axes)
    rewrites.remember(out, text)
    return out


# --------------------------------------------------------------------------------------
# Slips: textual mutations with the diagnostic the real toolchain prints
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slip:
    """A mutation applied to rendered source and the compiler's response to it."""

    kind: str
    line: int  # 1-based line of the diagnostic
    diagnostic: str  # full compiler output (nvcc or Triton style)
    key: str  # short phrase a real compiler's stderr must contain


def _caret_block(line_text: str, col: int) -> str:
    return f"  {line_text.rstrip()}\n  {' ' * col}^\n"


def _nvcc_error(line_no: int, msg: str, line_text: str, col: int) -> str:
    return f"{CUDA_FILE}({line_no}): error: {msg}\n{_caret_block(line_text, col)}\n"


_DECL = re.compile(
    r"^(\s+)(?:const\s+)?(?:float|int|uint32_t|unsigned|size_t|int64_t)\s+([a-z_][a-z0-9_]*)\s*=\s*[^;{}]*;\s*$"
)
_USE_CAST = re.compile(
    r"^(\s+)(const\s+)?(uint4|uint2|uint32_t|float4|float2|int4)\s*\*\s*([a-z_][a-z0-9_]*)\s*=\s*reinterpret_cast<(?:const\s+)?(?:uint4|uint2|uint32_t|float4|float2|int4)\s*\*>\((.*)\);\s*$"
)
_PTR_DECL = re.compile(
    r"(?:const\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*\*\s*(?:__restrict__\s+)?([a-z_][a-z0-9_]*)\b"
)


def _kernel_body_range(lines: list[str]) -> tuple[int, int]:
    """Line span from the first __global__/__device__ definition to the last line."""
    for i, ln in enumerate(lines):
        if "__global__" in ln or "__device__" in ln:
            return i, len(lines)
    return 0, len(lines)


#: A slip injector: (code, its lines, first/end line of the span it may edit, rng, lines the
#: step rewrote) -> the mutated code and its slip, or None when the span has no place for it.
_SlipFn = Callable[
    [str, list[str], int, int, random.Random, set[int] | None], tuple[str, Slip] | None
]

_NVCC_TAIL = f'1 error detected in the compilation of "{CUDA_FILE}".\n'


def _typo_of(name: str, code: str) -> str:
    """The misspelling of ``name`` a slip types: underscores dropped (else an ``s`` added),
    or ``name_v`` when that spelling already exists in the source."""
    typo = name.replace("_", "") if "_" in name else name + "s"
    if re.search(rf"\b{typo}\b", code):
        typo = name + "_v"
    return typo


def _cuda_missing_semicolon(
    code: str, lines: list[str], lo: int, hi: int, rng: random.Random, allowed: set[int] | None
) -> tuple[str, Slip] | None:
    """Drop the ``;`` of a declaration followed by code (nvcc blames the next line)."""
    ok = _allowed(allowed)
    cands = []
    for i in range(lo, hi - 1):
        if (
            ok(i)
            and _DECL.match(lines[i])
            and lines[i + 1].strip()
            and not lines[i + 1].lstrip().startswith(("//", "#", "}"))
        ):
            cands.append(i)
    if not cands:
        return None
    i = rng.choice(cands)
    lines[i] = lines[i].rstrip()[:-1]
    nxt = lines[i + 1]
    col = len(nxt) - len(nxt.lstrip())
    diag = _nvcc_error(i + 2, 'expected a ";"', nxt, col)
    diag += _NVCC_TAIL
    return "\n".join(lines), Slip("missing_semicolon", i + 2, diag, 'expected a ";"')


def _cuda_first_use(lines: list[str], name: str, start: int, stop: int) -> tuple[int, int] | None:
    """(line, column) of the first use of ``name`` in ``[start, stop)`` outside comments and
    preprocessor lines; None when a re-declaration is all there is or nothing uses it."""
    for j in range(start, stop):
        # ``name in`` first: the regex cannot match a line without the name
        if name not in lines[j] or lines[j].lstrip().startswith(("//", "#")):
            continue
        mm = re.search(rf"\b{name}\b", lines[j])
        if mm and not re.match(r"^\s*(?:const\s+)?\w+\s+" + name + r"\b", lines[j]):
            return j, mm.start()
    return None


def _cuda_undeclared_candidates(
    lines: list[str], lo: int, hi: int, allowed: set[int] | None
) -> list[tuple[int, str, int]]:
    """(line, name, column) of each declared name's first use that a slip may misspell."""
    ok = _allowed(allowed)
    srt = None if allowed is None else sorted(allowed)
    cands = []
    for i in range(lo, hi):
        # a use is looked for in the next 24 lines only: none of them may be edited
        if not _any_allowed(srt, i + 1, min(hi, i + 25)):
            continue
        m = _DECL.match(lines[i])
        if not m:
            continue
        name = m.group(2)
        if len(name) < 3:
            continue
        use = _cuda_first_use(lines, name, i + 1, min(hi, i + 25))
        if use is not None and ok(use[0]):
            cands.append((use[0], name, use[1]))
    return cands


def _cuda_undeclared_identifier(
    code: str, lines: list[str], lo: int, hi: int, rng: random.Random, allowed: set[int] | None
) -> tuple[str, Slip] | None:
    """Misspell the use of a local variable (nvcc: identifier is undefined)."""
    cands = _cuda_undeclared_candidates(lines, lo, hi, allowed)
    if not cands:
        return None
    j, name, col = rng.choice(cands)
    typo = _typo_of(name, code)
    lines[j] = lines[j][:col] + typo + lines[j][col + len(name) :]
    diag = _nvcc_error(j + 1, f'identifier "{typo}" is undefined', lines[j], col)
    diag += _NVCC_TAIL
    return "\n".join(lines), Slip(
        "undeclared_identifier", j + 1, diag, f'identifier "{typo}" is undefined'
    )


def _cuda_vector_ptr_cast(
    code: str, lines: list[str], lo: int, hi: int, rng: random.Random, allowed: set[int] | None
) -> tuple[str, Slip] | None:
    """Drop the ``reinterpret_cast`` of a vector pointer taken from a scalar pointer."""
    ok = _allowed(allowed)
    casts = [
        (i, m)
        for i in range(lo, hi)
        # a cast line holds "reinterpret_cast<": the substring test skips the regex
        if ok(i) and "reinterpret_cast<" in lines[i] and (m := _USE_CAST.match(lines[i]))
    ]
    # pointer declarations give the source type nvcc prints (scanned only when needed)
    ptr_types: dict[str, str] = {}
    if casts:
        for ln in lines:
            for pm in _PTR_DECL.finditer(ln):
                ptr_types.setdefault(pm.group(2), pm.group(1))
    cands = []
    for i, m in casts:
        expr = m.group(5).strip()
        base = re.match(r"([a-z_][a-z0-9_]*)", expr)
        if (
            base
            and base.group(1) in ptr_types
            and ptr_types[base.group(1)]
            not in ("uint4", "uint2", "uint32_t", "float4", "float2", "int4", "void")
        ):
            cands.append((i, m, base.group(1)))
    if not cands:
        return None
    i, m, base_name = rng.choice(cands)
    indent, const, vt, name, expr = (
        m.group(1),
        m.group(2) or "",
        m.group(3),
        m.group(4),
        m.group(5).strip(),
    )
    lines[i] = f"{indent}{const}{vt}* {name} = {expr};"
    col = len(f"{indent}{const}{vt}* {name} = ")
    src_t = ptr_types[base_name]
    # pointer arithmetic keeps the pointee type; nvcc prints the declared spelling
    decl_const = _is_const_ptr(code, base_name)
    shown = f"{'const ' if decl_const else ''}{src_t} *"
    msg = (
        f'a value of type "{shown}" cannot be used to initialize an entity of type "{const}{vt} *"'
    )
    diag = _nvcc_error(i + 1, msg, lines[i], col)
    diag += _NVCC_TAIL
    return "\n".join(lines), Slip(
        "vector_ptr_cast", i + 1, diag, "cannot be used to initialize an entity of type"
    )


def _cuda_legacy_shfl(
    code: str, lines: list[str], lo: int, hi: int, rng: random.Random, allowed: set[int] | None
) -> tuple[str, Slip] | None:
    """Write the pre-CUDA-9 ``__shfl_xor`` (no mask) that current nvcc no longer declares."""
    ok = _allowed(allowed)
    cands = [i for i in range(lo, hi) if ok(i) and "__shfl_xor_sync(0xffffffffu, " in lines[i]]
    if not cands:
        return None
    i = rng.choice(cands)
    col = lines[i].index("__shfl_xor_sync(0xffffffffu, ")
    lines[i] = lines[i].replace("__shfl_xor_sync(0xffffffffu, ", "__shfl_xor(", 1)
    diag = _nvcc_error(i + 1, 'identifier "__shfl_xor" is undefined', lines[i], col)
    diag += _NVCC_TAIL
    return "\n".join(lines), Slip(
        "legacy_shfl", i + 1, diag, 'identifier "__shfl_xor" is undefined'
    )


_CUDA_SLIP_FNS: dict[str, _SlipFn] = {
    "missing_semicolon": _cuda_missing_semicolon,
    "undeclared_identifier": _cuda_undeclared_identifier,
    "vector_ptr_cast": _cuda_vector_ptr_cast,
    "legacy_shfl": _cuda_legacy_shfl,
}


def _cuda_slip(
    code: str, kind: str, rng: random.Random, allowed: set[int] | None = None
) -> tuple[str, Slip] | None:
    lines = code.split("\n")
    lo, hi = _kernel_body_range(lines)
    slip = _CUDA_SLIP_FNS.get(kind)
    if slip is None:
        raise ValueError(f"unknown CUDA slip {kind!r}")
    return slip(code, lines, lo, hi, rng, allowed)


def _is_const_ptr(code: str, name: str) -> bool:
    m = re.search(rf"(const\s+)?[A-Za-z_][A-Za-z0-9_]*\s*\*\s*(?:__restrict__\s+)?{name}\b", code)
    return bool(m and m.group(1))


def _triton_error(line_no: int, col: int, line_text: str, err: str, kernel_line: int) -> str:
    rel = line_no - kernel_line + 1
    return (
        f"triton.compiler.errors.CompilationError: at {rel}:{col}:\n"
        f"{line_text.rstrip()}\n{' ' * col}^\n{err}\n"
    )


def _jit_start(lines: list[str]) -> int:
    for i, ln in enumerate(lines):
        if ln.startswith("@triton.jit"):
            return i + 1  # the def line (Triton counts from the def)
    return 0


def _triton_first_use(lines: list[str], name: str, start: int, stop: int) -> tuple[int, int] | None:
    """(line, column) of the first read of ``name`` in ``[start, stop)``; None when a
    re-assignment comes first or nothing reads it."""
    for j in range(start, stop):
        if name not in lines[j]:
            continue  # the regex cannot match a line without the name
        mm = re.search(rf"(?<![\.\w]){name}\b", lines[j])
        if mm and not re.match(rf"^\s*{name}\s*=", lines[j]):
            return j, mm.start()
    return None


def _triton_undefined_candidates(
    lines: list[str], start: int, end: int, allowed: set[int] | None
) -> list[tuple[int, str, int]]:
    """(line, name, column) of each assigned local's first read that a slip may misspell."""
    ok = _allowed(allowed)
    srt = None if allowed is None else sorted(allowed)
    cands = []
    for i in range(start + 1, end):
        if not _any_allowed(srt, i + 1, min(end, i + 20)):
            continue  # its use is looked for in the next 19 lines only
        m = re.match(r"^\s+([a-z_][a-z0-9_]*)\s*=\s*", lines[i])
        if not m or len(m.group(1)) < 3:
            continue
        name = m.group(1)
        use = _triton_first_use(lines, name, i + 1, min(end, i + 20))
        if use is not None and ok(use[0]):
            cands.append((use[0], name, use[1]))
    return cands


def _triton_undefined_name(
    code: str, lines: list[str], start: int, end: int, rng: random.Random, allowed: set[int] | None
) -> tuple[str, Slip] | None:
    """Misspell the read of a local in the kernel (Triton: NameError at compile time)."""
    cands = _triton_undefined_candidates(lines, start, end, allowed)
    if not cands:
        return None
    j, name, col = rng.choice(cands)
    typo = _typo_of(name, code)
    lines[j] = lines[j][:col] + typo + lines[j][col + len(name) :]
    kl = _kernel_def_line(lines, j)
    diag = _triton_error(j + 1, col, lines[j], f"NameError('{typo} is not defined')", kl)
    return "\n".join(lines), Slip("undefined_name", j + 1, diag, "is not defined")


def _triton_bad_kwarg(
    code: str, lines: list[str], start: int, end: int, rng: random.Random, allowed: set[int] | None
) -> tuple[str, Slip] | None:
    """Spell ``tl.load``'s ``other=`` as ``default=`` (a TypeError while compiling)."""
    ok = _allowed(allowed)
    cands = [
        i
        for i in range(start + 1, end)
        if ok(i) and "other=" in lines[i] and "tl.load(" in lines[i]
    ]
    if not cands:
        return None
    i = rng.choice(cands)
    col = lines[i].index("tl.load(")
    lines[i] = lines[i].replace("other=", "default=", 1)
    kl = _kernel_def_line(lines, i)
    diag = _triton_error(
        i + 1,
        col,
        lines[i],
        "TypeError(\"load() got an unexpected keyword argument 'default'\")",
        kl,
    )
    return "\n".join(lines), Slip("bad_kwarg", i + 1, diag, "unexpected keyword argument")


def _triton_missing_constexpr(
    code: str, lines: list[str], start: int, end: int, rng: random.Random, allowed: set[int] | None
) -> tuple[str, Slip] | None:
    """Drop the ``tl.constexpr`` of a block-size argument that ``tl.arange`` uses."""
    ok = _allowed(allowed)
    cands = []
    for i in range(start, end):
        for m in re.finditer(r"\b(BLOCK[_A-Z]*)\s*:\s*tl\.constexpr", lines[i]):
            name = m.group(1)
            use = next((j for j in range(i + 1, end) if f"tl.arange(0, {name})" in lines[j]), None)
            if use is not None and ok(i):
                cands.append((i, m, name, use))
    if not cands:
        return None
    i, m, name, use = rng.choice(cands)
    lines[i] = lines[i][: m.start()] + name + lines[i][m.end() :]
    col = lines[use].index(f"tl.arange(0, {name})")
    kl = _kernel_def_line(lines, use)
    diag = _triton_error(
        use + 1,
        col,
        lines[use],
        'ValueError("arange\'s arguments must be of type tl.constexpr")',
        kl,
    )
    return "\n".join(lines), Slip(
        "missing_constexpr", use + 1, diag, "must be of type tl.constexpr"
    )


def _triton_non_pow2_block(
    code: str, lines: list[str], start: int, end: int, rng: random.Random, allowed: set[int] | None
) -> tuple[str, Slip] | None:
    """Have the launch wrapper pass a block size that is not a power of two."""
    ok = _allowed(allowed)
    cands = []
    for i in range(end, len(lines)):
        m = re.search(r"\b(BLOCK(?:_[A-Z]+)?)=(\d+)", lines[i])
        if m and int(m.group(2)) >= 32 and ok(i):
            cands.append((i, m))
    if not cands:
        return None
    i, m = rng.choice(cands)
    val = int(m.group(2))
    bad = val * 3 // 4
    lines[i] = lines[i][: m.start(2)] + str(bad) + lines[i][m.end(2) :]
    name = m.group(1)
    use = next((j for j in range(start, end) if f"tl.arange(0, {name})" in lines[j]), None)
    if use is None:
        return None
    col = lines[use].index(f"tl.arange(0, {name})")
    kl = _kernel_def_line(lines, use)
    diag = _triton_error(
        use + 1, col, lines[use], 'ValueError("arange\'s range must be a power of 2")', kl
    )
    return "\n".join(lines), Slip("non_pow2_block", use + 1, diag, "must be a power of 2")


_TRITON_SLIP_FNS: dict[str, _SlipFn] = {
    "undefined_name": _triton_undefined_name,
    "bad_kwarg": _triton_bad_kwarg,
    "missing_constexpr": _triton_missing_constexpr,
    "non_pow2_block": _triton_non_pow2_block,
}


def _triton_slip(
    code: str, kind: str, rng: random.Random, allowed: set[int] | None = None
) -> tuple[str, Slip] | None:
    lines = code.split("\n")
    start = _jit_start(lines)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("def ")), len(lines))
    slip = _TRITON_SLIP_FNS.get(kind)
    if slip is None:
        raise ValueError(f"unknown Triton slip {kind!r}")
    return slip(code, lines, start, end, rng, allowed)


def _kernel_def_line(lines: list[str], at: int) -> int:
    for i in range(at, -1, -1):
        if lines[i].startswith("def ") and i > 0 and lines[i - 1].startswith("@triton.jit"):
            return i + 1
    return 1


def _any_allowed(lines: list[int] | None, lo: int, hi: int) -> bool:
    """Whether some line in ``[lo, hi)`` may be edited; ``lines`` sorted (None: all may)."""
    if lines is None:
        return True
    k = bisect.bisect_left(lines, lo)
    return k < len(lines) and lines[k] < hi


def _allowed(lines: set[int] | None) -> Callable[[int], bool]:
    """Predicate over 0-based line numbers: may a slip be typed there?"""
    if lines is None:
        return lambda _i: True
    return lines.__contains__


def inject_slip(
    code: str, impl: str, kind: str, rng: random.Random, lines: set[int] | None = None
) -> tuple[str, Slip] | None:
    """Apply a slip of ``kind``; None when the source offers no place for it.

    ``lines`` (0-based) restricts the slip to lines the step rewrote (the edited line is
    the one mutated; nvcc may still point at the next line for a missing semicolon, as it
    really does). None allows any line of the kernel."""
    if impl == "cuda":
        return _cuda_slip(code, kind, rng, lines)
    return _triton_slip(code, kind, rng, lines)


def slip_kinds(impl: str) -> tuple[str, ...]:
    return CUDA_SLIPS if impl == "cuda" else TRITON_SLIPS
