"""Asset checks that span assets: every ``expectations/<suite>.json`` as a Dagster asset
check on its asset.

One factory, so every suite gets the same behaviour: blocking when the suite says so,
per-expectation summary, observed vs expected and a sample of failing rows as metadata,
results also recorded in ``derived.quality_results`` for SQL and for the publish gate.
The suites and their runner stay Dagster-free in ``dagster_project/quality``; this is the
glue that registers them, beside the other Dagster wiring. Per-asset SQL checks live
beside their assets.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import dagster as dg

from dagster_project.quality.suites import SuiteError, load_suite, suite_files
from dagster_project.wiring.resources import LakeResource
from dagster_project.wiring.table_metadata import expectations_table


def _make_check(path: Path, suite: dict) -> dg.AssetChecksDefinition:
    kh = suite["meta"]["kernelhouse"]
    blocking = bool(kh.get("blocking", False))
    name = f"gx_{suite['name']}"

    @dg.asset_check(
        asset=dg.AssetKey(kh["asset"]),
        name=name,
        blocking=blocking,
        description=kh.get("description") or f"Great Expectations suite {path.name}",
    )
    def _check(lake: LakeResource) -> dg.AssetCheckResult:
        from dagster_project.quality.results import record
        from dagster_project.quality.suites import run_suite

        handle = lake.lake()
        result = run_suite(load_suite(path), handle.path)
        record(handle, result)
        return to_check_result(result)

    return _check


def to_check_result(result) -> dg.AssetCheckResult:  # noqa: ANN001
    failed = result.failed
    md: dict[str, dg.MetadataValue] = {
        "suite": dg.MetadataValue.text(result.suite),
        "rows": dg.MetadataValue.int(result.rows),
        "expectations": dg.MetadataValue.int(len(result.outcomes)),
        "failed": dg.MetadataValue.int(len(failed)),
        "seconds": dg.MetadataValue.float(round(result.seconds, 3)),
        "summary": dg.MetadataValue.json(result.summary()),
        # One row per expectation, shown by the UI as a table (the JSON above stays
        # for scripts that read it).
        "expectations_table": expectations_table(result.outcomes),
    }
    if result.not_evaluated:
        md["status"] = dg.MetadataValue.text(f"not evaluated: {result.not_evaluated}")
    if failed:
        md["failing_rows_sample"] = dg.MetadataValue.json(
            {f"{o.type}:{o.column or ''}": o.sample for o in failed}
        )
        md["failed_expectations"] = dg.MetadataValue.text(
            "; ".join(f"{o.type}({o.column or ''}) observed={o.observed}" for o in failed)
        )
    return dg.AssetCheckResult(
        passed=result.success,
        severity=dg.AssetCheckSeverity.ERROR if result.blocking else dg.AssetCheckSeverity.WARN,
        metadata=md,
        description=f"not evaluated: {result.not_evaluated}" if result.not_evaluated else None,
    )


def gx_checks(
    asset_keys: Iterable[dg.AssetKey] | None = None, directory: Path | None = None
) -> list[dg.AssetChecksDefinition]:
    """A check per suite file whose asset exists (suites of layers not built yet wait)."""
    known = {k.to_user_string() for k in asset_keys} if asset_keys is not None else None
    checks = []
    for path in suite_files(directory):
        suite = load_suite(path)
        if known is not None and suite["meta"]["kernelhouse"]["asset"] not in known:
            continue
        checks.append(_make_check(path, suite))
    return checks


def all_checks(asset_keys: Iterable[dg.AssetKey]) -> list[dg.AssetChecksDefinition]:
    """The GX checks of the assets ``definitions.py`` assembles."""
    return gx_checks(asset_keys)


__all__ = ["SuiteError", "all_checks", "gx_checks", "to_check_result"]
