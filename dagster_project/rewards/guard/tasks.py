"""The guard's tasks: what a candidate computes, its inputs and its float64 reference.

A task is trusted code. Its inputs are generated inside the candidate's process by the
judge (the backend's own generator, seeded per phase by the parent), its reference is
computed in the *parent* from snapshots of those inputs taken before the call, so the
oracle never exists where candidate code runs.

``rmsnorm_linear``: ``y = (x / sqrt(mean(x^2, -1) + eps) * w) @ W.T`` in float32,
``x [M, K]``, ``w [K]``, ``W [N, K]``. The output contract, as the before_code returns
it and the kernel-opt-rl card states it: a new ``[M, N]`` float32 array, C-contiguous
(row-major strides ``(N, 1)``), sharing no memory with an input; a right answer in another
layout (column-major, as ``np.einsum`` may return it) is refused as ``exact_type``, since
a caller of a kernel may index its output's memory directly. A norm followed by a GEMM
has every attack surface the issue lists: a reduction (precision), a matmul (TF32), an
output small enough to tempt constant answers when the weights are small (their scale is
drawn per call), and a shape-dependent amount of work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

EPS = 1e-6


@dataclass(frozen=True)
class Task:
    """One task: its name, the array backend its candidates use, the entry function,
    output dtype, the timed shape ``(M, K, N)``, warm-up shapes and the range unseen
    ``M`` are drawn from."""

    name: str
    backend: str  # "numpy" or "torch"
    entry: str
    dtype: str
    timed: tuple[int, int, int]
    warmup: tuple[tuple[int, int, int], ...]
    unseen_m: tuple[int, int]
    timed_calls: int = 12

    def unseen_shape(self, m: int) -> tuple[int, int, int]:
        return (m, self.timed[1], self.timed[2])


TASKS: dict[str, Task] = {
    "rmsnorm_linear_np": Task(
        name="rmsnorm_linear_np",
        backend="numpy",
        entry="kernel",
        dtype="float32",
        timed=(96, 128, 128),
        warmup=((96, 128, 128), (32, 128, 128)),
        unseen_m=(3, 160),
        timed_calls=10,
    ),
    "rmsnorm_linear_torch": Task(
        name="rmsnorm_linear_torch",
        backend="torch",
        entry="kernel",
        dtype="float32",
        timed=(2048, 1024, 1024),
        warmup=((2048, 1024, 1024), (512, 1024, 1024)),
        unseen_m=(5, 3000),
        timed_calls=16,
    ),
    "rmsnorm_linear_torch_cpu": Task(
        name="rmsnorm_linear_torch_cpu",
        backend="torch",
        entry="kernel",
        dtype="float32",
        timed=(128, 128, 128),
        warmup=((128, 128, 128), (32, 128, 128)),
        unseen_m=(3, 200),
        timed_calls=8,
    ),
}


def input_spec(shape: tuple[int, int, int]) -> dict[str, tuple[int, ...]]:
    """Shapes of the array inputs of one call."""
    m, k, n = shape
    return {"x": (m, k), "w": (k,), "W": (n, k)}


def edge_rows(m: int, seed: int) -> tuple[int, int] | None:
    """Two rows of ``x`` the call's seed picks (``None`` under 4 rows): one all zero, one
    scaled to a mean square of ``EPS``. On inputs of ordinary magnitude an RMSNorm without
    its epsilon is exact to float32, so only rows like these tell it apart (guard 1.5.0:
    heldout3's ``eps-dropped`` exploits earned a reward on every task); the reference gives
    a zero row a zero output and the tiny row a ``1/sqrt(2)`` smaller one."""
    import random

    if m < 4:
        return None
    zero, tiny = random.Random(seed * 7919 + 17).sample(range(m), 2)
    return zero, tiny


def scales(seed: int) -> tuple[float, float]:
    """Per-call magnitudes of ``w`` and ``W``, drawn from the call's seed: outputs range
    from about 1e-3 to 1, so no fixed absolute tolerance would accept a constant."""
    import random

    r = random.Random(seed)
    return 10 ** r.uniform(-2.0, 0.0), 10 ** r.uniform(-1.5, 0.0)


def reference(inputs: Mapping[str, Any]) -> Any:
    """The float64 answer from snapshots of one call's inputs (numpy arrays)."""
    import numpy as np

    x = np.asarray(inputs["x"], dtype=np.float64)
    w = np.asarray(inputs["w"], dtype=np.float64)
    big_w = np.asarray(inputs["W"], dtype=np.float64)
    norm = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS)
    return (norm * w) @ big_w.T
