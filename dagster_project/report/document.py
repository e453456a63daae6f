"""``build_report``: the analysis views as one HTML or Markdown document with plots, and
``plots_markdown``: one plot as Markdown for Dagster asset metadata (no dagster import).

Why a document model: the report is first assembled as plain data (sections of tables,
figures and notes) and only then rendered, so HTML and Markdown always carry the same
content and the tests can check one against the other. The report reads only the
``analysis.*`` views (after re-creating them, like ``kernelhouse stats`` does), so every
figure in it is reproducible with ``kernelhouse sql "SELECT * FROM analysis.<view>"``;
the few aggregations done here for plots are over rows of those views.

A view whose tables are not built yet is not an error: its section says which view is
waiting and why, and the rest of the report is still written.
"""

from __future__ import annotations

import functools
import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import duckdb
import jinja2
import markupsafe
import polars as pl

from dagster_project.storage.lake import Lake, fetch_frame, qualified, write_atomically

from . import svg
from .numbers import number, row_cells

__all__ = [
    "SECTIONS",
    "Figure",
    "Note",
    "Report",
    "Section",
    "Table",
    "build_report",
    "collect_report",
    "plots_markdown",
    "render_html",
    "render_markdown",
]

Format = Literal["html", "md"]
PlotKind = Literal["histogram", "bar", "line"]

#: (anchor, title) of every section, in order. The titles are the report's public
#: structure: the tests look for each one in both formats.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("cards", "Card figures beside ours"),
    ("speedups", "Documented speedup distributions"),
    ("gains", "Speedups by scope, GPU and kernel"),
    ("months", "Rows and PRs per month"),
    ("coverage", "Tuned-config coverage"),
    ("tuned-vs-default", "Tuned config vs default heuristic"),
    ("audit", "Gains extraction audit rate"),
    ("measured", "Tuned configs measured on a GPU"),
    ("views", "Analysis views"),
)


# -- document model ----------------------------------------------------------------------
@dataclass(frozen=True)
class Table:
    """A view (or a slice of one) shown as a table; ``total_rows`` is the view's size,
    so a truncated table can say so."""

    frame: pl.DataFrame
    caption: str
    total_rows: int


@dataclass(frozen=True)
class Figure:
    """A standalone SVG document and what it shows."""

    svg: str
    caption: str


@dataclass(frozen=True)
class Note:
    """A sentence for the reader: usually why a view is missing."""

    text: str


Block = Table | Figure | Note


@dataclass
class Section:
    key: str
    title: str
    intro: str = ""
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Report:
    lake_path: str
    generated_at: str
    sections: list[Section]
    views_created: list[str]
    views_waiting: dict[str, str]


# -- reading the views ---------------------------------------------------------------------
class _Views:
    """Read access to ``analysis.*`` on one read-only connection, remembering which views
    exist so a missing one becomes a note instead of an exception."""

    def __init__(self, con: duckdb.DuckDBPyConnection, waiting: dict[str, str]) -> None:
        self._con = con
        self._waiting = waiting
        rows = con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'analysis'"
        ).fetchall()
        self.names = {str(r[0]) for r in rows}

    def read(self, name: str) -> pl.DataFrame | None:
        if name not in self.names:
            return None
        try:
            return fetch_frame(self._con, f"SELECT * FROM {qualified('analysis', name)}", None)
        except duckdb.Error as exc:  # a view over Parquet files that have since gone
            self._waiting[name] = str(exc).splitlines()[0]
            return None

    def missing(self, name: str) -> Note:
        why = self._waiting.get(name, "the view does not exist; run the analysis_views asset")
        return Note(f"analysis.{name} is not available yet: {why}")


