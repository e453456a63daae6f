"""Asset checks that span assets: the Great Expectations suites in ``expectations/``.

Per-asset SQL checks live beside their assets; the GX layer lives in
``dagster_project/quality``.
"""

from __future__ import annotations

from collections.abc import Iterable

import dagster as dg


def all_checks(asset_keys: Iterable[dg.AssetKey]) -> list[dg.AssetChecksDefinition]:
    from dagster_project.quality.factory import gx_checks

    return gx_checks(asset_keys)
