"""Simulated layer: kernelinfer task specs and single-agent sessions, in 100-session
shards written as Parquet partitions (viewed as ``sim.kernelinfer_*``).

Shards are pure functions of (task list, seed, generator version): ``code_version`` is
the generator version, so an unchanged generator means unchanged shards on refresh.
"""

import dagster as dg

from dagster_project.execution import policy
from dagster_project.partitions import kernelinfer_shards, kernelswarm_shards
from dagster_project.resources import LakeResource
from dagster_project.sim import GENERATOR_VERSION
from dagster_project.sim.swarm.spec import SWARM_VERSION
from dagster_project.sim.verification import VERIFICATION_VERSION
from dagster_project.table_metadata import table_schema
from dagster_project.versions import params_version, table_version


@dg.asset(
    automation_condition=policy.on_missing_or_new_code(),
    tags={policy.CODE_VERSION_TAG: policy.SIM_PARAMS},
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
        data_version=dg.DataVersion(
            table_version(handle, "sim.kernelinfer_tasks", "sim.kernelinfer_tasks_holdout")
        ),
        metadata={
            "dagster/row_count": len(tasks),
            **table_schema(lake.lake(), "sim.kernelinfer_tasks"),
            "holdout": len(holdout),
            "seed": s.sim_seed,
            "ops": len({t.op for t in tasks}),
        },
    )


@dg.asset(
    automation_condition=policy.on_missing_or_new_code(),
    tags={policy.CODE_VERSION_TAG: policy.SIM_PARAMS},
    group_name="simulated",
    kinds={"python", "duckdb"},
    owners=["team:kernelhouse"],
    code_version=f"{GENERATOR_VERSION}+verification-{VERIFICATION_VERSION}",
    metadata={"table": "sim.rung_verification"},
    description=(
        "Execution-grounded status of every (op, impl, rung, arch family) the simulator can emit: "
        "nvcc compile status under the prompt's flags, H200 correctness and time (shipped CSVs)."
    ),
)
def sim_rung_verification(
    context: dg.AssetExecutionContext, lake: LakeResource
) -> dg.MaterializeResult:
    """Write ``sim.rung_verification`` from the shipped evidence files (no GPU needed)."""
    import polars as pl

    from dagster_project.sim.verification import summary, verification_rows

    rows = verification_rows()
    handle = lake.lake()
    handle.replace_table("sim", "rung_verification", pl.DataFrame(rows, infer_schema_length=None))
    stats = summary()
    return dg.MaterializeResult(
        data_version=dg.DataVersion(table_version(handle, "sim.rung_verification")),
        metadata={
            "dagster/row_count": len(rows),
            **table_schema(lake.lake(), "sim.rung_verification"),
            "verified": stats["verified"],
            "wrong": stats["wrong"],
            "unverified": stats["unverified"],
            "by_impl_family": dg.MetadataValue.json(stats["by_impl_family"]),
            "wrong_on_sm_90a": dg.MetadataValue.json(stats["wrong_rungs"]),
        },
    )


