"""Static checks: what a candidate's source may not *introduce*, read with ``ast``.

The candidate runs in the same process as the judge that times and snapshots it (it
must: device timers only see their own process), so the judge's objects are reachable
in principle. These checks close the doors a completion would use: imports of modules
that reach the interpreter, the process or the device's clocks (``gc``, ``inspect``,
``ctypes``, ``threading``, ``subprocess``, ``time``, ``triton.testing`` ...), calls that
run text as code or open files, attributes that patch timers, redirect streams, change
numeric modes or carve out persisting L2, writes to module attributes (monkey-patching
``torch.cuda.Event``), ``global`` statements (module state written from a call: a cache
across calls), and strings that spell any of these names for ``getattr``.

A real kernel file may already use some of these (vLLM imports ``os``); what counts is
what the patch adds, so ``introduced(before, after)`` reports only findings whose count
grew. Everything is pure standard library, so the checks run in CI.
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass

#: Bumped when a rule changes (stored with each verdict of the exploit suite).
STATIC_RULES_VERSION = "1.1.0"

#: Top-level modules (or dotted prefixes) a candidate may not import.
FORBIDDEN_MODULES = frozenset(
    {
        "atexit",
        "builtins",
        "cffi",
        "concurrent",
        "ctypes",
        "cuda",
        "dagster_project",
        "faulthandler",
        "gc",
        "importlib",
        "inspect",
        "marshal",
        "mmap",
        "multiprocessing",
        "pickle",
        "pty",
        "pynvml",
        "shutil",
        "signal",
        "socket",
        "subprocess",
        "sys",
        "tempfile",
        "threading",
        "_thread",
        "time",
        "timeit",
        "tracemalloc",
        "triton.testing",
        "torch.utils.benchmark",
        "torch.cuda.nvtx",
    }
)

#: Attribute names (``x.NAME``) a candidate may not touch, with the reason.
FORBIDDEN_ATTRS: dict[str, str] = {
    "_exit": "ends the process before the judge reports",
    "exit": "ends the process before the judge reports",
    "abort": "ends the process before the judge reports",
    "kill": "signals a process",
    "environ": "reads or writes the environment",
    "putenv": "writes the environment",
    "unsetenv": "writes the environment",
    "system": "runs a shell",
    "popen": "runs a shell",
    "fork": "starts a process",
    "forkpty": "starts a process",
    "spawnv": "starts a process",
    "execv": "replaces the process",
    "Thread": "starts a thread",
    "Process": "starts a process",
    "Pool": "starts workers",
    "ThreadPoolExecutor": "starts workers",
    "perf_counter": "reads or patches the judge's clock",
    "perf_counter_ns": "reads or patches the judge's clock",
    "monotonic": "reads or patches the judge's clock",
    "process_time": "reads or patches the judge's clock",
    "Event": "patches or creates the judge's device timer",
    "elapsed_time": "patches the judge's device timer",
    "synchronize": "patches or moves the judge's synchronisation",
    "do_bench": "patches the benchmark timer",
    "do_bench_cudagraph": "patches the benchmark timer",
    "Stream": "moves work to a side stream",
    "ExternalStream": "moves work to a side stream",
    "set_stream": "moves work to a side stream",
    "stream": "moves work to a side stream",
    "CUDAGraph": "captures or replays work out of the judge's sight",
    "_getframe": "walks the judge's stack",
    "f_back": "walks the judge's stack",
    "f_globals": "reads the judge's globals",
    "f_locals": "reads the judge's locals",
    "f_builtins": "reads the judge's builtins",
    "__globals__": "reads another function's globals",
    "__builtins__": "reaches the builtins",
    "__subclasses__": "walks the type graph to the judge",
    "__code__": "rewrites a function",
    "__closure__": "reads a closure",
    "__dict__": "reads an object's namespace",
    "__setattr__": "patches an object around its class",
    "__defaults__": "rewrites a function's defaults",
    "__kwdefaults__": "rewrites a function's defaults",
    "get_objects": "walks the heap to the judge",
    "get_referrers": "walks the heap to the judge",
    "get_referents": "walks the heap to the judge",
    "currentframe": "walks the judge's stack",
    "__torch_function__": "a Tensor subclass overriding operations",
    "__torch_dispatch__": "a Tensor subclass overriding operations",
    "_make_subclass": "a Tensor subclass",
    "_make_wrapper_subclass": "a Tensor subclass",
    "as_subclass": "a Tensor subclass",
    "__array__": "a lazy array-like",
    "__array_ufunc__": "an array-like overriding operations",
    "__array_function__": "an array-like overriding operations",
    "allow_tf32": "changes the precision of float32 matmuls",
    "set_float32_matmul_precision": "changes the precision of float32 matmuls",
    "allow_fp16_reduced_precision_reduction": "changes reduction precision",
    "allow_bf16_reduced_precision_reduction": "changes reduction precision",
    "cudaDeviceSetLimit": "sets a persisting-L2 carve-out",
    "cudaStreamSetAttribute": "sets an access-policy window",
    "accessPolicyWindow": "sets an access-policy window",
    "persisting_l2_cache_max_size": "sets a persisting-L2 carve-out",
    "set_per_process_memory_fraction": "changes the judge's memory limits",
    # 1.1.0 (heldout2, in sample): process-wide state the runtime checks compare too
    "sched_setaffinity": "changes the CPUs the judge's process may run on",
    "setpriority": "changes the process's scheduling priority",
    "addaudithook": "runs code on audited events, off the clock",
}

#: Builtins a candidate may not call by name.
FORBIDDEN_CALLS: dict[str, str] = {
    "exec": "runs text as code",
    "eval": "runs text as code",
    "compile": "compiles text as code",
    "__import__": "imports by name",
    "globals": "reads module globals",
    "locals": "reads a frame's locals",
    "vars": "reads an object's namespace",
    "open": "opens files (harness, caches, results)",
    "setattr": "patches an object by name",
    "delattr": "patches an object by name",
    "breakpoint": "enters a debugger",
    "exit": "ends the process before the judge reports",
    "quit": "ends the process before the judge reports",
    "print": "prints results the judge does not read",
}

#: Names, spelled as strings, that mean the code reaches for a forbidden attribute.
_SPELLED = frozenset(FORBIDDEN_ATTRS) | frozenset(FORBIDDEN_CALLS) | FORBIDDEN_MODULES


@dataclass(frozen=True, order=True)
class Finding:
    """One forbidden construct: ``rule`` (import, attribute, call, module_write, global,
    spelled_name, syntax), what it named, the line and why it is forbidden."""

    rule: str
    name: str
    line: int = 0
    why: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.rule, self.name)

    def __str__(self) -> str:
        return f"line {self.line}: {self.rule} {self.name!r} ({self.why})"


def _module_forbidden(name: str) -> bool:
    parts = name.split(".")
    return any(".".join(parts[: i + 1]) in FORBIDDEN_MODULES for i in range(len(parts)))


class _Scanner(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[Finding] = []
        self.module_names: set[str] = set()

    def add(self, rule: str, name: str, node: ast.AST, why: str) -> None:
        self.found.append(Finding(rule, name, getattr(node, "lineno", 0), why))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.module_names.add((alias.asname or alias.name).split(".")[0])
            if _module_forbidden(alias.name):
                self.add("import", alias.name, node, "module reaches the judge or the process")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        if node.level:
            self.add("import", "." * node.level + mod, node, "relative import")
        for alias in node.names:
            full = f"{mod}.{alias.name}" if mod else alias.name
            self.module_names.add(alias.asname or alias.name)
            if _module_forbidden(mod) or _module_forbidden(full):
                self.add("import", full, node, "module reaches the judge or the process")
            elif alias.name in FORBIDDEN_ATTRS:
                self.add("attribute", alias.name, node, FORBIDDEN_ATTRS[alias.name])

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in FORBIDDEN_ATTRS:
            self.add("attribute", node.attr, node, FORBIDDEN_ATTRS[node.attr])
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_ATTRS and node.id.startswith("__"):
            self.add("attribute", node.id, node, FORBIDDEN_ATTRS[node.id])

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in FORBIDDEN_ATTRS and node.name.startswith("__"):
            self.add("attribute", node.name, node, FORBIDDEN_ATTRS[node.name])
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            self.add("call", node.func.id, node, FORBIDDEN_CALLS[node.func.id])
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            self.add("global", name, node, "module state written from a call (a cache)")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        for name in node.names:
            self.add("global", name, node, "state kept across calls in a closure")

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and node.value.strip() in _SPELLED:
            self.add("spelled_name", node.value.strip(), node, "a forbidden name as a string")


def _module_writes(tree: ast.AST, modules: set[str]) -> list[Finding]:
    """Assignments whose target is an attribute of an imported module (``torch.x = ...``,
    ``torch.cuda.Event = Fake``): monkey-patching."""
    out: list[Finding] = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            base = target
            while isinstance(base, ast.Attribute):
                base = base.value
            if (
                isinstance(target, ast.Attribute)
                and isinstance(base, ast.Name)
                and base.id in modules
            ):
                out.append(
                    Finding(
                        "module_write",
                        ast.unparse(target),
                        getattr(node, "lineno", 0),
                        "patches a module attribute",
                    )
                )
    return out


def scan(source: str) -> list[Finding]:
    """Every forbidden construct in ``source`` (a file that does not parse is one
    ``syntax`` finding)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError) as exc:
        return [Finding("syntax", type(exc).__name__, 0, str(exc)[:200])]
    scanner = _Scanner()
    scanner.visit(tree)
    scanner.found.extend(_module_writes(tree, scanner.module_names))
    return sorted(scanner.found)


def introduced(before: str | None, after: str) -> list[Finding]:
    """Findings of ``after`` whose (rule, name) occurs more often than in ``before``:
    what a patch adds, so a kernel file's own ``import os`` is not held against it."""
    found = scan(after)
    if before is None:
        return found
    allowed = Counter(f.key for f in scan(before) if f.rule != "syntax")
    out: list[Finding] = []
    for f in found:
        if allowed[f.key] > 0:
            allowed[f.key] -= 1
        else:
            out.append(f)
    return out
