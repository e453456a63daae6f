"""Tables (markdown, HTML, and the aligned text tables of :mod:`.aligned`) to candidates.

A table compares variants either by **column** (``| M | main (us) | PR (us) | speedup |``,
also several metrics side by side: ``main TTFT | PR TTFT | main TPOT | PR TPOT``) or by
**row** (``| main | 12.1 | 3.4 |`` / ``| PR | 10.9 | 3.1 |``), or inside one **cell**
(``12.4 → 10.9``); a table with no variants but ratio cells (``1.41x`` per shape) is a grid
of ratio-only claims. Which column is the baseline and which the PR's variant is decided by
role words (:func:`~dagster_project.gains.extract.vocab.role_of`): strong words (main, before,
default / this PR, after, tuned) beat implementation names (torch / triton), and reference
columns (TensorRT, FA3, "for reference") are never either side.

Rows that are not measurements are skipped: totals/averages/geomeans (except the average of
a table of repeated runs, which *is* the measurement), config rows (``BLOCK_SIZE_M``,
``num_warps``), accuracy/count/memory/share rows, and a last row cut off by truncation
(dropped when the grid is built, :mod:`.document`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dagster_project.gains.extract.candidate import Candidate, value_of
from dagster_project.gains.extract.document import Block, Grid
from dagster_project.gains.extract.vocab import (
    ACCURACY,
    AGGREGATE,
    BATCH_KEY,
    CONFIG_KEY,
    COUNT_ROW,
    HW_KEY,
    METRIC_WORDS,
    MODEL_KEY,
    MULTIPLICATIVE_HEADER,
    RUN_ROW,
    SHAPE_KEYS_KERNEL,
    SHARE_HEADER,
    SPEEDUP_HEADER,
    Role,
    is_non_measurement,
    role_of,
    strip_role_words,
    unit_in,
)
from dagster_project.gains.normalise import (
    UNIT_PATTERN,
    infer_higher_is_better,
    normalise_unit,
    parse_stated_speedup,
)

ARROW = r"(?:→|->|=>|⟶|➡️?|➜|-->|⇒|to)"
_NUM = r"[-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+"
CELL_ARROW = re.compile(
    rf"^\s*(?P<b>{_NUM})\s*(?P<ub>[A-Za-zµμ/%]+)?\s*{ARROW}\s*(?P<o>{_NUM})\s*(?P<uo>[A-Za-zµμ/%]+)?"
    r"(?P<rest>.*)$"
)
_RATIO_CELL = re.compile(r"^\s*[~≈]?\s*\(?\s*[-+]?\d+(?:\.\d+)?\s*[x×X]\s*\)?\s*$")
_HEADER_ARROW = re.compile(
    r"^\s*(?P<a>[\w.+-]+)\s*(?:->|→|=>|⟶|\bto\b)\s*(?P<b>[\w.+-]+)\s*(?:\(.*\))?\s*$", re.I
)
#: a size ("64 MiB"), not a bandwidth ("12.6 GB / second", "3 GB/s": 2.6)
_SIZE_CELL = re.compile(r"\d\s*(?:[KMGT]i?B|bytes)\b(?!\s*/\s*s|\s*per\s+s|\s*/\s*sec)", re.I)
_PCT_CELL = re.compile(r"^\s*\(?\s*[-+\u2212]?\d+(?:\.\d+)?\s*%\s*\)?\s*$")


@dataclass
class Column:
    """One column's reading: header, kind and (for variants) its role."""

    j: int
    header: str
    kind: str  # "key" | "variant" | "speedup" | "metric" | "arrow" | "ratio" | "skip"
    role: Role
    residual: str


def _numeric_share(cells: list[str]) -> float:
    filled = [
        c for c in cells if c.strip() and c.strip() not in ("-", "—", "N/A", "n/a", "OOM", "x")
    ]
    if not filled:
        return 0.0
    return sum(value_of(c) is not None for c in filled) / len(filled)


def _is_key_header(h: str) -> bool:
    s = h.strip()
    return bool(
        BATCH_KEY.match(s)
        or SHAPE_KEYS_KERNEL.match(s)
        or MODEL_KEY.match(s)
        or HW_KEY.match(s)
        or re.fullmatch(
            r"(?:seq[_ ]?len|input[_ ]?len|output[_ ]?len|isl|osl|tp|ep|dp|dtype|"
            r"concurrency|max[_ ]?concurrency|num[_ ]?prompts|qps|rps|request[_ ]?rate|load|"
            r"config|case|setting|scenario|dataset|task|test|workload|kernel|op|layer|"
            r"provider|backend|method|impl(?:ementation)?|mode|quant|precision|"
            r"context(?:[_ ]len)?|prompt[_ ]?len|gen[_ ]?len|\w+[_ ]?size|num_\w+|n_\w+|"
            r"(?:max|min)[_ ]?\w*len\w*|max[_ ]?(?:new[_ ]?)?tokens|"
            r"in\s*/\s*out|isl\s*/\s*osl|input\s*/\s*output(?:[_ ]len(?:gth)?)?|"
            r"(?:tensor|pipeline|data|expert)[_ ]?parallel(?:[_ ]size)?|"
            r"[A-Za-z]|#)(?:\s*\(.*\))?",
            s,
            re.I,
        )
    )


def _most(filled: list[str], pattern: re.Pattern[str], *, search: bool = False) -> bool:
    """Whether at least 60% of the filled cells (and at least one) match ``pattern``."""
    hits = sum(bool(pattern.search(c) if search else pattern.match(c)) for c in filled)
    return hits >= max(1, 0.6 * len(filled))


