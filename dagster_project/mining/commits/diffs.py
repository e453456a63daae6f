"""Unified diffs: split git's output per file, read hunks, apply them, verify with git.

The row's ``diff`` is git's own patch (``diff-tree -p``), so ``git apply`` accepts it by
construction; this module holds the pieces that prove it on every row:

* :func:`split_diff_tree` cuts one ``diff-tree --stdin -p`` stream into per-(commit, path)
  patches.
* :func:`changed_lines` gives the removed (old-side) and added (new-side) line numbers, which
  ``kernel_body`` intersects with kernel function ranges and ``lines_changed`` counts.
* :func:`apply_patch` is a strict pure-Python applier (context must match at the stated
  line), cheap enough for an asset check over every row.
* :func:`verify_with_git_apply` runs the real ``git apply`` once over many rows.

Text is split on ``"\\n"`` only: ``str.splitlines`` would also split on ``\\x0c``, ``\\r``
and Unicode separators, which git does not treat as line ends.

Non-UTF-8 bytes: code and diff are decoded with ``errors="replace"`` (each invalid byte
sequence becomes U+FFFD). UTF-8 never lets an invalid sequence swallow a ``\\n``, so
decoding a whole blob and decoding it line by line agree, and the decoded diff applied to
the decoded before_code gives the decoded after_code exactly. The original bytes stay in
git (``sha`` + ``path``).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_SHA_LINE_RE = re.compile(rb"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
NO_NEWLINE = "\\ No newline at end of file"


class PatchError(ValueError):
    """A patch does not apply to the text it was given."""


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` kept, split on ``\\n`` only (git's notion of a line)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _unquote_git_path(raw: bytes) -> bytes:
    """Undo git's C-style quoting of unusual path names (``"a/p\\303\\251"``)."""
    if not raw.startswith(b'"'):
        return raw
    body = raw[1:-1]
    out = bytearray()
    i = 0
    escapes = {
        b"n": b"\n",
        b"t": b"\t",
        b'"': b'"',
        b"\\": b"\\",
        b"a": b"\a",
        b"b": b"\b",
        b"f": b"\f",
        b"r": b"\r",
        b"v": b"\v",
    }
    while i < len(body):
        c = body[i : i + 1]
        if c == b"\\" and i + 1 < len(body):
            n = body[i + 1 : i + 2]
            if n.isdigit():
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
            out += escapes.get(n, n)
            i += 2
            continue
        out += c
        i += 1
    return bytes(out)


def _path_of_block(header: bytes) -> str:
    """The file path of one ``diff --git`` block (new side; both sides agree without
    renames)."""
    for line in header.split(b"\n")[1:8]:
        if line.startswith(b"+++ ") and line[4:] != b"/dev/null":
            return _unquote_git_path(line[4:])[2:].decode("utf-8", "surrogateescape")
        if line.startswith(b"--- ") and line[4:] != b"/dev/null":
            return _unquote_git_path(line[4:])[2:].decode("utf-8", "surrogateescape")
    first = header.split(b"\n", 1)[0][len(b"diff --git ") :]
    if first.startswith(b'"'):
        end = first.index(b'"', 1)
        while first[end - 1 : end] == b"\\":
            end = first.index(b'"', end + 1)
        return _unquote_git_path(first[: end + 1])[2:].decode("utf-8", "surrogateescape")
    half = (len(first) - 1) // 2  # "a/P b/P": both halves have the same length
    return first[2:half].decode("utf-8", "surrogateescape")


# A commit header (a bare 40/64-hex line) or a file header. Inside a patch every line
# starts with " ", "+", "-", "@", "\\" or a header keyword, so neither can be content.
# The pattern starts with a literal "\n", which the regex engine finds with a fast scan.
_BLOCK_START_RE = re.compile(rb"\n(?:([0-9a-f]{40}(?:[0-9a-f]{24})?)(?=\n)|(?=diff --git ))")


def split_diff_tree(raw: bytes) -> dict[tuple[str, str], bytes]:
    """Per-(commit sha, path) patches from ``git diff-tree --stdin -p`` output."""
    patches: dict[tuple[str, str], bytes] = {}
    text = b"\n" + raw
    sha = ""
    start = -1  # offset of the current file block in ``text``
    for m in _BLOCK_START_RE.finditer(text):
        if start >= 0 and sha:
            block = text[start : m.start() + 1]
            patches[(sha, _path_of_block(block))] = block
            start = -1
        if m.group(1):
            sha = m.group(1).decode()
        else:
            start = m.end()
    if start >= 0 and sha:
        block = text[start:]
        patches[(sha, _path_of_block(block))] = block
    return patches


def is_binary_patch(patch: bytes | str) -> bool:
    """git prints ``Binary files … differ`` instead of hunks for binary content."""
    if isinstance(patch, bytes):
        return b"\nBinary files " in patch
    return "\nBinary files " in patch


@dataclass(frozen=True)
class ChangedLines:
    """1-based line numbers removed from the old side and added on the new side."""

    old: list[int]
    new: list[int]

    @property
    def count(self) -> int:
        """Added + deleted lines, as ``git diff --numstat`` counts them."""
        return len(self.old) + len(self.new)


