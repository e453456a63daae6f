"""The four coordination protocols of the card, each a real division of labour.

* ``dispatch`` (2-8 workers): the lead splits the variant ladder across workers; each
  writes and tunes its rungs; at the barrier the lead posts a leaderboard, merges the
  winner and redirects the losing half onto the winner's rung, each to a different
  parameter, with the winner handing its kernel over; a second round and a final merge.
* ``parallel_sweep`` (4-20 workers): one rung, its configuration space cut into slices
  along its widest parameters; every worker measures the most promising configs of its
  own slice; after the leaderboard only the top two refine around their bests.
* ``pipeline`` (3-6 agents): proposer → reviewer → verifier → tuner for every rung. The
  reviewer reads each candidate before the harness does and can reject it; the verifier
  re-benchmarks what passed; the tuner hill-climbs it. Rungs flow through the chain, so
  a proposer is already writing the next rung while the tuner works on the previous one.
  With three agents the proposer also tunes; five or six add a second proposer / tuner.
* ``campaign`` (5-20 agents): fleet dispatch over rung × config-region cells; after the
  first wave the lead redirects the weakest ~30% onto the two best rungs (with handoffs
  from their holders), then one or two verifiers re-benchmark the top results before the
  final merge.

How much each agent does shrinks with team size (``_per_agent``), as a fixed budget of
wall-clock hours would force, which keeps the mean message count near the card's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from ..env import OK
from ..feedback import fmt_ms
from ..variants import Params, Variant, param_space
from .agents import LEAD_ID, PROPOSER, REVIEWER, TUNER, VERIFIER, WORKER, SwarmAgent
from .reward_rule import RAN
from .runtime import Event, Runtime, fmt_params, launch_params

#: Tuning budget knobs (steps shared by a team; see ``_per_agent``).
DISPATCH_ROUND1 = 4.0
DISPATCH_ROUND2 = 5.0
SWEEP_REFINE = 3
PIPELINE_TUNE = 3
CAMPAIGN_REGIONS = 2
CAMPAIGN_REDIRECT_SHARE = 0.3


def _per_agent(budget: float, n: int, floor: int = 0) -> int:
    return max(floor, int(round(budget / max(1, n))))


def _slices(rt: Runtime, v: Variant, n: int) -> tuple[list[str], list[list[tuple[Any, ...]]]]:
    """Cut a rung's config space into ``n`` slices along its widest parameters.

    Returns the parameter names used and, per slice, the value combinations (cells) it
    owns. Cells are dealt round-robin; with more slices than cells, slices share cells.
    """
    space = rt.space(v)
    dims = sorted(
        (d for d in param_space(v, rt.op, rt.dtype) if len(d.values) > 1),
        key=lambda d: (-len(d.values), d.name),
    )
    chosen = []
    prod = 1
    for d in dims:
        if prod >= n:
            break
        chosen.append(d)
        prod *= len(d.values)
    names = [d.name for d in chosen]
    present = {tuple(p[nm] for nm in names) for p in space}
    cells = [c for c in itertools.product(*(d.values for d in chosen)) if c in present]
    if not cells:
        cells = [()]
    per: list[list[tuple[Any, ...]]] = [[] for _ in range(n)]
    if len(cells) >= n:
        for i, c in enumerate(cells):
            per[i % n].append(c)
    else:
        for j in range(n):
            per[j].append(cells[j % len(cells)])
    return names, per


def _member(names: list[str], cells: list[tuple[Any, ...]]) -> Callable[[Params], bool]:
    owned = set(cells)
    return lambda p: tuple(p[nm] for nm in names) in owned


def _describe(names: list[str], cells: list[tuple[Any, ...]]) -> str:
    if not names:
        return "the whole space"
    return f"({', '.join(names)}) in {{{'; '.join(','.join(str(x) for x in c) for c in cells)}}}"


def _dims(rt: Runtime, v: Variant) -> list[str]:
    return [d.name for d in param_space(v, rt.op, rt.dtype) if len(d.values) > 1]


def _losers(rt: Runtime, agents: list[SwarmAgent], share: float) -> list[SwarmAgent]:
    """The weaker part of a team: agents without a verified kernel, then the slowest."""
    ranked = {aid: i for i, (_t, aid) in enumerate(rt.standings())}
    order = sorted(agents, key=lambda a: (-(ranked.get(a.id, 10_000)), a.id))
    k = max(1, int(round(len(agents) * share)))
    return order[:k] if len(agents) > 1 else []


def _lead_pause(rt: Runtime, lo: float = 3.0, hi: float = 12.0) -> float:
    rt.lead_clock += rt.rng.uniform(lo, hi)
    return rt.lead_clock


# ---------------------------------------------------------------------------------- dispatch
def _dispatch_jobs(
    rt: Runtime, menu: list[Variant], n: int
) -> list[list[tuple[Variant, Params | None]]]:
    """Each worker's rungs: the ladder dealt round-robin, or with more workers than rungs
    one rung each and the spare workers doubling up on the most promising rungs from a
    random config."""
    jobs: list[list[tuple[Variant, Params | None]]] = [[] for _ in range(n)]
    if n >= len(menu):
        extra = list(reversed(menu))  # spare workers double up on the most promising rungs
        for i in range(n):
            if i < len(menu):
                jobs[i].append((menu[i], None))
            else:
                v = extra[(i - len(menu)) % len(extra)]
                jobs[i].append((v, rt.rng.choice(rt.space(v))))
    else:
        for j, v in enumerate(menu):
            jobs[j % n].append((v, None))
    return jobs


def run_dispatch(rt: Runtime) -> None:
    n = rt.spec.n_agents
    workers = rt.add_agents([WORKER] * n)
    menu = rt.menu()
    jobs = _dispatch_jobs(rt, menu, n)
    split = {a.id: [v.tag for v, _ in js] for a, js in zip(workers, jobs, strict=True)}
    rt.plan(
        "split the ladder by rung: "
        + "; ".join(f"{aid} -> {', '.join(tags)}" for aid, tags in split.items())
        + ". Everyone tunes what they build; losers move to the winner's rung after the first "
        "merge.",
        split,
    )
    for a, js in zip(workers, jobs, strict=True):
        tags = [v.tag for v, _ in js]
        start = {"start": dict(js[0][1])} if js[0][1] is not None else {}
        rt.dispatch(
            _lead_pause(rt),
            a,
            f"implement {' then '.join(tags)} and tune it",
            {"variants": tags, **start},
        )
    r1 = _per_agent(DISPATCH_ROUND1, n)
    for a, js in zip(workers, jobs, strict=True):
        for v, p in js:
            res = rt.implement(a, v, p)
            if res is not None and res.status in RAN:
                rt.tune(a, v, r1)
        rt.status(a)
    t = rt.barrier()
    rt.leaderboard(t, "round 1")
    rt.merge(_lead_pause(rt, 10, 40), "round 1")
    win = rt.winner()
    r2 = _per_agent(DISPATCH_ROUND2, n, floor=1)
    focus, wv = _dispatch_redirects(rt, workers, win)
    rt.sync()
    for a in workers:
        if a.id in focus and wv is not None:
            rt.tune(a, wv, r2, focus=focus[a.id])
        else:
            b = a.best()
            if b is None:
                continue
            rt.tune(a, rt.env.variant(b[1]), r2)
        rt.status(a)
    t = rt.barrier()
    rt.leaderboard(t, "final")
    rt.merge(_lead_pause(rt, 10, 40), "final")


def _dispatch_redirects(
    rt: Runtime, workers: list[SwarmAgent], win: Event | None
) -> tuple[dict[str, str | None], Variant | None]:
    """After round 1: the losing half moves to the winner's rung, each to explore a
    different parameter, and the winner hands its kernel over. Returns (each redirected
    worker's parameter, the winner's rung), empty when there is no winner."""
    focus: dict[str, str | None] = {}
    wv: Variant | None = None
    if win is not None and win.variant is not None and win.recipient is not None:
        wv = win.variant
        wp = launch_params(win.params)
        holder = rt.by_id[win.recipient]
        dims = _dims(rt, wv)
        losers = [a for a in _losers(rt, workers, 0.5) if a is not holder]
        for j, a in enumerate(losers):
            f = dims[j % len(dims)] if dims else None
            focus[a.id] = f
            t = _lead_pause(rt)
            rt.redirect(
                t,
                a,
                wv,
                f"{holder.id}'s kernel leads at {fmt_ms(win.time_ms or 0)} ms; explore "
                f"{f or 'its neighbourhood'}",
                {"region": f},
            )
            holder.clock = max(holder.clock, t)
            rt.handoff(
                t + rt.rng.uniform(5, 30), holder, a, wv, wp, win.time_ms, "start from my kernel"
            )
    return focus, wv


# ---------------------------------------------------------------------------------- parallel sweep
def run_parallel_sweep(rt: Runtime) -> None:
    n = rt.spec.n_agents
    workers = rt.add_agents([WORKER] * n)
    # the sweep's rung: this GPU's own, unless it is known to compute the wrong answer
    # (sim.rung_verification), then the highest portable rung that is not
    v = next(
        (
            x
            for x in (rt.hw_rung, *reversed(rt.mid_rungs))
            if x is not None and not rt.known_wrong(x)
        ),
        rt.hw_rung or rt.mid_rungs[-1],
    )
    names, cells = _slices(rt, v, n)
    split = {
        a.id: {"dims": names, "cells": [list(c) for c in cs]}
        for a, cs in zip(workers, cells, strict=True)
    }
    rt.plan(
        f"sweep {v.tag} ({v.title}); the space is cut along ({', '.join(names)}) into {n} slices; "
        "top two refine after the leaderboard.",
        split,
    )
    for a, cs in zip(workers, cells, strict=True):
        rt.dispatch(
            _lead_pause(rt, 2, 8),
            a,
            f"sweep {v.tag} over {_describe(names, cs)}",
            {"variant": v.tag, "slice": {"dims": names, "cells": [list(c) for c in cs]}},
        )
    per = 2 if n <= 5 else 1
    for a, cs in zip(workers, cells, strict=True):
        inside = _member(names, cs)
        mine = [p for p in rt.space(v) if inside(p)]
        picks = a.shortlist(rt.env, v, mine, per, rt.baseline_ms)
        if not picks:
            rt.status(a, "slice has nothing left to try")
            continue
        for i, p in enumerate(picks):
            rt.implement(a, v, p, habits=False, max_fixes=2, kind="variant" if i == 0 else "tune")
        rt.status(a)
    t = rt.barrier()
    rt.leaderboard(t, "sweep")
    rt.merge(_lead_pause(rt, 10, 40), "sweep")
    rt.sync()
    for _t, aid in rt.standings()[:2]:
        a = rt.by_id[aid]
        best = a.best()
        assert best is not None
        rt.dispatch(
            _lead_pause(rt),
            a,
            f"refine around your best ({fmt_ms(best[0])} ms, {fmt_params(best[2])}); "
            "any neighbour, slice boundaries no longer apply",
            {"variant": v.tag},
        )
        rt.tune(a, v, SWEEP_REFINE if n <= 10 else SWEEP_REFINE - 1)
        rt.status(a)
    t = rt.barrier()
    rt.leaderboard(t, "after refine")
    rt.merge(_lead_pause(rt, 10, 40), "final")


# ---------------------------------------------------------------------------------- pipeline
_PIPELINE_ROLES = {
    3: [PROPOSER, REVIEWER, VERIFIER],
    4: [PROPOSER, REVIEWER, VERIFIER, TUNER],
    5: [PROPOSER, REVIEWER, VERIFIER, TUNER, PROPOSER],
    6: [PROPOSER, REVIEWER, VERIFIER, TUNER, PROPOSER, TUNER],
}


def run_pipeline(rt: Runtime) -> None:
    team = rt.add_agents(_PIPELINE_ROLES[rt.spec.n_agents])
    proposers = [a for a in team if a.role == PROPOSER]
    reviewer = next(a for a in team if a.role == REVIEWER)
    verifier = next(a for a in team if a.role == VERIFIER)
    tuners = [a for a in team if a.role == TUNER] or proposers
    menu = rt.menu()
    split = {
        v.tag: {"proposer": proposers[i % len(proposers)].id, "tuner": tuners[i % len(tuners)].id}
        for i, v in enumerate(menu)
    }
    rt.plan(
        "run every rung through the chain proposer -> reviewer -> verifier -> tuner: "
        + "; ".join(
            f"{tag}: {r['proposer']} writes, {reviewer.id} reviews, {verifier.id} verifies, "
            f"{r['tuner']} tunes"
            for tag, r in split.items()
        ),
        split,
    )
    for i, v in enumerate(menu):
        rt.dispatch(
            _lead_pause(rt),
            proposers[i % len(proposers)],
            f"write {v.tag} ({v.title}) for review",
            {"variant": v.tag},
        )
    for i, v in enumerate(menu):
        prop = proposers[i % len(proposers)]
        tuner = tuners[i % len(tuners)]
        res = rt.implement(prop, v, reviewer=reviewer)
        if res is None or res.status not in RAN or res.time_ms is None:
            rt.status(prop, f"gave up on {v.tag}")
            continue
        p = launch_params(res.params)
        h = rt.handoff(
            prop.clock + prop.rng.uniform(5, 20), prop, verifier, v, p, res.time_ms, "please verify"
        )
        prop.clock = h.t
        ver = rt.verify(verifier, res, h.t, LEAD_ID)
        h2 = rt.handoff(
            ver.t + verifier.rng.uniform(5, 20),
            verifier,
            tuner,
            v,
            p,
            ver.time_ms,
            (
                "verified, tune it"
                if res.status == OK
                else f"timing confirmed, but {v.tag}'s output is unchecked here; tune it"
            )
            if ver.status == "pass"
            else "timing is noisy, its gain does not count; re-measure while tuning",
        )
        verifier.clock = h2.t
        rt.tune(tuner, v, PIPELINE_TUNE)
        rt.status(tuner, f"{v.tag} stage done")
        rt.lead_clock = max(rt.lead_clock, tuner.clock)
        rt.merge(_lead_pause(rt, 10, 40), f"{v.tag} stage")


# ---------------------------------------------------------------------------------- campaign
def run_campaign(rt: Runtime) -> None:
    n = rt.spec.n_agents
    n_ver = 1 if n < 10 else 2
    team = rt.add_agents([WORKER] * (n - n_ver) + [VERIFIER] * n_ver)
    workers = [a for a in team if a.role == WORKER]
    verifiers = [a for a in team if a.role == VERIFIER]
    menu = rt.menu()
    regions = {v.tag: _slices(rt, v, CAMPAIGN_REGIONS) for v in menu}
    cells: list[tuple[Variant, list[str], list[tuple[Any, ...]]]] = []
    for r in range(CAMPAIGN_REGIONS):
        for v in reversed(menu):
            names, per = regions[v.tag]
            cells.append((v, names, per[r]))
    assign = [cells[i % len(cells)] for i in range(len(workers))]
    split = {
        a.id: {"variant": v.tag, "dims": names, "cells": [list(c) for c in cs]}
        for a, (v, names, cs) in zip(workers, assign, strict=True)
    }
    rt.plan(
        f"fleet over {len(menu)} rungs x {CAMPAIGN_REGIONS} config regions ({len(cells)} cells) "
        f"for {len(workers)} workers; wave 2 moves the weaker half to the two best rungs; "
        f"{', '.join(a.id for a in verifiers)} re-bench the top results before the final merge.",
        split,
    )
    for a, (v, names, cs) in zip(workers, assign, strict=True):
        rt.dispatch(
            _lead_pause(rt, 2, 8),
            a,
            f"{v.tag} with {_describe(names, cs)}",
            {"variant": v.tag, "slice": {"dims": names, "cells": [list(c) for c in cs]}},
        )
    t1 = 1 if len(workers) <= 5 else 0
    for a, (v, names, cs) in zip(workers, assign, strict=True):
        inside = _member(names, cs)
        picks = a.shortlist(rt.env, v, [p for p in rt.space(v) if inside(p)], 1, rt.baseline_ms)
        res = rt.implement(a, v, picks[0] if picks else None)
        if t1 and res is not None and res.status in RAN:
            rt.tune(a, v, t1, within=inside)
        rt.status(a)
    t = rt.barrier()
    rt.leaderboard(t, "wave 1")
    rt.merge(_lead_pause(rt, 10, 40), "wave 1")
    rt.sync()
    top = _rung_leaders(rt)[:2]
    t2 = 2 if len(workers) <= 5 else 1
    if top:
        _campaign_redirects(rt, workers, top, t2)
    t = rt.barrier()
    rt.leaderboard(t, "wave 2")
    for j, e in enumerate(_top_distinct(rt, 3)):
        rt.verify(verifiers[j % len(verifiers)], e, t, LEAD_ID)
    rt.lead_clock = max([rt.lead_clock] + [a.clock for a in verifiers])
    rt.merge(_lead_pause(rt, 10, 40), "final")


def _rung_leaders(rt: Runtime) -> list[Event]:
    """The fastest result that ran on each rung (earliest on a tie), fastest first."""
    leaders: dict[str, Event] = {}
    for e in rt.results:
        if e.status in RAN and e.time_ms is not None and e.variant is not None:
            cur = leaders.get(e.variant.tag)
            if cur is None or (e.time_ms, e.t) < (cur.time_ms or 0.0, cur.t):
                leaders[e.variant.tag] = e
    return sorted(leaders.values(), key=lambda e: (e.time_ms, e.t))


def _campaign_redirects(rt: Runtime, workers: list[SwarmAgent], top: list[Event], t2: int) -> None:
    """Wave 2: the weakest workers move to the top rungs (each to explore one parameter),
    get the rung's best kernel from its holder, and tune it."""
    for j, a in enumerate(_losers(rt, workers, CAMPAIGN_REDIRECT_SHARE)):
        lead_ev = top[j % len(top)]
        assert lead_ev.variant is not None and lead_ev.recipient is not None
        v = lead_ev.variant
        holder = rt.by_id[lead_ev.recipient]
        dims = _dims(rt, v)
        f = dims[(j // len(top)) % len(dims)] if dims else None
        t = _lead_pause(rt)
        rt.redirect(
            t,
            a,
            v,
            f"{v.tag} is a top rung ({fmt_ms(lead_ev.time_ms or 0)} ms); explore "
            f"{f or 'around it'}",
            {"region": f},
        )
        if holder is not a:
            holder.clock = max(holder.clock, t)
            rt.handoff(
                t + rt.rng.uniform(5, 30),
                holder,
                a,
                v,
                launch_params(lead_ev.params),
                lead_ev.time_ms,
                "here is the current best of this rung",
            )
        rt.tune(a, v, t2, focus=f)
        rt.status(a)


def _top_distinct(rt: Runtime, k: int) -> list[Event]:
    """The ``k`` fastest results that ran, one per distinct kernel (rung + launch params)."""
    ranked = sorted(
        (e for e in rt.results if e.status in RAN and e.time_ms is not None),
        key=lambda e: (e.time_ms, e.t),
    )
    seen: set[tuple[str, tuple[tuple[str, Any], ...]]] = set()
    picked: list[Event] = []
    for e in ranked:
        key = (e.params["variant"], tuple(sorted(launch_params(e.params).items())))
        if key not in seen:
            seen.add(key)
            picked.append(e)
        if len(picked) == k:
            break
    return picked


PROTOCOLS: dict[str, Callable[[Runtime], None]] = {
    "dispatch": run_dispatch,
    "parallel_sweep": run_parallel_sweep,
    "pipeline": run_pipeline,
    "campaign": run_campaign,
}