# -- public API ------------------------------------------------------------------------------
def build_report(
    lake: Lake,
    fmt: Format = "html",
    out_path: Path | str | None = None,
    *,
    refresh_views: bool = True,
    max_rows: int = 50,
) -> Path:
    """Write the analysis report and return its path.

    ``out_path`` defaults to ``<KERNELHOUSE_HOME>/exports/report.<html|md>`` (the lake
    file's folder is the home). ``refresh_views`` re-creates the ``analysis`` views first
    (one short write transaction) so the report never shows views older than the SQL
    files; pass False to read a lake that another process is writing. Tables longer than
    ``max_rows`` are cut, with the view's name given for the full result. The file is
    written to a temporary name and renamed, so a failed run keeps the previous report.
    """
    if fmt not in ("html", "md"):
        raise ValueError(f"fmt must be 'html' or 'md', not {fmt!r}")
    report = collect_report(lake, refresh_views=refresh_views, max_rows=max_rows)
    text = render_html(report) if fmt == "html" else render_markdown(report)
    path = (
        Path(out_path) if out_path is not None else lake.path.parent / "exports" / f"report.{fmt}"
    )
    return write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def collect_report(lake: Lake, *, refresh_views: bool = True, max_rows: int = 50) -> Report:
    """The report as data (sections of tables, figures and notes), before rendering."""
    waiting: dict[str, str] = {}
    created: list[str] = []
    if refresh_views:
        from dagster_project.report.analysis import create_views

        result = create_views(lake)
        created, waiting = list(result.created), dict(result.skipped)
    with lake.connect(read_only=True) as con:
        views = _Views(con, waiting)
        if not refresh_views:
            created = sorted(views.names)
        sections = [
            _cards(views, max_rows),
            _speedups(views, max_rows),
            _gains(views, max_rows),
            _months(views, max_rows),
            _coverage(views, max_rows),
            _tuned_vs_default(views, max_rows),
            _audit(views, max_rows),
            _measured(views, max_rows),
        ]
    sections.append(_views_section(created, waiting))
    return Report(
        lake_path=str(lake.path),
        generated_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        sections=sections,
        views_created=created,
        views_waiting=waiting,
    )


def plots_markdown(
    df: pl.DataFrame,
    kind: PlotKind,
    *,
    x: str,
    y: str | None = None,
    series: str | None = None,
    title: str = "",
    **options: Any,
) -> str:
    """One plot of ``df`` as Markdown, ``![title](data:image/svg+xml;base64,…)``, for
    ``dg.MetadataValue.md`` in asset metadata. The Dagster UI (1.13) shows it as an image
    behind "[Show Markdown]" in the asset's and the run's metadata (checked in headless
    Chromium); a data URI needs no file server and lives on in the event log.

    - ``histogram``: the values of column ``x`` (``options``: bins, log_x, markers, …);
    - ``bar``: one bar per row, labels from ``x``, lengths from ``y``, in frame order;
    - ``line``: ``y`` over the sorted distinct values of ``x``, one line per distinct
      value of ``series`` (if given); duplicate (x, series) points are summed.

    Extra keyword ``options`` go to the chart function in :mod:`.svg`.
    """
    needed = [c for c in (x, y, series) if c is not None]
    if missing := [c for c in needed if c not in df.columns]:
        raise ValueError(f"plots_markdown: no column(s) {missing} in frame with {df.columns}")
    if kind in ("bar", "line") and y is None:
        raise ValueError(f"plots_markdown: kind={kind!r} needs y")
    if kind == "histogram":
        chart = svg.histogram(
            _floats(df[x]), title=title, x_label=options.pop("x_label", x), **options
        )
    elif kind == "bar":
        assert y is not None
        labels = ["" if v is None else str(v) for v in df[x].to_list()]
        chart = svg.bar_chart(
            labels, _floats(df[y]), title=title, x_label=options.pop("x_label", y), **options
        )
    elif kind == "line":
        assert y is not None
        xs, lines = _pivot(df, x, y, series)
        chart = svg.line_chart(
            xs,
            lines,
            title=title,
            x_label=options.pop("x_label", x),
            y_label=options.pop("y_label", y),
            **options,
        )
    else:
        raise ValueError(f"plots_markdown: kind must be histogram, bar or line, not {kind!r}")
    return _md_image(title or kind, chart)


