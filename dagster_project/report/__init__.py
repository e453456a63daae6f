"""The analysis report: SVG charts without a plotting stack, and the HTML / Markdown report
over the ``analysis.*`` views (no dagster import, so the CLI and tests use it directly).

``build_report(lake, fmt, out_path)`` writes the whole report; ``plots_markdown(df, kind,
…)`` gives one chart as Markdown for Dagster asset metadata (``dg.MetadataValue.md``).
"""

from .document import SECTIONS, build_report, collect_report, plots_markdown
from .svg import bar_chart, histogram, line_chart, svg_data_uri

__all__ = [
    "SECTIONS",
    "bar_chart",
    "build_report",
    "collect_report",
    "histogram",
    "line_chart",
    "plots_markdown",
    "svg_data_uri",
]
