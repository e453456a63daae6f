"""The kernelswarm reward rule, in one place for the generator and the checker.

A reward is attached to every environment ``result`` and to the closing ``verdict``:

* kept improvement of the episode's shared best: ``min(1, log2(prev_best / new))``;
* a correct kernel that does not beat the shared best: ``-0.05``;
* compile error ``-0.1``, wrong result ``-0.3``, unsupported architecture ``-0.05``;
* ``unverified`` (it ran, but its rung has no execution evidence on this arch family,
  see ``sim.verification``): ``-0.05`` like a correct kernel that does not beat the shared
  best, and never kept — nobody knows whether it is correct, so it earns no credit;
* an ``unstable`` verification (the verifier's 1,000-run re-measurement is outside the
  noise band of the recorded time): the gain is noise, so the verified result leaves the
  trusted set and, if it had been kept, the verify message carries minus its reward
  (``withdrawal_reward``); the shared best falls back to the fastest result still trusted;
* verdict: ``log2(speedup) / 4``.

"Shared best" is the lowest verified (``ok``) time so far in message order, not withdrawn,
starting from the baseline the lead measured before planning. Because the rule only looks
at the episode's own history, anyone can recompute every reward from the published
messages; ``checks.check_episode`` does exactly that. Rewards are rounded to ``REWARD_DIGITS``
decimals on both sides so the comparison is exact rather than tolerance-based.
"""

from __future__ import annotations

import math

from ..env import COMPILE_ERROR, OK, UNVERIFIED, WRONG_RESULT, Submission

#: A compile error caused by a PTX feature the target lacks (wgmma on sm_80, ...). The
#: harness reports it as a compile error; the swarm keeps it apart because it is priced
#: differently and because the arch-gating check needs to see it.
UNSUPPORTED_ARCH = "unsupported_arch"

RESULT_STATUSES: tuple[str, ...] = (OK, UNVERIFIED, COMPILE_ERROR, WRONG_RESULT, UNSUPPORTED_ARCH)
#: Results that ran and carry a time (the team's control flow treats both alike).
RAN: tuple[str, ...] = (OK, UNVERIFIED)

NO_IMPROVEMENT = -0.05
PENALTY: dict[str, float] = {
    COMPILE_ERROR: -0.1,
    WRONG_RESULT: -0.3,
    UNSUPPORTED_ARCH: -0.05,
}
REWARD_DIGITS = 6


def _r(x: float) -> float:
    # + 0.0 folds -0.0 into 0.0 so JSON never shows a signed zero
    return round(x, REWARD_DIGITS) + 0.0


def result_status(sub: Submission) -> str:
    """The swarm status of one harness outcome (feature errors become ``unsupported_arch``)."""
    if sub.status == COMPILE_ERROR and sub.error_kind == "feature":
        return UNSUPPORTED_ARCH
    if sub.status == OK and not sub.verified:
        return UNVERIFIED
    return sub.status


def result_reward(status: str, time_ms: float | None, prev_best: float) -> tuple[float, bool]:
    """``(reward, kept)`` of a result given the shared best before it."""
    if status == OK:
        if time_ms is None or time_ms <= 0:
            raise ValueError("an ok result needs a positive time")
        if time_ms < prev_best:
            return _r(min(1.0, math.log2(prev_best / time_ms))), True
        return NO_IMPROVEMENT, False
    if status == UNVERIFIED:
        if time_ms is None or time_ms <= 0:
            raise ValueError("an unverified result needs a positive time")
        return NO_IMPROVEMENT, False
    try:
        return PENALTY[status], False
    except KeyError:
        raise ValueError(f"unknown result status {status!r}") from None


#: The histogram buckets the swarm statistics report, derived from the rule above (every
#: non-positive reward a result can earn has its own bucket, most negative first; positive
#: rewards, capped at 1, in three bands), so a changed penalty moves its bucket with it.
_NON_POSITIVE: tuple[float, ...] = tuple(sorted({NO_IMPROVEMENT, *PENALTY.values()}))
_POSITIVE_BANDS: tuple[tuple[float, str], ...] = ((0.1, "(0, 0.1]"), (0.5, "(0.1, 0.5]"))
BUCKET_ORDER: tuple[str, ...] = (
    *(f"{v:g}" for v in _NON_POSITIVE),
    *(label for _, label in _POSITIVE_BANDS),
    "(0.5, 1)",
    "1",
)


def reward_bucket(reward: float) -> str:
    """The histogram bucket of one result reward (a value outside the rule's penalties
    falls into the mildest one, as the statistics always counted it)."""
    if reward <= 0:
        return f"{reward:g}" if reward in _NON_POSITIVE else f"{max(_NON_POSITIVE):g}"
    if reward >= 1.0:
        return "1"
    for upper, label in _POSITIVE_BANDS:
        if reward <= upper:
            return label
    return "(0.5, 1)"


def withdrawal_reward(result_reward: float | None) -> float | None:
    """Reward of an ``unstable`` verify message: a kept gain is taken back, else nothing."""
    if result_reward is not None and result_reward > 0:
        return _r(-result_reward)
    return None


def verdict_reward(speedup: float) -> float:
    """Terminal bonus of an episode: a quarter of the log2 speedup over the baseline."""
    if speedup <= 0:
        raise ValueError("speedup must be positive")
    return _r(math.log2(speedup) / 4.0)


def episode_speedup(baseline_ms: float, best_ms: float) -> float:
    """The speedup the card reports (two decimals), from which the verdict is priced."""
    return round(baseline_ms / best_ms, 2)
