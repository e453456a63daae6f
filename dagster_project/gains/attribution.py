"""From a PR's measurements to the per-row gain fields of the two mined subsets.

``kernel_commits``: ``kernel_speedup`` / ``e2e_speedup`` are the **median documented
speedup per scope** over the PR's *audited* measurements (audit-failed ones stay in
``gains`` with their flags, never in a speedup column). "Documented" means the computed
``speedup`` of a baseline/optimized pair, or the ``stated_speedup`` when the PR gave only
a ratio. The median (not the mean or max) because PRs often include a few outlier shapes
("up to 4x") next to many ordinary ones, and the card reports medians.

``tuned_configs``: ``config_pr_gains`` is every measurement of the newest PR that touched
the config file (as the card defines it); ``speedup_vs_default`` is set only when the
attribution to *this* row is unambiguous:

1. the measurement passed the audit, is kernel-scoped (end-to-end numbers depend on far
   more than one launch config) and has a documented speedup;
2. its GPU matches the row's (:func:`~dagster_project.gains.mentions.gpu_matches`:
   families equal; form factor and memory compared only when both sides state them, so
   "H100" matches ``NVIDIA_H100_80GB_HBM3`` but "H100 PCIe" does not);
3. its shape matches: every dimension stated on both sides (E, N, K) is equal and at least
   one is shared;
4. its batch size equals the row's ``M``;
5. if several measurements match, they agree within 5% (max/min ≤ 1.05); the value is
   then their median. A single matching measurement is unambiguous by itself.

When the caller knows the PR changed only this one config file it can pass
``implied_by_pr=True``: a measurement that states no GPU or no shape is then taken to be
about this file (anything it *does* state must still match).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dagster_project.gains.mentions import gpu_matches, parse_shape
from dagster_project.gains.schema import Measurement

AGREEMENT_TOLERANCE = 0.05
_DIMS = ("E", "N", "K")


def _as_measurement(m: Measurement | Mapping[str, Any]) -> Measurement:
    return m if isinstance(m, Measurement) else Measurement.from_dict(dict(m))


def documented_speedup(m: Measurement | Mapping[str, Any]) -> float | None:
    """Computed speedup if there is a pair, else the stated ratio."""
    return _as_measurement(m).documented_speedup


def median_speedup(
    gains: Iterable[Measurement | Mapping[str, Any]], scope: str, *, require_audit: bool = True
) -> float | None:
    """Median documented speedup of the measurements with this scope (``None`` if none).

    Only audited measurements count (:attr:`Measurement.usable_speedup`): an audit-failed
    or never-audited value is kept in ``gains`` with its flags but never feeds
    ``kernel_speedup`` / ``e2e_speedup``. ``require_audit=False`` is for tests of the
    arithmetic alone.
    """
    values: list[float] = []
    for raw in gains:
        m = _as_measurement(raw)
        if m.scope != scope:
            continue
        s = m.usable_speedup if require_audit else m.documented_speedup
        if s is not None and s > 0:
            values.append(s)
    return round(statistics.median(values), 4) if values else None


def kernel_commit_speedups(
    gains: Iterable[Measurement | Mapping[str, Any]], *, require_audit: bool = True
) -> dict[str, float | None]:
    """``{"kernel_speedup": …, "e2e_speedup": …}`` for a kernel_commits row."""
    items = [_as_measurement(g) for g in gains]
    return {
        "kernel_speedup": median_speedup(items, "kernel", require_audit=require_audit),
        "e2e_speedup": median_speedup(items, "e2e", require_audit=require_audit),
    }


@dataclass
class ConfigAttribution:
    """Result of attributing a PR's measurements to one tuned-config row."""

    speedup_vs_default: float | None
    matched: list[Measurement] = field(default_factory=list)
    reason: str = ""


def _row_value(row: Mapping[str, Any], *names: str) -> Any:
    for n in names:
        for key in (n, n.lower(), n.upper()):
            if key in row and row[key] is not None:
                return row[key]
    return None


