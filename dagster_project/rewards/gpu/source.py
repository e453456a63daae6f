"""Load a row's own Triton kernel from its ``kernel_source`` text.

The kernel comes from the row, never from an installed engine: the GPU machine has no
vLLM or SGLang. A kernel source is the kernel plus the ``@triton.jit`` helpers it calls
and the imports that bind its names (see ``mining/configs/kernels.py``). Imports of
``triton``, ``torch`` and the standard library run as written; imports from anywhere
else (the engine: ``from vllm.triton_utils import tl, triton``) are replaced by *shims*:
the few names such a module re-exports that the harness can provide itself
(``ENGINE_SHIMS``). A name the kernel needs and nobody provides is reported before any
compile, as a row-level error naming it.

Signatures change between engine versions (SGLang added TMA descriptors, vLLM added
``naive_block_assignment`` and ``HAS_BIAS``), so the harness binds arguments by *name*
from the parsed signature instead of by position (``plan.bind``).

Triton reads a kernel's text with ``inspect.getsource``, which needs a real file, so
``load_kernel`` writes the (shimmed) source to a cache folder keyed by its hash and
imports it from there. Parsing is pure ``ast``; only ``load_kernel`` imports triton.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

#: Engine-module names the harness can stand in for, and the module providing each.
#: vLLM re-exports ``tl``/``triton`` from ``vllm.triton_utils`` (so it can run without
#: Triton installed); ``libdevice`` is Triton's math library under its usual alias.
ENGINE_SHIMS: dict[str, str] = {
    "tl": "triton.language",
    "triton": "triton",
    "libdevice": "triton.language.extra.libdevice",
}

#: Import roots that are executed as written.
_KEPT_ROOTS = frozenset({"triton", "torch", "numpy", "math", "__future__"}) | frozenset(
    getattr(sys, "stdlib_module_names", ())
)


class KernelSourceError(ValueError):
    """The source cannot yield a launchable kernel; ``reason`` is one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class KernelParam:
    name: str
    constexpr: bool
    has_default: bool


@dataclass(frozen=True)
class KernelSignature:
    """The kernel's parameters in order, as parsed from its ``def``."""

    name: str
    params: tuple[KernelParam, ...]
    decorators: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if not p.has_default)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _is_triton_decorated(fn: ast.FunctionDef) -> bool:
    return any(
        _dotted(d).rsplit(".", 1)[-1] in {"jit", "autotune", "heuristics"}
        for d in fn.decorator_list
    )


def parse_source(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise KernelSourceError(
            f"kernel source does not parse: line {exc.lineno}: {exc.msg}"
        ) from exc


def jit_functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """Every Triton-decorated function at module level (or under a module-level ``if``)."""
    out: dict[str, ast.FunctionDef] = {}
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, ast.FunctionDef) and _is_triton_decorated(node):
            out.setdefault(node.name, node)
        elif isinstance(node, ast.If | ast.Try):
            stack.extend(node.body)
            stack.extend(getattr(node, "orelse", []))
    return out


def _is_constexpr(annotation: ast.expr | None) -> bool:
    return annotation is not None and _dotted(annotation).rsplit(".", 1)[-1] == "constexpr"


