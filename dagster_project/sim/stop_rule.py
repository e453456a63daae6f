"""When the simulated engineer stops tuning (issue 39, 39c).

A real engineer stops tuning for one of three reasons: the step budget is spent, the
gains it still finds cannot be told from the measurement noise, or it has tried a few
things in a row and none helped. Until generator 1.11.0 the policy
(``agent.Policy._in_the_noise``) had only the budget and fixed counts (six idle steps, or
half the steps it took to the last gain), so 40% of an average session's steps came after
its best: the engineer kept tuning long after its own record said nothing was left.

This module adds the missing test, in the engineer's own measurements:

* **the noise** is what the harness reported: the spread of the best's timed runs (the
  benchmark noise of ``timing.benchmark``, ``timing.noise_sigma`` of the kernel's time,
  as the engineer reads it off the feedback), times ``GAIN_NOISE`` because a gain is the
  difference of two such medians (spread about 1.4 s), floored at ``NOISE_FLOOR``;
* **the expected gain of one more try** is the session's own tuning record: the share of
  its tuning tries that beat the best by more than that noise (the hit rate) times the
  log gain of the latest hit (gains shrink as tuning converges). An engineer whose tries
  keep missing sees the hit rate fall with every miss; one whose hits are large keeps
  going longer;
* **stop** once that expected gain sits inside the noise (``TuningRecord.in_the_noise``).
  With no hit yet the record says nothing about the size of a gain, so the engineer stops
  after ``NO_HIT_TRIES`` tries without one (the policy's idle count, ``agent.STOP_IDLE``
  steps without any new best, still applies too);
* **the closing re-benchmark** of the best is run only while the best's lead over every
  other kernel measured is inside the noise (``settled``): a lead beyond it cannot flip on
  a longer run, so the engineer reports the best as measured.

Since 1.1.0 (generator 1.15.0) the engineer also stops when the most promising tuning move
it has left is one its own rules of thumb expect to be slower (``foreseen_slower``):

* **giving up the native low-precision MMA** its kernel already runs (``mma`` from e4m3 or
  e2m1 back to f16): the dequantised kernel widens the operands in registers and multiplies
  at the f16 tensor-core rate, half or a quarter of the native one, with the same work;
* **a move the printed occupancy calls slower** and that the engineer never measured in
  that direction on the rung (``agent.Policy._occupancy_hunch`` > 0: fewer splits or bigger
  tiles that leave the grid under one wave, more splits for a grid that already fills the
  GPU, a bigger tile with registers already at 128 per thread).

A real engineer states it as "the only thing left is expected slower, so tuning is over";
the policy picked the move only because its noisy guess of an unmeasured move came out
lucky. These were the foreseeable part of the slow tail: of generator 1.14.0's ok tuning
steps after the best on the development seeds, about 4% came back 1.5x or more slower than
the best, and more than 9 in 10 dequantising moves did (``benchmarks/sim_engineer.py
--slow-tail`` lists them). The check reads only the move already chosen and draws no random
number, so it too can only end a session earlier.

The rules only ever end a session earlier than 1.11.0 did (and 1.1.0's, than 1.14.0): they
are checked where the older stop tests were, draw no random number, and end the session the
same way (a closing re-benchmark of the best, unless the best is settled). Every step a
session still takes is byte for byte the step it took under 1.11.0 (1.14.0 for 1.1.0's
rule; ``tests/unit/sim/test_stop_rule.py``, ``tests/unit/sim/test_slow_tail.py``;
``benchmarks/sim_engineer.py --prefix-of`` over a whole seed), so the measured answers,
which are addressed by kernel text, stay valid.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

#: Version of the stop rule (part of ``GENERATOR_VERSION``'s output: session lengths).
STOP_RULE_VERSION = "1.1.0"

#: A gain counts as beyond the noise past this many times the reported spread (the
#: difference of two medians with spread s has a spread of about 1.4 s).
GAIN_NOISE = 1.5
#: The least relative gain told apart from the noise (a 1% spread floor: the harness
#: prints medians to 4 significant digits and a spread of a few tenths of a percent for
#: long kernels, which no engineer would trust below 1%).
NOISE_FLOOR = 0.01
#: Tuning tries without a single gain beyond the noise after which the engineer gives up
#: (the "k non-improving tries" of a real engineer; chosen in sample: the default build's
#: seed and seed 7).
NO_HIT_TRIES = 3


def noise(spread_pct: float) -> float:
    """The smallest relative gain the engineer can tell from the noise of a best whose
    timed runs the harness reported with ``spread_pct`` percent spread."""
    return max(NOISE_FLOOR, GAIN_NOISE * spread_pct / 100)


def settled(best_ms: float, runner_up_ms: float, spread_pct: float) -> bool:
    """Whether the best's lead over the fastest other kernel measured is beyond the noise
    (its rank cannot flip on a longer run, so a closing re-benchmark adds nothing)."""
    return runner_up_ms / best_ms - 1 > noise(spread_pct)


@dataclass
class TuningRecord:
    """The engineer's own record of its tuning: tries and the gains beyond the noise."""

    #: tuning moves submitted (a try whose code failed is a try)
    tries: int = 0
    #: log(best before / time) of each try that beat the best by more than the noise
    gains: list[float] = field(default_factory=list)

    def tried(self) -> None:
        """One more tuning move was submitted."""
        self.tries += 1

    def gained(self, before_ms: float, after_ms: float) -> None:
        """A tuning try (or the fix completing it) beat the best beyond the noise."""
        self.gains.append(math.log(before_ms / after_ms))

    def expected_gain(self) -> float | None:
        """The expected log gain of one more try: the hit rate times the latest hit's gain,
        or None while the record holds no hit (it says nothing about tuning gains yet)."""
        if not self.gains:
            return None
        # gains shrink as tuning converges: the latest is the best guess of the next one
        return len(self.gains) / max(self.tries, len(self.gains)) * self.gains[-1]

    def in_the_noise(self, spread_pct: float) -> bool:
        """Whether another try is expected to gain no more than the measured noise."""
        e = self.expected_gain()
        if e is None:
            return self.tries >= NO_HIT_TRIES
        return e <= noise(spread_pct)


#: The MMA operand type of a dequantised kernel (low-precision operands widened to f16).
DEQUANTISED_MMA = "f16"


@dataclass(frozen=True)
class Move:
    """One parameter a tuning move changes, as the engineer sees it before submitting."""

    dim: str
    old: object
    new: object
    #: whether the engineer has measured this parameter moving this way on the rung
    measured: bool
    #: its occupancy rule of thumb for the move (log time ratio; above 0: slower)
    hunch: float


def foreseen_slower(moves: Iterable[Move]) -> str | None:
    """Why the engineer expects a tuning move to be slower than the kernel it edits
    ("dequantise" or "occupancy"), or None: see the module doc (1.1.0)."""
    for m in moves:
        if m.dim == "mma" and m.old not in (None, DEQUANTISED_MMA) and m.new == DEQUANTISED_MMA:
            return "dequantise"
        if not m.measured and m.hunch > 0:
            return "occupancy"
    return None
