"""How a number reads wherever kernelhouse shows one: the CLI's tables, the report, the
dataset cards (issue 34: the report printed ``1726`` under ``19,287``, ``gains extract``
printed ``120`` for 120.5; each place had its own rule).

The rule, once:
* whole numbers (ints, integral floats) with thousands separators: ``1,726``, ``19,287``;
* other floats: at most two decimals from 1 up, trailing zeros dropped (``120.5``,
  ``1.23``, ``19,287.25``), three significant digits below 1 (``0.0123``);
* a year is a label, not a quantity: ``as_label=True`` (or ``row_cells`` on a row that
  names a year) prints ``2023``;
* None is blank (a card passes its own placeholder), booleans are ``true`` / ``false``,
  NaN and infinities as Python writes them, anything else as ``str``.

SVG tick labels (``report/svg.py``) are compact on purpose (``1.2e+06``) and keep theirs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def number(v: Any, *, as_label: bool = False, missing: str = "") -> str:
    """``v`` as the one number format says (see the module docstring)."""
    if v is None:
        return missing
    if isinstance(v, bool):
        return "true" if v else "false"
    if not isinstance(v, int | float):
        return str(v)
    if not math.isfinite(v):
        return str(v)
    if float(v).is_integer():
        return str(int(v)) if as_label else f"{int(v):,}"
    if abs(v) >= 1:
        text = f"{v:,.2f}".rstrip("0").rstrip(".")
        return text
    return f"{v:.3g}"


def row_cells(row: Iterable[Any]) -> list[str]:
    """A table row's cells; a row whose text names a year prints its numbers as labels."""
    cells = list(row)
    year = any(isinstance(c, str) and "year" in c.lower() for c in cells)
    return [number(c, as_label=year) for c in cells]
