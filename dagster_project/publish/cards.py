"""Dataset cards: YAML front matter from a dict, Markdown body from a Jinja2 template.

The front matter is dumped with ``yaml.safe_dump`` rather than templated, because the Hub
and ``datasets`` parse it (``configs:`` decides which files ``load_dataset`` reads) and a
hand-templated YAML breaks on the first value that needs quoting. The body is a template in
``templates/`` so the prose can be edited without touching code; every number in it comes
from the statistics dict passed in, never from the template itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import yaml

TEMPLATES = Path(__file__).resolve().parent / "templates"

#: The Hub's row-count buckets for ``size_categories`` (upper bound, label).
_SIZE_BUCKETS: tuple[tuple[float, str], ...] = (
    (1e3, "n<1K"),
    (1e4, "1K<n<10K"),
    (1e5, "10K<n<100K"),
    (1e6, "100K<n<1M"),
    (1e7, "1M<n<10M"),
    (1e8, "10M<n<100M"),
    (1e9, "100M<n<1B"),
    (1e10, "1B<n<10B"),
    (1e11, "10B<n<100B"),
    (1e12, "100B<n<1T"),
)


def size_category(rows: int) -> str:
    """The Hub's ``size_categories`` label for a dataset of ``rows`` rows."""
    for bound, label in _SIZE_BUCKETS:
        if rows < bound:
            return label
    return "n>1T"


# -- filters: how numbers look in a card -------------------------------------------------
def _num(value: Any) -> str:
    """The one number format (``report.numbers``); a missing value is an em dash."""
    from dagster_project.report.numbers import number

    return number(value, missing="—")


def _fixed(value: Any, digits: int = 2) -> str:
    return "—" if value is None else f"{float(value):,.{digits}f}"


def _times(value: Any, digits: int = 2) -> str:
    """A speedup as the cards write it: ``1.30×``."""
    return "—" if value is None else f"{float(value):.{digits}f}×"


def _pct(value: Any, digits: int = 1) -> str:
    return "—" if value is None else f"{100.0 * float(value):.{digits}f}%"


def _cell(value: Any) -> str:
    """Make a value safe inside a Markdown table cell."""
    text = "—" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _human_bytes(value: Any) -> str:
    size = float(value or 0)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def _zip_longest(first: Any, second: Any) -> list[tuple[Any, Any]]:
    """Pair two lists for side-by-side tables; the shorter one is padded with None."""
    return list(itertools.zip_longest(first or (), second or ()))


@cache
def _environment() -> jinja2.Environment:
    """Built on first use, not at import (nothing in kernelhouse does work at import)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,  # a misspelt stat must fail the export, not print ""
        autoescape=False,  # Markdown, not HTML
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        num=_num,
        fixed=_fixed,
        times=_times,
        pct=_pct,
        cell=_cell,
        human_bytes=_human_bytes,
        zip_longest=_zip_longest,
    )
    return env


def front_matter(meta: Mapping[str, Any]) -> str:
    """``---``-fenced YAML block, keys in the order given."""
    body = yaml.safe_dump(dict(meta), sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{body}---\n"


def render_card(template: str, meta: Mapping[str, Any], context: Mapping[str, Any]) -> str:
    """Front matter from ``meta`` followed by ``templates/<template>`` rendered with ``context``."""
    body = _environment().get_template(template).render(**context)
    return front_matter(meta) + "\n" + body.lstrip("\n")


def parse_front_matter(text: str) -> dict[str, Any]:
    """The YAML block at the top of a card (used by tests and by ``hub_push`` sanity checks)."""
    if not text.startswith("---\n"):
        return {}
    end = text.find("\n---\n", 4)
    if end < 0:
        return {}
    loaded = yaml.safe_load(text[4:end])
    return loaded if isinstance(loaded, dict) else {}