def changed_lines(diff: str) -> ChangedLines:
    """Removed and added line numbers of a single-file unified diff."""
    old: list[int] = []
    new: list[int] = []
    o = n = 0
    in_hunks = False
    for line in diff.split("\n"):
        if line.startswith("@@"):
            m = _HUNK_RE.match(line)
            if m:
                o, n = int(m.group(1)), int(m.group(3))
                in_hunks = True
            continue
        if not in_hunks or not line:
            continue
        tag = line[0]
        if tag == " ":
            o += 1
            n += 1
        elif tag == "-":
            old.append(o)
            o += 1
        elif tag == "+":
            new.append(n)
            n += 1
    return ChangedLines(old, new)


def _first_hunk(lines: list[str]) -> int:
    """Index of the first hunk header, past the file headers; a binary patch has none."""
    i = 0
    while i < len(lines) and not lines[i].startswith("@@"):
        if lines[i].startswith("Binary files "):
            raise PatchError("binary patch")
        i += 1
    return i


def _hunk_body(lines: list[str], i: int) -> tuple[list[tuple[str, str]], int]:
    """The (tag, line text) pairs of the hunk whose body starts at diff line ``i``, and the
    index of the line after it; a no-newline marker cuts the ``\\n`` of the line before."""
    body: list[tuple[str, str]] = []
    while i < len(lines) and not lines[i].startswith("@@"):
        line = lines[i]
        if line == NO_NEWLINE:
            if not body:
                raise PatchError("no-newline marker before any line")
            tag, text = body[-1]
            body[-1] = (tag, text[:-1])
        elif line and line[0] in " -+":
            body.append((line[0], line[1:] + "\n"))
        elif line == "" and i == len(lines) - 1:
            pass
        else:
            raise PatchError(f"unexpected diff line {i + 1}: {line[:80]!r}")
        i += 1
    return body, i


def _apply_body(src: list[str], pos: int, body: list[tuple[str, str]], out: list[str]) -> int:
    """Apply one hunk's body at ``src[pos]`` (context and removed lines must match), adding
    the new side to ``out``; the position in ``src`` after the hunk."""
    for tag, text in body:
        if tag in " -":
            if pos >= len(src) or src[pos] != text:
                raise PatchError(f"context mismatch at old line {pos + 1}")
            pos += 1
        if tag in " +":
            out.append(text)
    return pos


def apply_patch(before: str, diff: str) -> str:
    """Apply a single-file unified diff strictly (context checked at the stated lines).

    Raises :class:`PatchError` on any mismatch, so a passing check means the diff turns
    ``before`` into exactly the returned text.
    """
    src = split_lines(before)
    out: list[str] = []
    pos = 0  # index in src of the next line to copy
    lines = diff.split("\n")
    i = _first_hunk(lines)
    while i < len(lines):
        m = _HUNK_RE.match(lines[i])
        if not m:
            if lines[i] == "" and i == len(lines) - 1:
                break
            raise PatchError(f"expected a hunk header at diff line {i + 1}: {lines[i][:80]!r}")
        old_start = int(m.group(1))
        old_len = int(m.group(2)) if m.group(2) is not None else 1
        start = old_start - 1 if old_len else old_start
        if start < pos or start > len(src):
            raise PatchError(f"hunk at old line {old_start} is out of order or past the end")
        out.extend(src[pos:start])
        pos = start
        body, i = _hunk_body(lines, i + 1)
        pos = _apply_body(src, pos, body, out)
    out.extend(src[pos:])
    return "".join(out)


@dataclass(frozen=True)
class PatchCase:
    """One row to verify: its key, path, before/after text and diff."""

    key: str
    path: str
    before: str
    after: str
    diff: str


def _rebase_headers(diff: str, path: str, prefix: str) -> str:
    """Point a patch's ``a/<path>``/``b/<path>`` headers into ``prefix/`` (header only)."""
    head, sep, rest = diff.partition("\n@@")
    for a, b in ((f"a/{path}", f"a/{prefix}/{path}"), (f"b/{path}", f"b/{prefix}/{path}")):
        head = head.replace(a, b)
    return head + sep + rest


def verify_with_git_apply(
    cases: Iterable[PatchCase], *, workdir: Path | None = None
) -> list[tuple[str, str]]:
    """Apply every case with ONE ``git apply`` run; return (key, problem) for failures.

    Each case gets its own directory, so rows with the same path never collide; the
    patch headers are re-pointed there and nothing else in the diff is touched. The
    results are compared with after_code byte for byte.
    """
    items: Sequence[PatchCase] = list(cases)
    if not items:
        return []
    failures: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        root = Path(tmp) / "w"
        root.mkdir()
        chunks: list[str] = []
        for idx, case in enumerate(items):
            target = root / f"r{idx}" / case.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(case.before.encode("utf-8"))
            patch = _rebase_headers(case.diff, case.path, f"r{idx}")
            chunks.append(patch if patch.endswith("\n") else patch + "\n")
        patch_file = Path(tmp) / "all.patch"
        patch_file.write_bytes("".join(chunks).encode("utf-8"))
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": tmp, "LC_ALL": "C"}
        env.pop("GIT_DIR", None)
        proc = subprocess.run(
            ["git", "apply", "--reject", "--whitespace=nowarn", str(patch_file)],
            cwd=root,
            capture_output=True,
            env=env,
        )
        stderr = proc.stderr.decode("utf-8", "replace")
        for idx, case in enumerate(items):
            target = root / f"r{idx}" / case.path
            got = target.read_bytes() if target.exists() else None
            if got != case.after.encode("utf-8"):
                hint = "rejected" if Path(str(target) + ".rej").exists() else "differs"
                failures.append((case.key, hint))
        if proc.returncode != 0 and not failures:
            failures.append(("<all>", stderr.strip()[-500:]))
    return failures
