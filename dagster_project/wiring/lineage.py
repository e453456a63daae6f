"""Asset dependencies from the one lineage declaration (``storage/lineage.py``).

Why: ``deps`` typed by hand beside each asset drifted from the tables its code read.
An asset's ``deps`` are now the writers of the tables its declaration reads, and its
``table`` metadata the tables it writes, so the decorator cannot disagree with the lake
handle, which refuses undeclared reads at run time.
"""

from __future__ import annotations

import dagster as dg

from dagster_project.storage import lineage


def deps(asset: str) -> list[dg.AssetKey]:
    """The asset keys ``asset`` depends on (writers of what it reads, file deps)."""
    return [dg.AssetKey(name) for name in lineage.upstream(asset)]


def tables(asset: str) -> dict[str, str]:
    """Asset metadata naming the tables ``asset`` reads and writes (shown in the UI)."""
    acc = lineage.access(asset)
    out = {"tables": ", ".join(acc.writes)} if acc.writes else {}
    if len(acc.writes) == 1:
        out["table"] = acc.writes[0]
    if acc.reads:
        out["reads"] = ", ".join(acc.reads)
    return out
