"""Which language a kernel file is written in: by extension for native code, by content
for Python.

A ``.py`` file under a kernel directory is usually host code (layers, wrappers, configs);
it holds a kernel only when it defines one. The reference measured the two content rules
on every Triton/CuTe file in history (``shared/reference/commits.md`` §1): Triton files
carry ``@triton.jit``/``autotune``/``heuristics`` (a bare ``@jit`` imported from triton
occurs nowhere), CuTe DSL files import ``cutlass.cute`` or decorate with ``@cute.jit`` /
``@cute.kernel``. ``\\b`` keeps vLLM's ``cutlass_library`` generator scripts out. A file
that matches both is CuTe DSL (it uses Triton only as a helper). Either version of the file
(before or after) may carry the marker: a commit that turns a Triton file into a CuTe DSL
one is still a kernel change.
"""

from __future__ import annotations

import re

#: Version of language classification. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "1"

CUDA = "CUDA"
CPP = "C++"
TRITON = "Triton"
CUTE_DSL = "CuTe DSL"
LANGUAGES = (CUDA, CPP, TRITON, CUTE_DSL)

CUDA_EXT_RE = re.compile(r"\.(cu|cuh)$")
CPP_EXT_RE = re.compile(r"\.(cpp|cc|cxx|c|h|hpp|inl|inc|hip|mu|muh)$")

TRITON_RE = re.compile(rb"@triton\.(jit|autotune|heuristics)\b")
CUTE_RE = re.compile(
    rb"^[ \t]*(?:import cutlass\.cute\b|from cutlass(?:\.cute\b| import [^\n]*\bcute\b))"
    rb"|@cute\.(?:jit|kernel)\b",
    re.MULTILINE,
)
# The same rule split into patterns that start with a literal, which the regex engine
# finds with a fast substring search instead of trying ``^`` at every byte (CUTE_RE costs
# ~1 ms on a 60 KB file, these ~20 us). The import forms must start their line.
_CUTE_IMPORT_RES = (
    re.compile(rb"import cutlass\.cute\b"),
    re.compile(rb"from cutlass\.cute\b"),
    re.compile(rb"from cutlass import [^\n]*\bcute\b"),
)
_CUTE_DECORATOR_RE = re.compile(rb"@cute\.(?:jit|kernel)\b")


def _at_line_start(blob: bytes, pos: int) -> bool:
    return not blob[blob.rfind(b"\n", 0, pos) + 1 : pos].strip(b" \t")


def is_cute_dsl(blob: bytes) -> bool:
    """``CUTE_RE.search(blob)``, computed quickly."""
    if b"cutlass" not in blob:
        return b"@cute." in blob and _CUTE_DECORATOR_RE.search(blob) is not None
    if _CUTE_DECORATOR_RE.search(blob):
        return True
    for pattern in _CUTE_IMPORT_RES:
        for m in pattern.finditer(blob):
            if _at_line_start(blob, m.start()):
                return True
    return False


def is_triton(blob: bytes) -> bool:
    return b"@triton." in blob and TRITON_RE.search(blob) is not None


def native_language(path: str) -> str | None:
    """CUDA for ``.cu``/``.cuh``, C++ for the other native extensions, else None."""
    if CUDA_EXT_RE.search(path):
        return CUDA
    if CPP_EXT_RE.search(path):
        return CPP
    return None


def python_language(*versions: bytes | None) -> str | None:
    """CuTe DSL or Triton if any given version of a ``.py`` file defines such a kernel."""
    present = [v for v in versions if v]
    if any(is_cute_dsl(v) for v in present):
        return CUTE_DSL
    if any(is_triton(v) for v in present):
        return TRITON
    return None


def classify_language(kind: str, path: str, *versions: bytes | None) -> str | None:
    """The row language for a path of ``kind`` (``"native"``/``"python"``, from the spec)."""
    if kind == "native":
        return native_language(path)
    if kind == "python":
        return python_language(*versions)
    return None
