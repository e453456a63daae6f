"""Import one upstream file, as it was at a commit, without its package.

A kernel_commits row's file lives inside vLLM, SGLang or FlashInfer, none of which is
installed on the GPU machine (and the package at an old sha would not build there in the
time a row is worth). The file is imported on its own under a private module name:

* ``triton``, ``torch``, ``numpy`` and the standard library import as written;
* every module under an engine or compiled-extension root (``STUB_ROOTS``: ``vllm``,
  ``sglang``, ``sgl_kernel``, ``vllm._C``, ``aiter``, ``deep_gemm`` ...) is a *permissive
  stub*: a module whose missing attributes are the trivial shims in ``SHIMS`` (``is_hip``
  is False, ``cdiv`` divides, ``tl``/``triton`` are Triton's own, ``current_platform``
  says CUDA) or else an inert ``Stub`` that can be called, decorated with, subclassed and
  tested for truth (False), and a context manager that does nothing. A kernel that
  really needs a stubbed name fails at run time and the harness reports the error; it
  never runs something else silently, because the outputs are compared with an oracle.

Triton reads kernel text with ``inspect.getsource``, so the file is written to disk first.
Imports only the standard library; torch and triton are imported when a file asks.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import math
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: Top-level module names replaced by permissive stubs.
STUB_ROOTS: frozenset[str] = frozenset(
    {
        "vllm",
        "sglang",
        "sgl_kernel",
        "flashinfer",
        "aiter",
        "deep_gemm",
        "deep_ep",
        "flash_attn",
        "vllm_flash_attn",
        "cutlass",
        "transformers",
        "einops",
        "fla",
        "triton_kernels",
        "pynvml",
        "amdsmi",
        "psutil",
        "msgspec",
        "pydantic",
        "huggingface_hub",
        "safetensors",
        "xformers",
        "tqdm",
        "zmq",
        "flashinfer_jit_cache",
    }
)


class Stub:
    """An inert stand-in for a name the harness does not provide.

    Calling it returns another stub, except that calling it with one function (a
    decorator) returns that function unchanged; it is false in a test, an empty iterable,
    a base class that contributes nothing (it is dropped from the bases), and a type in
    annotations (``X | None``, ``X[int]``; ``isinstance(v, X)`` is False)."""

    def __init__(self, name: str = "stub") -> None:
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], Stub):
            return args[0]
        return Stub(self._name + "()")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return Stub(f"{self._name}.{name}")

    def __bool__(self) -> bool:
        return False

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        # Dropped from the bases: ``class X(StubA, StubB)`` and ``class X(StubA, int)`` would
        # otherwise repeat ``object`` or put it before ``int`` (no consistent MRO).
        return ()

    # Type-level use in annotations and aliases evaluated at import time: ``X | None``,
    # ``None | X``, ``X[int]`` give the stub back; nothing is an instance or subclass of it.
    def __or__(self, other: object) -> Any:
        return self

    def __ror__(self, other: object) -> Any:
        return self

    def __getitem__(self, item: object) -> Any:
        return self

    def __instancecheck__(self, obj: object) -> bool:
        return False

    def __subclasscheck__(self, cls: object) -> bool:
        return False

    def __enter__(self) -> Stub:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __repr__(self) -> str:
        return f"<stub {self._name}>"


def _false(*_a: Any, **_k: Any) -> bool:
    return False


def _true(*_a: Any, **_k: Any) -> bool:
    return True


def _cdiv(a: int, b: int) -> int:
    return -(a // -b)


def _next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def _tma_aligned_size(x: int, element_size: int) -> int:
    """vLLM's ``deep_gemm.get_tma_aligned_size``: ``x`` elements rounded up to TMA's
    16-byte alignment."""
    align = 16 // element_size
    return _cdiv(x, align) * align


def _fp8_min_max() -> tuple[float, float]:
    """vLLM's ``get_fp8_min_max`` on CUDA (not ROCm's fnuz): e4m3fn's finite range."""
    import torch

    finfo = torch.finfo(torch.float8_e4m3fn)
    return float(finfo.min), float(finfo.max)


def _cuda_capability(device_id: int = 0) -> tuple[int, int]:
    """The device's (major, minor); (9, 0) without CUDA: the CPU interpreter stands in for
    the H100 the rows run on (files that read the capability at import time load there)."""
    import torch

    if not torch.cuda.is_available():
        return 9, 0
    major, minor = torch.cuda.get_device_capability(device_id)
    return major, minor


