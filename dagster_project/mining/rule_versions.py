"""Rule-version strings: how a set of ``{rule: version}`` is written, read back and
compared. Pure string functions, apart from ``mining/versions.py`` (which imports every
rule module to compose them), so the incremental miner (``commits/lake_sync.py``), itself
a rule module, can compare the stored and current versions without importing
``versions`` back (issue 34: the two imported each other).
"""

from __future__ import annotations


def format_versions(versions: dict[str, str]) -> str:
    """``rule=v,rule=v`` in a fixed order: readable in the UI and stable as a code version."""
    return ",".join(f"{k}={v}" for k, v in sorted(versions.items()))


def parse_versions(text: str | None) -> dict[str, str]:
    """Inverse of ``format_versions``; an empty or missing string (old lakes) gives {}."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        key, sep, value = part.partition("=")
        if sep:
            out[key] = value
    return out


def changed_rules(stored: str | None, current: str) -> list[str]:
    """Human-readable differences, e.g. ``['title_filter 1 -> 2']``; [] when equal.

    A stored string of an older lake that recorded no version reports ``'no version
    recorded'`` so a refresh says why it re-mines.
    """
    if stored == current:
        return []
    old, new = parse_versions(stored), parse_versions(current)
    if not old:
        return ["no version recorded"]
    keys = sorted(set(old) | set(new))
    return [f"{k} {old.get(k, '-')} -> {new.get(k, '-')}" for k in keys if old.get(k) != new.get(k)]