def signature_of(source: str, kernel: str) -> KernelSignature:
    """The parameter list of ``kernel`` (a ``@triton.jit`` function in ``source``)."""
    fns = jit_functions(parse_source(source))
    fn = fns.get(kernel)
    if fn is None:
        found = ", ".join(sorted(fns)) or "none"
        raise KernelSourceError(
            f"no @triton.jit function {kernel!r} in the source (found: {found})"
        )
    args = fn.args
    if args.vararg or args.kwarg:
        raise KernelSourceError(f"{kernel} takes *args/**kwargs: cannot bind by name")
    positional = [*args.posonlyargs, *args.args]
    n_default = len(args.defaults)
    params = [
        KernelParam(a.arg, _is_constexpr(a.annotation), i >= len(positional) - n_default)
        for i, a in enumerate(positional)
    ]
    params += [
        KernelParam(a.arg, _is_constexpr(a.annotation), d is not None)
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    return KernelSignature(kernel, tuple(params), tuple(_dotted(d) for d in fn.decorator_list))


# -- engine imports and shims ---------------------------------------------------------


@dataclass(frozen=True)
class EngineImport:
    """One import statement of an engine module (``vllm.…``, ``sglang.…``, relative)."""

    module: str
    names: tuple[str, ...]  # the names it binds in the kernel's module
    lineno: int
    end_lineno: int
    col_offset: int


def _import_root(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        if node.level:
            return ["."]
        return [(node.module or "").split(".", 1)[0]]
    return [alias.name.split(".", 1)[0] for alias in node.names]


def _module_statements(tree: ast.Module) -> Iterator[ast.stmt]:
    """Module-level statements in source order, with the bodies of module-level
    ``if``/``try`` blocks (all branches) flattened in: what runs at import either way."""
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, ast.If | ast.Try):
            stack[:0] = [
                *node.body,
                *getattr(node, "orelse", []),
                *(stmt for handler in getattr(node, "handlers", []) for stmt in handler.body),
                *getattr(node, "finalbody", []),
            ]
            continue
        yield node


def engine_imports(tree: ast.Module) -> list[EngineImport]:
    """Module-level imports (also inside module-level ``if``/``try``) of non-kept modules."""
    out: list[EngineImport] = []
    for node in _module_statements(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if all(root in _KEPT_ROOTS for root in _import_root(node)):
            continue
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            names = tuple(a.asname or a.name for a in node.names)
        else:
            module = ", ".join(a.name for a in node.names)
            names = tuple(a.asname or a.name.split(".", 1)[0] for a in node.names)
        out.append(
            EngineImport(
                module, names, node.lineno, node.end_lineno or node.lineno, node.col_offset
            )
        )
    return out


def _defined_at_module(tree: ast.Module) -> set[str]:
    """Names bound by module-level statements (descending into ``if``/``try`` only)."""
    names: set[str] = set()
    for node in _module_statements(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".", 1)[0])
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _names_read(fn: ast.FunctionDef) -> set[str]:
    """Free-variable candidates of a function: names loaded and not bound inside it."""
    loaded: set[str] = set()
    bound: set[str] = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif (isinstance(node, ast.ExceptHandler) and node.name) or (
            isinstance(node, ast.FunctionDef) and node is not fn
        ):
            bound.add(cast(str, node.name))  # an except handler's name is checked above
    # Names used in the decorators and annotations are read at module level as well,
    # and ``tl``/``triton`` there must resolve too, so they count.
    return loaded - bound


def missing_names(source: str, shims: Iterable[str] = ENGINE_SHIMS) -> list[str]:
    """Names the source's Triton functions read that nothing will define once the engine
    imports are replaced by shims. Empty means the source can be loaded."""
    tree = parse_source(source)
    shimmed = set(shims)
    dropped = {n for imp in engine_imports(tree) for n in imp.names} - shimmed
    defined = (_defined_at_module(tree) - dropped) | shimmed | set(dir(builtins))
    needed: set[str] = set()
    for fn in jit_functions(tree).values():
        needed |= _names_read(fn)
    return sorted(needed - defined)


def shimmed_source(source: str) -> tuple[str, dict[str, str]]:
    """The source with engine imports blanked out (line numbers kept), and the shims
    (name -> module) to inject into the module namespace before it runs."""
    tree = parse_source(source)
    lines = source.splitlines()
    shims: dict[str, str] = {}
    for imp in engine_imports(tree):
        for name in imp.names:
            if name in ENGINE_SHIMS:
                shims[name] = ENGINE_SHIMS[name]
        indent = " " * imp.col_offset
        first = imp.lineno - 1
        lines[first] = f"{indent}pass  # kernelhouse shim for: import from {imp.module}"
        for i in range(first + 1, imp.end_lineno):
            lines[i] = ""
    return "\n".join(lines) + "\n", shims


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def cache_dir() -> Path:
    """Where loaded kernel files live (``KERNELHOUSE_GPU_CACHE`` or the temp folder)."""
    root = os.environ.get("KERNELHOUSE_GPU_CACHE")
    base = Path(root) if root else Path(tempfile.gettempdir()) / "kernelhouse-gpu"
    return base / "kernels"


@dataclass(frozen=True)
class LoadedKernel:
    """A launchable kernel: the JIT function, its parsed signature and where it lives."""

    fn: Any
    signature: KernelSignature
    path: Path
    source_sha: str


_LOADED: dict[tuple[str, str], LoadedKernel] = {}


def load_kernel(source: str, kernel: str) -> LoadedKernel:
    """Import the row's kernel (cached per source text and kernel name).

    Raises ``KernelSourceError`` when the source lacks the kernel, reads names nothing
    provides, or fails to import; the reason names the problem.
    """
    key = (source_hash(source), kernel)
    if key in _LOADED:
        return _LOADED[key]
    signature = signature_of(source, kernel)
    if any(d.rsplit(".", 1)[-1] in {"autotune", "heuristics"} for d in signature.decorators):
        raise KernelSourceError(
            f"{kernel} is autotuned/heuristics-decorated: its launch "
            "config is not the caller's to choose"
        )
    missing = missing_names(source)
    if missing:
        raise KernelSourceError(
            "kernel source needs names the harness does not provide: " + ", ".join(missing)
        )
    text, shims = shimmed_source(source)
    sha = source_hash(text)
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"k_{sha}.py"
    if not path.exists() or path.read_text() != text:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    module_name = f"kernelhouse_kernel_{sha}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise KernelSourceError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    for name, provider in shims.items():
        module.__dict__[name] = importlib.import_module(provider)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any import-time failure is the source's
        sys.modules.pop(module_name, None)
        raise KernelSourceError(
            f"kernel source failed to import: {type(exc).__name__}: {exc}"
        ) from exc
    fn = getattr(module, kernel, None)
    if fn is None or not hasattr(fn, "run"):
        raise KernelSourceError(f"{kernel} is not a Triton JIT function after import")
    loaded = LoadedKernel(fn, signature, path, sha)
    _LOADED[key] = loaded
    return loaded
