"""Task specs: one (op, impl, gpu, dtype, shape) optimisation problem, and pools of them.

A pool is drawn deterministically from a seed with every (op, gpu, shape, dtype) combo
unique, ops balanced round-robin and GPUs balanced per op, shapes kept on-device
(footprint under 70% of GPU memory). ``draw_split`` draws a dataset's training tasks and
its held-out task specs under the one holdout rule, ``held_out``: a fixed region of
(op, gpu, shape) space, the same for every dataset and seed, so no task held out by
kernelinfer or kernelswarm is trained on by either (issue 39).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .hardware import GPU_IDS, get_gpu
from .ops import OP_NAMES, OpSpec, footprint_bytes, get_op, shape_str
from .rng import derive_seed, stream
from .verification import can_verify

OBJECTIVE = "minimize latency_ms"

#: Version of the holdout rule (``held_out``). 2.0.0 (issue 39): one salted hash region of
#: (op, gpu, shape) for both datasets; before, each dataset carved its own holdout from its
#: own pool, and 7 + 5 tasks held out by one were sessions or episodes of the other.
HOLDOUT_VERSION = "2.0.0"
#: Share of (op, gpu, shape) space that is held out. Large enough that every op has held-out
#: combinations on several GPUs (the smallest shape set, conv2d_nhwc, has 36 shapes × 6 GPUs),
#: small enough to keep most of each op's shapes for training.
HOLDOUT_SHARE = 0.08
_HOLDOUT_SALT = "holdout/2.0.0"


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


def held_out(op: str, gpu: str, shape_items: tuple[tuple[str, int], ...]) -> bool:
    """Whether (op, gpu, shape) lies in the held-out region, whatever the dtype, the
    implementation, the dataset or the seed: a salted SHA-256 bucket of the triple, so a
    held-out task of one dataset can never be a training task of the other."""
    key = json.dumps([_HOLDOUT_SALT, op, gpu, [list(kv) for kv in shape_items]])
    h = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    return h < HOLDOUT_SHARE * 2**64


def _checkable_impl(op: str, impl: str, pinned: bool, arch: str, dtype: str) -> str | None:
    """The implementation a task is written in, so that some rung of it can be checked
    correct on ``arch`` at ``dtype`` (issue 39: a task with none only yields runs nobody
    checked): the drawn one, else the other (unless ``pinned``), else None (skip the task);
    an unpinned task that neither can check keeps its draw."""
    if can_verify(op, impl, arch, dtype):
        return impl
    if pinned:
        return None
    other = "cuda" if impl == "triton" else "triton"
    return other if can_verify(op, other, arch, dtype) else impl


def build_pool(
    seed: int,
    total: int,
    *,
    ops: Sequence[str] = OP_NAMES,
    triton_share: float = 0.3,
    impls: dict[str, str] | None = None,
    namespace: str = "kernelinfer",
    keep: Callable[[str, str, tuple[tuple[str, int], ...]], bool] | None = None,
) -> list[TaskSpec]:
    """Draw ``total`` unique tasks.

    ``impls`` pins the implementation per op (kernelswarm's fixed CUDA/Triton pairs);
    otherwise an op is written in Triton with probability ``triton_share``. ``keep``, when
    given, accepts an (op, gpu, shape) before it is drawn (``draw_split`` passes the
    holdout rule or its negation).
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
                if keep is not None and not keep(op_name, gpu_id, items):
                    continue
                combo = (op_name, gpu_id, items, dtype)
                if combo in seen:
                    continue
                seen.add(combo)
                drawn = (
                    impls[op_name]
                    if impls
                    else ("triton" if rng.random() < triton_share else "cuda")
                )
                impl = _checkable_impl(op_name, drawn, bool(impls), gpu.arch, dtype)
                if impl is None:
                    continue  # a pinned implementation with nothing checkable here
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


def _trained(op: str, gpu: str, shape_items: tuple[tuple[str, int], ...]) -> bool:
    return not held_out(op, gpu, shape_items)


def draw_split(
    seed: int,
    n_train: int,
    n_holdout: int,
    *,
    ops: Sequence[str] = OP_NAMES,
    impls: dict[str, str] | None = None,
    namespace: str = "kernelinfer",
) -> tuple[list[TaskSpec], list[TaskSpec]]:
    """(training tasks, held-out task specs) of one dataset under the one holdout rule.

    Training tasks come only from outside the ``held_out`` region and held-out specs only
    from inside it, each drawn by ``build_pool`` (ops round-robin, so the holdout covers
    every op); the two draws use separate streams, so the training tasks do not depend on
    how many specs are held out."""
    train = build_pool(seed, n_train, ops=ops, impls=impls, namespace=namespace, keep=_trained)
    holdout = build_pool(
        seed, n_holdout, ops=ops, impls=impls, namespace=f"{namespace}/holdout", keep=held_out
    )
    return train, holdout