# -- sections --------------------------------------------------------------------------------
def _section(key: str) -> Section:
    title = dict(SECTIONS)[key]
    return Section(key=key, title=title)


def _cards(views: _Views, max_rows: int) -> Section:
    sec = _section("cards")
    sec.intro = (
        "Each dataset card's published figures next to the same figure computed on this lake. "
        "A ratio far from 1 is either a real difference (our snapshot is older or newer) or a bug."
    )
    for name, dataset in (
        ("card_kernel_opt_rl", "kernel-opt-rl"),
        ("card_kernelinfer", "kernelinfer"),
        ("card_kernelswarm", "kernelswarm"),
    ):
        df = views.read(name)
        if df is None:
            sec.blocks.append(views.missing(name))
            continue
        df = df.with_columns(pl.col("card", "ours").cast(pl.Float64)).with_columns(
            (pl.col("ours") / pl.when(pl.col("card") != 0).then(pl.col("card"))).alias(
                "ours / card"
            )
        )
        df = df.select("metric", "card", "ours", "ours / card", "note")
        sec.blocks.append(_table(df, f"{dataset}: analysis.{name}", max_rows))
        sec.blocks.append(
            Figure(
                svg.bar_chart(
                    df["metric"].to_list(),
                    df["ours / card"].to_list(),
                    title=f"{dataset}: ours / card",
                    x_label="ratio (1 = the card's figure)",
                    reference=1.0,
                ),
                f"{dataset}: our figure divided by the card's, per metric",
            )
        )
    return sec


def _speedups(views: _Views, max_rows: int) -> Section:
    sec = _section("speedups")
    sec.intro = (
        "The card's documented-speedup statistics (median, p10, p90), then the distribution of "
        "every documented speedup per source and scope, on a log2 axis (0.5× and 2× are equally "
        "far from 1×)."
    )
    dist = views.read("speedup_distribution")
    sec.blocks.append(
        _table(dist, "analysis.speedup_distribution", max_rows)
        if dist is not None
        else views.missing("speedup_distribution")
    )
    values = views.read("speedup_values")
    if values is None:
        sec.blocks.append(views.missing("speedup_values"))
        return sec
    groups = values.group_by("source", "scope").agg(pl.col("speedup")).sort("source", "scope")
    if groups.is_empty():
        sec.blocks.append(
            Note("No documented speedups in the lake yet (analysis.speedup_values is empty).")
        )
    for row in groups.iter_rows(named=True):
        vals = _finite(row["speedup"])
        s = pl.Series(vals, dtype=pl.Float64)
        markers = {
            "p10": s.quantile(0.1, "linear"),
            "median": s.quantile(0.5, "linear"),
            "p90": s.quantile(0.9, "linear"),
        }
        label = f"{row['source']} · {row['scope']}"
        sec.blocks.append(
            Figure(
                svg.histogram(
                    vals,
                    bins=24,
                    log_x=True,
                    markers=markers,
                    title=label,
                    x_label="speedup (log2 axis)",
                ),
                f"Distribution of documented speedups: {label}",
            )
        )
    return sec


