"""Behaviour figures of a kernelswarm build (issue 20, "swarms with substance").

Reads the Parquet that ``benchmarks/bench_swarm.py --keep DIR`` writes (the episodes table
for each episode's task, the messages table for its log) and prints, for the whole build:

* **reviewer passes of over-limit kernels**: review ``pass`` messages whose kernel (rung +
  params) needs more shared memory than the GPU's per-block opt-in limit, recomputed with
  the simulator's kernel plan (the footprint of the code's shared arrays);
* **messages quoting results that do not exist yet** (``checks.timeline_violations``): a
  review that contains compiler / ptxas / Triton / correctness-harness text (it reads code
  that nobody has compiled), or any message quoting a diagnostic or a measured error that
  no earlier result of its episode printed;
* **unstable verifications rewarded**: ``verify`` messages with status ``unstable`` whose
  kernel still earns a reward, i.e. its result's kept-improvement reward is not taken back
  (``reward`` of the verify) or the verdict names that very kernel at that time;
* **verifications claiming correctness of an unverified rung** ("correct on the task
  shape" for a rung with no execution evidence);
* **template counts**: distinct message skeletons per kind, where a skeleton replaces
  parameter lists, rung tags, agent ids, stage labels and every number by placeholders
  (what is left is the phrasing).

* **memory** (issue 39, 39c; ``memory_figures``, also without a build: ``--generate N``
  simulates the first N episodes of ``--seed``'s plan in this process): candidates whose
  source an earlier candidate of the episode already submitted, by the same agent or a
  teammate, and how many of those resubmit a source that had failed (compile error, wrong
  result, or a review fail); fix candidates (an agent's next candidate on the rung after its
  own failure) whose edit removes and adds exactly the same lines as an earlier fix of the
  episode; and candidates on a rung whose best result so far is >= 1.5x slower than the
  episode's best result so far (a slow rung revisited).

Usage: ``python benchmarks/swarm_behaviour.py DIR [--json PATH]`` or
``python benchmarks/swarm_behaviour.py --generate 120 [--seed S]``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import polars as pl

from dagster_project.sim.hardware import get_gpu
from dagster_project.sim.kernels import plan
from dagster_project.sim.ops import get_op
from dagster_project.sim.swarm.checks import timeline_violations
from dagster_project.sim.swarm.spec import CARD_OPS
from dagster_project.sim.variants import get_variant

KINDS = ("status", "merge", "verify", "verdict", "review", "leaderboard", "handoff", "redirect")
_PARAMS = re.compile(r"\((?:[A-Za-z_]\w*=[^,()]+(?:, )?)+\)")
_TAG = re.compile(r"\bv\d_\w+")
_AGENT = re.compile(r"\ba\d\d\b")
_NUM = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_LABEL = re.compile(r"\((?:round|wave|final|sweep|after refine|V stage)[^)]*\)")
_REF = re.compile(r"\(message (\d+)\)")


def skeleton(text: str) -> str:
    """A message with its facts replaced by placeholders: what remains is the phrasing."""
    s = _PARAMS.sub("(P)", text)
    s = _TAG.sub("V", s)
    s = _AGENT.sub("A", s)
    s = _NUM.sub("#", s)
    return _LABEL.sub("(L)", s)


def _episodes(root: Path) -> list[dict[str, Any]]:
    """The build's messages grouped per episode, as ``memory_figures`` reads them."""
    msgs = pl.read_parquet(root / "kernelswarm_messages_*.parquet").sort("episode_id", "idx")
    out = []
    for _, frame in msgs.group_by(["episode_id"], maintain_order=True):
        rows = frame.to_dicts()
        for m in rows:
            m["params"] = json.loads(m["params"]) if isinstance(m["params"], str) else m["params"]
        out.append({"messages": rows})
    return out


def _launch(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != "variant"}


class _Tally:
    """What ``measure`` counts over the whole build, filled one episode at a time."""

    def __init__(self) -> None:
        self.skel: dict[str, Counter[str]] = defaultdict(Counter)
        self.f: Counter[str] = Counter()
        self.quote_kinds: Counter[str] = Counter()
        self.examples: dict[str, str] = {}
        self.plans: dict[tuple[Any, ...], int] = {}


