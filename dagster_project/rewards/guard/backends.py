"""Array backends of the judge inside the candidate's process (numpy, torch).

Each backend generates a call's inputs from a seed, snapshots arrays to host numpy,
describes an output (exact type, dtype, shape, strides, aliasing) *without* touching a
non-exact type's data, synchronises, flushes L2 and owns the identities it must verify
later: its timers, synchronisation and numeric modes, captured when the backend is built,
which is before any candidate code is loaded. numpy and torch are imported here only.
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import glob
import hashlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from .tasks import EPS, edge_rows, input_spec, scales

#: OS thread names of the CUDA driver and its libraries, which start threads of their own
#: on first use of a feature (not counted: only threads the candidate could start count).
DRIVER_THREADS = ("cuda", "nvidia", "cupti")


def os_threads() -> int:
    """Threads of this process that are not the CUDA driver's (Linux: /proc/self/task and
    each thread's name; elsewhere Python's own count)."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        import threading

        return threading.active_count()
    n = 0
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as fh:
                name = fh.read().strip().lower()
        except OSError:
            continue
        n += not name.startswith(DRIVER_THREADS)
    return n


def child_processes() -> int:
    """Live children of this process (Linux), 0 where it cannot be read."""
    n = 0
    for path in glob.glob("/proc/self/task/*/children"):
        with contextlib.suppress(OSError), open(path) as fh:
            n += len(fh.read().split())
    return n


#: Builtins the judge calls after the candidate has loaded (a rebound ``type`` or
#: ``isinstance`` would let a lazy object pass the exact-type check).
JUDGE_BUILTINS = (
    "type",
    "isinstance",
    "issubclass",
    "getattr",
    "hasattr",
    "len",
    "id",
    "open",
    "print",
    "dict",
    "list",
    "str",
    "int",
    "float",
    "bool",
    "__import__",
)


def denormals_kept() -> bool:
    """False when flush-to-zero or denormals-are-zero is on for this thread (x86 MXCSR,
    which ``torch.set_flush_denormal`` and ctypes can set for the whole process's numerics):
    half the smallest normal double must stay non-zero."""
    tiny = sys.float_info.min
    return tiny * 0.5 != 0.0


def process_hooks() -> dict[str, Any]:
    """Interpreter state through which work can run after a call has returned, outside the
    timed region: profile and trace hooks, armed interval timers, Python signal handlers.
    Compared with the state captured before the candidate loaded (held-out exploits 1.1.0:
    deferred fills through ``sys.setprofile`` and SIGALRM)."""
    timers = (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)
    handlers = {}
    for sig in signal.valid_signals():
        with contextlib.suppress(ValueError, OSError):
            handlers[int(sig)] = id(signal.getsignal(sig))
    return {
        "profile": id(sys.getprofile()),
        "trace": id(sys.gettrace()),
        "monitoring": monitoring_tools(),
        "itimers": [any(v > 0 for v in signal.getitimer(t)) for t in timers],
        "handlers": handlers,
        "gc": (gc.isenabled(), gc.get_threshold(), [id(cb) for cb in gc.callbacks]),
        "audit_hooks_added": audit_hooks_added(),
        "affinity": cpu_affinity(),
    }


def _instance_attrs(obj: Any) -> bool:
    """True when ``obj`` holds attributes in its own ``__dict__`` (read past any override)."""
    try:
        return bool(object.__getattribute__(obj, "__dict__"))
    except AttributeError:
        return False


#: How many ``sys.addaudithook`` calls this process has seen since the watch began.
_AUDIT: dict[str, int] = {}


def audit_hooks_added() -> int:
    """Audit hooks added since the first call (guard 1.4.0: heldout2 ``h2n-audit-hook``
    finished its output from an audit hook after the call returned). Audit hooks cannot be
    listed or removed, so the first call installs a watcher of its own, before any candidate
    loads, that counts the interpreter's ``sys.addaudithook`` event; a later count above the
    captured one is a hook the candidate added."""
    if "added" not in _AUDIT:
        _AUDIT["added"] = 0

        def _watch(event: str, _args: tuple[Any, ...]) -> None:
            if event == "sys.addaudithook":
                _AUDIT["added"] += 1

        sys.addaudithook(_watch)
    return _AUDIT["added"]