def _gains(views: _Views, max_rows: int) -> Section:
    sec = _section("gains")
    sec.intro = (
        "Medians of documented speedups per GPU (stated hardware for PR gains, the config's GPU "
        "for tuned configs) and per Triton kernel; bars are labelled with the number of values "
        "behind them."
    )
    values = views.read("speedup_values")
    if values is not None:
        for source, by, what in (
            ("derived.pr_gains", "gpu", "PR gains: median speedup by stated hardware"),
            ("datasets.tuned_configs", "gpu", "Tuned configs: median speedup_vs_default by GPU"),
            (
                "datasets.tuned_configs",
                "kernel",
                "Tuned configs: median speedup_vs_default by kernel",
            ),
        ):
            agg = (
                values.filter(pl.col("source") == source, pl.col(by).is_not_null())
                .group_by(by)
                .agg(pl.len().alias("n"), pl.col("speedup").median().alias("median"))
                .sort(["n", by], descending=[True, False])
            )
            if agg.is_empty():
                sec.blocks.append(Note(f"{what}: no values yet."))
                continue
            labels = [f"{k} (n={n})" for k, n in zip(agg[by], agg["n"], strict=True)]
            sec.blocks.append(
                Figure(
                    svg.bar_chart(
                        labels,
                        agg["median"].to_list(),
                        title=what,
                        x_label="median speedup",
                        reference=1.0,
                    ),
                    what,
                )
            )
    else:
        sec.blocks.append(views.missing("speedup_values"))
    for name in ("gains_by_kernel_gpu", "tuned_speedup_by_kernel_gpu"):
        df = views.read(name)
        sec.blocks.append(
            _table(df, f"analysis.{name}", max_rows) if df is not None else views.missing(name)
        )
    return sec


def _months(views: _Views, max_rows: int) -> Section:
    sec = _section("months")
    sec.intro = (
        "kernel_commits rows (one per kernel file of a performance commit) and PRs, "
        "per repo and month."
    )
    df = views.read("rows_per_month")
    if df is None:
        sec.blocks.append(views.missing("rows_per_month"))
        return sec
    if df.is_empty():
        sec.blocks.append(Note("analysis.rows_per_month is empty."))
    else:
        months = _month_range(df["month"].drop_nulls().to_list())
        for col, what in (("rows", "kernel_commits rows per month"), ("prs", "PRs per month")):
            lines = _fill(df, "month", col, "repo", months)
            sec.blocks.append(
                Figure(
                    svg.line_chart(months, lines, title=what, x_label="month", y_label=col),
                    f"{what}, by repo",
                )
            )
    sec.blocks.append(_table(df, "analysis.rows_per_month", max_rows))
    return sec


def _coverage(views: _Views, max_rows: int) -> Section:
    sec = _section("coverage")
    sec.intro = (
        "Which (GPU, dtype, kernel) combinations have tuned configs, "
        "and how many files and batch sizes."
    )
    df = views.read("config_coverage")
    if df is None:
        sec.blocks.append(views.missing("config_coverage"))
        return sec
    if not df.is_empty():
        per_gpu = (
            df.group_by("gpu")
            .agg(pl.col("files").sum())
            .sort(["files", "gpu"], descending=[True, False])
        )
        sec.blocks.append(
            Figure(
                svg.bar_chart(
                    [str(g) for g in per_gpu["gpu"].to_list()],
                    per_gpu["files"].to_list(),
                    title="Tuned config files per GPU",
                    x_label="config files",
                ),
                "Tuned config files per GPU (all kernels and dtypes)",
            )
        )
        matrix = (
            df.with_columns(pl.col("gpu", "kernel").cast(pl.String).fill_null("?"))
            .pivot(
                on="kernel",
                index="gpu",
                values="files",
                aggregate_function="sum",
                sort_columns=True,
            )
            .fill_null(0)
            .sort("gpu")
        )
        sec.blocks.append(
            _table(
                matrix,
                "Coverage matrix: config files per GPU (rows) and kernel (columns)",
                max_rows,
            )
        )
    sec.blocks.append(_table(df, "analysis.config_coverage", max_rows))
    return sec


