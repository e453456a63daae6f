r"""SWE-RL style reward for ``kernel_commits``: SEARCH/REPLACE edits scored against the real commit.

Only the standard library is used, because this file is also shipped inside the
published ``code/reward.py`` (see ``rewards.export``).

Edit format
-----------
A completion carries one or more blocks::

    ### path/to/file.cu            (optional)
    <<<<<<< SEARCH
    lines copied from the current file
    =======
    the lines that replace them
    >>>>>>> REPLACE

Prose, code fences (lines starting with three backticks) and anything before the last
``</think>`` around the blocks are ignored, because chat models wrap their answers in
all of these. The block syntax itself is strict, because a lenient parser teaches a
policy sloppy output that real tooling rejects:

* marker lines must be exactly the marker at the start of the line (trailing whitespace
  is allowed); an indented marker is prose;
* every ``<<<<<<< SEARCH`` needs one ``=======`` and then one ``>>>>>>> REPLACE``; a second
  divider, a nested SEARCH, a REPLACE before the divider, an unterminated block, or a
  divider / REPLACE marker outside a block makes the whole completion malformed;
* a completion without any block is malformed;
* everything between the markers is literal content, fences included.

Each section's text is its lines, each ended by ``\n``. A section whose last line is the
unified-diff marker ``\ No newline at end of file`` loses that line and its final ``\n``;
this is the only way to say that the file must end without a newline, and the oracle
uses it only when the real commit does exactly that.

Applying edits
--------------
Blocks are applied in order, each to the file as changed by the blocks before it. A
SEARCH text must occur exactly once in that text, counting overlapping occurrences (so
``"a\na\n"`` is ambiguous inside ``"a\na\na\n"``); an empty SEARCH therefore only
matches an empty file. Matching is exact: no whitespace, indentation or line-ending
normalisation, so a CRLF file needs CRLF blocks.

A non-empty file that does not end with a newline is read as if it had one, and gets it
removed again after the last block: models copy the last line with its newline, and the
file keeps lacking one (unless a block appends an empty line, which is how the oracle
adds the missing newline).

Score
-----
``changed_lines(old, new)`` are the ``-``/``+`` lines of
``difflib.unified_diff(lines(old), lines(new), n=0)`` without the ``---``/``+++``
headers and ``@@`` hunk lines, in diff order, each still carrying its line terminator
(``lines`` splits on ``\n`` only, keeping it; a last line without newline is its own
line). ``patch_reward`` is ``-1.0`` for a malformed completion or a SEARCH that does not
match exactly once, and otherwise::

    difflib.SequenceMatcher(None, changed_lines(before, predicted),
                            changed_lines(before, after)).ratio()

Comparing the changed lines of the *resulting file* rather than the edit text makes the
score independent of how the change was written down: one big block, more context,
merged or split hunks all give the same file and therefore the same score, and a
prediction identical to the real ``after_code`` always scores exactly 1.0. Line
granularity (instead of SWE-RL's characters) keeps the cost proportional to the number
of changed lines, which lets the reward run at hundreds of rows per second on 20K-char
files; the real commit's changed lines are cached per (before, after) pair because GRPO
scores many completions of the same prompt.

Oracle
------
``oracle_edit(before, after)`` writes the real change as minimal-context blocks (see
``oracle_edits``), re-parses and re-applies them, and so always rebuilds ``after_code``
byte for byte (insertions at either end, deletions, CRLF, tabs, repeated lines and
final-newline changes included) and scores 1.0. The one thing no block can carry is a
changed line, or a line needed as context, that reads exactly like a block marker
(``=======`` in a docstring underline, say); the oracle then falls back to one
whole-file block, which hits the same limit, so such a row scores -1 for every rendering.
"""

from __future__ import annotations

import difflib
import functools
from typing import NamedTuple

__all__ = [
    "MALFORMED_REWARD",
    "Edit",
    "EditDoesNotApply",
    "MalformedEdit",
    "apply_edits",
    "changed_lines",
    "oracle_edit",
    "oracle_edits",
    "parse_search_replace",
    "patch_reward",
    "patch_similarity",
    "render_edits",
    "split_lines",
    "strip_reasoning",
]

