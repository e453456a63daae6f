"""Whitespace-aligned text tables (``triton.testing.perf_report`` / pandas prints,
benchmark-script columns) to :class:`~dagster_project.gains.extract.document.Grid`.

A run of lines with the same number of cells, mostly numeric, under a header line with
as many cells (or one fewer: pandas prints an unnamed index column) is a table. Repeated
headers continue the same table; a one-cell title line (``moe-align-performance:``) or a
blank line followed by a new header starts another. Cells are split on runs of two or more
spaces when the header uses them, else on single spaces, because pandas pads with one
space only when columns are narrow.
"""

from __future__ import annotations

import re

from dagster_project.gains.extract.candidate import value_of
from dagster_project.gains.extract.document import Grid


def _cells(line: str, wide: bool) -> list[str]:
    s = line.strip().strip("|").strip()
    parts = re.split(r"\s{2,}|\t" if wide else r"\s+", s)
    return [p.strip() for p in parts if p.strip()]


def _numericish(cells: list[str]) -> float:
    if not cells:
        return 0.0
    return sum(value_of(c) is not None for c in cells) / len(cells)


def aligned_grids(lines: list[str]) -> list[Grid]:
    """Every aligned table in ``lines`` (usually a code block's lines)."""
    grids: list[Grid] = []
    i = 0
    n = len(lines)
    while i < n:
        head = lines[i]
        if not head.strip() or re.search(r"[=:]\s*\S", head) and not re.search(r"\s{2,}", head.strip()):
            i += 1
            continue
        for wide in (True, False):
            hcells = _cells(head, wide)
            if len(hcells) < 2 or _numericish(hcells) > 0.5:
                continue
            rows: list[list[str]] = []
            raw: list[str] = []
            j = i + 1
            index_col = False
            while j < n:
                ln = lines[j]
                if not ln.strip():
                    break
                if re.fullmatch(r"\s*[-=+|: ]{3,}\s*", ln):
                    j += 1  # a rule under the header
                    continue
                cells = _cells(ln, wide)
                if cells == hcells:
                    j += 1
                    continue
                if len(cells) == len(hcells) + 1 and re.fullmatch(r"\d+", cells[0]):
                    index_col = True
                    cells = cells[1:]
                if len(cells) != len(hcells) or _numericish(cells) < 0.5:
                    break
                rows.append(cells)
                raw.append(ln)
                j += 1
            if rows and (index_col or len(rows) >= 1):
                grids.append(Grid(hcells, rows, raw))
                i = j - 1
                break
        i += 1
    return grids
