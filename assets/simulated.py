"""Simulated layer: kernelinfer task specs and single-agent sessions, in 100-session
shards written as Parquet partitions (viewed as ``sim.kernelinfer_*``).

Shards are pure functions of (task list, seed, generator version): ``code_version`` is
the generator version, so an unchanged generator means unchanged shards on refresh.
kernelinfer shards also carry what their speedup labels are a function of (issue 36, 36p:
every session is labelled with the evidence shipped for its GPU): the label policy's and the
code model's versions and a fingerprint of the shipped answers, so new answers regenerate them.
"""

import dagster as dg

from dagster_project.execution import policy
from dagster_project.sim import GENERATOR_VERSION
from dagster_project.sim.label_columns import evidence_version
from dagster_project.sim.online_tier import code_version as online_code_version
from dagster_project.sim.swarm.spec import SWARM_VERSION
from dagster_project.sim.verification import VERIFICATION_VERSION
from dagster_project.storage.versions import table_version
from dagster_project.wiring import lineage
from dagster_project.wiring.partitions import kernelinfer_shards, kernelswarm_shards
from dagster_project.wiring.resources import LakeResource
from dagster_project.wiring.table_metadata import (
    check_result,
    materialize_result,
    table_rows,
    table_schema,
)


@dg.asset(
    automation_condition=policy.on_missing_or_new_code(),
    tags={policy.CODE_VERSION_TAG: policy.SIM_PARAMS},
    group_name="simulated",
    kinds={"python", "duckdb"},
    owners=["team:kernelhouse"],
    code_version=GENERATOR_VERSION,
    metadata=lineage.tables("sim_tasks"),
    description=(
        "kernelinfer task specs (op, gpu, shape, dtype) and the held-out specs no session uses."
    ),
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
    metadata=lineage.tables("sim_rung_verification"),
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
    deps=lineage.deps("kernelinfer_sessions"),
    code_version=f"{GENERATOR_VERSION}+labels-{evidence_version()}",
    check_specs=[
        dg.AssetCheckSpec("session_invariants", asset="kernelinfer_sessions", blocking=True)
    ],
    metadata=lineage.tables("kernelinfer_sessions"),
    description="One shard of 100 simulated single-agent optimisation sessions (Parquet).",
)
def kernelinfer_sessions(context: dg.AssetExecutionContext, lake: LakeResource):  # noqa: ANN201
    """Generate one shard, write its session and step partitions, check every session."""
    from dagster_project.sim.shards import kernelinfer_shard

    s = lake.settings()
    handle = lake.lake()
    out = kernelinfer_shard(
        handle, context.partition_key, seed=s.sim_seed, n_sessions=s.sim_sessions
    )
    own = int(out.metadata["dagster/row_count"])
    metadata = {**out.metadata, **table_rows(handle, "sim.kernelinfer_sessions", own)}
    yield materialize_result(handle, metadata, data_version=out.data_version)
    yield check_result(out.check)


@dg.asset(
    automation_condition=policy.on_missing_or_new_code(),
    tags={policy.CODE_VERSION_TAG: policy.SIM_PARAMS, policy.SHARDS_TAG: "sim_episodes"},
    group_name="simulated",
    kinds={"python", "parquet"},
    owners=["team:kernelhouse"],
    partitions_def=kernelswarm_shards,
    deps=lineage.deps("kernelswarm_episodes"),
    code_version=f"{GENERATOR_VERSION}+swarm-{SWARM_VERSION}",
    check_specs=[
        dg.AssetCheckSpec("episode_invariants", asset="kernelswarm_episodes", blocking=True)
    ],
    metadata=lineage.tables("kernelswarm_episodes"),
    description=(
        "One shard of 100 simulated multi-agent optimisation episodes with per-result rewards "
        "(Parquet)."
    ),
)
def kernelswarm_episodes(context: dg.AssetExecutionContext, lake: LakeResource):  # noqa: ANN201
    """Generate one shard of episodes; write episodes, agents and messages partitions."""
    from dagster_project.sim.shards import kernelswarm_shard

    s = lake.settings()
    handle = lake.lake()
    out = kernelswarm_shard(
        handle, context.partition_key, seed=s.sim_seed, n_episodes=s.sim_episodes
    )
    own = int(out.metadata["dagster/row_count"])
    metadata = {**out.metadata, **table_rows(handle, "sim.kernelswarm_episodes", own)}
    yield materialize_result(handle, metadata, data_version=out.data_version)
    yield check_result(out.check)


