"""Asset checks that span several assets (per-asset checks live beside their assets).

The Great Expectations layer (``dagster_project/quality``) contributes its suites here.
"""

from __future__ import annotations

import dagster as dg


def all_checks() -> list[dg.AssetChecksDefinition]:
    from dagster_project.quality.factory import gx_checks

    return gx_checks()
