"""The document model: a PR text split into blocks, each with the context around it.

Block kinds (each turned into candidate comparisons by its own module):

=============  ===================================================  =====================
kind           what                                                 module
=============  ===================================================  =====================
``table``      markdown pipe table or HTML ``<table>``                :mod:`.tables`
``code``       fenced code block: an aligned/pandas text table, or    :mod:`.aligned`,
               benchmark output records (``Avg latency: 1.2 s``)      :mod:`.records`
``text``       a run of plain lines: label/value records              :mod:`.records`,
               (``main: 9 us``), prose sentences                      :mod:`.prose`
=============  ===================================================  =====================

Context (heading, the prose just before, the line just before = the block's label, the
first line after = a caption) is what fills unit, metric, hardware, model and scope when
the block itself does not say.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def _one_line_span(line: str, mark: str) -> bool:
    """A line that opens and closes its own fence (text between): inline code, no block."""
    body = line.strip()[len(mark) :]
    return body.rstrip().endswith(mark) and bool(body.rstrip()[: -len(mark)].strip())


_HTML_TABLE = re.compile(r"<table\b.*?</table\s*>", re.I | re.S)
_PIPE_SEP = re.compile(r"^\s*\|?\s*:?-{1,}:?\s*(?:\|\s*:?-{1,}:?\s*)+\|?\s*$")
_HEADING = re.compile(r"^\s*(?:#{1,6}\s+\S|\*\*[^*]{2,80}\*\*:?\s*$|__[^_]{2,80}__:?\s*$)")
_DETAILS = re.compile(
    r"</?(?:details|summary|br|p|div|img|sub|sup|b|i|strong|em|code)\b[^>]*>", re.I
)


@dataclass
class Block:
    """A contiguous piece of the PR text of one kind, with its context."""

    kind: str  # "table" | "code" | "text"
    lines: list[str]
    index: int
    #: for tables: the parsed grid (header + rows of cleaned cells)
    grid: Grid | None = None
    heading: str = ""
    before: str = ""  # up to five prose lines before the block
    label: str = ""  # the non-empty line right before the block
    after: str = ""  # the first non-empty line after the block
    title: str = ""
    #: the text ends inside this block (an unclosed code fence): its last line may be cut
    truncated: bool = False

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def context(self) -> str:
        """Everything around the block that may name units, hardware, model or scope."""
        return f"{self.title}\n{self.heading}\n{self.before}\n{self.label}\n{self.after}"


@dataclass
class Grid:
    """A table: header cells and data rows of cleaned cells, plus each row's raw text."""

    header: list[str]
    rows: list[list[str]]
    raw: list[str] = field(default_factory=list)
    truncated_last: bool = False
    #: section-title rows (a single filled cell) before each data row, by row index
    sections: dict[int, str] = field(default_factory=dict)


def clean_cell(cell: str) -> str:
    """A cell's text without markup: tags, entities, emphasis, code ticks, extra spaces."""
    c = re.sub(r"<[^>]+>", " ", cell)
    c = html.unescape(c)
    c = c.replace("**", "").replace("__", "").replace("`", "")
    c = re.sub(r"(?<!\w)[*_](\S.*?\S|\S)[*_](?!\w)", r"\1", c)
    return re.sub(r"\s+", " ", c).strip()


def split_pipe_row(line: str) -> list[str]:
    """Cells of one markdown table row (escaped ``\\|`` kept inside a cell)."""
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    return [clean_cell(c) for c in re.split(r"(?<!\\)\|", s)]


#: a cell that is a number (with a short unit), not a name with digits in it ("fp8_bf16")
_NUMERIC_CELL = re.compile(r"^\s*[-+~≈]?\s*\d[\d,]*(?:\.\d+)?\s*[A-Za-zµμ/%×x]{0,8}\s*$")


def _split_open_row(line: str) -> list[str]:
    """Cells of a row of a table written without outer pipes (a spreadsheet paste): every
    pipe separates, so a leading ``| a | b`` has an empty first cell and a trailing
    ``a | b |  `` an empty last one (2.6)."""
    return [clean_cell(c) for c in re.split(r"(?<!\\)\|", line.rstrip("\n"))]


def _second_header(header: list[str], first: list[str]) -> bool:
    """Whether the first row under the separator is the header's second line: as wide as
    the header, no digit in any cell, and the header above it incomplete (blank cells) or
    repeating itself (``main | main | PR | PR``), so the two lines only mean something together."""
    if (
        len(first) != len(header)
        or any(_NUMERIC_CELL.match(c) for c in first)
        or sum(bool(c) for c in first) < 2
    ):
        return False
    named = [h for h in header if h]
    return len(named) < len(header) or len(set(named)) < len(named)