def cpu_affinity() -> list[int]:
    """The CPUs this process may run on (Linux; empty elsewhere). Guard 1.4.0: heldout2
    ``h2n-affinity-widen`` widened it at import; where candidates are pinned to fewer
    cores than the machine has, that is work on cores the reward did not grant."""
    getter = getattr(os, "sched_getaffinity", None)
    return sorted(getter(0)) if getter is not None else []


def monitoring_tools() -> list[tuple[int, str, int]]:
    """Tools registered with ``sys.monitoring`` (PEP 669, Python 3.12+): id, name and
    global event set. From 3.12 ``cProfile`` (and any debugger or coverage tool) hooks
    the interpreter there instead of ``sys.setprofile``, so ``sys.getprofile()`` stays
    ``None`` while a callback runs on every call and return (guard 1.3.0: the held-out
    ``hn-cprofile-timer-callback`` filled its output from cProfile's timer callback on
    the H100 machine's Python 3.12). A tool must hold an id to set any event, global or
    local, so the registered ids cover local events too. Empty before 3.12."""
    mon = getattr(sys, "monitoring", None)
    if mon is None:
        return []
    out = []
    for tool in range(6):  # ids 0-5 are the ones a tool can claim
        name = mon.get_tool(tool)
        if name is not None:
            out.append((tool, str(name), int(mon.get_events(tool))))
    return out


def common_identities() -> dict[str, Any]:
    """Functions of the standard library and numpy the judge itself calls to describe,
    snapshot, hash and report a call (a candidate rebinding one could fill a lazy output
    off the clock or rewrite the judge's messages)."""
    import numpy as np

    out: dict[str, Any] = {
        f"builtins.{n}": (builtins, n, getattr(builtins, n)) for n in JUDGE_BUILTINS
    }
    for owner, label, names in (
        (np, "numpy", ("array", "save", "ascontiguousarray", "may_share_memory", "array_equal")),
        (json, "json", ("dumps", "loads")),
        (json.JSONEncoder, "json.JSONEncoder", ("encode", "iterencode")),
        (hashlib, "hashlib", ("sha256",)),
        (os, "os", ("write", "_exit", "listdir")),
    ):
        for n in names:
            out[f"{label}.{n}"] = (owner, n, getattr(owner, n))
    return out


