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

Usage: ``python benchmarks/swarm_behaviour.py DIR [--json PATH]``.
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
    ap.add_argument("root", type=Path, help="folder written by bench_swarm.py --keep")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    r = measure(args.root)
    report(r)
    if args.json:
        args.json.write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
