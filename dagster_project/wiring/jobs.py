"""Jobs: one per layer, for manual runs from the UI and for the refresh schedule."""

from __future__ import annotations

import dagster as dg

# One job per layer. A job needs one partitions definition, so the simulated layer is
# two jobs: kernelinfer (sim_tasks + its shards) and kernelswarm (its shards).
LAYERS = (
    "sources",
    "tuned_configs",
    "kernel_commits",
    "pull_requests",
    "gains",
    "publish",
    "analysis",
)


def all_jobs() -> list[dg.UnresolvedAssetJobDefinition]:
    jobs = [
        dg.define_asset_job(
            f"{layer}_job",
            selection=dg.AssetSelection.groups(layer),
            description=f"Materialise the {layer} layer.",
        )
        for layer in LAYERS
    ]
    jobs.append(
        dg.define_asset_job(
            "kernelinfer_job",
            selection=dg.AssetSelection.assets("sim_tasks", "kernelinfer_sessions"),
            description="Generate the kernelinfer task specs and session shards.",
        )
    )
    jobs.append(
        dg.define_asset_job(
            "kernelswarm_job",
            selection=dg.AssetSelection.assets("kernelswarm_episodes"),
            description="Generate the kernelswarm episode shards.",
        )
    )
    return jobs
