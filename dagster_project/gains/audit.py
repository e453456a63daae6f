"""Verbatim audit: do a pair's baseline and optimized values appear in the PR text?

The card reports that in 98.8% of extracted pairs both values appear verbatim, the rest
being mostly averages the extractor computed itself. The audit is what lets us make (and
re-check) that claim: it catches a model that rounded, converted, averaged or invented a
number, and it is cheap enough to run on every extraction.

"Verbatim" is judged on the *value*, after the number-format normalisation of
:mod:`dagster_project.gains.numbers`:

============================  ==============================  =========
text in the PR                extracted value                 verbatim?
============================  ==============================  =========
``1,234.50``                  ``1234.5``                      yes (separator, trailing zero)
``12.3ms`` / ``12.3 ms``      ``12.3``                        yes (unit is not part of the number)
``1.2e3``                     ``1200``                        yes (same value)
``+4.0%`` / ``−4%``           ``4``                           yes (sign ignored; see below)
``12.5k tok/s``               ``12500``                       yes (``k`` suffix expands)
``0.7621450612``              ``0.762``                       **no** (rounded)
``10.1``, ``10.3`` (runs)     ``10.2`` (their mean)           **no** (computed)
``H100``                      ``100``                         **no** (part of a name)
============================  ==============================  =========

Signs are ignored because extracted baselines/optimized values are magnitudes (a "−4%"
cell is still the number 4 in the text). Stated-only measurements are not audited (the
card's rate is over baseline/optimized pairs), so their flags stay ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from dagster_project.gains.numbers import iter_numbers
from dagster_project.gains.schema import Measurement

_K_SUFFIX = re.compile(r"[kK](?![A-Za-z])")


def text_values(text: str) -> frozenset[float]:
    """Every value a reader could take from ``text`` (magnitudes, ``k`` suffix expanded)."""
    out: set[float] = set()
    for tok in iter_numbers(text):
        v = abs(tok.value)
        out.add(v)
        if _K_SUFFIX.match(text, tok.end):
            out.add(round(v * 1000, 9))
    return frozenset(out)


def appears_verbatim(value: float | None, text_or_values: str | frozenset[float]) -> bool:
    """True when ``value`` is written in the text (under the module's normalisation)."""
    if value is None:
        return False
    values = text_values(text_or_values) if isinstance(text_or_values, str) else text_or_values
    v = abs(float(value))
    return v in values or round(v, 9) in values


def audit_measurement(m: Measurement, text: str | frozenset[float]) -> Measurement:
    """Set ``baseline_verbatim``, ``optimized_verbatim`` and ``audit_pass`` on ``m``."""
    values = text_values(text) if isinstance(text, str) else text
    if m.is_pair:
        m.baseline_verbatim = appears_verbatim(m.baseline, values)
        m.optimized_verbatim = appears_verbatim(m.optimized, values)
        m.audit_pass = m.baseline_verbatim and m.optimized_verbatim
    else:
        m.baseline_verbatim = m.optimized_verbatim = m.audit_pass = None
    return m


def audit_all(measurements: Iterable[Measurement], text: str) -> list[Measurement]:
    """Audit every measurement against the same PR text (number scan done once)."""
    values = text_values(text)
    return [audit_measurement(m, values) for m in measurements]


def audit_rate(measurements: Iterable[Measurement | dict[str, Any]]) -> float | None:
    """Share of audited baseline/optimized pairs whose two values are both verbatim.

    Accepts measurements or their row dicts (as read back from the lake). ``None`` when
    there is no audited pair, so an empty dataset does not report a perfect 100%.
    """
    total = passed = 0
    for m in measurements:
        flag = m.get("audit_pass") if isinstance(m, dict) else m.audit_pass
        if flag is None:
            continue
        total += 1
        passed += bool(flag)
    return passed / total if total else None
