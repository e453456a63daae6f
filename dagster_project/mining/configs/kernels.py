"""The Triton kernel each config family drives, cut out of the repo at the snapshot commit.

A prompt needs the kernel a config is for, not the whole 2,000-line module around it.
We parse the module with ``ast`` and keep, verbatim and in file order, the decorated
kernel plus everything needed to read it: the ``@triton.jit`` helpers it calls
(transitively, including helpers defined under a module-level ``if``, as vLLM does for
``softplus``), the module-level constants it reads, and the import lines that bind the
names used. Helpers imported from another module of the same repo are resolved once more
in that module, so e.g. the SSU kernel's ``fast_exp`` comes along.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field

import polars as pl

from dagster_project.mining.configs.specs import KERNEL_FILES
from dagster_project.mining.git import GitRepo

#: Version of kernel-source extraction. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "1"

KERNELS_SCHEMA: dict[str, pl.DataType] = {
    "kernel": pl.String(),
    "repo": pl.String(),
    "path": pl.String(),
    "symbol": pl.String(),  # the name found at the ref (an older alias on old refs)
    "source": pl.String(),
    "snapshot_sha": pl.String(),
    "n_helpers": pl.Int64(),
}

_MAX_DEPTH = 2  # modules followed for imported helpers


def _is_jit(node: ast.FunctionDef) -> bool:
    """Decorated with ``triton.jit`` / ``jit`` / ``triton.autotune`` / ``triton.heuristics``."""
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in {"jit", "autotune", "heuristics"}:
            return True
    return False


def _names_used(node: ast.AST) -> set[str]:
    used: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            used.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            root: ast.AST = sub
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name):
                used.add(root.id)
    return used


def _free_names(fn: ast.FunctionDef) -> set[str]:
    """Names a function reads that it does not bind itself (parameters, locals)."""
    local = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    if fn.args.vararg:
        local.add(fn.args.vararg.arg)
    if fn.args.kwarg:
        local.add(fn.args.kwarg.arg)
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            local.add(sub.id)
    return _names_used(fn) - local


def _bound_names(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds (functions/classes/assignments also inside ifs)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, ast.Import):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    if isinstance(stmt, ast.ImportFrom):
        return {a.asname or a.name for a in stmt.names}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(stmt, (ast.If, ast.Try)):
        inner: set[str] = set()
        for block in (stmt.body, stmt.orelse, getattr(stmt, "finalbody", [])):
            for s in block:
                inner |= _bound_names(s)
        for h in getattr(stmt, "handlers", []):
            for s in h.body:
                inner |= _bound_names(s)
        return inner
    return set()


def _jit_defs(stmt: ast.stmt) -> Iterable[ast.FunctionDef]:
    if isinstance(stmt, ast.FunctionDef):
        if _is_jit(stmt):
            yield stmt
    elif isinstance(stmt, (ast.If, ast.Try)):
        for block in (stmt.body, stmt.orelse):
            for s in block:
                yield from _jit_defs(s)


@dataclass
class _Module:
    path: str
    text: str
    tree: ast.Module
    lines: list[str] = field(init=False)
    binders: dict[str, ast.stmt] = field(init=False)

    def __post_init__(self) -> None:
        self.lines = self.text.splitlines()
        self.binders = {}
        for stmt in self.tree.body:
            for name in _bound_names(stmt):
                self.binders.setdefault(name, stmt)

    def segment(self, stmt: ast.stmt) -> str:
        start = stmt.lineno
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = min([start, *(d.lineno for d in stmt.decorator_list)])
        return "\n".join(self.lines[start - 1 : stmt.end_lineno])


@dataclass
class Extracted:
    """A kernel cut out of its module: verbatim source, helper names, in-repo imports."""

    source: str
    symbol: str
    helpers: list[str]
    imported: dict[str, tuple[str, str]]  # name -> (module, original name) from in-repo imports


def extract_from_source(
    text: str, names: Iterable[str], path: str = "<module>"
) -> Extracted | None:
    """Cut one kernel (the first of ``names`` defined in ``text``) and what it needs."""
    try:
        mod = _Module(path, text, ast.parse(text))
    except SyntaxError:
        return None
    return _extract(mod, names)


def _extract(mod: _Module, names: Iterable[str]) -> Extracted | None:
    target = None
    for name in names:
        stmt = mod.binders.get(name)
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            target = stmt
            break
    if target is None:
        return None
    return _closure(mod, target)


def _called_names(fn: ast.FunctionDef) -> set[str]:
    return {
        c.func.id for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
    }


def _note_import(
    stmt: ast.Import | ast.ImportFrom,
    name: str,
    called: set[str],
    imported: dict[str, tuple[str, str]],
) -> None:
    """Record where ``name`` is imported from when the kernel calls it: only functions the
    kernel calls can be imported @triton.jit helpers (``tl`` and ``triton`` are used as
    modules), so only those are followed."""
    if isinstance(stmt, ast.ImportFrom) and stmt.module and name in called:
        for a in stmt.names:
            if (a.asname or a.name) == name:
                imported[name] = ("." * stmt.level + stmt.module, a.name)


def _is_kernel_part(stmt: ast.stmt, name: str) -> bool:
    """Whether the statement binding ``name`` belongs in the extracted kernel: not a class,
    and for a function (or an ``if``/``try`` defining one) only a @triton.jit one; plain
    Python callers/launchers are not part of the kernel."""
    if isinstance(stmt, (ast.FunctionDef, ast.If, ast.Try)):
        return any(f.name == name for f in _jit_defs(stmt))
    return not isinstance(stmt, ast.ClassDef)


def _names_needed(stmt: ast.stmt, called: set[str]) -> set[str]:
    """The names a kept statement uses (its jit functions' free names, or the names of an
    assignment / an ``if`` test); the functions its jit functions call join ``called``."""
    used = set()
    for fn in _jit_defs(stmt):
        used |= _free_names(fn)
        called |= _called_names(fn)
    if not isinstance(stmt, ast.FunctionDef):
        used |= (
            _names_used(stmt)
            if not isinstance(stmt, (ast.If, ast.Try))
            else (_names_used(stmt.test) if isinstance(stmt, ast.If) else set())
        )
    return used


def _closure(mod: _Module, target: ast.FunctionDef) -> Extracted:
    keep: dict[int, ast.stmt] = {id(target): target}
    called = _called_names(target)
    helpers: list[str] = []
    imported: dict[str, tuple[str, str]] = {}
    seen: set[str] = {target.name}
    work = list(_free_names(target))
    while work:
        name = work.pop()
        if name in seen:
            continue
        seen.add(name)
        stmt = mod.binders.get(name)
        if stmt is None:
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            keep[id(stmt)] = stmt
            _note_import(stmt, name, called, imported)
            continue
        if not _is_kernel_part(stmt, name):
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.If, ast.Try)):
            helpers.append(name)
        keep[id(stmt)] = stmt
        work.extend(_names_needed(stmt, called) - seen)
    ordered = sorted(keep.values(), key=lambda s: s.lineno)
    imports = [s for s in ordered if isinstance(s, (ast.Import, ast.ImportFrom))]
    body = [s for s in ordered if not isinstance(s, (ast.Import, ast.ImportFrom))]
    parts = ["\n".join(mod.segment(s) for s in imports)] if imports else []
    parts += [mod.segment(s) for s in body]
    return Extracted("\n\n\n".join(parts) + "\n", target.name, helpers, imported)


def _module_path(repo_name: str, importer: str, module: str) -> list[str]:
    """Candidate repo paths of an imported module (absolute or relative import)."""
    level = len(module) - len(module.lstrip("."))
    dotted = module.lstrip(".")
    if level:
        base = importer.split("/")[:-level]
        stem = "/".join(base + dotted.split(".")) if dotted else "/".join(base)
    else:
        top = dotted.split(".")[0]
        if top not in {"vllm", "sglang", "flashinfer"}:
            return []
        prefix = "python/" if top == "sglang" else ""
        stem = prefix + dotted.replace(".", "/")
    return [stem + ".py", stem + "/__init__.py"]


class _Modules:
    """Parsed modules of one ref, read in batches and parsed at most once each."""

    def __init__(self, repo: GitRepo, ref: str) -> None:
        self.repo, self.ref = repo, ref
        self._mods: dict[str, _Module | None] = {}

    def load(self, paths: Iterable[str]) -> None:
        """Read every not-yet-seen path with one ls-tree + one cat-file."""
        want = [p for p in dict.fromkeys(paths) if p not in self._mods]
        if not want:
            return
        listing = {p: oid for _m, t, oid, p in self.repo.ls_tree(self.ref, want) if t == "blob"}
        self.repo.prefetch_blobs(listing.values())
        blobs = self.repo.read_blobs(listing.values())
        for path in want:
            oid = listing.get(path)
            mod = None
            if oid is not None:
                text = blobs[oid].decode("utf-8", "replace")
                try:
                    mod = _Module(path, text, ast.parse(text))
                except SyntaxError:
                    mod = None
            self._mods[path] = mod

    def get(self, path: str) -> _Module | None:
        self.load([path])
        return self._mods[path]


def _resolve_imported(
    mods: _Modules, repo_name: str, importer: str, ext: Extracted, depth: int
) -> list[str]:
    """Sources of ``@triton.jit`` helpers that ``ext`` imports from in-repo modules."""
    if depth >= _MAX_DEPTH or not ext.imported:
        return []
    wanted: list[tuple[str, str]] = []
    for _local, (module, original) in ext.imported.items():
        for cand in _module_path(repo_name, importer, module):
            wanted.append((cand, original))
    mods.load(p for p, _ in wanted)
    out: list[str] = []
    for path, original in wanted:
        mod = mods.get(path)
        stmt = mod.binders.get(original) if mod is not None else None
        fn = next((f for f in _jit_defs(stmt) if f.name == original), None) if stmt else None
        if mod is None or fn is None:
            continue
        sub = _closure(mod, fn)
        out.append(f"# --- from {path} ---\n{sub.source}")
        out += _resolve_imported(mods, repo_name, path, sub, depth + 1)
    return out


def extract_kernel_sources(repo: GitRepo, repo_name: str, ref: str = "HEAD") -> pl.DataFrame:
    """One row per kernel of ``KERNEL_FILES[repo_name]`` found at ``ref``.

    The known paths are tried newest first; a kernel found in none of them is reported
    with a null ``source`` (never silently missing) so the caller can see the gap.
    """
    specs = KERNEL_FILES.get(repo_name, {})
    if not specs:
        return pl.DataFrame(schema=KERNELS_SCHEMA)
    sha = repo.head(ref)
    mods = _Modules(repo, sha)
    mods.load(p for s in specs.values() for p in s.paths)
    rows = []
    for kernel, spec in specs.items():
        row: dict[str, object] = {"kernel": kernel, "repo": repo_name, "snapshot_sha": sha}
        for path in spec.paths:
            mod = mods.get(path)
            ext = _extract(mod, spec.names) if mod is not None else None
            if ext is None:
                continue
            extra = _resolve_imported(mods, repo_name, path, ext, 0)
            source = ext.source + ("\n\n" + "\n\n".join(extra) if extra else "")
            row.update(
                path=path, symbol=ext.symbol, source=source, n_helpers=len(ext.helpers) + len(extra)
            )
            break
        rows.append(row)
    return pl.DataFrame(rows, schema=KERNELS_SCHEMA)
