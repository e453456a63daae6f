"""The online measured tier (issue 36): sessions whose every compiled step was measured.

On the device, ``benchmarks/device/sim_online.py`` generated these sessions against the GPU:
each step that compiled was run at the session's own shape and dtype, and the engineer
decided what to do next on the device's verdict and time, not the model's. What ships is
the list of complete sessions (``data/measured/<gpu>_online.csv``: id, digest, generator
version, evidence digest) and the answers they were built from (``<gpu>_online_answers.csv``,
kept apart from ``<gpu>_answers.csv``: that file is also the generator's rung evidence, and
growing it would change the trajectories of the very sessions it answers). Here a GPU-less
build regenerates each one with a *strict* ``StepOracle`` over the shipped answers: a step
the answers do not hold raises instead of falling back to the model, so a replayed session
is the measured one or it is not published, and its digest must equal the device's.

Nothing here imports polars or dagster; the asset turns the sessions into tables.
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from . import GENERATOR_VERSION
from .oracle import OracleMiss, StepOracle, evidence_digest, tier_answers

#: Columns of ``<gpu>_online.csv`` (the device driver writes the same for every session it
#: tried; only complete ones are shipped).
ONLINE_FIELDS = (
    "session_id",
    "gpu",
    "op",
    "impl",
    "end",
    "rounds",
    "num_steps",
    "best_speedup",
    "digest",
    "generator_version",
    "evidence",
)

#: The GPUs an online tier can exist for (the device lends these).
ONLINE_GPUS = ("h100", "h200")


def online_path(gpu: str) -> Path:
    """Where a GPU's complete online sessions are listed inside the package."""
    return Path(str(resources.files("dagster_project.sim") / "data" / "measured")) / (
        f"{gpu}_online.csv"
    )


def session_digest(session: dict[str, Any]) -> str:
    """sha256 of the session dict as canonical JSON: equal digests, equal sessions."""
    text = json.dumps(session, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Replay:
    """What replaying one GPU's shipped online sessions gave."""

    gpu: str
    sessions: list[dict[str, Any]] = field(default_factory=list)
    #: (session id, why) for each listed session that did not replay identically
    failed: list[tuple[str, str]] = field(default_factory=list)
    listed: int = 0

    @property
    def identical(self) -> int:
        return len(self.sessions)


def read_online(gpu: str, path: Path | None = None) -> list[dict[str, str]]:
    """The shipped list of complete online sessions for ``gpu`` (none if absent)."""
    p = path or online_path(gpu)
    if not p.exists():
        return []
    with p.open(newline="") as fh:
        return list(csv.DictReader(fh))


def replay_online(
    gpu: str,
    tasks: dict[str, Any],
    path: Path | None = None,
    answers: dict[str, Any] | None = None,
) -> Replay:
    """Regenerate each listed session of ``gpu`` from its task (``tasks``: session id →
    TaskSpec of the default draw) with a strict oracle over the tier's answers and keep it
    only where its digest matches the device's. A row of another generator version or
    evidence, a task the draw no longer holds, a missing answer or a different digest is
    reported, never published."""
    from .kernelinfer import simulate_session

    out = Replay(gpu)
    answers = tier_answers(gpu) if answers is None else answers
    evidence = evidence_digest()
    for row in read_online(gpu, path):
        out.listed += 1
        sid = row["session_id"]
        if row["generator_version"] != GENERATOR_VERSION:
            out.failed.append(
                (sid, f"generator {row['generator_version']} (now {GENERATOR_VERSION})")
            )
            continue
        if row.get("evidence") and row["evidence"] != evidence:
            # the rung evidence the generator reads changed since the session was checked
            out.failed.append((sid, f"evidence {row['evidence']} (now {evidence})"))
            continue
        task = tasks.get(sid)
        if task is None:
            out.failed.append((sid, "not in the current task draw"))
            continue
        try:
            s = simulate_session(task, oracle=StepOracle(gpu, answers, strict=True))
        except OracleMiss as exc:
            out.failed.append((sid, str(exc)))
            continue
        if session_digest(s) != row["digest"]:
            out.failed.append((sid, "replayed session differs from the device's"))
            continue
        out.sessions.append(s)
    return out


def tier_stats(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    """The statistics the card sets beside the modelled sessions': steps, statuses, best
    speedups (median, share ≥ 2x), null bests."""
    import statistics
    from collections import Counter

    if not sessions:
        return {"sessions": 0}
    st: Counter[str] = Counter(t["status"] for s in sessions for t in s["trace"])
    sp = [s["best"]["speedup"] for s in sessions if s["best"]["speedup"] is not None]
    steps = [s["num_steps"] for s in sessions]
    return {
        "sessions": len(sessions),
        "ops": len({s["op"] for s in sessions}),
        "steps": sum(steps),
        "median_steps": statistics.median(steps),
        "statuses": dict(sorted(st.items())),
        "null_best": sum(1 for s in sessions if s["best"]["step"] is None),
        "best_is_baseline": sum(1 for s in sessions if s["best"]["step"] == 0),
        "median_speedup": round(statistics.median(sp), 3) if sp else None,
        "speedup_ge_2x": round(sum(1 for x in sp if x >= 2) / len(sp), 3) if sp else None,
    }