class _Platform:
    """``current_platform`` of vLLM: a CUDA device, capability read from torch."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in ("is_cuda", "is_cuda_alike"):
            return _true
        if name == "simple_compile_backend":  # CUDA's torch.compile backend for small ops
            return "inductor"
        if name.startswith("is_") or name.startswith("has_"):
            return _false
        return Stub(f"current_platform.{name}")

    def fp8_dtype(self) -> Any:
        import torch

        return torch.float8_e4m3fn

    def get_device_capability(self, device_id: int = 0) -> Any:
        major, minor = _cuda_capability(device_id)
        cap = types.SimpleNamespace(major=major, minor=minor)
        cap.to_int = lambda: major * 10 + minor
        cap.as_version_str = lambda: f"{major}.{minor}"
        return cap

    def has_device_capability(self, capability: Any, device_id: int = 0) -> bool:
        major, minor = _cuda_capability(device_id)
        want = capability if isinstance(capability, int) else capability[0] * 10 + capability[1]
        return major * 10 + minor >= want

    def is_device_capability(self, capability: Any, device_id: int = 0) -> bool:
        major, minor = _cuda_capability(device_id)
        want = capability if isinstance(capability, int) else capability[0] * 10 + capability[1]
        return major * 10 + minor == want

    def get_device_name(self, device_id: int = 0) -> str:
        import torch

        return str(torch.cuda.get_device_name(device_id))


def _triton() -> Any:
    import triton

    return triton


def _tl() -> Any:
    import triton.language as tl

    return tl


def _device_capability(*_a: Any, **_k: Any) -> tuple[int, int]:
    import torch

    return tuple(torch.cuda.get_device_capability())


def _cuda_version(*_a: Any, **_k: Any) -> tuple[int, ...]:
    """SGLang's ``get_cuda_version``: torch's CUDA version as a tuple, (0, 0) without one
    (or before any file imported torch)."""
    text = getattr(getattr(sys.modules.get("torch"), "version", None), "cuda", None)
    return tuple(int(p) for p in text.split(".")) if text else (0, 0)


def _supports_pdl(*_a: Any, **_k: Any) -> bool:
    """vLLM's ``supports_pdl``: programmatic dependent launch needs a CUDA sm_90+ device
    (False on the CPU interpreter, which cannot run the PDL intrinsics)."""
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9)


class _EngineLogger(logging.LoggerAdapter):
    """vLLM's ``init_logger`` logger: a standard logger plus ``info_once`` /
    ``warning_once`` / ``debug_once`` (called from helpers such as the LoRA ops' config
    loader), which log a message once and take vLLM's ``scope`` keyword."""

    def __init__(self, name: str) -> None:
        super().__init__(logging.getLogger(name), {})
        self._seen: set[tuple[str, str]] = set()

    def _once(self, level: int, msg: str, *args: Any, **_kw: Any) -> None:
        key = (str(level), str(msg))
        if key not in self._seen:
            self._seen.add(key)
            self.log(level, msg, *args)

    def debug_once(self, msg: str, *args: Any, **kw: Any) -> None:
        self._once(logging.DEBUG, msg, *args, **kw)

    def info_once(self, msg: str, *args: Any, **kw: Any) -> None:
        self._once(logging.INFO, msg, *args, **kw)

    def warning_once(self, msg: str, *args: Any, **kw: Any) -> None:
        self._once(logging.WARNING, msg, *args, **kw)


def _identity_decorator_factory(*_a: Any, **_k: Any) -> Callable[[Any], Any]:
    """A decorator factory whose decorator returns the function unchanged (SGLang's
    ``cached_triton_kernel(key_fn)``: the kernel runs through Triton's own launch path)."""
    return lambda fn: fn