@dg.asset(
    automation_condition=policy.on_missing_or_new_code(),
    tags={policy.CODE_VERSION_TAG: policy.SIM_PARAMS, policy.SHARDS_TAG: "sim_sessions"},
    group_name="simulated",
    kinds={"python", "parquet"},
    owners=["team:kernelhouse"],
    partitions_def=kernelinfer_shards,
    deps=[sim_tasks, sim_rung_verification],
    code_version=GENERATOR_VERSION,
    check_specs=[
        dg.AssetCheckSpec("session_invariants", asset="kernelinfer_sessions", blocking=True)
    ],
    metadata={"tables": "sim.kernelinfer_sessions, sim.kernelinfer_steps"},
    description="One shard of 100 simulated single-agent optimisation sessions (Parquet).",
)
def kernelinfer_sessions(context: dg.AssetExecutionContext, lake: LakeResource):  # noqa: ANN201
    """Generate one shard, write its session and step partitions, check every session."""
    from dagster_project.sim.kernelinfer import (
        check_session,
        generate_shard,
        n_shards,
        session_frames,
    )

    s = lake.settings()
    shard = int(context.partition_key)
    handle = lake.lake()
    # A shard is a pure function of these: an exact data version at no cost.
    version = dg.DataVersion(
        params_version(
            generator=GENERATOR_VERSION, seed=s.sim_seed, sessions=s.sim_sessions, shard=shard
        )
    )
    if shard >= n_shards(s.sim_sessions):
        # A smaller build (KERNELHOUSE_SIM_SESSIONS) has no such shard: drop any stale file.
        for table in ("kernelinfer_sessions", "kernelinfer_steps"):
            handle.delete_partition(table, context.partition_key)
        yield dg.MaterializeResult(
            data_version=version,
            metadata={"dagster/row_count": 0, "note": f"beyond {s.sim_sessions} sessions"},
        )
        yield dg.AssetCheckResult(
            check_name="session_invariants", passed=True, metadata={"sessions_checked": 0}
        )
        return
    sessions = generate_shard(shard, seed=s.sim_seed, n_sessions=s.sim_sessions)
    sess_df, steps_df = session_frames(sessions, shard)
    handle.write_partition("kernelinfer_sessions", context.partition_key, sess_df)
    handle.write_partition("kernelinfer_steps", context.partition_key, steps_df)
    handle.refresh_view("sim", "kernelinfer_sessions")
    handle.refresh_view("sim", "kernelinfer_steps")
    violations = {x["session_id"]: v for x in sessions if (v := check_session(x))}
    statuses = steps_df.group_by("status").len().to_dicts() if steps_df.height else []
    yield dg.MaterializeResult(
        data_version=version,
        metadata={
            "dagster/row_count": sess_df.height,
            **table_schema(lake.lake(), "sim.kernelinfer_sessions"),
            "steps": steps_df.height,
            "mean_speedup": float(sess_df["best"].struct.field("speedup").mean() or 0)
            if sess_df.height
            else 0.0,
            "statuses": dg.MetadataValue.json({r["status"]: r["len"] for r in statuses}),
        },
    )
    yield dg.AssetCheckResult(
        check_name="session_invariants",
        passed=not violations,
        metadata={
            "sessions_checked": len(sessions),
            "violations": dg.MetadataValue.json(dict(list(violations.items())[:10])),
        },
    )


