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


_BOX_RULE = re.compile(r"^\s*[+\-=|:┏┓┗┛┡┩└┘├┤┬┴┼━─╇╈┳┻╭╮╰╯═╞╡╪]{3,}\s*$")
_BOX_ROW = re.compile(r"^\s*[|│┃]")


def box_grids(lines: list[str]) -> list[Grid]:
    """Tables drawn with borders (``+---+`` / ``| a | b |`` prints, rich's ``┃``/``│``
    boxes): header rows (merged column-wise) above the first rule under them, data below."""
    from dagster_project.gains.extract.document import split_pipe_row

    grids: list[Grid] = []
    header: list[list[str]] = []
    rows: list[list[str]] = []
    raw: list[str] = []
    seen_rule_after_header = False

    def flush() -> None:
        if header and rows:
            width = len(header[0])
            merged = [" ".join(h[j] for h in header if j < len(h)).strip() for j in range(width)]
            grids.append(
                Grid(
                    merged,
                    [r for r in rows if len(r) == width],
                    [x for r, x in zip(rows, raw, strict=True) if len(r) == width],
                )
            )

    for ln in lines:
        if _BOX_RULE.match(ln):
            if header:
                seen_rule_after_header = True
            continue
        if not _BOX_ROW.match(ln):
            flush()
            header, rows, raw, seen_rule_after_header = [], [], [], False
            continue
        cells = split_pipe_row(re.sub(r"[│┃]", "|", ln))
        if not seen_rule_after_header:
            header.append(cells)
        elif header and cells == header[0]:
            continue
        else:
            rows.append(cells)
            raw.append(ln)
    flush()
    return grids


def _header_cells(head: str, wide: bool) -> list[str] | None:
    """The cells of a header line split as ``wide`` says, or ``None`` when the line is not a
    header (fewer than two cells, mostly numbers, or ``key:   value`` records)."""
    hcells = _cells(head, wide)
    if (
        len(hcells) < 2
        or _numericish(hcells) >= 0.5
        or hcells[0].endswith(":")
        or any(
            c.endswith(":") and k + 1 < len(hcells) and value_of(hcells[k + 1]) is not None
            for k, c in enumerate(hcells)
        )
    ):
        # "Successful requests:   800" / "Backend:   sglang" are records, not a header
        # ("N  M  cute-dsl (us):  cuda (us)" is one: its colon is not a key's)
        return None
    return hcells


def _aligned_rows(
    lines: list[str], i: int, hcells: list[str], wide: bool
) -> tuple[list[list[str]], list[str], int, bool]:
    """The data rows under the header at line ``i``: (rows, their raw lines, the index of
    the line that ended the table, whether an unnamed index column was dropped). Rules and
    repeated headers are skipped; a blank line, or a row of another width or mostly words,
    ends the table."""
    n = len(lines)
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
    return rows, raw, j, index_col


_STAT_NAMES = re.compile(r"^(?:count|mean|std|min|max|median|\d{1,2}%|dtype:?)$", re.I)


def _summary_rows(rows: list[list[str]]) -> bool:
    """Whether most rows start with a distribution statistic (``count``, ``mean``, ``25%``,
    ``max``): pandas' ``describe()`` output, read as one record per statistic (2.4)."""
    firsts = [r[0].strip() for r in rows if r and r[0].strip()]
    return len(firsts) >= 3 and sum(bool(_STAT_NAMES.match(c)) for c in firsts) >= 0.6 * len(firsts)


def aligned_grids(lines: list[str]) -> list[Grid]:
    """Every aligned or boxed table in ``lines`` (usually a code block's lines)."""
    boxed = box_grids(lines)
    if boxed:
        return boxed
    grids: list[Grid] = []
    i = 0
    n = len(lines)
    while i < n:
        head = lines[i]
        if (
            not head.strip()
            or re.search(r"[=:]\s*\S", head)
            and not re.search(r"\s{2,}", head.strip())
        ):
            i += 1
            continue
        for wide in (True, False):
            hcells = _header_cells(head, wide)
            if hcells is None:
                continue
            rows, raw, j, index_col = _aligned_rows(lines, i, hcells, wide)
            if rows and _summary_rows(rows):
                break  # a describe() summary: records (records.py), not a table
            if rows and (index_col or len(rows) >= 1):
                grids.append(Grid(hcells, rows, raw))
                i = j - 1
                break
        i += 1
    return grids
