"""Reading numbers the way PR authors write them.

Benchmark numbers in PR descriptions come as ``1,234.50``, ``12.3ms``, ``1.2e-3``,
``**0.76**`` or ``−4.1%``. Both extractors and the verbatim audit must agree on what
number a piece of text denotes, so the rules live here once:

* thousands separators (``,``, thin space U+2009, narrow no-break space U+202F, no-break
  space U+00A0) are dropped only when they separate groups of exactly three digits, so
  ``1,234`` is 1234 while a list ``1,2,3`` stays three numbers;
* a unit or suffix glued to the number (``12.3ms``, ``1.5x``, ``23%``) is not part of it;
* trailing zeros, a leading ``+`` and scientific notation do not change the value;
  ``−`` (U+2212) is a minus sign;
* a number glued to letters on its left (``H100``, ``E2E``, ``fp8``) is not a number,
  because such tokens are names, never measurements.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

_SEP = "[,\u2009\u202f\u00a0]"
NUMBER_PATTERN = (
    r"(?<![A-Za-z0-9_.])"  # not glued to a name on the left (H100, v1.2)
    r"[-+\u2212]?"
    rf"(?:\d{{1,3}}(?:{_SEP}\d{{3}})+(?!\d)|\d+)"
    r"(?:\.\d+)?"
    r"(?:[eE][-+]?\d+)?"
    r"|(?<![A-Za-z0-9_.])[-+\u2212]?\.\d+"
)
NUMBER_RE = re.compile(NUMBER_PATTERN)
_SEP_RE = re.compile(_SEP)


@dataclass(frozen=True, slots=True)
class NumberToken:
    """One number found in text: its value, the exact characters, and where it sits."""

    value: float
    text: str
    start: int
    end: int


def parse_number(text: str | float | int | None) -> float | None:
    """The value of a number written by a person or a model, else ``None``.

    Accepts ints/floats unchanged and strings such as ``"1,234.50"``, ``"12.3 ms"``,
    ``"**0.76**"`` or ``"1.5x"``; the first number in the string wins. Strings without a
    number (``"OOM"``, ``"-"``, ``"N/A"``) give ``None`` rather than raising, because
    those cells are common in real tables and simply mean "no measurement".
    """
    if text is None or isinstance(text, bool):
        return None
    if isinstance(text, int | float):
        return float(text)
    tok = first_number(str(text))
    return tok.value if tok else None


def _to_float(raw: str) -> float | None:
    cleaned = _SEP_RE.sub("", raw).replace("\u2212", "-")
    try:
        return float(Decimal(cleaned))
    except (InvalidOperation, ValueError):
        return None


def iter_numbers(text: str) -> Iterator[NumberToken]:
    """Every number in ``text`` under the rules in the module docstring."""
    for m in NUMBER_RE.finditer(text):
        value = _to_float(m.group(0))
        if value is not None:
            yield NumberToken(value, m.group(0), m.start(), m.end())


def first_number(text: str) -> NumberToken | None:
    """The first number in ``text`` (``None`` when there is none)."""
    return next(iter_numbers(text), None)


def is_integer_text(text: str) -> bool:
    """True for a cell that is just an integer (``8``, ``1,024``): typical of sizes/counts."""
    s = text.strip().strip("*_`")
    return bool(re.fullmatch(rf"\d{{1,3}}(?:{_SEP}\d{{3}})+|\d+", s))
