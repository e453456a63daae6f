"""Guarded reward for a SEARCH/REPLACE completion on a task's before_code.

Order of defences: the edit must parse and apply (``rewards.patch``), the patched file
must introduce nothing ``static`` forbids, then the patched file and the before_code each
run in their own process under ``isolate.run_candidate``. Reward:

* ``FAILED_REWARD`` (-1.0) when any defence fires on the candidate;
* ``0.0`` ("no gain") when it is correct but not faster than before_code beyond
  ``MIN_GAIN`` (the before_code itself therefore earns 0.0);
* ``speedup - 1`` otherwise, where speedup is the before_code's median time over the
  candidate's, and never more than the *paired* speedup: the before_code timed after
  each of the candidate's timed calls in the candidate's own process
  (``isolate.paired_speedup``).

Why the paired figure (guard 1.3.0): a machine's speed drifts between processes (other
work on the host, turbo frequency falling as more cores are busy, a busy neighbour core)
by up to 1.7x, more than ``MIN_GAIN``. On the H100 run of the held-out set (guard 1.2.0)
the baseline was measured while three exploit groups started side by side (1404 us per
call), and two exploits that ran the before_code's own loop on every call (their caches
never hit: inputs are fresh) later ran in a quiet moment at ~850 us and earned +0.52 and
+0.73. Timed back to back in one process, both halves of each pair see the same machine,
so such a candidate gets ~1.0x. The cross-process figure stays as a cap: a candidate that
slowed the before_code in its own process still gains no more than across processes.
``MIN_GAIN`` is unchanged, so an honest gain keeps its reward.

``run`` is injectable (``(task, source) -> RunResult``), so a caller with its own
process boundary (the commit execution reward) can reuse the same verdict arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..patch import EditDoesNotApply, MalformedEdit, apply_edits, parse_search_replace
from .isolate import RunResult, run_candidate
from .static import introduced

FAILED_REWARD = -1.0
NO_GAIN = 0.0
#: A candidate must beat before_code by this factor to earn anything. Two runs of one
#: file in separate processes differ by up to ~1.2x on a busy CPU (the suite's CPU runs);
#: the before_code's time is the fastest of its runs (``fastest``), never a slow outlier.
MIN_GAIN = 1.25

Runner = Callable[[str, str], RunResult]


@dataclass(frozen=True)
class PatchVerdict:
    """The reward and, when it is not positive, the defence that decided it."""

    reward: float
    defence: str
    reason: str
    speedup: float | None = None
    runtime: RunResult | None = None


def fastest(runs: list[RunResult]) -> RunResult:
    """The before_code's run to compare with: the fastest valid one (a slow outlier
    would hand every candidate an unearned speedup)."""
    ok = [r for r in runs if r.ok and r.t_us]
    return min(ok, key=lambda r: r.t_us or 0.0) if ok else runs[0]


def apply_completion(before_code: str, completion: str) -> str:
    """The patched file; raises ``MalformedEdit`` / ``EditDoesNotApply``."""
    return apply_edits(before_code, parse_search_replace(completion))


def guarded_patch_reward(
    task: str,
    before_code: str,
    completion: str,
    *,
    base: RunResult | None = None,
    run: Runner | None = None,
    static: bool = True,
) -> PatchVerdict:
    """Reward of ``completion`` on ``task``'s ``before_code`` (see the module docstring).

    ``base`` is the before_code's result when the caller has it (one per prompt in a
    GRPO group); ``static=False`` skips the static checks (the suite uses it to show what
    the runtime defences alone catch). A ``run`` of the caller's own gets the paired cap
    only if it passes ``baseline=before_code`` to ``run_candidate`` as the default does.
    """
    try:
        after = apply_completion(before_code, completion)
    except (MalformedEdit, EditDoesNotApply) as exc:
        return PatchVerdict(FAILED_REWARD, "patch", str(exc)[:300])
    if static:
        found = introduced(before_code, after)
        if found:
            return PatchVerdict(FAILED_REWARD, "static", "; ".join(map(str, found[:3])))
    runner = run or (lambda t, s: run_candidate(t, s, baseline=before_code))
    cand = runner(task, after)
    if not cand.ok:
        return PatchVerdict(FAILED_REWARD, cand.defence, cand.reason, runtime=cand)
    base = base or fastest([runner(task, before_code) for _ in range(2)])
    if not base.ok or not base.t_us or not cand.t_us:
        return PatchVerdict(NO_GAIN, "harness", f"before_code failed: {base.reason}", None, cand)
    speedup = base.t_us / cand.t_us
    if speedup < MIN_GAIN:
        return PatchVerdict(NO_GAIN, "no_gain", f"speedup {speedup:.2f}x", speedup, cand)
    paired = cand.details.get("paired_speedup")
    if paired is not None and float(paired) < speedup:
        speedup = float(paired)
        if speedup < MIN_GAIN:
            why = f"speedup {speedup:.2f}x against before_code timed beside it (in-process)"
            return PatchVerdict(NO_GAIN, "no_gain", why, speedup, cand)
    return PatchVerdict(speedup - 1.0, "", "", speedup, cand)