SEARCH_MARKER = "<<<<<<< SEARCH"
DIVIDER_MARKER = "======="
REPLACE_MARKER = ">>>>>>> REPLACE"
NO_EOL_MARKER = "\\ No newline at end of file"
PATH_PREFIX = "### "
FENCE = "```"
THINK_END = "</think>"

#: What a malformed or non-applying completion earns (SWE-RL's value).
MALFORMED_REWARD = -1.0


class MalformedEdit(ValueError):
    """The completion does not follow the SEARCH/REPLACE block syntax; ``reason`` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class EditDoesNotApply(ValueError):
    """Block ``index`` (0-based) does not match the current file exactly once."""

    def __init__(self, reason: str, index: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.index = index


class Edit(NamedTuple):
    """One SEARCH/REPLACE block: replace the single occurrence of ``search`` by ``replace``.

    ``path`` is the ``### path`` line in front of the block, if any. It is kept for
    callers that care, but the reward ignores it: every ``kernel_commits`` row is one
    file, and a model's rendering of the path ("a/x.cu", "x.cu") should not decide it.
    A NamedTuple rather than a dataclass because dataclasses need their module in
    ``sys.modules``, which the standalone ``reward.py`` cannot promise when exec'd.
    """

    search: str
    replace: str
    path: str | None = None


def strip_reasoning(text: str) -> str:
    """The part of a completion after its last ``</think>``: drafts inside it don't count."""
    cut = text.rfind(THINK_END)
    return text if cut < 0 else text[cut + len(THINK_END) :]


def _marker(line: str) -> str | None:
    """Which block marker ``line`` is, if any (exact, at column 0, trailing space allowed)."""
    stripped = line.rstrip()
    if stripped in (SEARCH_MARKER, DIVIDER_MARKER, REPLACE_MARKER):
        return stripped
    return None


def _section_text(lines: list[str], where: str, block: int) -> str:
    """Join a section's lines, honouring a trailing no-newline-at-end-of-file marker."""
    if lines and lines[-1].rstrip() == NO_EOL_MARKER:
        body = lines[:-1]
        if not body:
            raise MalformedEdit(f"block {block}: {where} holds only the no-newline marker")
        return "\n".join(body)
    return "".join(line + "\n" for line in lines)


def parse_search_replace(completion: str) -> list[Edit]:
    """All SEARCH/REPLACE blocks of a completion, in order.

    Raises ``MalformedEdit`` (with a human-readable ``reason``) when the block syntax is
    broken or there is no block; see the module docstring for the exact grammar.
    """
    if not isinstance(completion, str):
        raise MalformedEdit(f"completion is a {type(completion).__name__}, not text")
    parser = _SearchReplaceParser()
    for number, line in enumerate(strip_reasoning(completion).split("\n"), start=1):
        marker = _marker(line)
        if parser.state == "prose":
            parser.prose_line(number, line, marker)
        elif parser.state == "search":
            parser.search_line(number, line, marker)
        else:
            parser.replace_line(number, line, marker)
    if parser.state != "prose":
        raise MalformedEdit(f"block {parser.block} is not terminated by {REPLACE_MARKER!r}")
    if not parser.edits:
        raise MalformedEdit("no SEARCH/REPLACE block")
    return parser.edits


class _SearchReplaceParser:
    """``parse_search_replace``'s state, one method per section a line can be in: prose
    (where a ``### path`` line names the next block's file), SEARCH or REPLACE."""

    def __init__(self) -> None:
        self.edits: list[Edit] = []
        self.state = "prose"
        self.pending_path: str | None = None
        self.block_path: str | None = None
        self.search: list[str] = []
        self.replace: list[str] = []
        self.block = 0

    def prose_line(self, number: int, line: str, marker: str | None) -> None:
        """Outside a block: a SEARCH marker opens one; a path line is remembered until
        other prose (fences aside) comes between it and the block."""
        if marker == SEARCH_MARKER:
            self.block += 1
            self.state, self.block_path = "search", self.pending_path
            self.search, self.replace = [], []
        elif marker is not None:
            raise MalformedEdit(f"line {number}: {marker!r} outside a SEARCH/REPLACE block")
        elif line.startswith(PATH_PREFIX):
            self.pending_path = line[len(PATH_PREFIX) :].strip() or None
        elif line.strip() and not line.lstrip().startswith(FENCE):
            self.pending_path = None

    def search_line(self, number: int, line: str, marker: str | None) -> None:
        """In the SEARCH section, up to the ======= divider."""
        if marker == DIVIDER_MARKER:
            self.state = "replace"
        elif marker is not None:
            raise MalformedEdit(f"line {number}: {marker!r} before the ======= divider")
        else:
            self.search.append(line)

    def replace_line(self, number: int, line: str, marker: str | None) -> None:
        """In the REPLACE section: the REPLACE marker closes the block into an ``Edit``."""
        if marker == REPLACE_MARKER:
            self.edits.append(
                Edit(
                    _section_text(self.search, "SEARCH", self.block),
                    _section_text(self.replace, "REPLACE", self.block),
                    self.block_path,
                )
            )
            self.state, self.pending_path = "prose", None
        elif marker is not None:
            raise MalformedEdit(f"line {number}: {marker!r} inside the REPLACE section")
        else:
            self.replace.append(line)


