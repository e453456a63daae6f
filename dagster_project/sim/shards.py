"""One partition of a simulated dataset, end to end: generate, write, check, summarise.

The ``kernelinfer_sessions`` and ``kernelswarm_episodes`` assets are thin wrappers around
``kernelinfer_shard`` and ``kernelswarm_shard``: this module decides what a shard writes
(which partitions, which views to refresh, the swarm holdout on shard 0), what its data
version is (the generator parameters: a shard is a pure function of them, so the
fingerprint is exact and costs nothing), which invariants its blocking check enforces
(``check_session`` / ``check_episode`` on every generated item) and what the UI shows.
No dagster import: the asset turns the result into Dagster objects with
``table_metadata.materialize_result`` / ``check_result``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dagster_project.frames import CheckOutcome, ColumnSchema, Json, series_mean
from dagster_project.sim import GENERATOR_VERSION
from dagster_project.sim.swarm.spec import SWARM_VERSION
from dagster_project.storage.lake import Lake
from dagster_project.storage.versions import params_version

#: Violations listed in a failed check's metadata (the count is in ``*_checked``).
SHOWN_VIOLATIONS = 10

KERNELINFER_TABLES = ("kernelinfer_sessions", "kernelinfer_steps")
KERNELSWARM_TABLES = ("kernelswarm_episodes", "kernelswarm_agents", "kernelswarm_messages")


@dataclass(frozen=True)
class ShardOutcome:
    """What one shard's asset run reports: its exact data version, the metadata of the
    materialisation (plain values and ``frames`` markers) and its blocking check."""

    data_version: str
    metadata: dict[str, Any]
    check: CheckOutcome


def _shown(violations: Mapping[str, Any]) -> Json:
    return Json(dict(list(violations.items())[:SHOWN_VIOLATIONS]))


def _empty_shard(
    lake: Lake,
    partition: str,
    tables: tuple[str, ...],
    version: str,
    note: str,
    check: CheckOutcome,
) -> ShardOutcome:
    """A shard beyond the configured size (a smaller build): its stale files are dropped,
    so the views show exactly the configured number of items."""
    for table in tables:
        lake.delete_partition(table, partition)
    return ShardOutcome(
        data_version=version, metadata={"dagster/row_count": 0, "note": note}, check=check
    )


def kernelinfer_shard(lake: Lake, partition: str, *, seed: int, n_sessions: int) -> ShardOutcome:
    """Generate shard ``partition`` of ``n_sessions`` sessions, label each one with the
    evidence shipped for its GPU (``label_columns``), write its session and step
    partitions, and check every session's invariants."""
    from dagster_project.sim.kernelinfer import (
        check_session,
        generate_shard,
        n_shards,
        session_frames,
    )
    from dagster_project.sim.label_columns import (
        attach_labels,
        evidence_version,
        label_violations,
    )

    shard = int(partition)
    version = params_version(
        generator=GENERATOR_VERSION,
        seed=seed,
        sessions=n_sessions,
        shard=shard,
        labels=evidence_version(),
    )
    if shard >= n_shards(n_sessions):
        note = f"beyond {n_sessions} sessions"
        return _empty_shard(
            lake,
            partition,
            KERNELINFER_TABLES,
            version,
            note,
            CheckOutcome("session_invariants", True, {"sessions_checked": 0}),
        )
    sessions = generate_shard(shard, seed=seed, n_sessions=n_sessions)
    attach_labels(sessions)
    sess_df, steps_df = session_frames(sessions, shard)
    lake.write_partition("kernelinfer_sessions", partition, sess_df)
    lake.write_partition("kernelinfer_steps", partition, steps_df)
    for table in KERNELINFER_TABLES:
        lake.refresh_view("sim", table)
    violations = {
        x["session_id"]: v for x in sessions if (v := check_session(x) + label_violations(x))
    }
    statuses = steps_df.group_by("status").len().to_dicts() if steps_df.height else []
    return ShardOutcome(
        data_version=version,
        metadata={
            "dagster/row_count": sess_df.height,
            "dagster/column_schema": ColumnSchema("sim.kernelinfer_sessions"),
            "steps": steps_df.height,
            "mean_speedup": series_mean(sess_df["best"].struct.field("speedup")),
            "speedup_provenance": Json(_provenance_counts(sess_df)),
            "statuses": Json({r["status"]: r["len"] for r in statuses}),
        },
        check=CheckOutcome(
            "session_invariants",
            not violations,
            {"sessions_checked": len(sessions), "violations": _shown(violations)},
        ),
    )


def _provenance_counts(sess_df: Any) -> dict[str, int]:
    """Sessions per label provenance kind (``measured``, ``modelled``, ``unknown``)."""
    kinds = sess_df["speedup_provenance"].str.split(":").list.first()
    return {str(k): int(n) for k, n in kinds.value_counts(sort=True).iter_rows()}


def kernelswarm_shard(lake: Lake, partition: str, *, seed: int, n_episodes: int) -> ShardOutcome:
    """Generate shard ``partition`` of ``n_episodes`` episodes, write its episode, agent
    and message partitions (shard 0 also the build's held-out tasks), and check every
    episode's invariants."""
    from dagster_project.sim.kernelswarm import (
        build_swarm_tasks,
        check_episode,
        episode_frames,
        generate_swarm_shard,
        swarm_holdout_frame,
    )

    shard = int(partition)
    version = params_version(
        generator=GENERATOR_VERSION,
        swarm=SWARM_VERSION,
        seed=seed,
        episodes=n_episodes,
        shard=shard,
    )
    episodes = generate_swarm_shard(shard, seed=seed, n_episodes=n_episodes)
    if not episodes:
        note = f"beyond {n_episodes} episodes"
        return _empty_shard(
            lake,
            partition,
            KERNELSWARM_TABLES,
            version,
            note,
            CheckOutcome("episode_invariants", True, {"episodes_checked": 0}),
        )
    frames = episode_frames(episodes, shard)
    for table, df in zip(KERNELSWARM_TABLES, frames, strict=True):
        lake.write_partition(table, partition, df)
        lake.refresh_view("sim", table)
    if shard == 0:  # the holdout is a property of the whole build; shard 0 owns it
        _, holdout = build_swarm_tasks(seed, n_episodes)
        lake.replace_table("sim", "kernelswarm_tasks_holdout", swarm_holdout_frame(holdout))
    ep_df, _, msgs_df = frames
    violations = {e["episode_id"]: v for e in episodes if (v := check_episode(e))}
    return ShardOutcome(
        data_version=version,
        metadata={
            "dagster/row_count": ep_df.height,
            "dagster/column_schema": ColumnSchema("sim.kernelswarm_episodes"),
            "messages": msgs_df.height,
            "mean_agents": series_mean(ep_df["n_agents"]),
            "scenarios": Json(dict(ep_df.group_by("scenario").len().iter_rows())),
        },
        check=CheckOutcome(
            "episode_invariants",
            not violations,
            {"episodes_checked": len(episodes), "violations": _shown(violations)},
        ),
    )
