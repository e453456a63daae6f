"""publish layer: RL-ready exports under ``exports/`` and the opt-in Hub push.

Every export refuses to run while a blocking quality gate of its inputs is failing (or
was never checked); the message names the failing expectations.
"""

import dagster as dg

from dagster_project.execution import policy
from dagster_project.wiring import lineage
from dagster_project.wiring.resources import LakeResource
from dagster_project.wiring.table_metadata import asset_metadata

GROUP = "publish"


def _gate(lake: LakeResource, assets: list[str]) -> None:
    from dagster_project.quality.results import failing_gates

    bad = failing_gates(lake.lake(), assets)
    if bad:
        raise dg.Failure(
            description="publication blocked by failing quality gates: " + "; ".join(bad)
        )


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    group_name=GROUP,
    kinds={"parquet", "huggingface"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("kernel_opt_rl_export"),
    description=(
        "kernel-opt-rl export: Parquet per config and split, dataset card, code/reward.py, "
        "licenses/."
    ),
)
def kernel_opt_rl_export(lake: LakeResource) -> dg.MaterializeResult:
    """Write exports/kernel-opt-rl (atomically swapped in)."""
    from dagster_project.publish import export_kernel_opt_rl, read_snapshot, upstream_notice_files
    from dagster_project.rewards import render_reward_module

    handle = lake.lake()
    # pr_tasks (issue 41) is exported, and so gated, only where it is built.
    pr_tasks = ["pr_tasks"] if handle.table_exists("datasets", "pr_tasks") else []
    _gate(lake, ["tuned_configs", "kernel_commits", "pr_gains", *pr_tasks])
    snapshot = read_snapshot(handle)
    licenses = {}
    for row in snapshot:
        git, head = lake.repo_snapshot(row["repo"])
        licenses[row["repo"]] = upstream_notice_files(git, head)
    settings = lake.settings()
    report = export_kernel_opt_rl(
        handle,
        settings.exports_dir / "kernel-opt-rl",
        reward_module=render_reward_module(),
        licenses=licenses,
        snapshot=snapshot,
        repo_id=f"{settings.hub_repo_prefix}-kernel-opt-rl" if settings.hub_repo_prefix else None,
    )
    return dg.MaterializeResult(
        metadata={"dagster/row_count": sum(report.rows.values()), **report.metadata()}
    )


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    group_name=GROUP,
    kinds={"json", "huggingface"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("kernelinfer_export"),
    description=(
        "kernelinfer export: batches/*.jsonl, sessions.jsonl, tasks_holdout.jsonl, stats.json, "
        "card."
    ),
)
def kernelinfer_export(lake: LakeResource) -> dg.MaterializeResult:
    """Write exports/kernelinfer in the card's layout."""
    from dagster_project.publish import CompileValidation, export_kernelinfer
    from dagster_project.sim import GENERATOR_VERSION

    settings = lake.settings()
    handle = lake.lake()
    validation = None
    cv = handle.read_table_or_none("sim", "compile_validation")
    if cv is not None and cv.height:
        # "compiled" in the card = instantiations whose real compile agreed with the simulator.
        validation = CompileValidation(
            checked=cv.height, compiled=int(cv["agree"].sum()), toolchain="nvcc + ast"
        )
    report = export_kernelinfer(
        handle,
        settings.exports_dir / "kernelinfer",
        compile_validation=validation,
        build={"generator_version": GENERATOR_VERSION, "seed": settings.sim_seed},
        repo_id=f"{settings.hub_repo_prefix}-kernelinfer" if settings.hub_repo_prefix else None,
    )
    return dg.MaterializeResult(
        metadata={"dagster/row_count": sum(report.rows.values()), **report.metadata()}
    )


@dg.asset(
    automation_condition=policy.on_inputs_changed(),
    group_name=GROUP,
    kinds={"json", "huggingface"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("kernelswarm_export"),
    description=(
        "kernelswarm export: batches/batch_*.jsonl, episodes.jsonl, tasks_holdout.jsonl, "
        "stats.json, card."
    ),
)
def kernelswarm_export(lake: LakeResource) -> dg.MaterializeResult:
    """Write exports/kernelswarm in the card's layout."""
    from dagster_project.publish import export_kernelswarm
    from dagster_project.sim import GENERATOR_VERSION
    from dagster_project.sim.swarm.spec import SWARM_VERSION

    settings = lake.settings()
    report = export_kernelswarm(
        lake.lake(),
        settings.exports_dir / "kernelswarm",
        build={
            "generator_version": GENERATOR_VERSION,
            "swarm_version": SWARM_VERSION,
            "seed": settings.sim_seed,
        },
        repo_id=f"{settings.hub_repo_prefix}-kernelswarm" if settings.hub_repo_prefix else None,
    )
    return dg.MaterializeResult(
        metadata={"dagster/row_count": sum(report.rows.values()), **report.metadata()}
    )


@dg.asset(
    # No automation_condition: publishing to the Hub is a deliberate act.
    group_name=GROUP,
    kinds={"huggingface"},
    owners=["team:kernelhouse"],
    deps=lineage.deps("hub_push"),
    description=(
        "Opt-in push of every export to the Hub (only with KERNELHOUSE_HUB_REPO_PREFIX and "
        "HF_TOKEN)."
    ),
)
def hub_push(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """One commit per dataset; never pushes while a blocking gate fails."""
    from dagster_project.publish.hub import push_exports

    metadata = push_exports(lake.lake(), lake.settings(), context.log.info)
    return dg.MaterializeResult(metadata=asset_metadata(None, metadata))