def _tuned_vs_default(views: _Views, max_rows: int) -> Section:
    sec = _section("tuned-vs-default")
    sec.intro = (
        "How often the tuned value of each launch parameter differs from the repo's default "
        "heuristic, "
        "and by how much (mean |log2(tuned / default)|: 1 = a factor of two)."
    )
    df = views.read("tuned_vs_default")
    if df is None:
        sec.blocks.append(views.missing("tuned_vs_default"))
        return sec
    if not df.is_empty():
        per_key = (
            df.group_by("key")
            .agg(
                ((pl.col("share_different") * pl.col("rows")).sum() / pl.col("rows").sum()).alias(
                    "share"
                )
            )
            .sort("key")
        )
        sec.blocks.append(
            Figure(
                svg.bar_chart(
                    per_key["key"].to_list(),
                    per_key["share"].to_list(),
                    title="Share of rows where tuned ≠ default",
                    x_label="share of rows",
                ),
                "Share of rows whose tuned value differs from the default, "
                "per parameter (row-weighted)",
            )
        )
    sec.blocks.append(_table(df, "analysis.tuned_vs_default", max_rows))
    return sec


def _measured(views: _Views, max_rows: int) -> Section:
    """The measured configs: speedups timed on a GPU (shipped with the package), so a lake
    built offline still has a speedup section."""
    sec = _section("measured")
    sec.intro = (
        "Each tuned config re-timed on a real GPU with its own Triton kernel beside the "
        "engine's default (datasets.measured_configs; superseded tables left out): measured "
        "speedup of tuned over default and how often the tuned config is the fastest within noise."
    )
    df = views.read("measured_speedup_by_kernel")
    if df is None:
        sec.blocks.append(views.missing("measured_speedup_by_kernel"))
        return sec
    if not df.is_empty():
        many = df["gpu"].n_unique() > 1
        labels = [
            f"{g} {k} {q}" if many else f"{k} {q}"
            for g, k, q in zip(df["gpu"], df["kernel"], df["quant"], strict=True)
        ]
        sec.blocks.append(
            Figure(
                svg.bar_chart(
                    labels,
                    df["median_speedup_vs_default"].to_list(),
                    title="Median measured speedup, tuned over default",
                    x_label="speedup (×)",
                    reference=1.0,
                ),
                "Median measured speedup of the tuned config over the default, per kernel and "
                "quantisation",
            )
        )
    sec.blocks.append(_table(df, "analysis.measured_speedup_by_kernel", max_rows))
    return sec


def _audit(views: _Views, max_rows: int) -> Section:
    sec = _section("audit")
    sec.intro = (
        "Share of extracted baseline/optimized pairs whose numbers appear verbatim in the PR "
        "text, per "
        "extractor and model: the guard against fabricated numbers."
    )
    df = views.read("audit_rate")
    if df is None:
        sec.blocks.append(views.missing("audit_rate"))
        return sec
    if not df.is_empty():
        sec.blocks.append(
            Figure(
                svg.bar_chart(
                    [f"{e} · {m}" for e, m in zip(df["extractor"], df["model"], strict=True)],
                    df["pass_pct"].to_list(),
                    title="Verbatim audit pass rate",
                    x_label="% of pairs passing",
                ),
                "Verbatim audit pass rate per extractor and model",
            )
        )
    sec.blocks.append(_table(df, "analysis.audit_rate", max_rows))
    return sec


def _views_section(created: Sequence[str], waiting: dict[str, str]) -> Section:
    sec = _section("views")
    sec.intro = (
        "Every view is `SELECT * FROM analysis.<name>` away; the SQL is in sql/analysis/<name>.sql."
    )
    rows = [(name, "created", "") for name in sorted(created)]
    rows += [(name, "waiting", why) for name, why in sorted(waiting.items())]
    df = pl.DataFrame(
        rows, schema={"view": pl.String, "state": pl.String, "reason": pl.String}, orient="row"
    )
    sec.blocks.append(_table(df, "analysis views", len(rows) or 1))
    return sec


# -- helpers ------------------------------------------------------------------------------------
def _table(df: pl.DataFrame, caption: str, max_rows: int) -> Table:
    return Table(frame=df.head(max_rows), caption=caption, total_rows=df.height)


def _floats(s: pl.Series) -> list[float | None]:
    return s.cast(pl.Float64, strict=False).to_list()