def _pipe_header(rows: list[str], sep_at: int) -> list[str]:
    """The header cells above the separator line, with a header written over two lines
    above it ("| | main | PR |" above "| bs | us | us |") joined cell by cell."""
    header = split_pipe_row(rows[sep_at - 1])
    if not rows[sep_at].lstrip().startswith("|") and rows[sep_at - 1].lstrip().startswith("|"):
        # a table without outer pipes (a spreadsheet paste: "a | b | c") whose header starts
        # with "|": that pipe closes an empty first cell, it is not an outer pipe
        header = ["", *header]
    # a header written over two lines ("| | main | PR |" above "| bs | us | us |")
    for extra in rows[: sep_at - 1][::-1]:
        up = split_pipe_row(extra)
        if len(up) == len(header):
            header = [f"{a} {b}".strip() for a, b in zip(up, header, strict=True)]
    return header


def _fill_grid(grid: Grid, data_lines: list[str], at_text_end: bool, outer: bool) -> None:
    """Add the data rows to ``grid``: a last row cut by the end of the text is dropped
    (flagged), a repeated header skipped, and a row with one filled cell (a section title)
    kept as the section of the rows below it."""
    header = grid.header
    for j, ln in enumerate(data_lines):
        cells = split_pipe_row(ln)
        last = j == len(data_lines) - 1
        if (
            last
            and at_text_end
            and (len(cells) < len(header) or (outer and not ln.rstrip().endswith("|")))
        ):
            grid.truncated_last = True
            continue
        if cells == header:
            continue  # a repeated header
        filled = [c for c in cells if c]
        if (
            len(filled) == 1
            and cells[0]
            and not re.search(r"\d", "".join(cells[1:]))
            and len(header) > 2
        ):
            grid.sections[len(grid.rows)] = cells[0]
            continue
        grid.rows.append(cells)
        grid.raw.append(ln)


def _pipe_grid(lines: list[str], at_text_end: bool) -> Grid | None:
    rows = [ln for ln in lines if ln.strip()]
    if len(rows) < 2:
        return None
    sep_at = next((i for i, ln in enumerate(rows) if _PIPE_SEP.match(ln)), None)
    if sep_at is None or sep_at == 0:
        return None
    header = _pipe_header(rows, sep_at)
    data_lines = [ln for ln in rows[sep_at + 1 :] if not _PIPE_SEP.match(ln)]
    open_rows = (
        data_lines
        and sum(not ln.lstrip().startswith("|") for ln in data_lines) > len(data_lines) / 2
    )
    if open_rows and data_lines and not any(_NUMERIC_CELL.match(c) for c in header):
        # a spreadsheet paste whose first line is a title ("model/TP1 |  |  |  |") and whose
        # real header is the first row under the separator: read both with every pipe a
        # separator, so that their widths agree with the data rows
        wide = _split_open_row(rows[sep_at - 1])
        first = _split_open_row(data_lines[0])
        widths = {len(split_pipe_row(ln)) for ln in data_lines[1:]}
        if (
            sum(bool(c) for c in wide) == 1
            and len(wide) == len(first)
            and widths == {len(wide)}
            and _second_header(wide, first)
        ):
            header = [f"{a} {b}".strip() for a, b in zip(wide, first, strict=True)]
            data_lines.pop(0)
    if data_lines and _second_header(header, split_pipe_row(data_lines[0])):
        # the header's second line below the separator ("main | main | PR | PR" over
        # "reqs / sec | toks / sec | reqs / sec | toks / sec"): one header, cell by cell
        second = split_pipe_row(data_lines.pop(0))
        header = [f"{a} {b}".strip() for a, b in zip(header, second, strict=True)]
    grid = Grid(header, [], [])
    # a missing closing pipe marks a cut row only in a table whose rows close with one
    outer = rows[sep_at - 1].rstrip().endswith("|") and not open_rows
    _fill_grid(grid, data_lines, at_text_end, outer)
    return grid


def html_grid(table_html: str) -> Grid | None:
    """Rows of an HTML table (``<th>``/``<td>``), first row the header; colspans ignored."""
    rows: list[list[str]] = []
    raw: list[str] = []
    for tr in re.findall(r"<tr\b.*?(?:</tr\s*>|(?=<tr\b)|$)", table_html, re.I | re.S):
        cells = re.findall(
            r"<t[hd]\b[^>]*>(.*?)(?:</t[hd]\s*>|(?=<t[hd]\b)|(?=</tr)|$)", tr, re.I | re.S
        )
        if cells:
            rows.append([clean_cell(c) for c in cells])
            raw.append(tr)
    if len(rows) < 2:
        return None
    return Grid(rows[0], rows[1:], raw[1:])


def _is_heading(line: str) -> bool:
    return bool(_HEADING.match(line))