class NumpyBackend:
    """CPU arrays; the clock is ``time.perf_counter`` as captured at construction."""

    type_name = "numpy.ndarray"
    uses_events = False

    def __init__(self) -> None:
        import numpy as np

        self.np = np
        self.clock: Callable[[], float] = time.perf_counter
        self.cpu_clock: Callable[[], float] = time.process_time
        self.array_type = np.ndarray
        np.ones((64, 64), dtype=np.float32) @ np.ones((64, 64), dtype=np.float32)

    def inputs(self, shape: tuple[int, int, int], seed: int) -> dict[str, Any]:
        np = self.np
        rng = np.random.default_rng(seed)
        spec = input_spec(shape)
        sw, s_big = scales(seed)
        k = shape[1]
        x = (rng.standard_normal(spec["x"]) * rng.uniform(0.5, 4.0)).astype(np.float32)
        rows = edge_rows(shape[0], seed)
        if rows is not None:
            x[rows[0]] = 0.0
            tiny = x[rows[1]].astype(np.float64)
            x[rows[1]] = (tiny * (EPS / (tiny * tiny).mean()) ** 0.5).astype(np.float32)
        return {
            "x": x,
            "w": (rng.uniform(0.5, 1.5, spec["w"]) * sw).astype(np.float32),
            "W": (rng.standard_normal(spec["W"]) * (s_big / k**0.5)).astype(np.float32),
        }

    def host(self, arr: Any) -> Any:
        return self.np.array(arr, copy=True)

    def describe(self, out: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        t = type(out)
        meta: dict[str, Any] = {
            "type": f"{t.__module__}.{t.__qualname__}",
            "exact_type": t is self.array_type,
        }
        if not meta["exact_type"]:
            return meta
        meta.update(
            dtype=str(out.dtype),
            shape=list(out.shape),
            strides=[s // max(1, out.itemsize) for s in out.strides],
            aliases_input=any(self.np.may_share_memory(out, v) for v in inputs.values()),
        )
        return meta

    def sync(self) -> None:
        return None

    def flush_l2(self) -> None:
        return None

    def same_memory(self, a: Any, b: Any) -> bool:
        return bool(self.np.may_share_memory(a, b))

    def shares_buffer(self, a: Any, b: Any) -> bool:
        """Whether two outputs come from one allocation: their outermost ndarray bases
        overlap (disjoint views of one arena share it; two fresh arrays never do)."""
        return bool(self.np.may_share_memory(_root(a), _root(b)))

    def reserve(self, shapes: list[tuple[int, int, int]], outputs: int) -> None:
        """Touch, then free, the arrays a phase's calls will hold (``_call_sizes``): the
        judge holds every checked output to the phase's end (1.6.0), and the heap it grows
        into is then already mapped (the child's heap is never trimmed: ``isolate``)."""
        np = self.np
        held = [np.ones(size, dtype=np.float32) for s in shapes for size in _call_sizes(s, outputs)]
        del held

    def identities(self) -> dict[str, Any]:
        return {
            "time.perf_counter": (time, "perf_counter", self.clock),
            "time.process_time": (time, "process_time", self.cpu_clock),
            **common_identities(),
        }

    def modes(self) -> dict[str, Any]:
        return {"denormals": denormals_kept()}

    l2_base: int | None = None

    def persisting_l2(self) -> int | None:
        return None

    def new_event(self) -> Any:
        return None

    def record(self, ev: Any) -> None:
        return None

    def elapsed_ms(self, start: Any, end: Any) -> float | None:
        return None


class TorchBackend:
    """torch tensors on CUDA when present (else CPU). TF32 and reduced-precision
    reductions are switched off and the persisting-L2 limit set to 0 before any candidate
    code loads; both are verified after every phase."""

    type_name = "torch.Tensor"

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.cuda = torch.cuda.is_available()
        self.device = (
            torch.device("cuda", torch.cuda.current_device()) if self.cuda else torch.device("cpu")
        )
        self.uses_events = self.cuda
        self.clock: Callable[[], float] = time.perf_counter
        self.cpu_clock: Callable[[], float] = time.process_time
        self.array_type = torch.Tensor
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        torch.set_num_threads(1)
        self._sync: Callable[[], None] = torch.cuda.synchronize
        self.event_cls: Any = torch.cuda.Event
        self._record = torch.cuda.Event.record
        self._elapsed = torch.cuda.Event.elapsed_time
        (torch.ones((64, 64), device=self.device) @ torch.ones((64, 64), device=self.device)).sum()
        self._flush: Any = None
        self._cudart = _cudart() if self.cuda else None
        if self.cuda:
            props = torch.cuda.get_device_properties(0)
            l2 = int(getattr(props, "L2_cache_size", 0) or 0) or 60 * 2**20
            self._flush = torch.empty(2 * l2 // 4, dtype=torch.float32, device=self.device)
            self.set_persisting_l2_zero()
            self._sync()
        self.l2_base = self.persisting_l2()

    def inputs(self, shape: tuple[int, int, int], seed: int) -> dict[str, Any]:
        torch = self.torch
        g = torch.Generator(device=self.device)
        g.manual_seed(seed)
        spec = input_spec(shape)
        sw, s_big = scales(seed)
        k = shape[1]
        kw = {"generator": g, "device": self.device, "dtype": torch.float32}
        x_scale = 0.5 + 3.5 * float(torch.rand((), generator=g, device=self.device))
        x = torch.randn(spec["x"], **kw) * x_scale
        rows = edge_rows(shape[0], seed)
        if rows is not None:
            x[rows[0]] = 0.0
            tiny = x[rows[1]].double()
            x[rows[1]] = (tiny * (EPS / (tiny * tiny).mean()) ** 0.5).float()
        return {
            "x": x,
            "w": (torch.rand(spec["w"], **kw) + 0.5) * sw,
            "W": torch.randn(spec["W"], **kw) * (s_big / k**0.5),
        }

    def host(self, arr: Any) -> Any:
        # through the class, never the object: a tensor's instance attributes can shadow its
        # methods (heldout2 ``h2t-instance-methods`` filled its output from a per-object
        # ``detach`` the first time the judge called it)
        tensor = self.torch.Tensor
        return tensor.numpy(tensor.to(tensor.detach(arr), "cpu", copy=True))

    def describe(self, out: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        t = type(out)
        meta: dict[str, Any] = {
            "type": f"{t.__module__}.{t.__qualname__}",
            # a plain tensor carries no attributes of its own: one that does can shadow a
            # method the judge calls (guard 1.4.0), so it is not the exact type
            "exact_type": t is self.array_type and not _instance_attrs(out),
        }
        if not meta["exact_type"]:
            return meta
        meta.update(
            dtype=str(out.dtype).removeprefix("torch."),
            shape=list(out.shape),
            strides=list(self.torch.Tensor.stride(out)),
            device=str(out.device),
            aliases_input=any(self.same_memory(out, v) for v in inputs.values()),
        )
        if (out.device.type, out.device.index or 0) != (self.device.type, self.device.index or 0):
            meta["exact_type"] = False
            meta["type"] += f" on {out.device}"
        return meta

    def shares_buffer(self, a: Any, b: Any) -> bool:
        """Whether two outputs come from one allocation (their storages overlap: a view
        of an arena holds the arena's whole storage)."""
        return self.same_memory(a, b)

    def reserve(self, shapes: list[tuple[int, int, int]], outputs: int) -> None:
        """Allocate, then free, the tensors a phase's calls will hold (``_call_sizes``):
        the judge holds every checked output to the phase's end (1.6.0), and the caching
        allocator then serves each timed call's output from a cached block instead of a
        ``cudaMalloc`` inside the timed region (on the CPU: from heap already mapped)."""
        torch = self.torch
        held = [
            torch.ones(size, dtype=torch.float32, device=self.device)
            for s in shapes
            for size in _call_sizes(s, outputs)
        ]
        del held

    def same_memory(self, a: Any, b: Any) -> bool:
        """Whether two tensors' storages overlap (pointer ranges)."""
        try:
            sa, sb = a.untyped_storage(), b.untyped_storage()
        except Exception:  # noqa: BLE001 - not a plain tensor: treat as aliasing
            return True
        a0, b0 = sa.data_ptr(), sb.data_ptr()
        return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes() and sa.nbytes() > 0

    def sync(self) -> None:
        if self.cuda:
            self._sync()

    def flush_l2(self) -> None:
        if self._flush is not None:
            self._flush.zero_()

    def identities(self) -> dict[str, Any]:
        torch = self.torch
        out: dict[str, Any] = {
            "time.perf_counter": (time, "perf_counter", self.clock),
            "time.process_time": (time, "process_time", self.cpu_clock),
            "torch.cuda.synchronize": (torch.cuda, "synchronize", self._sync),
            "torch.cuda.Event": (torch.cuda, "Event", self.event_cls),
            "torch.cuda.Event.record": (self.event_cls, "record", self._record),
            "torch.cuda.Event.elapsed_time": (self.event_cls, "elapsed_time", self._elapsed),
        }
        with contextlib.suppress(Exception):
            import triton.testing as tt

            out["triton.testing.do_bench"] = (tt, "do_bench", tt.do_bench)
        for n in ("detach", "to", "numpy", "clone", "cpu", "untyped_storage", "stride"):
            out[f"torch.Tensor.{n}"] = (torch.Tensor, n, getattr(torch.Tensor, n))
        for n in ("randn", "rand", "Generator", "manual_seed"):
            out[f"torch.{n}"] = (torch, n, getattr(torch, n))
        return {**out, **common_identities()}

    def modes(self) -> dict[str, Any]:
        torch = self.torch
        return {
            "matmul.allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn.allow_tf32": bool(torch.backends.cudnn.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "fp16_reduced_reduction": bool(
                torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
            ),
            "denormals": denormals_kept(),
            "default_dtype": str(torch.get_default_dtype()),
            "deterministic": bool(torch.are_deterministic_algorithms_enabled()),
            "cudnn.benchmark": bool(torch.backends.cudnn.benchmark),
            "cudnn.deterministic": bool(torch.backends.cudnn.deterministic),
            "num_threads": int(torch.get_num_threads()),
            # heldout3 h3t-interop-threads: the inter-op pool is process state too (1.5.0)
            "num_interop_threads": int(torch.get_num_interop_threads()),
            "mode_stacks": _mode_stacks(torch),
        }

    def set_persisting_l2_zero(self) -> None:
        import ctypes

        if self._cudart is not None:
            with contextlib.suppress(Exception):
                self._cudart.cudaDeviceSetLimit(ctypes.c_int(0x06), ctypes.c_size_t(0))

    def persisting_l2(self) -> int | None:
        """The device's persisting-L2 limit in bytes (``None``: cannot be read here); the
        judge compares it with ``l2_base``, read right after setting it to 0."""
        import ctypes

        if self._cudart is None:
            return None
        value = ctypes.c_size_t(0)
        rc = self._cudart.cudaDeviceGetLimit(ctypes.byref(value), ctypes.c_int(0x06))
        return int(value.value) if rc == 0 else None

    def new_event(self) -> Any:
        return self.event_cls(enable_timing=True) if self.cuda else None

    def record(self, ev: Any) -> None:
        if ev is not None:
            self._record(ev)

    def elapsed_ms(self, start: Any, end: Any) -> float | None:
        if start is None or end is None:
            return None
        return float(self._elapsed(start, end))


def _root(arr: Any) -> Any:
    """The outermost ndarray an array is a view of (itself when it owns its data)."""
    import numpy as np

    base_of = np.ndarray.base.__get__  # the C attribute: a subclass's property is not run
    while isinstance(arr, np.ndarray) and isinstance(base_of(arr), np.ndarray):
        arr = base_of(arr)
    return arr


def _call_sizes(shape: tuple[int, int, int], outputs: int) -> list[int]:
    """Element counts of the float32 arrays one call of a phase holds: its inputs and their
    snapshots, ``outputs`` outputs and their snapshots, and as much again for the call's
    temporaries; allocated one by one, as the call will, so each lands where the call's
    own arrays will (the heap, or the caching allocator's blocks of that size)."""
    m, k, n = shape
    return ([m * k, k, n * k] * 2 + [m * n] * (2 * outputs)) * 2


def _mode_stacks(torch: Any) -> list[int]:
    """Depths of torch's function-mode and dispatch-mode stacks (a mode entered at import
    sees, and can fill, every tensor the judge touches); ``-1`` where this torch has no
    such query."""
    depths = []
    for query in (
        lambda: len(torch.overrides._get_current_function_mode_stack()),
        lambda: int(torch._C._len_torch_dispatch_stack()),
    ):
        try:
            depths.append(int(query()))
        except Exception:  # noqa: BLE001 - a private API may move between versions
            depths.append(-1)
    return depths


def _cudart() -> Any:
    """The CUDA runtime library torch loaded (for the persisting-L2 limit), or ``None``."""
    import ctypes

    import torch

    roots = [os.path.dirname(torch.__file__)]
    with contextlib.suppress(Exception):
        import nvidia  # type: ignore[import-not-found]

        roots += list(nvidia.__path__)
    for root in roots:
        for path in sorted(glob.glob(os.path.join(root, "**", "libcudart.so*"), recursive=True)):
            with contextlib.suppress(OSError):
                return ctypes.CDLL(path)
    with contextlib.suppress(OSError):
        return ctypes.CDLL("libcudart.so")
    return None


def backend(name: str) -> NumpyBackend | TorchBackend:
    if name == "numpy":
        return NumpyBackend()
    if name == "torch":
        return TorchBackend()
    raise ValueError(f"unknown backend {name!r}")
