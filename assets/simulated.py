"""Simulated layer: kernelinfer task specs and single-agent sessions, in 100-session
shards written as Parquet partitions (viewed as ``sim.kernelinfer_*``).

Shards are pure functions of (task list, seed, generator version): ``code_version`` is
the generator version, so an unchanged generator means unchanged shards on refresh.
"""

import dagster as dg

from dagster_project.partitions import kernelinfer_shards
from dagster_project.resources import LakeResource
from dagster_project.sim import GENERATOR_VERSION


@dg.asset(
    group_name="simulated",
    kinds={"python", "duckdb"},
    owners=["team:kernelhouse"],
    code_version=GENERATOR_VERSION,
    metadata={"tables": "sim.kernelinfer_tasks, sim.kernelinfer_tasks_holdout"},
    description="kernelinfer task specs (op, gpu, shape, dtype) and the held-out specs no session uses.",
)
def sim_tasks(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Draw the session tasks and the disjoint held-out tasks from the seed."""
    from dagster_project.sim.kernelinfer import build_tasks, holdout_frame, task_frame

    s = lake.settings()
    tasks, holdout = build_tasks(seed=s.sim_seed, n_sessions=s.sim_sessions)
    handle = lake.lake()
    handle.replace_table("sim", "kernelinfer_tasks", task_frame(tasks))
    handle.replace_table("sim", "kernelinfer_tasks_holdout", holdout_frame(holdout))
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(tasks),
            "holdout": len(holdout),
            "seed": s.sim_seed,
            "ops": len({t.op for t in tasks}),
        }
    )


@dg.asset(
    group_name="simulated",
    kinds={"python", "parquet"},
    owners=["team:kernelhouse"],
    partitions_def=kernelinfer_shards,
    deps=[sim_tasks],
    code_version=GENERATOR_VERSION,
    check_specs=[dg.AssetCheckSpec("session_invariants", asset="kernelinfer_sessions", blocking=True)],
    metadata={"tables": "sim.kernelinfer_sessions, sim.kernelinfer_steps"},
    description="One shard of 100 simulated single-agent optimisation sessions (Parquet).",
)
def kernelinfer_sessions(context: dg.AssetExecutionContext, lake: LakeResource):  # noqa: ANN201
    """Generate one shard, write its session and step partitions, check every session."""
    from dagster_project.sim.kernelinfer import check_session, generate_shard, session_frames

    s = lake.settings()
    shard = int(context.partition_key)
    sessions = generate_shard(shard, seed=s.sim_seed, n_sessions=s.sim_sessions)
    handle = lake.lake()
    sess_df, steps_df = session_frames(sessions)
    handle.write_partition("kernelinfer_sessions", context.partition_key, sess_df)
    handle.write_partition("kernelinfer_steps", context.partition_key, steps_df)
    handle.refresh_view("sim", "kernelinfer_sessions")
    handle.refresh_view("sim", "kernelinfer_steps")
    violations = {x["session_id"]: v for x in sessions if (v := check_session(x))}
    statuses = steps_df.group_by("status").len().to_dicts() if steps_df.height else []
    yield dg.MaterializeResult(
        metadata={
            "dagster/row_count": sess_df.height,
            "steps": steps_df.height,
            "mean_speedup": float(sess_df["best"].struct.field("speedup").mean() or 0) if sess_df.height else 0.0,
            "statuses": dg.MetadataValue.json({r["status"]: r["len"] for r in statuses}),
        }
    )
    yield dg.AssetCheckResult(
        check_name="session_invariants",
        passed=not violations,
        metadata={
            "sessions_checked": len(sessions),
            "violations": dg.MetadataValue.json(dict(list(violations.items())[:10])),
        },
    )