def measure(root: Path) -> dict[str, Any]:
    eps = pl.read_parquet(
        root / "kernelswarm_episodes_*.parquet",
        columns=["episode_id", "op", "impl", "gpu", "dtype", "shape"],
    )
    msgs = pl.read_parquet(root / "kernelswarm_messages_*.parquet").sort("episode_id", "idx")
    task = {r["episode_id"]: r for r in eps.iter_rows(named=True)}
    tally = _Tally()
    for (eid,), frame in msgs.group_by(["episode_id"], maintain_order=True):
        _measure_episode(tally, eid, task[eid], frame.to_dicts())
    skel = tally.skel
    return {
        "figures": dict(tally.f),
        "future_quotes_by_kind": dict(tally.quote_kinds),
        "templates": {k: len(skel[k]) for k in KINDS},
        "top_skeletons": {
            k: skel[k].most_common(3) for k in ("status", "merge", "verify", "verdict")
        },
        "examples": tally.examples,
    }


def _measure_episode(tally: _Tally, eid: Any, t: dict[str, Any], rows: list[dict]) -> None:
    """One episode's messages: skeletons, timeline violations, then each review and verify."""
    f = tally.f
    sim_op, impl = CARD_OPS[t["op"]]
    op, gpu, shape = get_op(sim_op), get_gpu(t["gpu"]), json.loads(t["shape"])
    for m in rows:
        m["params"] = json.loads(m["params"])
        if m["kind"] in KINDS:
            tally.skel[m["kind"]][skeleton(m["content"])] += 1
    f["episodes"] += 1
    f["messages"] += len(rows)
    for i, why in timeline_violations(rows):
        f["future_quotes"] += 1
        tally.quote_kinds[rows[i]["kind"]] += 1
        tally.examples.setdefault(rows[i]["kind"], f"{eid} #{i}: {why}")
    verdict = rows[-1]
    for i, m in enumerate(rows):
        if m["kind"] == "review":
            _count_review(tally, eid, t, (sim_op, impl, op, gpu, shape), i, m)
        elif m["kind"] == "verify":
            _count_verify(f, rows, verdict, i, m)


def _count_review(
    tally: _Tally, eid: Any, t: dict[str, Any], kernel: tuple[Any, ...], i: int, m: dict
) -> None:
    """A review: its status, and whether a pass let through a kernel over the smem limit
    (its plan is computed once per distinct kernel of the build)."""
    f = tally.f
    sim_op, impl, op, gpu, shape = kernel
    f[f"reviews_{m['status']}"] += 1
    if m["status"] != "pass":
        return
    key = (sim_op, impl, t["gpu"], t["dtype"], t["shape"], json.dumps(m["params"]))
    if key not in tally.plans:
        v = get_variant(op.family, impl, m["params"]["variant"])
        tally.plans[key] = plan(op, shape, t["dtype"], gpu, v, _launch(m["params"])).smem
    if tally.plans[key] > gpu.smem_per_block_optin:
        f["over_limit_passes"] += 1
        tally.examples.setdefault("over_limit_pass", f"{eid} #{i}: {m['content'][:160]}")


def _count_verify(f: Counter[str], rows: list[dict], verdict: dict, i: int, m: dict) -> None:
    """A verification: the result it refers to, a correctness claim for an unverified rung,
    and whether an unstable verdict still leaves its kernel rewarded."""
    f["verifications"] += 1
    ref_i = m["params"].get("ref")
    if ref_i is None:
        hit = _REF.search(m["content"])
        ref_i = int(hit.group(1)) if hit else None
    ref = rows[ref_i] if ref_i is not None and ref_i < i else None
    if ref is None:
        f["verify_without_earlier_result"] += 1
        return
    if ref["status"] == "unverified" and "correct on" in m["content"]:
        f["verify_claims_unverified_correct"] += 1
    if m["status"] != "unstable":
        return
    f["unstable"] += 1
    net = (ref["reward"] or 0.0) + (m["reward"] or 0.0)
    won = (
        verdict["params"].get("variant") == ref["params"]["variant"]
        and verdict["params"].get("params") == _launch(ref["params"])
        and verdict["time_ms"] == ref["time_ms"]
    )
    if net > 0 or won:
        f["unstable_rewarded"] += 1
        f["unstable_rewarded_in_verdict"] += won


_FAILED = ("compile_error", "wrong_result", "unsupported_arch", "fail")


