"""Jobs: one per layer, for manual runs from the UI and for the refresh schedule."""

from __future__ import annotations

import dagster as dg

LAYERS = (
    "sources",
    "tuned_configs",
    "kernel_commits",
    "pull_requests",
    "gains",
    "simulated",
    "publish",
    "analysis",
)


def all_jobs() -> list[dg.UnresolvedAssetJobDefinition]:
    return [
        dg.define_asset_job(
            f"{layer}_job",
            selection=dg.AssetSelection.groups(layer),
            description=f"Materialise the {layer} layer.",
        )
        for layer in LAYERS
    ]