def _row_dims(row: Mapping[str, Any]) -> dict[str, int]:
    dims: dict[str, int] = {}
    for d in _DIMS:
        v = _row_value(row, d)
        if v is not None:
            try:
                dims[d] = int(v)
            except (TypeError, ValueError):
                continue
    name = _row_value(row, "config_file", "filename", "file_name", "path")
    if isinstance(name, str):
        for d, v in parse_shape(name.rsplit("/", 1)[-1]).items():
            if d in _DIMS:
                dims.setdefault(d, v)
    return dims


def _row_gpu(row: Mapping[str, Any]) -> str | None:
    gpu = _row_value(row, "gpu", "device_name", "hardware")
    if gpu:
        return str(gpu)
    name = _row_value(row, "config_file", "filename", "file_name", "path")
    if isinstance(name, str):
        m = re.search(r"device_name=([^,]+?)(?:,|\.json|$)", name)
        if m:
            return m.group(1)
    return None


def _row_m(row: Mapping[str, Any]) -> int | None:
    """The row's ``M`` (or ``batch_size``) as an int, ``None`` when missing or not a number."""
    m_value = _row_value(row, "M", "batch_size")
    try:
        return int(m_value) if m_value is not None else None
    except (TypeError, ValueError):
        return None


def _matches_row(
    m: Measurement, row_m: int, gpu: str | None, dims: dict[str, int], implied_by_pr: bool
) -> bool:
    """Whether one measurement speaks for the row: a usable kernel speedup at the row's M,
    on its GPU (or none named, when the PR implies the config) and of no other shape."""
    # audit-failed measurements never feed speedup_vs_default (see usable_speedup)
    if m.scope != "kernel" or m.usable_speedup is None:
        return False
    if m.batch_size != row_m:
        return False
    if m.hardware:
        if not gpu or not gpu_matches(m.hardware, gpu):
            return False
    elif not implied_by_pr:
        return False
    mdims = {k: v for k, v in parse_shape(m.shape).items() if k in _DIMS}
    shared = set(mdims) & set(dims)
    if any(mdims[d] != dims[d] for d in shared):
        return False
    return not (not shared and not (implied_by_pr and not mdims))


def config_speedup_vs_default(
    row: Mapping[str, Any],
    gains: Iterable[Measurement | Mapping[str, Any]],
    *,
    implied_by_pr: bool = False,
    tolerance: float = AGREEMENT_TOLERANCE,
) -> ConfigAttribution:
    """Attribute ``gains`` to one tuned-config row (see the module docstring for rules).

    ``row`` needs the GPU (``gpu`` or ``device_name``), the shape (``E``/``N``/``K``
    columns, or a ``config_file`` name such as ``E=8,N=14336,device_name=….json``) and
    ``M`` (or ``batch_size``).
    """
    gpu = _row_gpu(row)
    dims = _row_dims(row)
    row_m = _row_m(row)
    if row_m is None:
        return ConfigAttribution(None, reason="row has no M")
    matched: list[Measurement] = []
    for raw in gains:
        m = _as_measurement(raw)
        if _matches_row(m, row_m, gpu, dims, implied_by_pr):
            matched.append(m)
    if not matched:
        return ConfigAttribution(None, reason="no measurement matches GPU, shape and M")
    values = [m.documented_speedup for m in matched if m.documented_speedup is not None]
    if len(values) > 1 and max(values) / min(values) > 1 + tolerance:
        return ConfigAttribution(
            None, matched, reason=f"{len(values)} matches disagree by more than {tolerance:.0%}"
        )
    return ConfigAttribution(
        round(statistics.median(values), 4),
        matched,
        reason=f"{len(values)} matching measurement(s)",
    )


def attribute_config_row(
    row: Mapping[str, Any],
    gains: Iterable[Measurement | Mapping[str, Any]],
    *,
    implied_by_pr: bool = False,
) -> dict[str, Any]:
    """``{"config_pr_gains": [card dicts…], "speedup_vs_default": float | None}``."""
    items = [_as_measurement(g) for g in gains]
    att = config_speedup_vs_default(row, items, implied_by_pr=implied_by_pr)
    return {
        "config_pr_gains": [m.to_gain() for m in items],
        "speedup_vs_default": att.speedup_vs_default,
    }
