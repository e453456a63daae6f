"""Turns ``expectations/<asset>.json`` suites into Dagster asset checks."""

from __future__ import annotations

import dagster as dg


def gx_checks() -> list[dg.AssetChecksDefinition]:
    return []
