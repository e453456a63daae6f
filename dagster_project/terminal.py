"""Terminal safety: the one home of the rule for text that reaches a screen (issue 42).

Commit subjects, config file names, PR text and lake values are upstream's or a user's
text. Printed raw, an escape sequence in them drives the reader's terminal: OSC 52 writes
the clipboard, CSI moves the cursor or clears the screen, OSC 0 sets the window title, a
C1 control (U+0080-U+009F) is a one-byte ESC on some terminals, and bidirectional
overrides (U+202A-U+202E, U+2066-U+2069) make a line read differently from what it is.
Rich's markup escape does not touch any of these (rich writes ``\\x1b`` through).

So every character of Unicode category Cc (C0, DEL, C1) other than newline and tab, and
every bidi control, is shown as a visible escape (``\\x1b``, ``\\u202e``): the text stays
readable and nothing in it is interpreted. :func:`escape` adds rich's markup escape, for
text inside rich markup; :func:`has_control` is the test used where such a character
makes a value invalid (a tuned-config file name that would become a GPU label).
"""

from __future__ import annotations

import re

from rich.markup import escape as _markup_escape

RULES_VERSION = "1"

# C0 except tab and newline, DEL, C1, and the bidirectional embedding/override/isolate marks
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str) -> str:
    """``text`` with every control and bidi character replaced by a visible escape."""
    return _UNSAFE.sub(_visible, text)


def escape(text: str) -> str:
    """``text`` safe for a terminal and for rich markup (``[red]`` stays literal)."""
    return _markup_escape(safe(text))


def has_control(text: str) -> bool:
    """True when ``text`` holds a character :func:`safe` would replace (including the
    newline and tab, which no label may hold either)."""
    return bool(_UNSAFE.search(text)) or "\n" in text or "\t" in text
