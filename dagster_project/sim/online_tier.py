"""The online measured tier as lake tables (issue 36, 36w): replay, label, frame, check.

``sim.online`` replays one GPU's shipped online sessions with a strict oracle; this module
is what the ``kernelinfer_online`` asset calls: it replays every GPU's list
(``online.ONLINE_GPUS``: the H100's today, the H200's once one is shipped), writes each
replayed session's speedup label with the label policy's own decision (every ran step of an
online session was timed on its GPU, so a label here is ``measured`` or ``unknown``, never
modelled), turns the sessions into the same two tables as the modelled tier
(``kernelinfer.session_frames``, plus ``measured_on``) and states the blocking check: every
listed session must replay identically. A failed replay fails the check, with its reason,
instead of silently leaving a smaller table.

Why a table of its own: the online sessions are the same task ids as modelled sessions of
the default build, generated in measured mode, so their trajectories differ; mixing them
into ``sim.kernelinfer_sessions`` would give one id two rows. No dagster import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagster_project.frames import CheckOutcome, Json

from . import GENERATOR_VERSION
from . import label_policy as lp
from .online import ONLINE_GPUS, Replay, read_online, replay_online, tier_stats

if TYPE_CHECKING:
    import polars as pl

    from dagster_project.storage.lake import Lake

    from .oracle import Answer

#: Version of how replayed online sessions become rows (which label they carry, which
#: columns the tables add); part of the asset's code version.
ONLINE_TIER_VERSION = "1.0.0"

#: The tables the ``kernelinfer_online`` asset writes (schema ``sim``).
TABLES = ("kernelinfer_online_sessions", "kernelinfer_online_steps")

#: The blocking asset check: every listed session replays identically.
CHECK = "online_replay"

#: ``online_status`` of a listed session.
IDENTICAL, FAILED = "identical", "failed"

#: Failures listed in a failed check's metadata (the count is always there).
SHOWN_FAILURES = 20


@dataclass(frozen=True)
class OnlineTier:
    """Every GPU's replay of its shipped online sessions."""

    replays: tuple[Replay, ...]
    #: per listed session, in list order: gpu, session_id, online_status, reason
    report: tuple[dict[str, Any], ...]

    @property
    def sessions(self) -> list[dict[str, Any]]:
        return [s for r in self.replays for s in r.sessions]

    @property
    def listed(self) -> int:
        return sum(r.listed for r in self.replays)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.report if r["online_status"] == FAILED]


def default_tasks() -> dict[str, Any]:
    """The tasks the online sessions were drawn from: the default kernelinfer build's
    (default seed and size, whatever this build's settings say), by session id."""
    from .kernelinfer import build_tasks

    tasks, _ = build_tasks()
    return {t.session_id: t for t in tasks}


def replay_tier(
    gpus: Iterable[str] = ONLINE_GPUS,
    tasks: Mapping[str, Any] | None = None,
    paths: Mapping[str, Path] | None = None,
    answers: Mapping[str, dict[str, Answer]] | None = None,
) -> OnlineTier:
    """Replay each GPU's listed online sessions (``paths`` / ``answers`` replace a GPU's
    shipped list / answers: tests) and report every listed session's outcome."""
    tasks = dict(tasks) if tasks is not None else default_tasks()
    replays: list[Replay] = []
    report: list[dict[str, Any]] = []
    for gpu in gpus:
        path = (paths or {}).get(gpu)
        replay = replay_online(gpu, tasks, path=path, answers=(answers or {}).get(gpu))
        replays.append(replay)
        why = dict(replay.failed)
        for row in read_online(gpu, path):
            sid = row["session_id"]
            report.append(
                {
                    "gpu": gpu,
                    "session_id": sid,
                    "online_status": FAILED if sid in why else IDENTICAL,
                    "reason": why.get(sid),
                }
            )
    return OnlineTier(tuple(replays), tuple(report))


