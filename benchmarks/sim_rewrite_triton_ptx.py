"""Compile real Triton renders, canonical and rewritten, to PTX with Triton on the CPU (39e).

Run by ``benchmarks/sim_rewrite_evidence.py --triton-ptx PYTHON``, under a Python that imports
torch and Triton 3.6 (no project imports here: e.g. /tmp/venv-exec/bin/python). Each case
folder holds ``canon.py``, ``variant.py`` and ``meta.json`` (op, signature, shape). The entry
point is called with meta tensors of the task's shape (no data, no GPU); every kernel it
launches is compiled instead (``triton.compile`` of an ``ASTSource`` with the launch's own
signature, constexprs and options, target sm_90) and its PTX kept without comments and debug
lines. A case is ``same`` when both renders launch the same kernels with identical PTX;
``harness`` when the entry point cannot run here (a TMA descriptor or another driver call, a
signature this parser does not read). One JSON line per case on stdout.

    python benchmarks/sim_rewrite_triton_ptx.py CASES_DIR [SECONDS] [SKIP_IDS]
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

os.environ["TRITON_DISABLE_LINE_INFO"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

#: the launch wrappers ask for the SM count (persistent rungs): an H100's, as the tier's
torch.cuda.get_device_properties = lambda *a, **k: SimpleNamespace(  # type: ignore[assignment]
    multi_processor_count=132, name="NVIDIA H100", total_memory=80 * 2**30, major=9, minor=0
)
torch.cuda.current_device = lambda: 0  # type: ignore[assignment]
torch.cuda.is_available = lambda: True  # type: ignore[assignment]

_DT = {
    "fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32,
    "int32": torch.int32, "int64": torch.int64, "int8": torch.int8, "uint8": torch.uint8,
    "bool": torch.bool, "fp8_e4m3": torch.float8_e4m3fn, "fp8": torch.float8_e4m3fn,
    "fp4": torch.uint8,
}  # fmt: skip
_TS = {
    torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.int32: "i32",
    torch.int64: "i64", torch.int8: "i8", torch.uint8: "u8", torch.bool: "i1",
    torch.float8_e4m3fn: "fp8e4nv",
}  # fmt: skip
#: sizes a signature names that are not task dimensions (pools, tables)
_EXTRA = {"num_blocks": 64, "max_blocks": 8, "max_pos": 4096, "n_blocks": 64, "E": 8}


def inputs(sig: str, shape: dict[str, int]) -> list[Any]:
    """Meta tensors (and scalars) for the op's signature, dims evaluated over the shape."""
    head = sig.split(" -> ")[0]
    inner = head[head.index("(") + 1 : head.rindex(")")]
    env = {**_EXTRA, **shape}
    out: list[Any] = []
    for a in re.split(r",\s*(?![^\[]*\])", inner):
        m = re.match(r"(\w+)(?:\[([^\]]*)\])?\s+(\w+)", a.strip())
        if m is None:
            raise ValueError(f"signature argument {a!r}")
        _, dims, dt = m.groups()
        if dims is None:
            out.append(1e-6 if dt.startswith("fp") else 1)
            continue
        ds = [int(eval(d.strip(), {}, dict(env))) for d in dims.split(",")]  # noqa: S307
        out.append(torch.empty(ds, dtype=_DT.get(dt, torch.float16), device="meta"))
    return out


def _ptx(asm: str) -> str:
    keep = []
    for ln in asm.split("\n"):
        s = ln.strip()
        if s and not s.startswith(("//", ".loc", ".file")):
            keep.append(ln.split("//")[0].rstrip())
    return "\n".join(keep)


def _sig_of(fn: JITFunction, a: tuple[Any, ...], kw: dict[str, Any]) -> tuple[dict, dict]:
    vals = dict(zip([p.name for p in fn.params], a, strict=False))
    vals.update(kw)
    sig: dict[str, str] = {}
    const: dict[str, Any] = {}
    for p in fn.params:
        v = vals.get(p.name, p.default)
        if p.is_constexpr or v is None:
            sig[p.name], const[p.name] = "constexpr", v
        elif isinstance(v, torch.Tensor):
            sig[p.name] = "*" + _TS[v.dtype]
        elif isinstance(v, bool):
            sig[p.name] = "i1"
        elif isinstance(v, int):
            sig[p.name] = "i32" if abs(v) < 2**31 else "i64"
        elif isinstance(v, float):
            sig[p.name] = "fp32"
        else:
            raise TypeError(f"{p.name}: {type(v).__name__}")
    return sig, const


def kernels_of(path: str, op: str, args: list[Any]) -> list[str]:
    """PTX of every kernel the entry point ``op`` of ``path`` launches, in launch order."""
    spec = importlib.util.spec_from_file_location(f"case{abs(hash(path))}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    got: list[str] = []

    def getitem(self: JITFunction, grid: Any) -> Any:
        def launch(*a: Any, **kw: Any) -> None:
            opts = {k: kw.pop(k) for k in ("num_warps", "num_stages", "num_ctas") if k in kw}
            sig, const = _sig_of(self, a, kw)
            k = triton.compile(
                ASTSource(self, sig, const), target=GPUTarget("cuda", 90, 32), options=opts
            )
            got.append(_ptx(k.asm["ptx"]))

        return launch

    old = JITFunction.__getitem__
    JITFunction.__getitem__ = getitem  # type: ignore[method-assign]
    try:
        getattr(mod, op)(*args)
    finally:
        JITFunction.__getitem__ = old  # type: ignore[method-assign]
    return got


def main() -> None:
    root = sys.argv[1]
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 1e9
    skip = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else set()
    t0 = time.time()
    for d in sorted(os.listdir(root)):
        p = os.path.join(root, d)
        if d in skip or not os.path.isdir(p) or time.time() - t0 > budget:
            continue
        meta = json.loads(Path(p, "meta.json").read_text())
        rec: dict[str, Any] = {"id": d, "op": meta["op"], "variant": meta["variant"]}
        try:
            args = inputs(meta["sig"], meta["shape"])
            a = kernels_of(os.path.join(p, "canon.py"), meta["op"], args)
            b = kernels_of(os.path.join(p, "variant.py"), meta["op"], args)
            rec.update(verdict="same" if a and a == b else "different" if a else "harness")
            rec["kernels"] = len(a)
        except Exception as ex:  # noqa: BLE001 - one case must not stop the rest
            rec.update(verdict="harness", error=f"{type(ex).__name__}: {ex}"[:200])
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
