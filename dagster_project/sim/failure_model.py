"""What goes wrong when the simulated engineer writes a kernel, and what it remembers.

**The mix** (generator 1.10.0, issue 39). Until 1.9.0 nine compile errors in ten were
typed slips (a dropped ``;``, a misspelt identifier, a lost ``reinterpret_cast``), retyped
on the same line fix after fix. Published analyses of LLM kernel agents point the other
way; the figures below are theirs, the rates here are ours:

* KernelBench (Ouyang et al., 2025, https://arxiv.org/abs/2502.10517) scores 250 PyTorch
  workloads by correctness against the reference and by speedup (``fast_p``); frontier
  models beat the PyTorch baseline in fewer than 20% of tasks, and execution and profiling
  feedback in iterative refinement improves them.
* KernelBench-X (Wang et al., 2026, https://arxiv.org/abs/2605.04956): over GEAK's
  refinement iterations the compile rate rose from 52.3% to 68.8%, so compile errors are
  what feedback fixes first; quantisation tasks stayed at 0 of 30 despite non-trivial
  compile rates, which the authors trace to misread numerical contracts rather than
  surface-level syntax errors; category explains about three times more variance in
  semantic correctness than method.
* The Correctness Illusion in LLM-Generated GPU Kernels (Sarkar, 2026,
  https://arxiv.org/abs/2606.20128) seeds LLM-style transcription bugs (indexing, masks,
  accumulation) that compile and run, and shows fixed-shape allclose checks miss them.

So the engineer's mistakes are mostly **semantic bugs that compile and run wrong**: the
planted bugs of ``codegen.FAMILY_BUGS`` (a missing ``__syncthreads``, a split-K race, a tail
tile without its mask, a wrong stride/index, a missing online-softmax rescale, a stale
running max, a state not reset, a quantisation scale applied wrong, epsilon outside the
root), each reported as the wrong result the harness measures for it. nvcc agrees: in
``data/verification/nvcc_compile.csv`` 216 of the 220 ``bug:*`` rows compile, and the other 4
fail as expected, for their configuration (shared memory, an FP8/FP4 path), not the bug.
Typed slips stay possible but rare (nvcc's own diagnostic, checked by ``compile_check``),
and the hardware mistakes (a feature this GPU lacks, shared memory over the cap) are left
to the policy's habits, which the diagnostics correct once.

**Memory.** A mistake the engineer has been shown is one it fixes and does not write again:
a bug on the rung whose code it fixed (a new rung is new code), a slip anywhere in the
session. ``MistakeMemory`` is the runner's record of that; ``KernelEnv.submit(avoid=...)``
never writes a remembered mistake, so a fixed line stays fixed in every later render. A fix
step is a focused edit of the failing source and carries no new mistake.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Version of the failure mix and the memory rule (part of ``GENERATOR_VERSION``'s output).
FAILURE_MODEL_VERSION = "1.0.0"

#: Intent to type a slip, as a multiple of ``AgentProfile.p_slip`` per step kind (a slip
#: lands only on a line the step rewrote, so a parameter-only tune rarely has room for one).
#: 1.9.0 used 2.75 / 4.95 / 0.3.
SLIP_WEIGHT: dict[str, float] = {"variant": 0.04, "tune": 0.06, "fix": 0.0}
#: The same for a swarm agent's ``Hands`` (``Engineer._maybe_mistake``), whose submissions
#: carry no edit base, so a slip lands wherever it is typed. 1.9.0 used 1.6 / 0.55 / 0.3.
HANDS_SLIP_WEIGHT: dict[str, float] = {"variant": 0.05, "tune": 0.015, "fix": 0.0}
#: Intent to write a semantic bug, as a multiple of ``AgentProfile.p_bug`` (1.9.0: 6.05 on
#: both): new code (a rung) is where logic goes wrong; a retune rewrites a few lines.
BUG_WEIGHT: dict[str, float] = {"variant": 7.5, "tune": 6.5}


def slip_intent(
    kind: str, p_slip: float, skill: float, weights: dict[str, float] | None = None
) -> float:
    """Chance that a step of ``kind`` is typed with a slip (skill makes it rarer)."""
    return p_slip * (weights or SLIP_WEIGHT).get(kind, 0.0) * (1.35 - 0.7 * skill)


def bug_intent(kind: str, p_bug: float, skill: float) -> float:
    """Chance that a step of ``kind`` carries a semantic bug (skill makes it rarer)."""
    return p_bug * BUG_WEIGHT.get(kind, 0.0) * (1.3 - 0.6 * skill)


@dataclass
class MistakeMemory:
    """The mistakes an engineer was shown in one session: never written again."""

    #: bugs fixed in each rung's code (by rung tag)
    bugs: dict[str, set[str]] = field(default_factory=dict)
    #: slip kinds the compiler has reported in this session
    slips: set[str] = field(default_factory=set)

    def avoid(self, tag: str) -> frozenset[str]:
        """Bug and slip names the engineer will not write into ``tag``'s code."""
        return frozenset(self.bugs.get(tag, ())) | frozenset(self.slips)

    def shown(self, tag: str, bug: str | None, slip: str | None) -> None:
        """A diagnostic named this mistake: it is fixed next and remembered."""
        if bug:
            self.bugs.setdefault(tag, set()).add(bug)
        if slip:
            self.slips.add(slip)