def _outcomes(rows: list[dict]) -> dict[int, int]:
    """Each candidate's index -> the index of the message that judged it (its result, or
    the review that failed it): the first later message to its author with its params."""
    out: dict[int, int] = {}
    waiting: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, m in enumerate(rows):
        key = json.dumps(m["params"], sort_keys=True)
        if m["kind"] == "candidate":
            waiting[(m["sender"], key)].append(i)
        elif m["kind"] in ("result", "review") and m["recipient"] is not None:
            q = waiting.get((m["recipient"], key))
            if q and (m["kind"] == "result" or m["status"] == "fail"):
                out[q.pop(0)] = i
    return out


def _edit(a: str, b: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(removed, added) stripped non-blank lines of the edit from ``a`` to ``b``."""
    import difflib

    la, lb = a.split("\n"), b.split("\n")
    rem: list[str] = []
    add: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, la, lb, autojunk=False).get_opcodes():
        if tag != "equal":
            rem += [x.strip() for x in la[i1:i2] if x.strip()]
            add += [x.strip() for x in lb[j1:j2] if x.strip()]
    return tuple(sorted(rem)), tuple(sorted(add))


def _fixes(rows: list[dict], prev: tuple[str, str, str, int], m: dict) -> bool:
    """Whether candidate ``m`` fixes its author's failed candidate ``prev`` (rung, source,
    status, index): the same configuration retyped, or, after a compile error, another
    configuration of the rung (a resized tile); after a wrong result another configuration
    is a new try, not a fix."""
    if rows[prev[3]]["params"] == m["params"]:
        return True
    return prev[2] in ("compile_error", "unsupported_arch")


def _began(rows: list[dict]) -> dict[int, int]:
    """Each candidate's index -> the index of its author's previous message (sent or
    received): when the author began writing it (-1 for its first)."""
    began: dict[int, int] = {}
    last_msg: dict[str, int] = {}
    for i, m in enumerate(rows):
        if m["kind"] == "candidate":
            began[i] = last_msg.get(m["sender"], -1)
        for who in (m["sender"], m["recipient"]):
            if who is not None:
                last_msg[who] = i
    return began


def _episode_memory(f: Counter[str], rows: list[dict]) -> None:
    """One episode's repeats (see the module doc, **memory**). A repeat is *known* when what
    it repeats was on the log (its result or review printed) before the repeating agent
    began writing (its last message, sent or received, before the candidate; for a fix,
    before the failing candidate it fixes): agents writing at the same time cannot know
    each other's unreported work."""
    judged = _outcomes(rows)
    # source -> (first author, when the first failure of it was logged or None, when its
    # first outcome was logged)
    by_code: dict[str, tuple[str, int | None, int]] = {}
    last_of: dict[str, tuple[str, str, str, int]] = {}  # agent -> (rung, source, status, at)
    edits: dict[tuple[tuple[str, ...], tuple[str, ...]], int] = {}  # -> when logged
    rung_best: dict[str, float] = {}
    best = float("inf")
    began = _began(rows)
    for i, m in enumerate(rows):
        if m["kind"] == "result" and m["time_ms"] is not None and m["status"] == "ok":
            tag = m["params"].get("variant", "")
            rung_best[tag] = min(rung_best.get(tag, m["time_ms"]), m["time_ms"])
            best = min(best, m["time_ms"])
        if m["kind"] != "candidate":
            continue
        f["candidates"] += 1
        code, who, tag = m["content"], m["sender"], m["params"].get("variant", "")
        at = judged.get(i, len(rows))
        failed = at < len(rows) and rows[at]["status"] in _FAILED
        seen = by_code.get(code)
        if seen is not None:
            f["resubmitted_source"] += 1
            f["resubmitted_own" if seen[0] == who else "resubmitted_teammates"] += 1
            f["resubmitted_source_known"] += int(seen[2] < began[i])
            f["resubmitted_failed_source"] += int(seen[1] is not None)
            f["resubmitted_failed_source_known"] += int(seen[1] is not None and seen[1] < began[i])
            by_code[code] = (
                seen[0],
                seen[1] if seen[1] is not None else (at if failed else None),
                seen[2],
            )
        else:
            by_code[code] = (who, at if failed else None, at)
        prev = last_of.get(who)
        if prev is not None and prev[2] in _FAILED and prev[0] == tag and _fixes(rows, prev, m):
            f["fix_candidates"] += 1
            e = _edit(prev[1], code)
            if e in edits:
                f["fix_repeats"] += 1
                f["fix_repeats_known"] += int(edits[e] < began[prev[3]])
            else:
                edits[e] = at
        rb = rung_best.get(tag)
        f["slow_rung_candidates"] += int(rb is not None and rb >= 1.5 * best)
        last_of[who] = (tag, code, rows[at]["status"] if at < len(rows) else "", i)


