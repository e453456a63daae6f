"""Small helpers over polars frames shared by assets and reports (no dagster import)."""

from __future__ import annotations

import polars as pl


def md_table(df: pl.DataFrame, n: int = 5, width: int = 60) -> str:
    """A Markdown preview of the first ``n`` rows (cells cut to ``width`` chars), for
    asset metadata: no pandas/tabulate needed."""
    head = df.head(n)

    def cell(v: object) -> str:
        s = "" if v is None else str(v)
        s = s.replace("|", "\\|").replace("\n", " ")
        return s if len(s) <= width else s[: width - 1] + "…"

    lines = ["| " + " | ".join(head.columns) + " |", "|" + "---|" * len(head.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in head.iter_rows()]
    return "\n".join(lines)
