"""Small helpers over polars frames shared by assets and reports (no dagster import)."""

from __future__ import annotations

import polars as pl


def md_table(df: pl.DataFrame, n: int = 5, width: int = 60) -> str:
    """A Markdown preview of the first ``n`` rows (cells cut to ``width`` chars), for
    asset metadata. The table itself is ``tabulate``'s GitHub format (a dependency of
    Dagster already); only the cell clean-up is ours: pipes escaped, newlines flattened,
    long values cut, so a kernel source cannot break the table."""
    from tabulate import tabulate

    head = df.head(n)

    def cell(v: object) -> str:
        s = "" if v is None else str(v)
        s = s.replace("|", "\\|").replace("\n", " ")
        return s if len(s) <= width else s[: width - 1] + "…"

    rows = [[cell(v) for v in row] for row in head.iter_rows()]
    return tabulate(rows, headers=head.columns, tablefmt="github", disable_numparse=True)
