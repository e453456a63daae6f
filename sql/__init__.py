"""DuckDB SQL files, one intent per file, loaded relative to this package (never the CWD).

Values are always bound parameters (``$name`` / ``?``); no SQL in kernelhouse is built
with f-strings from data.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent


class SqlNotFound(FileNotFoundError):
    pass


@cache
def load_sql(name: str) -> str:
    """Text of ``sql/<name>.sql`` (``name`` may include a folder: ``analysis/gains``)."""
    path = (SQL_DIR / f"{name}.sql").resolve()
    if SQL_DIR not in path.parents or not path.exists():
        raise SqlNotFound(f"no SQL file {name!r} under {SQL_DIR}")
    return path.read_text()


def analysis_views() -> list[tuple[str, str]]:
    """(view name, SQL) for every ``sql/analysis/*.sql`` file, sorted by name."""
    folder = SQL_DIR / "analysis"
    return [(p.stem, p.read_text()) for p in sorted(folder.glob("*.sql"))]
