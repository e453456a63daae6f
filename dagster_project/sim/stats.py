"""kernelinfer statistics beside the card's figures (used by ``benchmarks/bench_sim.py``).

The JSONL export itself (batches/, sessions.jsonl, tasks_holdout.jsonl, stats.json) is
written from the lake by ``dagster_project.publish.export_kernelinfer``; one writer of
that layout, not two.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from typing import Any

from .kernelinfer import CARD_STATS


class KernelinferStats:
    """Streaming aggregate of session dicts (what stats.json and the benchmark report)."""

    def __init__(self) -> None:
        self.sessions = 0
        self.steps = 0
        self.hours: list[float] = []
        self.speedups: list[float] = []
        self.statuses: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.combos: set[tuple[Any, ...]] = set()
        self.impls: Counter[str] = Counter()
        self.gpus: Counter[str] = Counter()
        self.ops: Counter[str] = Counter()
        self.attempts: Counter[str] = Counter()
        self.no_verified = 0

    def add(self, s: dict[str, Any]) -> None:
        self.sessions += 1
        self.steps += s["num_steps"]
        self.hours.append(s["elapsed_s"] / 3600.0)
        if s["best"]["speedup"] is not None:  # None: no kernel verified correct
            self.speedups.append(s["best"]["speedup"])
        else:
            self.no_verified += 1
        for t in s["trace"]:
            self.statuses[t["status"]] += 1
            self.kinds[t["kind"]] += 1
        self.combos.add((s["op"], s["gpu"], json.dumps(s["shape"], sort_keys=True), s["dtype"]))
        self.impls[s["impl"]] += 1
        self.gpus[s["gpu"]] += 1
        self.ops[s["op"]] += 1
        self.attempts.update(s["attempts"])

    def result(self) -> dict[str, Any]:
        n = max(self.sessions, 1)
        total = max(sum(self.statuses.values()), 1)
        sp = sorted(self.speedups) or [0.0]
        return {
            "sessions": self.sessions,
            "unique_combos": len(self.combos),
            "steps": self.steps,
            "mean_steps": self.steps / n,
            "mean_hours": statistics.fmean(self.hours) if self.hours else 0.0,
            "min_hours": min(self.hours, default=0.0),
            "max_hours": max(self.hours, default=0.0),
            "mean_speedup": statistics.fmean(sp),
            "median_speedup": sp[len(sp) // 2],
            "p90_speedup": sp[min(len(sp) - 1, int(0.9 * len(sp)))],
            "status_counts": dict(sorted(self.statuses.items())),
            "ok_share": self.statuses["ok"] / total,
            "compile_error_share": self.statuses["compile_error"] / total,
            "wrong_result_share": self.statuses["wrong_result"] / total,
            "unverified_share": self.statuses["unverified"] / total,
            "sessions_without_verified_best": self.no_verified,
            "kind_counts": dict(sorted(self.kinds.items())),
            "attempts": dict(sorted(self.attempts.items())),
            "impls": dict(sorted(self.impls.items())),
            "gpus": dict(sorted(self.gpus.items())),
            "ops": len(self.ops),
        }


def card_comparison(stats: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each card figure beside ours with the relative difference."""
    out: dict[str, dict[str, float]] = {}
    for key, card in CARD_STATS.items():
        if key not in stats:
            continue
        ours = float(stats[key])
        out[key] = {
            "ours": ours,
            "card": card,
            "rel_diff": (ours - card) / card if card else math.nan,
        }
    return out
