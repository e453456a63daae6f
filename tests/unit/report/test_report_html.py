"""The HTML report is a jinja2 template with autoescape: hostile lake text renders as text.

Every string a lake row can put in the report (section intro, note, table caption,
column name, cell, lake path, chart label) carries markup here; the page, parsed with the
standard library's HTML parser, must contain no element or attribute it did not write.
"""

from __future__ import annotations

from html.parser import HTMLParser

import polars as pl

from dagster_project.report import svg
from dagster_project.report.document import Figure, Note, Report, Section, Table, render_html

EVIL = '<script>alert(1)</script><img src=x onerror="alert(2)">"\'&'


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attrs.update(name for name, _ in attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def hostile_report() -> Report:
    df = pl.DataFrame({EVIL: [EVIL, "ok"], "n": [1.5, 20_000.0]})
    chart = svg.bar_chart([EVIL, "b"], [1.0, 2.0], title=EVIL, x_label=EVIL)
    sec = Section("cards", EVIL, EVIL, [Note(EVIL), Figure(chart, EVIL), Table(df, EVIL, 2)])
    return Report(EVIL, "2026-12-01 10:00 UTC", [sec], [EVIL], {EVIL: EVIL})


def test_untrusted_text_is_escaped_everywhere() -> None:
    page = render_html(hostile_report())
    assert "<script" not in page and "<img" not in page and 'onerror="' not in page
    parsed = Tags()
    parsed.feed(page)
    assert not parsed.tags & {"script", "img", "iframe", "object"}
    assert not [a for a in parsed.attrs if a.startswith("on")]
    # ... and the text itself survives, readable, in every place it was put.
    text = "".join(parsed.text)
    assert text.count("<script>alert(1)</script>") >= 8


def test_the_page_keeps_its_own_markup_and_the_chart() -> None:
    page = render_html(hostile_report())
    parsed = Tags()
    parsed.feed(page)
    assert {"style", "nav", "section", "h2", "figure", "svg", "rect", "table", "td"} <= parsed.tags
    assert '<td class="num">20,000</td>' in page  # numeric cells right-aligned, as before
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</body></html>\n")
    assert '"Segoe UI"' in page  # the stylesheet is ours: not escaped
