"""Publishable kernelinfer export and the statistics that go with it.

Layout (as the card describes it):

    batches/batch_000.jsonl …   100-session shards
    sessions.jsonl              merged view
    tasks_holdout.jsonl         held-out task specs (no solutions)
    stats.json                  our figures beside the card's

Files are written to temporary names and renamed at the end, so a crash leaves the
previous export intact. Sessions are streamed: only one shard is held in memory.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from . import GENERATOR_VERSION
from .kernelinfer import CARD_STATS, SHARD_SIZE, holdout_record
from .tasks import TaskSpec


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

    def add(self, s: dict[str, Any]) -> None:
        self.sessions += 1
        self.steps += s["num_steps"]
        self.hours.append(s["elapsed_s"] / 3600.0)
        self.speedups.append(s["best"]["speedup"])
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


def _sessions(it: Iterable[Any]) -> Iterator[dict[str, Any]]:
    for item in it:
        if isinstance(item, dict):
            yield item
        else:
            yield from item


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def write_kernelinfer_export(
    sessions_iter: Iterable[Any], holdout: Iterable[TaskSpec | dict[str, Any]], out_dir: str | Path
) -> dict[str, Any]:
    """Write the export folder; ``sessions_iter`` yields session dicts or lists of them
    (shards). Returns the stats written to stats.json."""
    out = Path(out_dir)
    batches = out / "batches"
    batches.mkdir(parents=True, exist_ok=True)
    stats = KernelinferStats()
    tmp_files: list[tuple[Path, Path]] = []

    def tmp(final: Path) -> Path:
        t = final.with_name(final.name + ".tmp")
        tmp_files.append((t, final))
        return t

    merged_path = tmp(out / "sessions.jsonl")
    batch_idx = 0
    batch_fh = None
    in_batch = 0
    with merged_path.open("w", encoding="utf-8") as merged:
        for s in _sessions(sessions_iter):
            if batch_fh is None or in_batch == SHARD_SIZE:
                if batch_fh is not None:
                    batch_fh.close()
                    batch_idx += 1
                batch_fh = tmp(batches / f"batch_{batch_idx:03d}.jsonl").open("w", encoding="utf-8")
                in_batch = 0
            line = _dump(s)
            merged.write(line + "\n")
            batch_fh.write(line + "\n")
            in_batch += 1
            stats.add(s)
    if batch_fh is not None:
        batch_fh.close()
    hold_path = tmp(out / "tasks_holdout.jsonl")
    n_hold = 0
    with hold_path.open("w", encoding="utf-8") as fh:
        for t in holdout:
            rec = holdout_record(t) if isinstance(t, TaskSpec) else t
            fh.write(_dump(rec) + "\n")
            n_hold += 1
    result = stats.result()
    result["holdout"] = n_hold
    result["generator_version"] = GENERATOR_VERSION
    result["batches"] = batch_idx + (1 if stats.sessions else 0)
    result["card_comparison"] = card_comparison(result)
    stats_path = tmp(out / "stats.json")
    stats_path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    # stale batches from a bigger previous export would confuse readers
    keep = {final.name for _t, final in tmp_files if final.parent == batches}
    for old in batches.glob("batch_*.jsonl"):
        if old.name not in keep:
            old.unlink()
    for t, final in tmp_files:
        os.replace(t, final)
    return result