#: Names every stubbed module provides (lazily), by attribute name.
SHIMS: dict[str, Callable[[], Any]] = {
    "triton": _triton,
    "tl": _tl,
    "cdiv": lambda: _cdiv,
    "ceil_div": lambda: _cdiv,
    "round_up": lambda: lambda x, y: _cdiv(x, y) * y,
    "next_power_of_2": lambda: _next_power_of_2,
    "current_platform": _Platform,
    "init_logger": lambda: _EngineLogger,
    "logger": lambda: _EngineLogger("commit_exec"),
    "is_cuda": lambda: _true,
    "_is_cuda": lambda: True,
    "is_cuda_alike": lambda: _true,
    "get_device_capability": lambda: _device_capability,
    "get_device_sm": lambda: lambda: _device_capability()[0] * 10 + _device_capability()[1],
    "direct_register_custom_op": lambda: lambda *a, **k: None,
    "HAS_TRITON": lambda: True,
    "log2": lambda: math.log2,
    "RCP_LN2": lambda: 1.0 / math.log(2.0),
    "LN2": lambda: math.log(2.0),
    "PAD_SLOT_ID": lambda: -1,
    "fast_exp": lambda: _fla("exp"),  # vLLM's jit exp helper: Triton's exp, jit-wrapped
    # FLA helpers (fla/op.py, index.py, utils.py of vLLM and SGLang): see fla_shims
    "exp": lambda: _fla("exp"),
    "exp2": lambda: _fla("exp2"),
    "log": lambda: _fla("log"),
    "gather": lambda: _fla("gather"),
    "safe_exp": lambda: _fla("safe_exp"),
    "prepare_lens": lambda: _fla("prepare_lens"),
    "prepare_chunk_indices": lambda: _fla("prepare_chunk_indices"),
    "prepare_chunk_offsets": lambda: _fla("prepare_chunk_offsets"),
    "FLA_CHUNK_SIZE": lambda: 64,
    "autotune_cache_kwargs": lambda: {},
    "check_shared_mem": lambda: _true,  # Hopper's 228 KiB pass every FLA threshold
    "use_cuda_graph": lambda: False,  # a flag there (FLA_USE_CUDA_GRAPH unset), not a call
    "is_amd": lambda: False,  # a flag in fla/utils.py, not a call
    "get_cuda_version": lambda: _cuda_version,
    "supports_pdl": lambda: _supports_pdl,
    "is_arch_support_pdl": lambda: _supports_pdl,  # SGLang's name for the same test
    "cached_triton_kernel": lambda: _identity_decorator_factory,
    "get_tma_aligned_size": lambda: _tma_aligned_size,
    "get_fp8_min_max": lambda: _fp8_min_max,  # vLLM's quant_utils: e4m3fn on CUDA
    # SGLang's torch.compile backend on CUDA (a stub there failed dynamo: KeyError)
    "get_compiler_backend": lambda: lambda *_a, **_k: "inductor",
    "FP8_DTYPE": lambda: _Platform().fp8_dtype(),
}


def _fla(name: str) -> Any:
    from . import fla_shims

    return getattr(fla_shims, name)


def _shim(module: str, name: str) -> Any:
    if name in SHIMS:
        return SHIMS[name]()
    if name.startswith(("is_", "_is_", "use_", "_use_", "has_", "_has_", "should_")):
        return _false
    if name.startswith("get_bool_env_var") or name.startswith("envs"):
        return Stub(f"{module}.{name}")
    return Stub(f"{module}.{name}")


class StubModule(types.ModuleType):
    """A module of an engine or compiled extension: every attribute a shim or a ``Stub``."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _shim(self.__name__, name)
        setattr(self, name, value)
        return value


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = StubModule(spec.name)
        module.__path__ = []  # a package: submodules resolve through the finder too
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class StubFinder(importlib.abc.MetaPathFinder):
    """Finds every module under ``STUB_ROOTS`` and makes it a ``StubModule``."""

    def __init__(self, roots: frozenset[str] = STUB_ROOTS) -> None:
        self.roots = roots

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)
        return None


class _Version:
    """``packaging.version.Version`` for release numbers (``2.1.0+cu121`` -> (2, 1, 0))."""

    def __init__(self, text: str) -> None:
        head = str(text).split("+")[0]
        parts = []
        for piece in head.split("."):
            digits = "".join(ch for ch in piece if ch.isdigit())
            if not digits:
                break
            parts.append(int(digits))
        self.release = tuple(parts)

    def _key(self, other: object) -> tuple[tuple[int, ...], tuple[int, ...]]:
        theirs = other if isinstance(other, _Version) else _Version(str(other))
        n = max(len(self.release), len(theirs.release))
        pad = (0,) * n
        return (self.release + pad)[:n], (theirs.release + pad)[:n]

    def __lt__(self, other: object) -> bool:
        a, b = self._key(other)
        return a < b

    def __le__(self, other: object) -> bool:
        a, b = self._key(other)
        return a <= b

    def __gt__(self, other: object) -> bool:
        a, b = self._key(other)
        return a > b

    def __ge__(self, other: object) -> bool:
        a, b = self._key(other)
        return a >= b

    def __eq__(self, other: object) -> bool:
        a, b = self._key(other)
        return a == b

    def __hash__(self) -> int:
        return hash(self.release)


class _FallbackFinder(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: ``packaging`` (used for version tests) when not installed."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname in ("packaging", "packaging.version"):
            return importlib.machinery.ModuleSpec(fullname, _PackagingLoader(), is_package=True)
        return None


class _PackagingLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.Version = _Version  # type: ignore[attr-defined]
        module.parse = _Version  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


_FINDER = StubFinder()
_FALLBACK = _FallbackFinder()


def install_stubs() -> None:
    """Put the stub finder first on ``sys.meta_path`` and the fallback last (idempotent)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    if _FALLBACK not in sys.meta_path:
        sys.meta_path.append(_FALLBACK)


