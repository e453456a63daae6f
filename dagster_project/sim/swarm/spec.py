"""What one episode is about: a task, a coordination protocol and a team size.

Op naming. The card counts "17 ops (14 CUDA + 3 Triton impls)" and lists 17 names, two of
them prefixed ``triton_``. The simulator's ``ops.KERNELSWARM_OPS`` fixes the mapping: the
first fourteen names (flash_decode … kv_append) are CUDA kernels, and the three Triton
kernels are ``fused_qkv_rope`` (Triton only) plus Triton versions of ``flash_decode`` and
``rmsnorm``. A row's ``op`` is the card's name, so ``triton_flash_decode`` and
``flash_decode`` are distinct ops exactly as the card counts them; ``CARD_OPS`` maps each
card name back to the simulator op and implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..ops import KERNELSWARM_OPS, shape_str
from ..tasks import TaskSpec

#: Version of the swarm generator. Episodes are a pure function of (seed, this version,
#: the simulator's ``GENERATOR_VERSION``); bump it whenever output may change.
SWARM_VERSION = "1.4.0"
#: Label of the random streams (``rng.stream``). Kept apart from ``SWARM_VERSION`` so a
#: change of behaviour (1.1.0: reviews from the code, unstable gains withdrawn, messages
#: stating the episode's facts) is compared with the previous version on the same draws
#: of tasks, teams and skills instead of on a fresh sample.
STREAM_EPOCH = "1.0.0"
NAMESPACE = "kernelswarm"

SCENARIOS: tuple[str, ...] = ("dispatch", "parallel_sweep", "pipeline", "campaign")

#: Inclusive team-size range of each protocol (specialists; the lead ``a00`` is extra).
TEAM_SIZES: Mapping[str, tuple[int, int]] = MappingProxyType(
    {"dispatch": (2, 8), "parallel_sweep": (4, 20), "pipeline": (3, 6), "campaign": (5, 20)}
)


def card_op_name(op: str, impl: str) -> str:
    """The card's name of a simulator (op, impl) pair."""
    if impl == "triton" and (op, "cuda") in KERNELSWARM_OPS:
        return f"triton_{op}"
    return op


CARD_OPS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {card_op_name(op, impl): (op, impl) for op, impl in KERNELSWARM_OPS}
)


def sim_op(card_op: str) -> str:
    """Simulator op behind a card op name (``triton_rmsnorm`` → ``rmsnorm``)."""
    try:
        return CARD_OPS[card_op][0]
    except KeyError:
        raise KeyError(f"{card_op!r} is not one of the card's 17 ops") from None


@dataclass(frozen=True)
class SwarmSpec:
    """One episode to simulate; a pure value, so shards can be rebuilt anywhere."""

    index: int
    task: TaskSpec
    scenario: str
    n_agents: int

    @property
    def card_op(self) -> str:
        return card_op_name(self.task.op, self.task.impl)

    @property
    def episode_id(self) -> str:
        shape = shape_str(self.task.shape)
        return f"{self.card_op}_{self.task.gpu}_{shape}_{self.scenario}_{self.index}"
