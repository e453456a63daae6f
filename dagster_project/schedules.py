"""Schedules: the daily incremental refresh."""

from __future__ import annotations

import dagster as dg


def all_schedules() -> list[dg.ScheduleDefinition]:
    return []