def _kind_by_cells(h: str, filled: list[str], role: Role) -> str | None:
    """The kinds that the cells' shape (arrows, ratios, sizes, percentages) or a
    share/speedup header decide, before the header's role words are weighed; ``None``
    when none applies."""
    if SHARE_HEADER.search(h) and not SPEEDUP_HEADER.search(
        strip_role_words(SHARE_HEADER.sub(" ", h))
    ):
        return "skip"  # profiling shares ("Time (%)") are not timings
    if filled and sum(bool(CELL_ARROW.match(c)) for c in filled) >= max(1, len(filled) // 2):
        return "arrow"
    if SPEEDUP_HEADER.search(h) and role.strength < 2:
        return "speedup"
    if filled and _most(filled, _RATIO_CELL):
        return "ratio"
    if (
        filled
        and _HEADER_ARROW.match(h)
        and sum(bool(_PCT_CELL.match(c) or _RATIO_CELL.match(c)) for c in filled)
        >= max(1, 0.6 * len(filled))
    ):
        return "speedup"  # "AOT->JIT": the change from one column to another
    if filled and _most(filled, _SIZE_CELL, search=True):
        return "skip"  # "64 MiB" cells: sizes, not timings, whatever the header says
    if filled and _most(filled, _PCT_CELL) and re.search(r"\bdelta\b|\bchange\b", h, re.I):
        return "speedup"  # 2.7: "Patched TPOT delta" of signed percentages: the PR's change
    if (
        filled
        and _most(filled, _PCT_CELL)
        and (role.kind is None or re.search(r"\s/\s|\s-\s*1\b", h))
    ):
        return (
            "speedup"
            if re.search(r"improv|gain|change|diff|delta|speed|faster|reduc|%", h, re.I)
            else "skip"
        )
    return None


def _kind_by_header(j: int, h: str, role: Role, residual: str, share: float) -> str:
    """Key, skipped, variant or metric column: what the header and the numeric share say
    once the cells' shape has decided nothing."""
    if share < 0.5 and j > 0 and role.kind in ("baseline", "optimized") and role.strength == 2:
        # 2.8: an "After" column whose cells hold no value ("~683–690" is a range) is a
        # side without a value, not a key that turns the table into rows of other sides
        return "skip"
    if (
        share < 0.5
        or (j == 0 and not role.kind and not (METRIC_WORDS.search(h) and unit_in(h)))
        or (_is_key_header(h) and not role.kind)
    ):
        return "key"
    if (
        ACCURACY.search(h)
        or (is_non_measurement(residual) and not METRIC_WORDS.search(h))
        or re.search(r"[(\[\s](?:[kmgt]i?b|bytes)\s*[)\]]|\bmemory\b|\bmem\b", h, re.I)
    ):
        return "skip"
    if role.kind:
        return "variant"
    return "metric"


def classify(grid: Grid) -> list[Column]:
    """Kind and role of every column of ``grid``."""
    cols: list[Column] = []
    width = len(grid.header)
    for j in range(width):
        h = grid.header[j]
        cells = [r[j] if j < len(r) else "" for r in grid.rows]
        role = role_of(h)
        residual = strip_role_words(h)
        share = _numeric_share(cells)
        filled = [c for c in cells if c.strip()]
        kind = _kind_by_cells(h, filled, role) or _kind_by_header(j, h, role, residual, share)
        cols.append(Column(j, h, kind, role, residual))
    return cols


def _norm_residual(s: str) -> str:
    s = re.sub(r"[(\[][^)\]]*[)\]]", " ", s.lower())
    s = re.sub(rf"(?<![a-z])(?:{UNIT_PATTERN})(?![a-z])", " ", s)
    return re.sub(r"[^a-z0-9]+", " ", s).strip()


def _choose(cols: list[Column]) -> tuple[Column | None, Column | None]:
    """The baseline and the PR's variant among one metric's variant columns.

    2.12 (issue 40): both sides named as strongly, or no pair. An implementation named only
    weakly ("cuBLAS", "FlashInfer", "torch") beside a strongly named side ("this PR",
    "main") is a third implementation shown for comparison, never the other side: pairing
    it made "cuBLAS vs this PR" the PR's gain while the same table with the column called
    "time" gave nothing. (A strong baseline beside one other value column still names that
    column the PR's: :func:`_weak_beside_strong_baseline`.)"""
    base = [c for c in cols if c.role.kind == "baseline"]
    opt = [c for c in cols if c.role.kind == "optimized"]
    if not base or not opt:
        return None, None
    bmax = max(c.role.strength for c in base)
    omax = max(c.role.strength for c in opt)
    if bmax != omax:
        return None, None
    o = [c for c in opt if c.role.strength == omax][-1]
    b = _counterpart(o.header, base, lambda c: c.header) or next(
        c for c in base if c.role.strength == bmax
    )
    return b, o


def _counterpart(opt_label: str, bases: list, label_of):  # noqa: ANN001, ANN202
    """The baseline named like the optimized side ("old RTN" for "new RTN") among several:
    the others (a "Baseline (BF16)" row) are references."""
    if len(bases) < 2:
        return None
    for norm in (
        lambda x: re.sub(r"[^a-z0-9]+", " ", strip_role_words(x).lower()).strip(),
        lambda x: _norm_residual(strip_role_words(x)),
    ):
        want = norm(opt_label)
        same = [b for b in bases if want and norm(label_of(b)) == want]
        if len(same) == 1:
            return same[0]
    return None


def _row_label(row: list[str], keys: list[Column]) -> str:
    for c in keys:
        if c.j < len(row) and row[c.j].strip():
            return row[c.j].strip()
    return row[0].strip() if row else ""


def _stated_from(cell: str, header: str) -> tuple[float | None, str | None]:
    """An explicit multiplicative ratio in a speedup cell (``1.41x``, or a bare number
    under a Speedup/Ratio header); percentages beside a pair are not kept as stated."""
    s = cell.strip()
    if not s or re.search(r"\d\s*[-–]\s*\d", s):
        return None, None
    if re.search(r"\d\s*[x×X]\b|\d\s*[x×X]$", s) or (
        MULTIPLICATIVE_HEADER.search(header)
        and "%" not in s
        and "%" not in header
        and re.fullmatch(r"[~≈]?\s*\(?\s*\d+(?:\.\d+)?\s*\)?", s)
    ):
        v = parse_stated_speedup(s)
        return (v, s) if v is not None else (None, None)
    return None, None


def _ratio_only(cell: str, header: str, hib: bool | None) -> tuple[float | None, str | None]:
    s = cell.strip()
    if not s or re.search(r"\d\s*[-–]\s*\d", s):
        return None, None
    v = parse_stated_speedup(s, higher_is_better=hib, kind=header)
    return (v, s) if v is not None else (None, None)


def _skip_row(label: str) -> bool:
    return bool(
        CONFIG_KEY.match(label.strip())
        or COUNT_ROW.search(label)
        or (ACCURACY.search(label) and not METRIC_WORDS.search(label))
    )


def _metric_for(col_residual: str, row_label: str, transposed: bool, block: Block) -> str:
    if transposed and row_label:
        return row_label
    if not METRIC_WORDS.search(col_residual) and not unit_in(col_residual):
        return ""  # a variant's name ("loop unroll", "triton"), not what was measured
    if (
        col_residual
        and _norm_residual(col_residual)
        and not re.fullmatch(r"[\W\d_]*", _norm_residual(col_residual))
    ):
        return col_residual
    return ""


Rows = list[tuple[int, list[str]]]


def accuracy_only(grid: Grid, block: Block) -> bool:
    """An accuracy table (by its header or the block's context) with no metric-named row:
    nothing in it is a timing."""
    header_text = " ".join(grid.header)
    ctx = f"{block.label}\n{block.heading}"
    accuracy = (ACCURACY.search(header_text) or ACCURACY.search(ctx)) and not METRIC_WORDS.search(
        header_text
    )
    return bool(accuracy) and not any(METRIC_WORDS.search(r[0]) for r in grid.rows if r)


def _measured_rows(grid: Grid, keys: list[Column]) -> tuple[Rows, bool]:
    """The rows that can hold measurements (aggregates only in a table of repeated runs,
    no config/count/accuracy rows) and whether the table is transposed (its key column
    names metrics, one metric per row)."""
    runs_table = any(RUN_ROW.match(_row_label(r, keys)) for r in grid.rows)
    rows = list(enumerate(grid.rows))
    if runs_table:
        rows = [(i, r) for i, r in rows if AGGREGATE.match(_row_label(r, keys))] or rows
    else:
        rows = [(i, r) for i, r in rows if not AGGREGATE.match(_row_label(r, keys))]
    rows = [(i, r) for i, r in rows if not _skip_row(_row_label(r, keys))]
    # transposed: the key column holds metric names (rows = metrics)
    transposed = bool(keys) and sum(
        bool(METRIC_WORDS.search(_row_label(r, keys)) or unit_in(_row_label(r, keys)))
        for _, r in rows
    ) >= max(1, len(rows) // 2)
    if transposed:
        rows = [(i, r) for i, r in rows if not is_non_measurement(_row_label(r, keys))]
    return rows, transposed


def table_candidates(grid: Grid, block: Block) -> list[Candidate]:
    """Every comparison a table states (see module docstring)."""
    cols = classify(grid)
    if accuracy_only(grid, block) and not any(c.kind in ("speedup", "ratio") for c in cols):
        # (2.6: a table with a speedup column times something, whatever error column or
        # correctness check stands beside it)
        return []
    keys = [c for c in cols if c.kind == "key"]
    rows, transposed = _measured_rows(grid, keys)
    out = _column_candidates(grid, block, cols, keys, rows, transposed)
    if out:
        return out
    out = _arrow_cell_candidates(grid, block, cols, keys, rows, transposed)
    if out:
        return out
    out = _row_pairs(grid, cols, block, rows)
    if out:
        return out
    return _ratio_only_candidates(grid, block, cols, keys, rows)


def _variant_groups(variants: list[Column]) -> dict[str, list[Column]]:
    """Variant columns grouped by their metric residual (``main TTFT | PR TTFT | main TPOT
    | PR TPOT``); one group of all when no residual group has both sides."""
    groups: dict[str, list[Column]] = {}
    for c in variants:
        groups.setdefault(_norm_residual(c.residual), []).append(c)
    if len(groups) > 1 and not any(_choose(g)[0] for g in groups.values()):
        groups = {"": variants}
    return groups


def _two_weak_sides(
    cols: list[Column], rows: Rows, valued: list[Column], speed_cols: list[Column]
) -> dict[str, list[Column]] | None:
    """``| batch | F.linear (us) | tinygemm (us) | speedup |``: two sides named weakly or not
    at all, and a stated ratio or change per row: the numbers say which side is the
    baseline (a change is relative to it; a speedup is base/PR for a time, PR/base for a
    rate); without that evidence the weak words decide, else the column order. ``None``
    when the table is not of that shape or the sides stay undecided."""
    if not (
        len(valued) == 2
        and len(speed_cols) == 1
        and all(c.role.strength < 2 for c in valued)
        and not _roles_in_rows(cols, rows)
    ):
        return None
    first, second = valued
    da, db = (infer_higher_is_better(c.header, unit_in(c.header)) for c in valued)
    if da is not None and db is not None and da != db:
        return None  # 2.6: "Mean TPOT" beside "Output tps": two metrics, not two sides
    by_numbers = _sides_by_change(rows, first, second, speed_cols[0])
    if by_numbers is not None:
        first, second = by_numbers
    elif sum(c.role.strength for c in valued) > 1:
        return None
    elif second.role.kind == "baseline":
        first, second = second, first
    return {
        "": [
            Column(first.j, first.header, "variant", Role("baseline", 1), first.residual),
            Column(second.j, second.header, "variant", Role("optimized", 1), second.residual),
        ]
    }


def _stacked_changes(valued: list[Column]) -> dict[str, list[Column]] | None:
    """``| Baseline | +vector loads | +unroll |``: changes stacked left to right after one
    strong baseline, the last column is the PR's state; ``None`` for other tables."""
    strong_base = [c for c in valued if c.role.kind == "baseline" and c.role.strength == 2]
    others = [
        c for c in valued if c.role.kind is None and c.j > (strong_base[0].j if strong_base else 0)
    ]
    if len(strong_base) == 1 and others and not any(c.role.kind == "optimized" for c in valued):
        b = strong_base[0]
        last = others[-1]
        return {
            "": [b, Column(last.j, last.header, "variant", Role("optimized", 2), last.residual)]
        }
    return None


def _column_groups(cols: list[Column], rows: Rows) -> dict[str, list[Column]]:
    """The groups of value columns to pick (baseline, optimized) from, after the table
    shapes that override the residual grouping (weak names only, two weak sides with a
    ratio column, a weak column beside a strong baseline, stacked changes)."""
    variants = [c for c in cols if c.kind == "variant"]
    groups = _variant_groups(variants)
    speed_cols = [c for c in cols if c.kind in ("speedup", "ratio")]
    valued = [c for c in cols if c.kind in ("variant", "metric")]
    if (
        all(c.role.strength < 2 for c in variants)
        and len(valued) > 2
        and sum(1 for g in groups.values() if _choose(g)[0] is not None) <= 1
    ):
        # three or more implementations named only by weak words: which one is the PR's
        # is not written in the table, so no pair is read from it
        groups = {}
    weak_sides = _two_weak_sides(cols, rows, valued, speed_cols)
    if weak_sides is not None:
        groups = weak_sides
    if not any(_choose(g)[0] for g in groups.values()) and (
        sw := _weak_beside_strong_baseline(valued, cols)
    ):
        strong, weak = sw
        groups = {
            "": [
                strong,
                Column(weak.j, weak.header, "variant", Role("optimized", 2), weak.residual),
            ]
        }
    stacked = _stacked_changes(valued)
    if stacked is not None:
        groups = stacked
    return groups


Pair = tuple[str, Column, Column]


def _column_pairs(
    cols: list[Column], rows: Rows
) -> tuple[list[Pair], list[tuple[Column, Column, Column]]]:
    """The (name, baseline, optimized) column pairs of a by-column table, and the
    "speedup vs X" triples (baseline, optimized, speedup column) when those named them."""
    groups = _column_groups(cols, rows)
    speed_cols = [c for c in cols if c.kind in ("speedup", "ratio")]
    valued = [c for c in cols if c.kind in ("variant", "metric")]
    chosen = [(name, *_choose(g)) for name, g in groups.items()]
    pairs = [(n, b, o) for n, b, o in chosen if b is not None and o is not None]
    named_vs = _speedup_vs_pairs(valued, speed_cols, rows)
    if named_vs and len(named_vs) >= len(pairs):  # one pair per "speedup vs X" column
        pairs = [("", b, o) for b, o, _s in named_vs]
    else:
        named_vs = []
    return pairs, named_vs


def _row_keys(grid: Grid, keys: list[Column], row: list[str]) -> list[tuple[str, str]]:
    """(header, cell) of every filled key cell of ``row``: what tells its measurement apart."""
    return [(grid.header[k.j], row[k.j]) for k in keys if k.j < len(row) and row[k.j].strip()]


def _section_of(grid: Grid, i: int) -> str | None:
    """The section heading (a spanning row) above row ``i``, if the grid has sections."""
    return next((grid.sections[s] for s in sorted(grid.sections, reverse=True) if s <= i), None)


def _named_metric(grid: Grid, keys: list[Column], row: list[str]) -> str:
    """The row's cell under a "Metric"/"Name"/"Measurement" key column, else ``""``."""
    mcol = next(
        (
            k
            for k in keys
            if re.fullmatch(r"metrics?|name|measure(?:ment)?", grid.header[k.j].strip(), re.I)
        ),
        None,
    )
    return row[mcol.j].strip() if mcol is not None and mcol.j < len(row) else ""


def _pair_stated_column(
    speed_cols: list[Column],
    n_pairs: int,
    bcol: Column,
    ocol: Column,
    named_vs: list[tuple[Column, Column, Column]],
) -> Column | None:
    """The stated ratio of a pair: the speedup column a "speedup vs X" header ties to it,
    else the only speedup column, else the first one right of the pair's columns
    (``| A before | A after | speedup A | B before | ... |``)."""
    if named_vs:
        return next(sc for b, _o, sc in named_vs if b is bcol)
    # 2.12: a "speedup vs X" column whose X is not this pair's baseline states no ratio of it
    speed_cols = [
        s for s in speed_cols if not (m := _VS.search(s.header)) or _names(bcol, m.group("name"))
    ]
    if not speed_cols:
        return None
    if len(speed_cols) == 1 or n_pairs == 1:
        return speed_cols[0]
    return next((s for s in speed_cols if s.j > max(bcol.j, ocol.j)), None)


@dataclass
class _Table:
    """What every row of one table is read against: the grid, its block, its key columns
    and whether it is transposed."""

    grid: Grid
    block: Block
    keys: list[Column]
    transposed: bool


def _pair_row_candidate(
    t: _Table,
    bcol: Column,
    ocol: Column,
    scol: Column | None,
    unit: str | None,
    i: int,
    row: list[str],
) -> Candidate | None:
    """One row's (baseline, optimized) values in a pair's two columns, with its keys, unit,
    metric and stated ratio; ``None`` when either cell holds no number."""
    if max(bcol.j, ocol.j) >= len(row):
        return None
    bv, ov = value_of(row[bcol.j]), value_of(row[ocol.j])
    if bv is None or ov is None:
        return None
    grid, keys, transposed = t.grid, t.keys, t.transposed
    label = _row_label(row, keys)
    rkeys = _row_keys(grid, keys, row)
    if grid.sections:
        sec = _section_of(grid, i)
        if sec:
            rkeys.insert(0, ("section", sec))
    if transposed:
        rkeys = [kv for kv in rkeys if kv[1] != label]
    named = _named_metric(grid, keys, row)
    if named:
        rkeys = [kv for kv in rkeys if kv[1] != named]
    cu = (
        unit
        or unit_in(row[ocol.j])
        or unit_in(row[bcol.j])
        or _cell_unit(row[ocol.j])
        or _cell_unit(row[bcol.j])
        or (unit_in(label) if transposed else None)
        or unit_in(named)
    )
    metric = named or _metric_for(ocol.residual, label, transposed, t.block)
    stated = stext = None
    if scol is not None and scol.j < len(row):
        stated, stext = _stated_from(row[scol.j], scol.header)
    return Candidate(
        bv,
        ov,
        metric,
        cu,
        t.block,
        "table:row",
        keys=rkeys,
        baseline_label=bcol.header,
        optimized_label=ocol.header,
        stated=stated,
        stated_text=stext,
        evidence=[grid.raw[i] if i < len(grid.raw) else " | ".join(row)],
    )


def _column_candidates(
    grid: Grid,
    block: Block,
    cols: list[Column],
    keys: list[Column],
    rows: Rows,
    transposed: bool,
) -> list[Candidate]:
    """Column comparisons, grouped by metric residual: one candidate per row and pair of
    (baseline, optimized) columns."""
    t = _Table(grid, block, keys, transposed)
    speed_cols = [c for c in cols if c.kind in ("speedup", "ratio")]
    pairs, named_vs = _column_pairs(cols, rows)
    out: list[Candidate] = []
    for _name, bcol, ocol in pairs:
        unit = unit_in(ocol.header) or unit_in(bcol.header)
        scol = _pair_stated_column(speed_cols, len(pairs), bcol, ocol, named_vs)
        hib = (
            _direction_by_change(rows, bcol, ocol, scol)
            if scol is not None
            and infer_higher_is_better(f"{bcol.header} {ocol.header}", unit) is None
            else None
        )
        for i, row in rows:
            cand = _pair_row_candidate(t, bcol, ocol, scol, unit, i, row)
            if cand is not None:
                if (
                    cand.higher_is_better is None
                    and infer_higher_is_better(cand.metric, cand.unit) is None
                ):
                    cand.higher_is_better = hib
                out.append(cand)
    return out


def _direction_by_change(rows: Rows, bcol: Column, ocol: Column, scol: Column) -> bool | None:
    """Whether higher is better, as a gain column beside a pair of unitless columns tells it
    (2.4). Only a positive gain under a gain-like header ("speedup", "improvement") counts,
    since the sign conventions of change columns differ: ``(b - o) / b``, ``b / o - 1`` or
    ``b / o`` says the numbers are times, ``(o - b) / b``, ``o / b - 1`` or ``o / b`` that
    they are rates. ``None`` unless most rows fit one reading and none fits both."""
    if not re.search(r"speed|improv|gain|faster|better", scol.header, re.I):
        return None
    votes = [0, 0]  # lower is better / higher is better
    for _i, row in rows:
        if max(bcol.j, ocol.j, scol.j) >= len(row):
            continue
        b, o = value_of(row[bcol.j]), value_of(row[ocol.j])
        cell = row[scol.j].strip()
        g = value_of(cell.rstrip("%xX× "))
        if not b or not o or g is None or g <= 0 or b == o:
            continue
        if "%" in cell:
            g /= 100
        tol = max(0.005, 0.03 * g)
        lower = any(abs(x - g) <= tol for x in ((b - o) / b, b / o - 1, b / o))
        higher = any(abs(x - g) <= tol for x in ((o - b) / b, o / b - 1, o / b))
        if lower != higher:
            votes[int(higher)] += 1
    total = sum(votes)
    if total == 0 or max(votes) < 0.8 * total:
        return None
    return votes[1] > votes[0]


def _arrow_cell_candidate(t: _Table, c: Column, row: list[str]) -> Candidate | None:
    """The "12.4 → 10.9" in one arrow cell as a candidate; ``None`` when it holds none."""
    if c.j >= len(row):
        return None
    m = CELL_ARROW.match(row[c.j])
    if not m:
        return None
    bv, ov = value_of(m.group("b")), value_of(m.group("o"))
    if bv is None or ov is None:
        return None
    rest = m.group("rest") or ""
    stated, stext = (
        _stated_from(re.sub(r"[()]", " ", rest).strip(), "speedup")
        if re.search(r"\d\s*[x×]", rest)
        else (None, None)
    )
    label = _row_label(row, t.keys)
    rkeys = _row_keys(t.grid, t.keys, row)
    unit = unit_in(c.header) or normalise_unit(m.group("uo") or m.group("ub") or "") or None
    if unit in ("x", "%"):
        unit = None
    return Candidate(
        bv,
        ov,
        strip_role_words(c.header) if not t.transposed else label,
        unit,
        t.block,
        "table:cell",
        keys=rkeys,
        stated=stated,
        stated_text=stext,
        evidence=[row[c.j]],
    )


def _arrow_cell_candidates(
    grid: Grid,
    block: Block,
    cols: list[Column],
    keys: list[Column],
    rows: Rows,
    transposed: bool,
) -> list[Candidate]:
    """Arrow cells: "12.4 → 10.9" per cell, column by column."""
    t = _Table(grid, block, keys, transposed)
    out: list[Candidate] = []
    arrows = [c for c in cols if c.kind == "arrow"]
    speed = [c for c in cols if c.kind == "speedup"]
    for c in arrows:
        for _i, row in rows:
            cand = _arrow_cell_candidate(t, c, row)
            if cand is None:
                continue
            if cand.stated is None and len(arrows) == 1 and len(speed) == 1:
                # 2.9: "| 2.67s → 2.13s | 1.25x |": the row's one speedup cell is the
                # stated ratio of its one arrow cell
                s = speed[0]
                if s.j < len(row):
                    cand.stated, cand.stated_text = _stated_from(row[s.j], s.header)
            out.append(cand)
    return out


def _ratio_only_candidates(
    grid: Grid, block: Block, cols: list[Column], keys: list[Column], rows: Rows
) -> list[Candidate]:
    """Ratio-only claims: a speedup column without a pair, or a grid of ratio cells.

    2.12 (issue 40; 2.9 asked only for some side named): not when the table has two or more
    value columns unless one is strongly named the baseline and another the PR's
    (``| Flex (tok/s) | Flash Attention (tok/s) | Speedup |``, ``| cuBLAS | this PR |
    speedup |``): the ratio then compares variants the text never says are the PR's
    before and after, or the PR against a third implementation."""
    speed_cols = [c for c in cols if c.kind in ("speedup", "ratio")]
    valued = [c for c in cols if c.kind in ("variant", "metric")]
    strong = {c.role.kind for c in valued if c.role.strength == 2}
    if len(valued) >= 2 and not {"baseline", "optimized"} <= strong:
        return []
    out: list[Candidate] = []
    hib = None
    for c in speed_cols:
        for i, row in rows:
            if c.j >= len(row):
                continue
            v, stext = _ratio_only(row[c.j], c.header, hib)
            if v is None:
                continue
            rkeys = _row_keys(grid, keys, row)
            if len([s for s in speed_cols if s.kind == "ratio"]) > 1:
                rkeys.append(("column", c.header))
            out.append(
                Candidate(
                    None,
                    None,
                    strip_role_words(SPEEDUP_HEADER.sub(" ", c.header)).strip(),
                    None,
                    block,
                    "table:row",
                    keys=rkeys,
                    stated=v,
                    stated_text=stext,
                    evidence=[grid.raw[i] if i < len(grid.raw) else " | ".join(row)],
                )
            )
    return out


def _roles_in_rows(cols: list[Column], rows: list[tuple[int, list[str]]]) -> Column | None:
    """The key column whose cells name both sides (``| main | ... |`` / ``| this pr | ... |``):
    the table compares by row, and its value columns are metrics, never two sides. (2.13:
    the two-name and 1.00x-ratio readings of rows, 2.4-2.6, are gone: they paid on no
    development text, RESULTS stop 36, 40d.)"""
    for c in cols:
        if c.kind != "key":
            continue
        roles = [role_of(r[c.j]).kind for _, r in rows if c.j < len(r)]
        if "baseline" in roles and "optimized" in roles:
            return c
    return None


_VS = re.compile(r"\b(?:vs\.?|versus|over|against)\s+(?P<name>[\w.+-]+)", re.I)


def _cell_unit(cell: str) -> str | None:
    """The unit after a cell's number (``0.15258ms``, ``9.83 requests/s``), if known."""
    m = re.match(r"^\s*[~≈]?\s*[-+]?\d[\d,]*(?:\.\d+)?\s*(?P<u>\S.*?)\s*$", cell)
    return unit_in(f" {m.group('u')}") if m else None


def _cells_unit(rows: Rows, *cols: Column) -> str | None:
    """The unit the cells of ``cols`` are written in (``0.0116 ms``) when every filled cell
    that names one names the same (2.5: headers such as ``| native | FlashInfer |`` carry
    none)."""
    units = {
        u for _i, r in rows for c in cols if c.j < len(r) and (u := _cell_unit(r[c.j])) is not None
    }
    return units.pop() if len(units) == 1 else None


def _sides_by_change(
    rows: list[tuple[int, list[str]]], a: Column, b: Column, change: Column
) -> tuple[Column, Column] | None:
    """(baseline, optimized) of two value columns as the change column's numbers tell it:
    a percentage is relative to the baseline (``+7.4%`` beside 152 and 163 says 152 is it);
    a ratio is baseline/PR for a time and PR/baseline for a rate (the direction from the
    headers' units). ``None`` when most rows do not say, or disagree."""
    unit = unit_in(a.header) or unit_in(b.header) or _cells_unit(rows, a, b)
    hib = infer_higher_is_better(f"{a.header} {b.header}", unit)
    votes = [0, 0]  # a is the baseline / b is the baseline
    for _i, row in rows:
        if max(a.j, b.j, change.j) >= len(row):
            continue
        va, vb, cell = value_of(row[a.j]), value_of(row[b.j]), row[change.j].strip()
        if not va or not vb or va == vb:
            continue
        pm = re.fullmatch(r"\W*?([-+\u2212]?)\s*(\d+(?:\.\d+)?)\s*%\W*", cell)
        if pm:
            pct = float(pm.group(2)) * (-1 if pm.group(1) in "-\u2212" and pm.group(1) else 1)
            fit_a, fit_b = abs((vb - va) / va * 100 - pct), abs((va - vb) / vb * 100 - pct)
            if min(fit_a, fit_b) <= max(0.5, 0.15 * abs(pct)) and fit_a != fit_b:
                votes[0 if fit_a < fit_b else 1] += 1
            continue
        r = _stated_from(cell, change.header)[0] or value_of(cell)
        if r and hib is not None and r != 1:
            a_base = (va / vb) if not hib else (vb / va)
            b_base = (vb / va) if not hib else (va / vb)
            if abs(a_base / r - 1) <= 0.03 and abs(b_base / r - 1) > 0.03:
                votes[0] += 1
            elif abs(b_base / r - 1) <= 0.03 and abs(a_base / r - 1) > 0.03:
                votes[1] += 1
    total = sum(votes)
    if not total or max(votes) < 0.6 * total:
        return None
    return (a, b) if votes[0] > votes[1] else (b, a)


def side_overrides(cols: list[Column], rows: list[tuple[int, list[str]]]) -> dict[int, str]:
    """Column index -> side, where the table itself names the sides beyond role words: a
    "speedup vs X" header (X's column is a baseline), or the numbers of a change/ratio column
    (:func:`_sides_by_change`), or one column beside a strong baseline
    (:func:`_weak_beside_strong_baseline`). What :mod:`~dagster_project.gains.audit` lets stand
    on each side, so that the audit and the extractor read one table the same way. (2.13: the
    "A->B" header and extending-header readings are gone: they paid on no development text.)"""
    valued = [c for c in cols if c.kind in ("variant", "metric")]
    speed = [c for c in cols if c.kind in ("speedup", "ratio")]
    out: dict[int, str] = {b.j: "baseline" for b, _sc in _vs_named(valued, speed)}
    if len(valued) == 2 and len(speed) == 1 and all(c.role.strength < 2 for c in valued):
        sides = _sides_by_change(rows, valued[0], valued[1], speed[0])
        if sides is not None:
            out[sides[0].j], out[sides[1].j] = "baseline", "optimized"
    if not out and (sw := _weak_beside_strong_baseline(valued, cols)):
        out[sw[1].j] = "optimized"
    return out


def _weak_beside_strong_baseline(
    valued: list[Column], cols: list[Column]
) -> tuple[Column, Column] | None:
    """``| FlashInfer AUTO | Fallback |`` in a vLLM PR: two value columns, one named strongly
    as the baseline and the other only weakly: (baseline, the PR's side), else None. 2.8:
    never when the table has a strongly named PR column without values (``| Before | After
    | FA3 |`` with a range under "After"): the weak one is then a reference."""
    if len(valued) != 2:
        return None
    if any(c.role.kind == "optimized" and c.role.strength == 2 for c in cols if c not in valued):
        return None
    strong = [c for c in valued if c.role.strength == 2 and c.role.kind == "baseline"]
    # 2.12: a reference-named column is never the PR's side (issue 40)
    weak = [c for c in valued if c.role.strength < 2 and c.role.kind != "reference"]
    # 2.4: the other side may be unnamed or named like a reference ("trtllm_mean" beside
    # "baseline_mean"): with one strong baseline and one other value column, the other is
    # what the PR compares against it
    return (strong[0], weak[0]) if len(strong) == 1 and len(weak) == 1 else None


def _vs_named(valued: list[Column], speed_cols: list[Column]) -> list[tuple[Column, Column]]:
    """(value column, its speedup column) for every "speedup vs X" / "over X" header whose X
    names exactly one value column by a word of its header."""
    named: list[tuple[Column, Column]] = []
    for sc in speed_cols:
        m = _VS.search(sc.header)
        if not m:
            continue
        want = m.group("name").lower()
        hits = [c for c in valued if want in re.sub(r"[^\w.+-]+", " ", c.header.lower()).split()]
        if len(hits) > 1:
            # 2.6: "Candidate paired with live" also names "live", as what it is compared
            # with; the column that is X is the one that does not ("Live FlashInfer (ms)")
            hits = [
                c
                for c in hits
                if not re.search(
                    rf"\b(?:with|vs\.?|over|against|than)\s+{re.escape(want)}\b", c.header, re.I
                )
            ]
        if len(hits) == 1 and not _beside_strong_baseline(hits[0], valued):
            named.append((hits[0], sc))
    return named


def _names(c: Column, name: str) -> bool:
    """Whether a word of ``c``'s header is ``name`` (the X of "speedup vs X")."""
    return name.lower() in re.sub(r"[^\w.+-]+", " ", c.header.lower()).split()


def _beside_strong_baseline(c: Column, valued: list[Column]) -> bool:
    """2.12 (issue 40): whether another value column is strongly named the baseline while
    ``c`` is named only weakly or not at all: a "speedup vs torch" beside a ``main``
    column compares the PR with a third implementation, so torch's column is no baseline
    of the PR."""
    if c.role.strength == 2:
        return False  # "speedup vs tuned" beside "Old": a second baseline the text names
    return any(o is not c and o.role.kind == "baseline" and o.role.strength == 2 for o in valued)


def _speedup_vs_pairs(
    valued: list[Column], speed_cols: list[Column], rows: list[tuple[int, list[str]]] | None = None
) -> list[tuple[Column, Column, Column]]:
    """``| ours us | dispatch us | cuBLAS us | Speedup vs dispatch | Speedup vs cuBLAS |``: each
    "speedup vs X" column names X's column as a baseline; the one value column no speedup
    column names is the PR's side. (baseline, optimized, speedup column) per named column."""
    named = _vs_named(valued, speed_cols)
    if not named:
        return []
    rest = [c for c in valued if all(c is not b for b, _ in named)]
    if len(named) > 1 and len(rest) > 1 and rows is not None:
        # 2.6: each "speedup vs X" column has its own PR column ("Candidate paired with X"):
        # the one column whose ratio to X's that speedup column states
        # (equal numbers in two such columns: the one between X's column and its speedup's)
        own = []
        for b, sc in named:
            cs = [c for c in rest if _agrees(rows, b, c, sc)]
            if len(cs) > 1:
                cs = [c for c in cs if min(b.j, sc.j) < c.j < max(b.j, sc.j)]
            own.append((b, cs, sc))
        if all(len(cs) == 1 for _b, cs, _sc in own):
            return [(b, cs[0], sc) for b, cs, sc in own]
    if len(rest) > 1 and rows is not None:
        # several other columns (a reference implementation beside the PR's): the PR's is
        # the one the stated ratios were worked out from
        b0, s0 = named[0]
        rest = [c for c in rest if _agrees(rows, b0, c, s0)]
    if len(rest) != 1:
        return []
    return [(b, rest[0], sc) for b, sc in named]


def _agrees(rows: list[tuple[int, list[str]]], base: Column, opt: Column, ratio: Column) -> bool:
    """Whether most rows' stated ratio equals base/opt or opt/base within 2%."""
    hits = total = 0
    for _i, row in rows:
        if max(base.j, opt.j, ratio.j) >= len(row):
            continue
        b, o = value_of(row[base.j]), value_of(row[opt.j])
        r = _stated_from(row[ratio.j], ratio.header)[0] or value_of(row[ratio.j])
        if not b or not o or not r:
            continue
        total += 1
        hits += any(abs(x / r - 1) <= 0.02 for x in (b / o, o / b))
    return total > 0 and hits >= 0.6 * total


_Labelled = tuple[int, list[str], Role]


def _row_sides(members: Rows, role_col: Column) -> list[tuple[_Labelled, _Labelled]]:
    """(baseline row, optimized row) pairs among one key group's rows, by the roles their
    role cells name: each strongest optimized row with its like-named baseline (or, when
    it is the only one, the strongest baseline)."""
    labelled = [(i, r, role_of(r[role_col.j])) for i, r in members]
    base = [x for x in labelled if x[2].kind == "baseline"]
    opt = [x for x in labelled if x[2].kind == "optimized"]
    if not base or not opt:
        return []
    if _strongest(base) != _strongest(opt):
        return []  # 2.12: a weakly named row beside a strong one is a third implementation
    top = [x for x in opt if x[2].strength == max(y[2].strength for y in opt)]
    sides = []
    for o in top:
        b = _counterpart(o[1][role_col.j], base, lambda x: x[1][role_col.j])
        if b is None and len(top) == 1:
            b = max(base, key=lambda x: x[2].strength)
        if b is not None:
            sides.append((b, o))
    return sides


def _strongest(xs: list[_Labelled]) -> int:
    return max(x[2].strength for x in xs)


def _row_pair_candidate(
    grid: Grid,
    block: Block,
    role_col: Column,
    sides: tuple[_Labelled, _Labelled],
    c: Column,
    speed: list[Column],
    rkeys: list[tuple[str, str]],
    n_metrics: int,
) -> Candidate | None:
    """One metric column's values in a (baseline row, optimized row) pair; ``None`` when
    the column is not a measurement or either cell holds no number."""
    b, o = sides
    if c.j >= len(b[1]) or c.j >= len(o[1]):
        return None
    if is_non_measurement(c.header) or ACCURACY.search(c.header):
        return None
    bv, ov = value_of(b[1][c.j]), value_of(o[1][c.j])
    if bv is None or ov is None:
        return None
    stated = stext = None
    for s in speed:
        if s.j < len(o[1]):
            stated, stext = _stated_from(o[1][s.j], s.header)
    hkey = _header_key(c.header)
    unit = unit_in(c.header) or unit_in(o[1][c.j])
    if hkey is not None and unit is None:
        unit = unit_in(o[1][role_col.j]) or unit_in(b[1][role_col.j])  # "this PR (us)"
    # one ratio beside several metrics belongs to the metric whose numbers it reproduces
    keep = n_metrics == 1 or (
        stated is not None
        and bv != 0
        and ov != 0
        and any(abs(x / stated - 1) <= 0.02 for x in (bv / ov, ov / bv))
    )
    ckeys = rkeys + [hkey] if hkey is not None else rkeys
    metric = "" if hkey is not None else strip_role_words(c.header)
    return Candidate(
        bv,
        ov,
        metric,
        unit,
        block,
        "table:rows",
        keys=ckeys,
        baseline_label=b[1][role_col.j],
        optimized_label=o[1][role_col.j],
        stated=stated if keep else None,
        stated_text=stext if keep else None,
        evidence=[
            grid.raw[b[0]] if b[0] < len(grid.raw) else "",
            grid.raw[o[0]] if o[0] < len(grid.raw) else "",
        ],
    )


_HEADER_KEY = re.compile(
    r"(?P<k>[A-Za-z][\w ]{0,15}?)\s*[=:]?\s*(?P<v>\d+(?:\s*[,x×]\s*\d+)*)|"
    r"(?P<t>\(\s*\d+(?:\s*,\s*\d+)+\s*\))"
)


def _header_key(header: str) -> tuple[str, str] | None:
    """The (key, value) a rows-are-sides table's column header names when it is a condition
    and not a metric: ``64`` (a batch), ``M=16``, ``bs 8``, ``(1, 4096, 4096)``. 2.12 (issue
    40): shapes and parameters in headers are keys, never the metric (the metric then comes
    from the unit the cells or the side labels carry)."""
    h = header.strip()
    if re.fullmatch(r"\d+", h):
        return ("batch_size", h)
    m = _HEADER_KEY.fullmatch(h)
    if m is None or (m.group("k") and (METRIC_WORDS.search(m.group("k")) or unit_in(h))):
        return None
    if m.group("t"):
        return ("shape", m.group("t"))
    return (m.group("k").strip(), m.group("v"))


def _row_pairs(
    grid: Grid, cols: list[Column], block: Block, rows: list[tuple[int, list[str]]]
) -> list[Candidate]:
    """Row comparisons: a key column whose cells are roles (``| main | ... |`` / ``| this
    pr | ... |``), the rows grouped by the other key columns."""
    role_col = _roles_in_rows(cols, rows)
    if role_col is None:
        return []
    other_keys = [c for c in cols if c.kind == "key" and c.j != role_col.j]
    metrics = [c for c in cols if c.kind in ("metric", "variant") and c.j != role_col.j]
    speed = [c for c in cols if c.kind in ("speedup", "ratio")]
    groups: dict[tuple[str, ...], list[tuple[int, list[str]]]] = {}
    for i, r in rows:
        gk = tuple(r[k.j] if k.j < len(r) else "" for k in other_keys)
        groups.setdefault(gk, []).append((i, r))
    # rows without their own key (continuation chunks) inherit nothing: grouped by order
    out: list[Candidate] = []
    for gk, members in groups.items():
        sides = _row_sides(members, role_col)
        if not sides:
            continue
        rkeys = [(grid.header[k.j], v) for k, v in zip(other_keys, gk, strict=True) if v.strip()]
        for bo, c in ((bo, c) for bo in sides for c in metrics):
            cand = _row_pair_candidate(grid, block, role_col, bo, c, speed, rkeys, len(metrics))
            if cand is not None:
                out.append(cand)
    return out
