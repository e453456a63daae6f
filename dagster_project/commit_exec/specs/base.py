"""What a harness spec is: which rows it runs, how it builds inputs and calls the launcher.

A spec is our own code, reviewed like any code, one per launcher family. It names:

* ``rows``: the kernel_commits rows it runs, as ``(repo, sha prefix, path)``;
* ``shapes``: at least four named shapes, each with where it comes from (the repo's tests at
  the sha, a call site, a model the title names), plus ``control`` (a shape whose code path
  the commit does not change, ``control_reason`` says why; ``None`` means the spec knows no
  such path and the runner times ``before`` against a second copy of ``before`` instead, an
  A/A control of the harness itself) and ``random_shape`` (drawn at run time from the
  runner's seed, never seen before the run: the held-out shape);
* ``make_inputs(shape, gen, device)``: fresh, non-degenerate inputs for one call;
* ``call(module, inputs, sha)``: calls the launcher of one side; returns every output and
  every tensor the launcher mutates in place, by name (an adapter per side lives here when
  the signature changed);
* ``reference(inputs)``: the repo's torch reference re-written as our own code, when its
  tests have one (reported beside the oracle, which is the ``before`` side);
* ``tolerance``: per output ``(atol, rtol)``, justified in ``tolerance_why``; a spec whose
  error grows with the shape (the accumulation length of a split-K GEMM) gives
  ``tolerance_at(shape)`` instead, and ``tolerance_for(shape)`` is what the runner compares
  with;
* ``not_runnable``: rows it covers that cannot run under the harness, with the status
  and reason the runner records for them instead (a change that is a compiled CUDA op);
* ``siblings``: by sha prefix (``""`` for every row), repo paths of modules the row's file
  imports from its own package (helpers such as vLLM's ``kernel_utils.py``), or that launch
  it; the materialiser writes each at ``sha^`` beside ``before`` and at ``sha`` beside
  ``after``, and the loader imports them as real modules side by side instead of stubs;
* ``footprint(shape)``: optional upper bound, in bytes, of what ``make_inputs`` plus
  ``reference`` hold at once at that shape, from the shape alone (no allocation), for specs
  whose reference could outgrow the card (``tests/unit/commit_exec/test_footprint.py``).

Imports only the standard library and torch (lazily), so it runs on the bare GPU machine.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Shape = dict[str, Any]
Inputs = dict[str, Any]
Outputs = dict[str, Any]

#: Default ``(atol, rtol)`` per output dtype name, for outputs a spec does not list.
#: bf16 has an 8-bit mantissa (ulp 2^-8 = 0.0039 relative), fp16 11 bits (0.00049), so two
#: correct fp32-accumulating kernels that sum in another order differ by a few ulp: 4 ulp
#: relative plus a small absolute floor for values near zero. fp32 outputs get 1e-4, since
#: kernels use fast exp/div and reassociate sums. fp8 e4m3 has 3 mantissa bits (ulp 12.5%):
#: one step of rounding either way is allowed. Integers and booleans are exact.
DEFAULT_TOLERANCE: dict[str, tuple[float, float]] = {
    "torch.float32": (1e-4, 1e-4),
    "torch.float16": (2e-3, 2e-3),
    "torch.bfloat16": (1.6e-2, 1.6e-2),
    "torch.float8_e4m3fn": (0.0, 0.126),
    "torch.float8_e5m2": (0.0, 0.26),
}


@dataclass(frozen=True)
class Spec:
    """One launcher family's harness (see the module docstring)."""

    name: str
    launcher: str
    rows: tuple[tuple[str, str, str], ...]
    shapes: tuple[Shape, ...]
    make_inputs: Callable[[Shape, Any, Any], Inputs]
    call: Callable[[Any, Inputs, str], Outputs]
    random_shape: Callable[[random.Random], Shape]
    control: Shape | None = None
    control_reason: str = ""
    reference: Callable[[Inputs], Outputs] | None = None
    tolerance: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    tolerance_why: str = ""
    #: Inputs the launcher writes in place (compared, and cloned before every call).
    mutated: tuple[str, ...] = ()
    #: Per-shape tolerance (overrides ``tolerance`` when set), for errors that grow with K.
    tolerance_at: Callable[[Shape], Mapping[str, tuple[float, float]]] | None = None
    #: Bytes the inputs and the reference hold at once at a shape (a bound, see above).
    footprint: Callable[[Shape], int] | None = None
    #: Rows the spec covers that cannot run here, by sha prefix: ``(exec_status, reason)``
    #: (e.g. the commit's change is a CUDA kernel of the package's compiled extension that
    #: the after side dispatches to). The runner records that status without loading them.
    not_runnable: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    #: Repo paths of sibling modules written at each side's commit, by sha prefix.
    siblings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def siblings_for(self, sha: str) -> tuple[str, ...]:
        """The sibling paths of this row (every prefix it starts with, in order, once)."""
        out: list[str] = []
        for prefix, paths in self.siblings.items():
            if sha.startswith(prefix):
                out += [p for p in paths if p not in out]
        return tuple(out)

    def tolerance_for(self, shape: Shape) -> Mapping[str, tuple[float, float]]:
        """The ``(atol, rtol)`` overrides that apply at this shape."""
        return self.tolerance if self.tolerance_at is None else self.tolerance_at(shape)

    def not_runnable_for(self, sha: str) -> tuple[str, str] | None:
        """``(exec_status, reason)`` when this row cannot run under the harness, else None."""
        for prefix, why in self.not_runnable.items():
            if sha.startswith(prefix):
                return why
        return None

    def covers(self, repo: str, sha: str, path: str) -> bool:
        return any(repo == r and sha.startswith(s) and path == p for r, s, p in self.rows)


def shape_label(shape: Shape) -> str:
    """A shape as short stable text (``name`` first, then the dimensions)."""
    dims = ",".join(f"{k}={v}" for k, v in shape.items() if k not in ("name", "source"))
    return f"{shape.get('name', '?')}[{dims}]"