def package_of(path: str) -> str:
    """The dotted package a repo path belongs to: ``python/sglang/srt/x.py`` -> ``sglang.srt``."""
    parts = Path(path).with_suffix("").parts
    if parts and parts[0] == "python":
        parts = parts[1:]
    return ".".join(parts[:-1])


#: Operator namespaces of compiled extensions that are never built here (besides the
#: stubbed roots): vLLM's ``_C``, ``_moe_C``, ``_rocm_C`` and its attention libraries.
STUB_OP_NAMESPACES: frozenset[str] = STUB_ROOTS | {
    "_C",
    "_moe_C",
    "_rocm_C",
    "_C_cache_ops",
    "_C_custom_ar",
    "_vllm_fa2_C",
    "_vllm_fa3_C",
    "_flashmla_C",
}


@contextlib.contextmanager
def _fakes_of_stubbed_ops_ignored() -> Iterator[None]:
    """While a file imports: ``torch.library.register_fake`` (and its older name
    ``impl_abstract``) of an operator in a stubbed extension's namespace returns the
    function unchanged. Files register fake kernels for ``torch.compile`` at import
    (SGLang's topk.py: ``@register_fake("sgl_kernel::moe_fused_gate")``); torch raises
    there because the extension, and so the operator, does not exist here. The harness
    never traces those operators; every other registration is torch's own."""
    torch = sys.modules.get("torch")
    library = getattr(torch, "library", None)
    if library is None:
        yield
        return
    saved = {
        n: getattr(library, n) for n in ("register_fake", "impl_abstract") if hasattr(library, n)
    }

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def register(op: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(op, str) and op.split("::")[0] in STUB_OP_NAMESPACES:
                func = args[0] if args and callable(args[0]) else kwargs.get("func")
                return func if func is not None else (lambda fn: fn)
            return original(op, *args, **kwargs)

        return register

    for name, original in saved.items():
        setattr(library, name, wrap(original))
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(library, name, original)


@contextlib.contextmanager
def _quiet_stderr_logging() -> Iterator[None]:
    level = logging.root.level
    logging.root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logging.root.setLevel(level)


def load_file(file: Path, name: str, package: str) -> types.ModuleType:
    """Import ``file`` as module ``name`` whose relative imports resolve in ``package``
    (stubbed). Raises whatever the file raises at import time.

    When the materialiser wrote the row's sibling modules for this side
    (``<stem>_siblings/<repo path>`` beside the file, and ``siblings.json`` naming the row's
    own repo path), those import as themselves instead of stubs: see ``load_with_siblings``."""
    install_stubs()
    side = side_modules(file)
    if side is not None:
        return load_with_siblings(file, name, side)
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    module.__package__ = package
    sys.modules[name] = module
    with _quiet_stderr_logging(), _fakes_of_stubbed_ops_ignored():
        spec.loader.exec_module(module)
    return module


# --- sibling modules at the row's sha (harness 5) -------------------------------------


def module_of(path: str) -> str:
    """The dotted module of a repo path: ``python/sglang/srt/x.py`` -> ``sglang.srt.x``."""
    parts = list(Path(path).with_suffix("").parts)
    if parts and parts[0] == "python":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def side_modules(file: Path) -> dict[str, Path] | None:
    """The modules this side of a row imports as real files, by dotted name (the row's own
    file among them), or None when the materialiser wrote no siblings for it."""
    folder, meta = file.with_name(f"{file.stem}_siblings"), file.with_name("siblings.json")
    if not folder.is_dir() or not meta.is_file():
        return None
    import json

    modules = {module_of(str(p.relative_to(folder))): p for p in sorted(folder.rglob("*.py"))}
    modules[module_of(json.loads(meta.read_text())["path"])] = file
    return modules


class _SideStubModule(StubModule):
    """A stubbed package of one side's namespace: a sibling it holds imports as the file
    (``from . import kda``) before any stub is made up for the name."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        full = f"{self.__name__}.{name}"
        if any(isinstance(f, _SideFinder) and f.owns_file(full) for f in sys.meta_path):
            return importlib.import_module(full)
        return super().__getattr__(name)


class _SideLoader(importlib.abc.Loader):
    """Executes a sibling (or the row's file) inside its side's namespace."""

    def __init__(self, finder: _SideFinder, file: Path | None) -> None:
        self.finder, self.file = finder, file

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        if self.file is None:
            module = _SideStubModule(spec.name)
            module.__path__ = []
            return module
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        if self.file is None:
            return
        module.__file__ = str(self.file)
        module.__package__ = module.__name__.rpartition(".")[0]
        module.__dict__["__builtins__"] = self.finder.builtins
        code = compile(self.file.read_text(), str(self.file), "exec")
        with _quiet_stderr_logging(), _fakes_of_stubbed_ops_ignored():
            exec(code, module.__dict__)


class _SideFinder(importlib.abc.MetaPathFinder):
    """One side of one row: every module named ``<prefix>.<dotted>``. A sibling file the
    materialiser wrote imports as itself, any other name is a stub package, so the before
    side's helpers are those at ``sha^`` and the after side's those at ``sha``, side by
    side in one process. Files of the side import engine names (``vllm.x``, ``sglang.x``)
    through ``builtins``, whose ``__import__`` maps them into the side's namespace, also
    for imports inside functions that run at call time."""

    def __init__(self, prefix: str, modules: dict[str, Path]) -> None:
        self.prefix, self.modules = prefix, modules
        self.roots = {m.split(".")[0] for m in modules}
        self.builtins = dict(vars(builtins_module()), __import__=self._import)

    def owns_file(self, fullname: str) -> bool:
        head, _, rest = fullname.partition(".")
        return head == self.prefix and rest in self.modules

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.prefix and not fullname.startswith(self.prefix + "."):
            return None
        file = self.modules.get(fullname[len(self.prefix) + 1 :])
        loader = _SideLoader(self, file)
        spec = importlib.machinery.ModuleSpec(
            fullname, loader, origin=str(file) if file else None, is_package=file is None
        )
        spec.has_location = file is not None
        return spec

    def _import(
        self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        real = builtins_module().__import__
        if level != 0 or name.split(".")[0] not in self.roots:
            return real(name, globals, locals, fromlist, level)
        module = real(f"{self.prefix}.{name}", globals, locals, fromlist, 0)
        return module if fromlist else sys.modules[f"{self.prefix}.{name.split('.')[0]}"]


def builtins_module() -> types.ModuleType:
    import builtins

    return builtins


def load_with_siblings(file: Path, name: str, modules: dict[str, Path]) -> types.ModuleType:
    """Import the row's file as ``<name>_pkg.<its dotted name>``, in a namespace of its own
    where its siblings (written at this side's commit) import as real modules."""
    prefix = f"{name}_pkg"
    finder = _SideFinder(prefix, modules)
    sys.meta_path.insert(0, finder)
    own = next(m for m, p in modules.items() if p == file)
    module = importlib.import_module(f"{prefix}.{own}")
    # a spec whose launcher is a sibling (the row's file holds only jit helpers) reaches it
    # through the row's module: ``mod._ce_sibling("vllm.lora.ops.triton_ops.lora_shrink_op")``
    module.__dict__["_ce_sibling"] = lambda dotted: importlib.import_module(f"{prefix}.{dotted}")
    sys.modules[name] = module
    return module
