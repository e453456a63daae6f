"""Device memory a candidate needs at its shape: its tensors plus what its own code allocates.

An allocation beyond the GPU's memory is a runtime error, never ``ok`` (issue 36: 17 of 31
CUDA ``mamba_scan`` baselines asked for up to 1.17 TB on an 80 GB card and were labelled
ok). The footprint is read off the rendered source: the op's input and output tensors
(``OpSpec.bytes``, the ideal traffic, which reads every input and writes every output once)
plus every ``cudaMallocAsync(&p, sizeof(T) * expr, stream)`` of a CUDA launch wrapper
(``expr`` evaluated over the file's ``constexpr`` integers and the wrapper's integer locals)
and every ``torch.empty((d0, d1, ...), ..., dtype=...)`` of a Triton entry point whose
dimensions resolve over the entry point's integer locals.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

#: Version of the rule; it feeds the session labels (``kernelinfer``).
MEMORY_RULE_VERSION = "1.0.0"

#: Bytes the driver, the context and the harness's own buffers keep: what a kernel's
#: tensors may not use of the card's memory.
RESERVED_BYTES = 2 * 2**30

_SIZEOF = {
    "float": 4,
    "float2": 8,
    "float4": 16,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "int32_t": 4,
    "uint32_t": 4,
    "int64_t": 8,
    "uint64_t": 8,
    "size_t": 8,
    "half": 2,
    "__half": 2,
    "__nv_bfloat16": 2,
    "act_t": 2,
    "double": 8,
}
_TORCH_SIZE = {
    "float32": 4,
    "float": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "int32": 4,
    "int64": 8,
    "int8": 1,
    "uint8": 1,
    "float8_e4m3fn": 1,
}

_CONST = re.compile(r"constexpr\s+(?:int|int64_t|long|unsigned|size_t)\s+(\w+)\s*=\s*([^;]+);")
_LOCAL = re.compile(r"const\s+(?:int|int64_t|long|size_t|unsigned)\s+(\w+)\s*=\s*([^;]+);")
_MALLOC = re.compile(r"cudaMallocAsync\(\s*&\s*\w+\s*,\s*([^;]*?),\s*stream\s*\)")
_SIZEOF_RE = re.compile(r"sizeof\(\s*([\w ]+?)\s*\)")
_CAST = re.compile(r"static_cast<[^>]*>|\b(?:int64_t|size_t|int|unsigned|long)(?=\()")
_PY_ASSIGN = re.compile(r"^\s*(\w+(?:\s*,\s*\w+)*)\s*=\s*([^\n#=][^\n#]*)$", re.M)
_EMPTY = re.compile(r"torch\.empty\(\s*\(([^()]*)\)[^)]*?dtype\s*=\s*([\w.{}]+)")

_BINOPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.floordiv,
    ast.Mod: operator.mod,
}


def _eval(expr: str, names: Mapping[str, int]) -> int | None:
    """An integer arithmetic expression over ``names``; None if it uses anything else."""
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        return None

    def ev(node: ast.AST) -> int | None:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return names.get(node.id)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            a, b = ev(node.left), ev(node.right)
            if a is None or b is None or (b == 0 and not isinstance(node.op, _NO_ZERO_RISK)):
                return None
            return _BINOPS[type(node.op)](a, b)
        return None

    return ev(tree)


_NO_ZERO_RISK = (ast.Add, ast.Sub, ast.Mult)


def _c_expr(text: str) -> str:
    """A C integer expression as Python: casts dropped, ``/`` as integer division."""
    text = _CAST.sub("", text).replace("/", "//")
    return re.sub(r"(\d+)(?:LL|ULL|L|U|u|ll)\b", r"\1", text)


def cuda_workspace_bytes(code: str) -> int:
    """Bytes a CUDA launch wrapper allocates with ``cudaMallocAsync`` (all at once: the
    wrapper frees them only after its kernels)."""
    names: dict[str, int] = {}
    for name, expr in [*_CONST.findall(code), *_LOCAL.findall(code)]:
        val = _eval(_c_expr(expr), names)
        if val is not None:
            names[name] = val
    total = 0
    for arg in _MALLOC.findall(code):
        sizes = [_SIZEOF.get(t.strip(), 8) for t in _SIZEOF_RE.findall(arg)]
        expr = _SIZEOF_RE.sub("1", arg)
        val = _eval(_c_expr(expr), names)
        if val is not None:
            total += val * (sizes[0] if sizes else 1)
    return total


_SIG_TENSOR = re.compile(r"(\w+)\[([^\]]+)\]")
_SHAPE_OF = re.compile(r"^(\w+)\.shape$")
_SHAPE_AT = re.compile(r"^(\w+)\.shape\[(-?\d+)\]$")


def signature_dims(signature: str, shape: Mapping[str, int]) -> dict[str, list[int | None]]:
    """Each tensor of a task signature (``q[B,S,Hq,D] fp16, ...``) -> its dimensions over
    the shape (None where a dimension is not a shape expression, e.g. ``num_blocks``)."""
    out: dict[str, list[int | None]] = {}
    for name, dims in _SIG_TENSOR.findall(signature):
        out[name] = [_eval(d.replace("/", "//"), shape) for d in dims.split(",")]
    return out


def _py_value(rhs: str, names: Mapping[str, int], dims: Mapping[str, list[int | None]]) -> Any:
    """An assignment's value: ``X.shape`` (a tuple), ``X.shape[i]``, or integer arithmetic."""
    rhs = rhs.strip()
    m = _SHAPE_OF.match(rhs)
    if m:
        return dims.get(m.group(1))
    parts = [x.strip() for x in rhs.split(",")]
    vals: list[int | None] = []
    for part in parts:
        at = _SHAPE_AT.match(part)
        if at:
            d = dims.get(at.group(1)) or []
            i = int(at.group(2))
            vals.append(d[i] if -len(d) <= i < len(d) else None)
        else:
            vals.append(_eval(part, names))
    return vals if len(parts) > 1 else vals[0]