@dg.asset(
    automation_condition=policy.on_missing_or_new_code(),
    tags={policy.CODE_VERSION_TAG: policy.SIM_PARAMS, policy.SHARDS_TAG: "sim_episodes"},
    group_name="simulated",
    kinds={"python", "parquet"},
    owners=["team:kernelhouse"],
    partitions_def=kernelswarm_shards,
    deps=[sim_rung_verification],
    code_version=f"{GENERATOR_VERSION}+swarm-{SWARM_VERSION}",
    check_specs=[
        dg.AssetCheckSpec("episode_invariants", asset="kernelswarm_episodes", blocking=True)
    ],
    metadata={
        "tables": "sim.kernelswarm_episodes, sim.kernelswarm_agents, sim.kernelswarm_messages, sim.kernelswarm_tasks_holdout"
    },
    description="One shard of 100 simulated multi-agent optimisation episodes with per-result rewards (Parquet).",
)
def kernelswarm_episodes(context: dg.AssetExecutionContext, lake: LakeResource):  # noqa: ANN201
    """Generate one shard of episodes; write episodes, agents and messages partitions."""
    from dagster_project.sim.kernelswarm import (
        build_swarm_tasks,
        check_episode,
        episode_frames,
        generate_swarm_shard,
        swarm_holdout_frame,
    )

    s = lake.settings()
    shard = int(context.partition_key)
    version = dg.DataVersion(
        params_version(
            generator=GENERATOR_VERSION,
            swarm=SWARM_VERSION,
            seed=s.sim_seed,
            episodes=s.sim_episodes,
            shard=shard,
        )
    )
    episodes = generate_swarm_shard(shard, seed=s.sim_seed, n_episodes=s.sim_episodes)
    handle = lake.lake()
    if not episodes:
        # A smaller build (KERNELHOUSE_SIM_EPISODES) has no such shard: drop any stale file.
        for table in ("kernelswarm_episodes", "kernelswarm_agents", "kernelswarm_messages"):
            handle.delete_partition(table, context.partition_key)
        yield dg.MaterializeResult(
            data_version=version,
            metadata={"dagster/row_count": 0, "note": f"beyond {s.sim_episodes} episodes"},
        )
        yield dg.AssetCheckResult(
            check_name="episode_invariants", passed=True, metadata={"episodes_checked": 0}
        )
        return
    ep_df, agents_df, msgs_df = episode_frames(episodes, shard)
    for table, df in (
        ("kernelswarm_episodes", ep_df),
        ("kernelswarm_agents", agents_df),
        ("kernelswarm_messages", msgs_df),
    ):
        handle.write_partition(table, context.partition_key, df)
        handle.refresh_view("sim", table)
    if shard == 0:  # the holdout is a property of the whole build; shard 0 owns it
        _, holdout = build_swarm_tasks(s.sim_seed, s.sim_episodes)
        handle.replace_table("sim", "kernelswarm_tasks_holdout", swarm_holdout_frame(holdout))
    violations = {e["episode_id"]: v for e in episodes if (v := check_episode(e))}
    yield dg.MaterializeResult(
        data_version=version,
        metadata={
            "dagster/row_count": ep_df.height,
            **table_schema(lake.lake(), "sim.kernelswarm_episodes"),
            "messages": msgs_df.height,
            "mean_agents": float(ep_df["n_agents"].mean() or 0) if ep_df.height else 0.0,
            "scenarios": dg.MetadataValue.json(dict(ep_df.group_by("scenario").len().iter_rows()))
            if ep_df.height
            else {},
        },
    )
    yield dg.AssetCheckResult(
        check_name="episode_invariants",
        passed=not violations,
        metadata={
            "episodes_checked": len(episodes),
            "violations": dg.MetadataValue.json(dict(list(violations.items())[:10])),
        },
    )


@dg.asset(
    automation_condition=policy.on_missing_or_new_code(),
    tags={policy.CODE_VERSION_TAG: policy.SIM_PARAMS},
    group_name="simulated",
    kinds={"python", "duckdb"},
    owners=["team:kernelhouse"],
    code_version=GENERATOR_VERSION,
    metadata={"table": "sim.compile_validation"},
    description="Compiles a stratified sample of CUDA/Triton template instantiations with nvcc / ast; records agreement with the simulator.",
)
def sim_compile_validation(
    context: dg.AssetExecutionContext, lake: LakeResource
) -> dg.MaterializeResult:
    """Where the simulator says 'compiles', nvcc must compile it; injected errors must fail.

    Sample size: ``KERNELHOUSE_SIM_COMPILE_SAMPLE`` (default 48; 0 = every class).
    """
    import tempfile

    import polars as pl

    from dagster_project.sim.compile_check import compile_sample, nvcc_path, summarize

    s = lake.settings()
    n = s.sim_compile_sample
    if nvcc_path() is None:
        context.log.warning("nvcc not found: only Triton candidates are checked (ast)")
    with tempfile.TemporaryDirectory(prefix="kh-nvcc-") as work:
        # nvcc answers are kept by (toolchain, flags, rendered source) hash in the home,
        # so a rebuild with unchanged templates compiles nothing (compile_check.NvccCache).
        records = compile_sample(n or None, s.sim_seed, work, cache_dir=s.home / "cache" / "nvcc")
    df = pl.DataFrame(records, infer_schema_length=None) if records else pl.DataFrame()
    lake.lake().replace_table("sim", "compile_validation", df)
    summary = summarize(records)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(records),
            **table_schema(lake.lake(), "sim.compile_validation"),
            "agreement": float(summary.get("agreement", 0.0)),
            "nvcc": nvcc_path() or "not found",
            "nvcc_cached": sum(1 for r in records if r.get("cached")),
            "by_stratum": dg.MetadataValue.json(summary.get("by_stratum", {})),
            "disagreements": dg.MetadataValue.json(summary.get("disagreements", [])),
        }
    )