class _Splitter:
    """The state of one pass over a PR body's lines: the blocks so far, the text lines since
    the last table/code block, the current heading and the prose lines read (the context
    each new block is given)."""

    def __init__(self, title: str, lines: list[str]) -> None:
        self.title = title
        self.lines = lines
        self.blocks: list[Block] = []
        self.text_buf: list[str] = []
        self.heading = ""
        self.prose_tail: list[str] = []

    def ctx_block(self, kind: str, blines: list[str], grid: Grid | None = None) -> Block:
        """A table/code block with the context read so far (label: the last text line)."""
        label = next((ln.strip() for ln in reversed(self.text_buf) if ln.strip()), "")
        return Block(
            kind,
            blines,
            len(self.blocks),
            grid,
            self.heading,
            "\n".join(self.prose_tail[-5:]),
            label,
            "",
            self.title,
        )

    def flush_text(self) -> None:
        """Close the text lines since the last block as a text block (if any is filled)."""
        if any(ln.strip() for ln in self.text_buf):
            self.blocks.append(
                Block(
                    "text",
                    list(self.text_buf),
                    len(self.blocks),
                    None,
                    self.heading,
                    "\n".join(self.prose_tail[-5:]),
                    "",
                    "",
                    self.title,
                )
            )

    def emit(self, blk: Block) -> None:
        """Append a table/code block after the text before it; a new text run starts."""
        self.flush_text()
        blk.index = len(self.blocks)
        self.blocks.append(blk)
        self.text_buf = []

    def fence(self, i: int, mark: str) -> int:
        """A fenced code block opening at line ``i``; the index of the line after it."""
        lines = self.lines
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(mark[0] * len(mark)):
            j += 1
        body_lines = lines[i + 1 : j]
        cut = j >= len(lines)  # unclosed: authors forget the fence; the lines are read
        blk = self.ctx_block("code", body_lines)
        blk.truncated = cut
        self.emit(blk)
        return j + 1

    def html(self, line: str) -> None:
        """A placeholder line holding one HTML table (see :func:`split_blocks`)."""
        grid = html_grid(line[5:])
        if grid is not None:
            self.emit(self.ctx_block("table", [line[5:]], grid))

    def pipe_table(self, i: int) -> int | None:
        """A markdown table whose header is line ``i``; the index of the line after it, or
        ``None`` when the lines do not make a grid (then line ``i`` is text)."""
        lines = self.lines
        j = i + 2
        while j < len(lines) and "|" in lines[j] and lines[j].strip():
            j += 1
        at_end = j >= len(lines) or not any(ln.strip() for ln in lines[j:])
        grid = _pipe_grid(lines[i:j], at_end)
        if grid is None:
            return None
        # the line before may be the table's upper header row
        self.emit(self.ctx_block("table", lines[i:j], grid))
        return j

    def text_line(self, line: str) -> None:
        """A line of prose: it may set the heading, and it joins the text run."""
        stripped = _DETAILS.sub(" ", line).strip()
        if _is_heading(line):
            self.heading = clean_cell(line.lstrip("#"))
        elif stripped:
            self.prose_tail.append(stripped)
        self.text_buf.append(_DETAILS.sub(" ", line))

    def step(self, i: int) -> int:
        """Read the block or line starting at line ``i``; the index of the next line."""
        lines = self.lines
        line = lines[i]
        fence = _FENCE.match(line)
        if fence and _one_line_span(line, fence.group(1)):
            fence = None  # "```python3 -m sglang.bench_serving ...```": a code span, not a fence
        if fence:
            return self.fence(i, fence.group(1))
        if line.startswith("\x00HTML"):
            self.html(line)
            return i + 1
        if "|" in line and i + 1 < len(lines) and _PIPE_SEP.match(lines[i + 1]):
            after = self.pipe_table(i)
            if after is not None:
                return after
        self.text_line(line)
        return i + 1


def split_blocks(text: str) -> list[Block]:
    """Split a PR text (first line = title) into blocks with their context."""
    title, _, body = text.partition("\n")
    # HTML comments are not rendered (PR templates, hidden notes): nobody reads them as results
    body = re.sub(r"<!--.*?(?:-->|$)", "", body, flags=re.S)
    body = _HTML_TABLE.sub(lambda m: "\n\x00HTML" + m.group(0).replace("\n", " ") + "\n", body)
    sp = _Splitter(title, body.split("\n"))
    i = 0
    while i < len(sp.lines):
        i = sp.step(i)
    sp.flush_text()
    blocks = sp.blocks
    # captions: the first text line after a table/code block
    for k, b in enumerate(blocks):
        if b.kind != "text" and k + 1 < len(blocks) and blocks[k + 1].kind == "text":
            b.after = next((ln.strip() for ln in blocks[k + 1].lines if ln.strip()), "")
    return blocks