def triton_workspace_bytes(code: str, shape: Mapping[str, int], signature: str = "") -> int:
    """Bytes of the ``torch.empty`` buffers a Triton entry point allocates whose dimensions
    resolve over its integer assignments: integer arithmetic, the shape's own names
    (lower-cased too), and ``X.shape`` / ``X.shape[i]`` of a tensor the task signature
    sizes (``a, b = q.shape[0], q.shape[2]`` in the entry point)."""
    names: dict[str, int] = {k.lower(): v for k, v in shape.items()}
    names.update(shape)
    dims = signature_dims(signature, shape) if signature else {}
    for lhs, rhs in _PY_ASSIGN.findall(code):
        val = _py_value(rhs, names, dims)
        targets = [t.strip() for t in lhs.split(",")]
        if len(targets) == 1 and isinstance(val, int):
            names[targets[0]] = val
        elif len(targets) > 1 and isinstance(val, list) and len(val) == len(targets):
            names.update({t: v for t, v in zip(targets, val, strict=True) if isinstance(v, int)})
    total = 0
    for dims, dtype in _EMPTY.findall(code):
        n = 1
        for d in (x for x in dims.split(",") if x.strip()):
            v = _eval(d, names)
            if v is None:
                n = 0
                break
            n *= v
        total += n * _TORCH_SIZE.get(dtype.rsplit(".", 1)[-1], 2)
    return total


def footprint_bytes(
    tensor_bytes: float, code: str, impl: str, shape: Mapping[str, int], signature: str = ""
) -> float:
    """The candidate's device memory: its tensors plus its own allocations."""
    extra = (
        cuda_workspace_bytes(code)
        if impl == "cuda"
        else triton_workspace_bytes(code, shape, signature)
    )
    return float(tensor_bytes) + float(extra)


def fits_memory(footprint: float, mem_gb: int) -> bool:
    """Whether a footprint fits the card (less what the driver and harness keep)."""
    return footprint <= mem_gb * 1e9 - RESERVED_BYTES


def oom_report(footprint: float, mem_gb: int) -> str:
    """The runtime error a harness prints when the candidate's allocations exceed the card."""
    return (
        "RuntimeError: CUDA error: out of memory: the candidate needs "
        f"{footprint / 2**30:.1f} GiB of device memory at this shape (tensors plus its own "
        f"workspace); the GPU has {mem_gb} GB. Nothing ran; no output to check."
    )