def attach_online_labels(sessions: Iterable[dict[str, Any]]) -> None:
    """Write the four label columns onto each online session, in place, with the label
    policy's decision (``label_policy.label_from_times``; the one home of the rule) over
    the steps' measured times. No code-model scales are passed: an online label is
    ``measured`` (baseline and best both timed on the GPU, or the baseline is best) or
    ``unknown`` (no correct step), never a model's figure."""
    from .label_columns import label_fields

    for s in sessions:
        gpu = s.get("measured_on") or s["gpu"]
        times = [
            (t.get("measured_ms"), lp.MEASURED if t.get("measured_ms") is not None else "")
            for t in s["trace"]
        ]
        s.update(label_fields(lp.label_from_times(s, times, gpu, None), gpu))


def online_frames(sessions: list[dict[str, Any]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(sessions table, steps table) of labelled online sessions: the modelled tier's
    layout (``kernelinfer.session_frames``; ``shard`` is the task's shard in the default
    build) plus ``measured_on``, the GPU every ran step was measured on."""
    import polars as pl

    from .kernelinfer import session_frames

    sdf, tdf = session_frames(sessions)
    measured_on = pl.Series("measured_on", [s.get("measured_on") for s in sessions], pl.String)
    return sdf.with_columns(measured_on), tdf


def check_outcome(tier: OnlineTier) -> CheckOutcome:
    """The blocking check: every listed session replayed identically (reasons shown)."""
    failed = tier.failed
    return CheckOutcome(
        CHECK,
        not failed,
        {
            "listed": tier.listed,
            "identical": len(tier.sessions),
            "failed": len(failed),
            "failures": Json(
                {f"{r['gpu']}:{r['session_id']}": r["reason"] for r in failed[:SHOWN_FAILURES]}
            ),
        },
    )


def tier_metadata(tier: OnlineTier) -> dict[str, Any]:
    """What the asset shows: sessions per GPU, the tier's statistics, what it replays under."""
    from collections import Counter

    from .oracle import evidence_digest

    return {
        "listed": tier.listed,
        "online_status": Json(dict(Counter(r["online_status"] for r in tier.report))),
        "by_gpu": Json({r.gpu: r.identical for r in tier.replays if r.listed}),
        "tier_stats": Json(tier_stats(tier.sessions)),
        "generator_version": GENERATOR_VERSION,
        "evidence": evidence_digest(),
    }


def code_version() -> str:
    """What the tables are a function of besides the shipped files (whose fingerprint the
    asset's ``shipped`` lineage adds): generator, this module's rule and the evidence."""
    from .oracle import evidence_digest

    return f"{GENERATOR_VERSION}+online-{ONLINE_TIER_VERSION}+evidence-{evidence_digest()}"


@dataclass(frozen=True)
class TierOutcome:
    """What one ``kernelinfer_online`` run reports: its tables' data version, the
    materialisation's metadata and the blocking check."""

    data_version: str
    metadata: dict[str, Any]
    check: CheckOutcome


def materialise(lake: Lake, tier: OnlineTier | None = None) -> TierOutcome:
    """Replay the tier (unless given), write both tables (the identical sessions only;
    failures go to the check) and report."""
    from dagster_project.frames import ColumnSchema
    from dagster_project.storage.versions import table_version

    tier = replay_tier() if tier is None else tier
    sessions = tier.sessions
    attach_online_labels(sessions)
    sdf, tdf = online_frames(sessions)
    lake.replace_table("sim", TABLES[0], sdf)
    lake.replace_table("sim", TABLES[1], tdf)
    names = [f"sim.{t}" for t in TABLES]
    return TierOutcome(
        data_version=table_version(lake, *names),
        metadata={
            "dagster/row_count": sdf.height,
            "dagster/column_schema": ColumnSchema(names[0]),
            "steps": tdf.height,
            **tier_metadata(tier),
        },
        check=check_outcome(tier),
    )
