"""Secret scrubbing of untrusted text: the one place that decides what a leaked key looks like.

Why it exists: an LLM endpoint (or a prompt-injected PR body steering the model) can echo
the API key back, and a reply is JSON, so the key can arrive encoded: plain, written with
``\\u`` escapes (only visible after decoding), split over two fields that the lake stores
side by side, or base64-wrapped. A scrub of the raw reply alone misses all but the first
(issue 42), so the rule here works on *decoded* values:

* :func:`scrub_text` replaces the secret in one string, and any base64 (standard or
  URL-safe) or hex token whose decoded bytes contain it;
* :func:`scrub_value` walks a decoded JSON value (dicts, lists, strings), scrubs every
  string, and then looks for the secret across neighbouring strings (concatenated in
  document order, whitespace ignored): every string that contributes a character to such a
  match is replaced whole, since any piece of a key is a piece of a key;
* :func:`scrub_json_text` decodes a JSON text, scrubs it, and re-encodes it when the
  decoded value changed, so the stored text no longer carries the escaped key either.

Secrets shorter than :data:`MIN_SECRET_LEN` are not real keys and replacing them would
mangle ordinary text, so they are ignored.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET_LEN = 8

# base64 / base64url / hex runs long enough to hold an 8-character secret
_B64_TOKEN = re.compile(r"[A-Za-z0-9+/_-]{12,}={0,2}")
_HEX_TOKEN = re.compile(r"\b(?:[0-9a-fA-F]{2}){8,}\b")
# escapes a JSON (or Python) text can hide a key behind, decoded even outside valid JSON
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})")


def _real(secrets: Iterable[str | None]) -> list[str]:
    return sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LEN}, key=len, reverse=True)


def _b64_decodings(token: str) -> list[bytes]:
    padded = token + "=" * (-len(token) % 4)
    out: list[bytes] = []
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            out.append(decode(padded))
        except (binascii.Error, ValueError):
            continue
    return out


def _encoded_leak(token: str, secrets: list[str]) -> bool:
    blobs = _b64_decodings(token)
    if _HEX_TOKEN.fullmatch(token):
        blobs.append(bytes.fromhex(token))
    needles = [s.encode("utf-8") for s in secrets]
    return any(n in blob for blob in blobs for n in needles)


def scrub_text(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with each secret, and each base64/hex token that decodes to one, redacted."""
    real = _real(secrets)
    if not real or not text:
        return text
    unescaped = _ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text)
    if unescaped != text and any(s in unescaped for s in real):
        text = unescaped  # the key was written with escapes: keep the decoded form, scrubbed
    for s in real:
        text = text.replace(s, REDACTED)

    def encoded(match: re.Match[str]) -> str:
        return REDACTED if _encoded_leak(match.group(0), real) else match.group(0)

    text = _B64_TOKEN.sub(encoded, text)
    return _HEX_TOKEN.sub(encoded, text)


def _leaves(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _leaves(v, out)
    elif isinstance(value, list | tuple):
        for v in value:
            _leaves(v, out)


def _split_leaks(strings: list[str], secrets: list[str]) -> set[int]:
    """Indexes of the strings that together spell a secret (whitespace between ignored)."""
    chars: list[str] = []
    owner: list[int] = []
    for i, s in enumerate(strings):
        for ch in s:
            if not ch.isspace():
                chars.append(ch)
                owner.append(i)
    joined = "".join(chars)
    hit: set[int] = set()
    for s in secrets:
        compact = "".join(ch for ch in s if not ch.isspace())
        start = joined.find(compact)
        while start >= 0:
            hit.update(owner[start : start + len(compact)])
            start = joined.find(compact, start + 1)
    return hit


def _map_strings(value: Any, fn: Any, counter: list[int]) -> Any:
    """``value`` with ``fn(index, string)`` applied to every string, in document order."""
    if isinstance(value, str):
        counter[0] += 1
        return fn(counter[0] - 1, value)
    if isinstance(value, dict):
        return {k: _map_strings(v, fn, counter) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_map_strings(v, fn, counter) for v in value]
    return value


def scrub_value(value: Any, secrets: Iterable[str | None]) -> Any:
    """A copy of a decoded JSON value with every secret redacted (see the module doc).

    Each string is scrubbed on its own first; what is left of a key can then only be split
    over several strings, and those are replaced whole."""
    real = _real(secrets)
    if not real:
        return value
    value = _map_strings(value, lambda _i, s: scrub_text(s, real), [0])
    strings: list[str] = []
    _leaves(value, strings)
    hit = _split_leaks(strings, real)
    if not hit:
        return value
    return _map_strings(value, lambda i, s: REDACTED if i in hit else s, [0])


def _rescrub_json(text: str, secrets: list[str]) -> str | None:
    """``text`` re-encoded from its scrubbed decoding; ``None`` if it is not JSON."""
    try:
        decoded = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    clean = scrub_value(decoded, secrets)
    return text if clean == decoded else json.dumps(clean, ensure_ascii=False)


def scrub_json_text(text: str, secrets: Iterable[str | None]) -> str:
    """A JSON text scrubbed after decoding; non-JSON text gets :func:`scrub_text` only.

    When decoding shows a secret the raw text hid (a split over fields), the text is
    re-encoded from the scrubbed value, so no form of the key survives. A reply wrapped in
    prose or code fences is handled like the parser handles it: the outermost ``{...}``."""
    real = _real(secrets)
    if not real:
        return text
    plain = scrub_text(text, real)
    whole = _rescrub_json(plain, real)
    if whole is not None:
        return whole
    start, end = plain.find("{"), plain.rfind("}")
    if start < 0 or end <= start:
        return plain
    inner = _rescrub_json(plain[start : end + 1], real)
    return plain if inner is None else plain[:start] + inner + plain[end + 1 :]


def contains_secret(text: str, secrets: Iterable[str | None]) -> bool:
    """True when ``text`` would be changed by :func:`scrub_text` (a leak check for tests and
    gates)."""
    return scrub_text(text, secrets) != text