@dg.asset(
    automation_condition=policy.on_missing_or_new_code(),
    tags={policy.CODE_VERSION_TAG: policy.SIM_PARAMS},
    group_name="simulated",
    kinds={"python", "duckdb"},
    owners=["team:kernelhouse"],
    code_version=GENERATOR_VERSION,
    metadata=lineage.tables("sim_compile_validation"),
    description=(
        "Compiles a stratified sample of CUDA/Triton template instantiations with nvcc / ast; "
        "records agreement with the simulator."
    ),
)
def sim_compile_validation(
    context: dg.AssetExecutionContext, lake: LakeResource
) -> dg.MaterializeResult:
    """Where the simulator says 'compiles', nvcc must compile it; injected errors must fail.

    Sample size: ``KERNELHOUSE_SIM_COMPILE_SAMPLE`` (default 48; 0 = every class).
    """
    import tempfile

    import polars as pl

    from dagster_project.sim.compile_check import (
        compile_sample,
        load_shipped_answers,
        nvcc_path,
        summarize,
    )

    s = lake.settings()
    n = s.sim_compile_sample
    if nvcc_path() is None:
        context.log.warning("nvcc not found: only Triton candidates are checked (ast)")
    with tempfile.TemporaryDirectory(prefix="kh-nvcc-") as work:
        # nvcc answers are kept by (toolchain, flags, rendered source) hash in the home,
        # so a rebuild with unchanged templates compiles nothing (compile_check.NvccCache);
        # the package's shipped answers of the same nvcc build serve a cold build.
        records = compile_sample(
            n or None,
            s.sim_seed,
            work,
            cache_dir=s.home / "cache" / "nvcc",
            shipped=load_shipped_answers() if s.sim_compile_shipped else None,
        )
    df = pl.DataFrame(records, infer_schema_length=None) if records else pl.DataFrame()
    lake.lake().replace_table("sim", "compile_validation", df)
    summary = summarize(records)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(records),
            **table_schema(lake.lake(), "sim.compile_validation"),
            "agreement": float(summary.get("agreement", 0.0)),
            "nvcc": nvcc_path() or "not found",
            "answers": dg.MetadataValue.json(summary.get("answers", {})),
            "by_stratum": dg.MetadataValue.json(summary.get("by_stratum", {})),
            "disagreements": dg.MetadataValue.json(summary.get("disagreements", [])),
        }
    )


@dg.asset(
    automation_condition=policy.on_missing_or_new_code(),
    tags=policy.lineage_tags("kernelinfer_online"),
    group_name="simulated",
    kinds={"python", "duckdb"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("kernelinfer_online"),
    code_version=online_code_version(),
    check_specs=[dg.AssetCheckSpec("online_replay", asset="kernelinfer_online", blocking=True)],
    metadata=lineage.tables("kernelinfer_online"),
    description=(
        "The online measured tier (issue 36): H100/H200 sessions generated against the GPU, "
        "every compiled step measured, replayed here from the shipped answers and checked "
        "byte for byte against the device's digests."
    ),
)
def kernelinfer_online(context: dg.AssetExecutionContext, lake: LakeResource):  # noqa: ANN201
    """Replay the shipped online sessions with a strict oracle, write both tables, and fail
    the blocking check when any listed session does not replay identically."""
    from dagster_project.sim.online_tier import materialise

    handle = lake.lake()
    out = materialise(handle)
    yield materialize_result(handle, out.metadata, data_version=out.data_version)
    yield check_result(out.check)