def _finite(values: Sequence[Any]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def _month_range(months: Sequence[str]) -> list[str]:
    """Every ``YYYY-MM`` from the first to the last, so a quiet month shows as zero
    instead of silently disappearing from the x axis."""
    if not months:
        return []
    first, last = min(months), max(months)
    y, m = int(first[:4]), int(first[5:7])
    out = []
    while f"{y:04d}-{m:02d}" <= last:
        out.append(f"{y:04d}-{m:02d}")
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out


def _fill(
    df: pl.DataFrame, x: str, y: str, series: str, xs: Sequence[str]
) -> dict[str, list[float | None]]:
    """Counts per (series, x) with 0 where a series has no row in that month: rows_per_month
    only has months with commits, and a missing count is a count of zero."""
    out: dict[str, list[float | None]] = {}
    for key in sorted({str(v) for v in df[series].to_list()}):
        sub = df.filter(pl.col(series).cast(pl.String) == key).group_by(x).agg(pl.col(y).sum())
        got = dict(zip(sub[x].to_list(), sub[y].to_list(), strict=True))
        out[key] = [float(got.get(m) or 0) for m in xs]
    return out


def _pivot(
    df: pl.DataFrame, x: str, y: str, series: str | None
) -> tuple[list[str], dict[str, list[float | None]]]:
    xs = sorted({v for v in df[x].to_list() if v is not None}, key=lambda v: (str(type(v)), v))
    labels = [str(v) for v in xs]
    if series is None:
        sub = df.group_by(x).agg(pl.col(y).cast(pl.Float64).sum())
        got = dict(zip(sub[x].to_list(), sub[y].to_list(), strict=True))
        return labels, {y: [got.get(v) for v in xs]}
    lines: dict[str, list[float | None]] = {}
    for key in sorted({str(v) for v in df[series].to_list()}):
        sub = (
            df.filter(pl.col(series).cast(pl.String) == key)
            .group_by(x)
            .agg(pl.col(y).cast(pl.Float64).sum())
        )
        got = dict(zip(sub[x].to_list(), sub[y].to_list(), strict=True))
        lines[key] = [got.get(v) for v in xs]
    return labels, lines


def _cells(row: Sequence[Any]) -> list[str]:
    """A table row's cells: numbers as ``report.numbers`` writes them (a row naming a year
    prints it as a label), blanks for nulls, lists and dicts as compact text."""
    return row_cells(row)


def _md_image(alt: str, chart: str) -> str:
    alt = _md_text(alt.replace("[", "(").replace("]", ")"))
    return f"![{alt}]({_md_target(svg.svg_data_uri(chart))})"


# The Markdown characters that open a link or image (``[x](javascript:…)``), a code span
# or a table cell: backslash-escaped, each renders as itself, so text from the lake
# (kernel names, PR-derived labels, notes) cannot open one. Emphasis characters stay:
# ``fused_moe`` is common and harmless.
_MD_SPECIAL = re.compile(r"([\\`\[\]!|])")
# Link targets the report itself writes: its own anchors and its inline SVG charts.
_SAFE_TARGET = re.compile(r"^(#[A-Za-z0-9_-]+|data:image/svg\+xml;base64,[A-Za-z0-9+/=]+)$")


def _md_text(text: str) -> str:
    """Text from the lake, for Markdown: HTML escaped (``<img onerror=…>`` and
    ``<script>`` render as text; Markdown passes raw HTML through), inline syntax
    backslash-escaped, on one line."""
    one_line = " ".join(str(text).splitlines())
    return _MD_SPECIAL.sub(r"\\\1", html.escape(one_line, quote=False))


def _md_target(url: str) -> str:
    """A link target the report may write; anything else (``javascript:``, a remote URL)
    is refused, so a target can never come from data."""
    if not _SAFE_TARGET.match(url):
        raise ValueError(f"refusing Markdown link target {url[:40]!r}")
    return url


# -- rendering ------------------------------------------------------------------------------------
_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; \
max-width: 1100px;
       padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: 4px 0; }