def memory_figures(episodes: list[dict[str, Any]]) -> dict[str, int]:
    """The memory counters over card-format episode dicts (``simulate_episode``)."""
    f: Counter[str] = Counter()
    for ep in episodes:
        f["episodes"] += 1
        _episode_memory(f, ep["messages"])
    return dict(f)


def memory_report(f: dict[str, int]) -> str:
    def pct(a: str, b: str) -> str:
        return f"{f.get(a, 0)}/{f.get(b, 0)} = {100 * f.get(a, 0) / max(1, f.get(b, 0)):.1f}%"

    return "\n".join(
        [
            f"episodes {f.get('episodes', 0)}, candidates {f.get('candidates', 0)}",
            f"candidates resubmitting an earlier candidate's source: "
            f"{pct('resubmitted_source', 'candidates')} (own {f.get('resubmitted_own', 0)}, "
            f"a teammate's {f.get('resubmitted_teammates', 0)}); of a source that had failed: "
            f"{f.get('resubmitted_failed_source', 0)}; known (on the log before it was begun): "
            f"{f.get('resubmitted_source_known', 0)}, of a failed source "
            f"{f.get('resubmitted_failed_source_known', 0)}",
            "fix candidates repeating an earlier fix's edit: "
            + pct("fix_repeats", "fix_candidates")
            + "; known (the earlier fix on the log before the failing code was begun): "
            f"{f.get('fix_repeats_known', 0)}",
            f"candidates on a rung already >= 1.5x slower than the best: "
            f"{pct('slow_rung_candidates', 'candidates')}",
        ]
    )


def generate(n: int, seed: int | None) -> list[dict[str, Any]]:
    """The first ``n`` episodes of the seed's plan, simulated in this process."""
    from dagster_project.sim.kernelswarm import DEFAULT_SEED, build_swarm_tasks, simulate_episode

    s = DEFAULT_SEED if seed is None else seed
    specs, _ = build_swarm_tasks(s, n_episodes=n)
    return [simulate_episode(spec, s) for spec in specs]


def report(r: dict[str, Any]) -> None:
    f = r["figures"]
    print(f"episodes {f.get('episodes', 0)}, messages {f.get('messages', 0)}")
    print(
        f"reviews: {f.get('reviews_pass', 0)} pass, {f.get('reviews_fail', 0)} fail; "
        f"reviewer passes of over-limit kernels: {f.get('over_limit_passes', 0)}"
    )
    print(
        f"messages quoting results that do not exist yet: {f.get('future_quotes', 0)} "
        f"(by kind {r['future_quotes_by_kind']})"
    )
    print(
        f"verifications: {f.get('verifications', 0)}; unstable {f.get('unstable', 0)}; "
        f"unstable verifications rewarded: {f.get('unstable_rewarded', 0)} "
        f"(of which the verdict's kernel: {f.get('unstable_rewarded_in_verdict', 0)}); "
        f"claiming an unverified rung correct: {f.get('verify_claims_unverified_correct', 0)}; "
        f"without an earlier result: {f.get('verify_without_earlier_result', 0)}"
    )
    print(
        "templates (distinct digit-normalised skeletons): "
        + ", ".join(f"{k} {n}" for k, n in r["templates"].items())
    )
    for k, rows in r["top_skeletons"].items():
        for s, n in rows:
            print(f"  {k:8s} {n:6d}  {s[:150]!r}")
    for k, e in r["examples"].items():
        print(f"  example {k}: {e[:220]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path, nargs="?", help="folder written by bench_swarm.py --keep")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--generate", type=int, help="simulate N episodes: the memory figures")
    ap.add_argument("--seed", type=int, help="the plan's seed with --generate")
    args = ap.parse_args(argv)
    if args.generate:
        from dagster_project.sim.swarm.spec import SWARM_VERSION

        mem = memory_figures(generate(args.generate, args.seed))
        print(f"== swarm {SWARM_VERSION}, seed {args.seed or 'default'}")
        print(memory_report(mem))
        if args.json:
            args.json.write_text(json.dumps(mem, indent=1))
        return 0
    if args.root is None:
        ap.error("give the folder of a build, or --generate N")
    r = measure(args.root)
    r["memory"] = memory_figures(_episodes(args.root))
    print(memory_report(r["memory"]))
    report(r)
    if args.json:
        args.json.write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