def _find_unique(text: str, needle: str) -> int:
    """Index of the only occurrence of ``needle`` (overlaps count), -1 if none, -2 if several."""
    at = text.find(needle)
    if at < 0:
        return -1
    return -2 if text.find(needle, at + 1) >= 0 else at


def apply_edits(text: str, edits: list[Edit]) -> str:
    """Apply blocks in order; raise ``EditDoesNotApply`` unless each matches exactly once."""
    virtual_eol = bool(text) and not text.endswith("\n")
    work = text + "\n" if virtual_eol else text
    for index, edit in enumerate(edits):
        at = _find_unique(work, edit.search)
        if at == -1:
            raise EditDoesNotApply(f"SEARCH block {index + 1} does not occur in the file", index)
        if at == -2:
            raise EditDoesNotApply(f"SEARCH block {index + 1} occurs more than once", index)
        work = work[:at] + edit.replace + work[at + len(edit.search) :]
    if virtual_eol and work.endswith("\n"):
        work = work[:-1]
    return work


def split_lines(text: str) -> list[str]:
    """Lines split on ``\\n`` only, each keeping it (``str.splitlines`` would also split on
    form feeds and Unicode separators, which do occur in C sources)."""
    if not text:
        return []
    parts = text.split("\n")
    last = parts.pop()
    lines = [part + "\n" for part in parts]
    if last:
        lines.append(last)
    return lines


def changed_lines(old: str, new: str) -> list[str]:
    """The ``-``/``+`` lines of ``unified_diff(lines(old), lines(new), n=0)``, headers excluded.

    Computed from the same ``SequenceMatcher(None, a, b)`` opcodes ``unified_diff`` uses,
    without building hunk headers.
    """
    a, b = split_lines(old), split_lines(new)
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes():
        if tag in ("replace", "delete"):
            out.extend("-" + line for line in a[i1:i2])
        if tag in ("replace", "insert"):
            out.extend("+" + line for line in b[j1:j2])
    return out


@functools.lru_cache(maxsize=256)
def _reference_changes(before_code: str, after_code: str) -> tuple[str, ...]:
    """The real commit's changed lines, cached: GRPO scores a group per prompt."""
    return tuple(changed_lines(before_code, after_code))


def patch_similarity(before_code: str, predicted_code: str, after_code: str) -> float:
    """Similarity in [0, 1] of the predicted file's changed lines to the real commit's."""
    if predicted_code == after_code:
        return 1.0  # identical changed lines; SequenceMatcher would also say 1.0
    reference = list(_reference_changes(before_code, after_code))
    predicted = changed_lines(before_code, predicted_code)
    return difflib.SequenceMatcher(None, predicted, reference).ratio()


def patch_reward(completion: str, before_code: str, after_code: str, **kwargs: object) -> float:
    """SWE-RL reward of one completion: -1.0 if malformed / not applying, else the similarity.

    Extra keyword arguments (other dataset columns) are accepted and ignored.
    """
    try:
        predicted = apply_edits(before_code, parse_search_replace(completion))
    except (MalformedEdit, EditDoesNotApply):
        return MALFORMED_REWARD
    return patch_similarity(before_code, predicted, after_code)


def _render_section(text: str) -> list[str]:
    """Block lines for a section text (inverse of ``_section_text``)."""
    if not text:
        return []
    if text.endswith("\n"):
        return text[:-1].split("\n")
    return [*text.split("\n"), NO_EOL_MARKER]