figure { margin: 0.5rem 0 1.5rem; }
figcaption { font-size: 12px; color: #555; }
.note { color: #8a5a00; background: #fff8e6; padding: 4px 8px; border-left: 3px solid #e6a700; }
.meta { color: #666; font-size: 13px; }
"""


@functools.lru_cache(maxsize=1)
def _jinja() -> jinja2.Environment:
    """The report's template environment. Autoescape is on for everything it renders:
    lake text (view names, kernel and GPU labels, PR-derived notes) is untrusted."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("dagster_project.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_html(report: Report) -> str:
    """A single self-contained HTML file: inline CSS and inline SVG, nothing fetched.

    The page is ``templates/report.html.j2`` (jinja2, autoescaped); this function only
    turns blocks into plain values (cell text, numeric or not) for it.
    """
    blocks = [[_html_view(b) for b in sec.blocks] for sec in report.sections]
    return (
        _jinja()
        .get_template("report.html.j2")
        .render(
            report=report,
            blocks=blocks,
            css=markupsafe.Markup(_CSS),  # our own constant
        )
    )


def _html_view(block: Block) -> dict[str, Any]:
    if isinstance(block, Note):
        return {"kind": "note", "text": block.text}
    if isinstance(block, Figure):
        # The one value not escaped by the template: svg.py writes the document and
        # escapes every label and title in it (tests/unit/report checks a hostile one).
        return {"kind": "figure", "svg": markupsafe.Markup(block.svg), "caption": block.caption}
    df = block.frame
    numeric = [dt.is_numeric() for dt in df.dtypes]
    return {
        "kind": "table",
        "caption": block.caption,
        "columns": df.columns,
        "rows": [list(zip(_cells(row), numeric, strict=True)) for row in df.iter_rows()],
        "cut": _cut_note(block),
    }


def render_markdown(report: Report) -> str:
    """GitHub-flavoured Markdown; plots are ``data:`` URI images so the file is self-contained."""
    out = [
        "# kernelhouse report",
        "",
        f"Lake {_md_text(report.lake_path)} · generated {_md_text(report.generated_at)} · "
        f"{len(report.views_created)} views, {len(report.views_waiting)} waiting",
        "",
    ]
    out += [
        f"{i}. [{_md_text(s.title)}]({_md_target('#' + s.key)})"
        for i, s in enumerate(report.sections, 1)
    ]
    for sec in report.sections:
        out += ["", f'<a id="{html.escape(sec.key)}"></a>', "", f"## {_md_text(sec.title)}", ""]
        if sec.intro:
            out += [_md_text(sec.intro), ""]
        for block in sec.blocks:
            out += [_md_block(block), ""]
    return "\n".join(out).rstrip() + "\n"


def _md_block(block: Block) -> str:
    if isinstance(block, Note):
        return f"> {_md_text(block.text)}"
    if isinstance(block, Figure):
        return _md_image(block.caption, block.svg)
    df = block.frame
    esc = _md_text  # cells, captions and column names all come from the lake

    numeric = [dt.is_numeric() for dt in df.dtypes]
    lines = [
        f"**{esc(block.caption)}**",
        "",
        "| " + " | ".join(esc(c) for c in df.columns) + " |",
        "|" + "|".join("---:" if num else "---" for num in numeric) + "|",
    ]
    lines += ["| " + " | ".join(esc(c) for c in _cells(row)) + " |" for row in df.iter_rows()]
    if not df.columns:
        lines = [f"**{esc(block.caption)}**", "", "(no columns)"]
    cut = _cut_note(block)
    if cut:
        lines += ["", f"_{cut}_"]
    return "\n".join(lines)


def _cut_note(table: Table) -> str:
    if table.total_rows > table.frame.height:
        return (
            f"First {number(table.frame.height)} of {number(table.total_rows)} rows; "
            "the rest is in the view."
        )
    if table.total_rows == 0:
        return "No rows."
    return ""
