"""Guarded reward for a SEARCH/REPLACE completion on a task's before_code.

Order of defences: the edit must parse and apply (``rewards.patch``), the patched file
must introduce nothing ``static`` forbids, then the patched file and the before_code each
run in their own process under ``isolate.run_candidate``. Reward:

* ``FAILED_REWARD`` (-1.0) when any defence fires on the candidate;
* ``0.0`` ("no gain") when it is correct but not faster than before_code beyond
  ``MIN_GAIN`` (the before_code itself therefore earns 0.0);
* ``speedup - 1`` otherwise, where speedup is the before_code's median time over the
  candidate's, *confirmed*: a claimed gain is measured again against before_code runs
  taken right around the candidate's (``confirmed_speedup``), because a machine's speed
  drifts between processes by more than ``MIN_GAIN`` (guard 1.3.0; see there).

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
#: Candidate reruns that confirm a claimed gain, each bracketed by fresh before_code runs.
CONFIRM_RUNS = 2

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
    the runtime defences alone catch).
    """
    try:
        after = apply_completion(before_code, completion)
    except (MalformedEdit, EditDoesNotApply) as exc:
        return PatchVerdict(FAILED_REWARD, "patch", str(exc)[:300])
    if static:
        found = introduced(before_code, after)
        if found:
            return PatchVerdict(FAILED_REWARD, "static", "; ".join(map(str, found[:3])))
    runner = run or (lambda t, s: run_candidate(t, s))
    cand = runner(task, after)
    if not cand.ok:
        return PatchVerdict(FAILED_REWARD, cand.defence, cand.reason, runtime=cand)
    base = base or fastest([runner(task, before_code) for _ in range(2)])
    if not base.ok or not base.t_us or not cand.t_us:
        return PatchVerdict(NO_GAIN, "harness", f"before_code failed: {base.reason}", None, cand)
    speedup = base.t_us / cand.t_us
    if speedup < MIN_GAIN:
        return PatchVerdict(NO_GAIN, "no_gain", f"speedup {speedup:.2f}x", speedup, cand)
    failed, speedup = confirmed_speedup(runner, task, before_code, after, base)
    if failed is not None:
        return PatchVerdict(FAILED_REWARD, failed.defence, failed.reason, runtime=failed)
    if speedup < MIN_GAIN:
        why = f"speedup {speedup:.2f}x against before_code runs around the candidate's"
        return PatchVerdict(NO_GAIN, "no_gain", why, speedup, cand)
    return PatchVerdict(speedup - 1.0, "", "", speedup, cand)


def confirmed_speedup(
    runner: Runner, task: str, before_code: str, after: str, base: RunResult
) -> tuple[RunResult | None, float]:
    """A claimed gain measured again: before_code, candidate, before_code, ... with
    ``CONFIRM_RUNS`` candidate runs, each between two fresh before_code runs; the speedup
    is the fastest before_code time (these and ``base``) over the fastest of these
    candidate runs. Returns the first candidate rerun a defence stopped (more spot checks)
    or ``None``, and the speedup.

    Why: a machine's speed drifts between processes (other work on the host, turbo
    frequency falling as more cores are busy, a busy SMT sibling) by up to 1.7x, more
    than ``MIN_GAIN``. On the H100 run of the held-out set (guard 1.2.0) the baseline was
    measured while three exploit groups started side by side (1404 us), and two exploits
    that ran the before_code's own loop on every call (the caches never hit: fresh inputs)
    later ran in a quiet moment at ~850 us: +0.52 and +0.73. Slowdowns are one-sided, so
    the fastest of several runs estimates a process's undisturbed speed, and runs taken
    in turn see the same machine; the first candidate run is left out because no fresh
    before_code run was taken beside it. ``MIN_GAIN`` is unchanged: an honest gain keeps
    its reward, and a candidate that is only as fast as before_code gets ~1.0x."""
    bases = [base, runner(task, before_code)]
    cands: list[RunResult] = []
    for _ in range(CONFIRM_RUNS):
        cand = runner(task, after)
        if not cand.ok:
            return cand, 0.0
        cands.append(cand)
        bases.append(runner(task, before_code))
    base_us = min((b.t_us for b in bases if b.ok and b.t_us), default=None)
    cand_us = min(c.t_us or float("inf") for c in cands)
    if base_us is None or not cand_us > 0:
        return None, 0.0
    return None, base_us / cand_us
