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


def _second_header(header: list[str], first: list[str]) -> bool:
    """Whether the first row under the separator is the header's second line: as wide as
    the header, no digit in any cell, and the header above it incomplete (blank cells) or
    repeating itself (``main | main | PR | PR``), so the two lines only mean something together."""
    if (
        len(first) != len(header)
        or any(re.search(r"\d", c) for c in first)
        or sum(bool(c) for c in first) < 2
    ):
        return False
    named = [h for h in header if h]
    return len(named) < len(header) or len(set(named)) < len(named)


def _pipe_grid(lines: list[str], at_text_end: bool) -> Grid | None:
    rows = [ln for ln in lines if ln.strip()]
    if len(rows) < 2:
        return None
    sep_at = next((i for i, ln in enumerate(rows) if _PIPE_SEP.match(ln)), None)
    if sep_at is None or sep_at == 0:
        return None
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
    data_lines = [ln for ln in rows[sep_at + 1 :] if not _PIPE_SEP.match(ln)]
    if data_lines and _second_header(header, split_pipe_row(data_lines[0])):
        # the header's second line below the separator ("main | main | PR | PR" over
        # "reqs / sec | toks / sec | reqs / sec | toks / sec"): one header, cell by cell
        second = split_pipe_row(data_lines.pop(0))
        header = [f"{a} {b}".strip() for a, b in zip(header, second, strict=True)]
    grid = Grid(header, [], [])
    # a missing closing pipe marks a cut row only in a table whose rows close with one
    outer = rows[sep_at - 1].rstrip().endswith("|")
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


def split_blocks(text: str) -> list[Block]:
    """Split a PR text (first line = title) into blocks with their context."""
    title, _, body = text.partition("\n")
    # HTML comments are not rendered (PR templates, hidden notes): nobody reads them as results
    body = re.sub(r"<!--.*?(?:-->|$)", "", body, flags=re.S)
    body = _HTML_TABLE.sub(lambda m: "\n\x00HTML" + m.group(0).replace("\n", " ") + "\n", body)
    lines = body.split("\n")
    blocks: list[Block] = []
    i = 0
    text_buf: list[str] = []
    heading = ""
    prose_tail: list[str] = []

    def ctx_block(kind: str, blines: list[str], grid: Grid | None = None) -> Block:
        label = next((ln.strip() for ln in reversed(text_buf) if ln.strip()), "")
        return Block(
            kind, blines, len(blocks), grid, heading, "\n".join(prose_tail[-5:]), label, "", title
        )

    def flush_text() -> None:
        if any(ln.strip() for ln in text_buf):
            blocks.append(
                Block(
                    "text",
                    list(text_buf),
                    len(blocks),
                    None,
                    heading,
                    "\n".join(prose_tail[-5:]),
                    "",
                    "",
                    title,
                )
            )

    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence and _one_line_span(line, fence.group(1)):
            fence = None  # "```python3 -m sglang.bench_serving ...```": a code span, not a fence
        if fence:
            mark = fence.group(1)
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(mark[0] * len(mark)):
                j += 1
            body_lines = lines[i + 1 : j]
            cut = j >= len(lines)  # unclosed: authors forget the fence; the lines are read
            blk = ctx_block("code", body_lines)
            blk.truncated = cut
            flush_text()
            blk.index = len(blocks)
            blocks.append(blk)
            text_buf = []
            i = j + 1
            continue
        if line.startswith("\x00HTML"):
            grid = html_grid(line[5:])
            if grid is not None:
                blk = ctx_block("table", [line[5:]], grid)
                flush_text()
                blk.index = len(blocks)
                blocks.append(blk)
                text_buf = []
            i += 1
            continue
        if "|" in line and i + 1 < len(lines) and _PIPE_SEP.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and "|" in lines[j] and lines[j].strip():
                j += 1
            at_end = j >= len(lines) or not any(ln.strip() for ln in lines[j:])
            grid = _pipe_grid(lines[i:j], at_end)
            if grid is not None:
                # the line before may be the table's upper header row
                blk = ctx_block("table", lines[i:j], grid)
                flush_text()
                blk.index = len(blocks)
                blocks.append(blk)
                text_buf = []
                i = j
                continue
        stripped = _DETAILS.sub(" ", line).strip()
        if _is_heading(line):
            heading = clean_cell(line.lstrip("#"))
        elif stripped:
            prose_tail.append(stripped)
        text_buf.append(_DETAILS.sub(" ", line))
        i += 1
    flush_text()
    # captions: the first text line after a table/code block
    for k, b in enumerate(blocks):
        if b.kind != "text" and k + 1 < len(blocks) and blocks[k + 1].kind == "text":
            b.after = next((ln.strip() for ln in blocks[k + 1].lines if ln.strip()), "")
    return blocks