def render_edits(edits: list[Edit], path: str | None = None) -> str:
    """SEARCH/REPLACE text for ``edits``; ``path`` (or each edit's own) goes in a ``###`` line."""
    out: list[str] = []
    for edit in edits:
        name = path if path is not None else edit.path
        if name:
            out.append(PATH_PREFIX + name)
        out.append(SEARCH_MARKER)
        out.extend(_render_section(edit.search))
        out.append(DIVIDER_MARKER)
        out.extend(_render_section(edit.replace))
        out.append(REPLACE_MARKER)
    return "\n".join(out) + "\n" if out else ""


def _whole_file_edit(before_code: str, after_code: str) -> Edit:
    """One block replacing the entire file: always unique, used as the last resort."""
    virtual_eol = bool(before_code) and not before_code.endswith("\n")
    if virtual_eol:
        return Edit(before_code + "\n", after_code + "\n")
    return Edit(before_code, after_code)


def oracle_edits(before_code: str, after_code: str) -> list[Edit]:
    """Minimal-context blocks that turn ``before_code`` into exactly ``after_code``.

    Hunks come from a line diff. Each block starts with just the changed lines (a pure
    insertion has none, so it starts empty) and grows one line of context on each side
    until its SEARCH occurs exactly once in the file as edited by the previous blocks.
    Backward context is text already produced by earlier blocks and is copied into the
    REPLACE unchanged; forward context stops at the next hunk, which is then merged into
    the block. The whole current file is always unique, so the growth terminates.
    """
    virtual_eol = bool(before_code) and not before_code.endswith("\n")
    current = before_code + "\n" if virtual_eol else before_code
    target = after_code + "\n" if virtual_eol else after_code
    if current == target:
        # Nothing changed: a no-op block keeps the completion well-formed.
        return [_whole_file_edit(before_code, after_code)]
    a, b = split_lines(current), split_lines(target)
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    hunks = [[i1, i2, j1, j2] for tag, i1, i2, j1, j2 in opcodes if tag != "equal"]
    cur = list(a)
    text = current
    offset = 0  # current-file index minus before-file index, past the applied hunks
    edits: list[Edit] = []
    k = 0
    while k < len(hunks):
        i1, i2, j1, j2 = hunks[k]
        lo = hi = 0
        while True:
            p, q = i1 + offset, i2 + offset
            search = "".join(cur[p - lo : q + hi])
            if (search or not text) and _find_unique(text, search) >= 0:
                break
            grew = False
            if p - lo > 0:
                lo += 1
                grew = True
            limit = hunks[k + 1][0] + offset if k + 1 < len(hunks) else len(cur)
            if q + hi < limit:
                hi += 1
                grew = True
            elif k + 1 < len(hunks):
                # The forward context ran into the next hunk: take it into this block.
                _, i2, _, j2 = hunks.pop(k + 1)
                hi = 0
                grew = True
            if not grew:
                break  # the whole file: unique by construction
        p, q = i1 + offset, i2 + offset
        new_lines = cur[p - lo : p] + b[j1:j2] + cur[q : q + hi]
        edits.append(Edit(search, "".join(new_lines)))
        cur[p - lo : q + hi] = new_lines
        text = "".join(cur)
        offset += (j2 - j1) - (i2 - i1)
        k += 1
    return edits


def oracle_edit(before_code: str, after_code: str, path: str | None = None) -> str:
    """The reference SEARCH/REPLACE completion for the real change ``before → after``.

    The result is re-parsed and re-applied; if that does not give ``after_code`` exactly
    (only possible when the file itself contains a line that looks like a block marker),
    one whole-file block is returned instead, which is the best any rendering can do.
    """
    rendered = render_edits(oracle_edits(before_code, after_code), path)
    if _reproduces(rendered, before_code, after_code):
        return rendered
    return render_edits([_whole_file_edit(before_code, after_code)], path)


def _reproduces(completion: str, before_code: str, after_code: str) -> bool:
    """Whether ``completion`` parses, applies and yields exactly ``after_code``."""
    try:
        return apply_edits(before_code, parse_search_replace(completion)) == after_code
    except (MalformedEdit, EditDoesNotApply):
        return False
