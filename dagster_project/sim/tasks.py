"""Task specs: one (op, impl, gpu, dtype, shape) optimisation problem, and pools of them.

A pool is drawn deterministically from a seed with every (op, gpu, shape, dtype) combo
unique, ops balanced round-robin and GPUs balanced per op, shapes kept on-device
(footprint under 70% of GPU memory). ``split_holdout`` carves off task specs whose
combos appear in no session. Both kernelinfer and (later) kernelswarm draw from here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from .hardware import GPU_IDS, get_gpu
from .ops import OP_NAMES, OpSpec, footprint_bytes, get_op, shape_str
from .rng import derive_seed, stream

OBJECTIVE = "minimize latency_ms"


@dataclass(frozen=True)
class TaskSpec:
    """One optimisation task; ``seed`` seeds the session that solves it."""

    index: int
    op: str
    impl: str
    gpu: str
    dtype: str
    shape_items: tuple[tuple[str, int], ...]
    seed: int

    @property
    def shape(self) -> dict[str, int]:
        return dict(self.shape_items)

    @property
    def arch(self) -> str:
        return get_gpu(self.gpu).arch

    @property
    def spec(self) -> OpSpec:
        return get_op(self.op)

    @property
    def signature(self) -> str:
        return self.spec.signature_for(self.dtype)

    @property
    def desc(self) -> str:
        return self.spec.desc

    @property
    def combo(self) -> tuple[str, str, tuple[tuple[str, int], ...], str]:
        """The uniqueness key of the card: (op, gpu, shape, dtype)."""
        return (self.op, self.gpu, self.shape_items, self.dtype)

    @property
    def session_id(self) -> str:
        return f"{self.impl}_{self.op}-{self.gpu}-{shape_str(self.shape)}-{self.dtype}-s{self.seed}"

    @property
    def task_id(self) -> str:
        return f"{self.impl}_{self.op}-{self.gpu}-{shape_str(self.shape)}-{self.dtype}"

    def as_record(self) -> dict[str, object]:
        """Plain dict of the spec (shape as a dict, no solution fields)."""
        return {
            "task_id": self.task_id,
            "op": self.op,
            "impl": self.impl,
            "gpu": self.gpu,
            "arch": self.arch,
            "dtype": self.dtype,
            "shape": self.shape,
            "signature": self.signature,
            "desc": self.desc,
            "objective": OBJECTIVE,
        }


def _dtype_for(op: OpSpec, gpu_id: str, rng_choice: float) -> str:
    dtypes = list(op.dtypes)
    gpu = get_gpu(gpu_id)
    # An fp8 KV cache is only deployed where the hardware has fp8 (sm_89+).
    if op.fp8_attention and "fp8_mma" not in gpu.features and "fp8" in dtypes:
        dtypes.remove("fp8")
    return dtypes[int(rng_choice * len(dtypes))]


#: Passes over the ops (200 draws per op each) without one new combination after which a
#: pool is called exhausted: the shapes are sampled, so the last few unused combinations of
#: a nearly full space take many draws, but a full one never yields another.
_STALLED_PASSES = 25


class PoolExhausted(ValueError):
    """More unique tasks were asked for than the ops' shape sets hold."""


def build_pool(
    seed: int,
    total: int,
    *,
    ops: Sequence[str] = OP_NAMES,
    triton_share: float = 0.3,
    impls: dict[str, str] | None = None,
    namespace: str = "kernelinfer",
) -> list[TaskSpec]:
    """Draw ``total`` unique tasks.

    ``impls`` pins the implementation per op (kernelswarm's fixed CUDA/Triton pairs);
    otherwise an op is written in Triton with probability ``triton_share``.
    """
    rng = stream(namespace, "pool", seed)
    order = list(ops)
    seen: set[tuple[str, str, tuple[tuple[str, int], ...], str]] = set()
    tasks: list[TaskSpec] = []
    gpu_cursor = {op: rng.randrange(len(GPU_IDS)) for op in order}
    stalled = 0  # consecutive passes over the ops that found no new combination
    while len(tasks) < total:
        if stalled >= _STALLED_PASSES:
            raise PoolExhausted(
                f"only {len(tasks)} unique (op, gpu, shape, dtype) tasks of {', '.join(ops)} "
                f"could be drawn ({namespace}), {total} were asked for: the ops' shape sets "
                "do not hold that many combinations; build fewer sessions or episodes"
            )
        before = len(tasks)
        rng.shuffle(order)
        for op_name in order:
            if len(tasks) >= total:
                break
            op = get_op(op_name)
            for _attempt in range(200):
                gpu_id = GPU_IDS[gpu_cursor[op_name] % len(GPU_IDS)]
                gpu_cursor[op_name] += 1 if _attempt % 3 == 2 else 0
                gpu = get_gpu(gpu_id)
                shape = op.sample(rng)
                dtype = _dtype_for(op, gpu_id, rng.random())
                if footprint_bytes(op, shape, dtype) > 0.7 * gpu.mem_gb * 1e9:
                    continue
                items = tuple(shape.items())
                combo = (op_name, gpu_id, items, dtype)
                if combo in seen:
                    continue
                seen.add(combo)
                impl = (
                    impls[op_name]
                    if impls
                    else ("triton" if rng.random() < triton_share else "cuda")
                )
                idx = len(tasks)
                sseed = (
                    derive_seed(
                        namespace, "session", seed, op_name, gpu_id, json.dumps(shape), dtype
                    )
                    % 1_000_000
                )
                tasks.append(TaskSpec(idx, op_name, impl, gpu_id, dtype, items, sseed))
                gpu_cursor[op_name] += 1
                break
        stalled = stalled + 1 if len(tasks) == before else 0
    return tasks


def split_holdout(
    tasks: list[TaskSpec], n_holdout: int, seed: int, namespace: str = "kernelinfer"
) -> tuple[list[TaskSpec], list[TaskSpec]]:
    """Split a pool into (sessions, holdout); holdout combos never occur in sessions.

    The holdout is stratified by op (every op gets ⌊n/ops⌋ or one more) so evaluation
    covers the whole op set; the remaining tasks keep their pool order.
    """
    rng = stream(namespace, "holdout", seed)
    by_op: dict[str, list[TaskSpec]] = {}
    for t in tasks:
        by_op.setdefault(t.op, []).append(t)
    ops = sorted(by_op)
    rng.shuffle(ops)
    picked: set[int] = set()
    per_op = n_holdout // max(1, len(ops))
    extra = n_holdout - per_op * len(ops)
    for i, op in enumerate(ops):
        want = per_op + (1 if i < extra else 0)
        cands = by_op[op][:]
        rng.shuffle(cands)
        for t in cands[:want]:
            picked.add(t.index)
    # top up if some op had too few tasks
    rest = [t for t in tasks if t.index not in picked]
    while len(picked) < n_holdout and rest:
        t = rest.pop(rng.randrange(len(rest)))
        picked.add(t.index)
    holdout = [t for t in tasks if t.index in picked]
    sessions = [t for t in tasks if t.index not in picked]
    return sessions, holdout
