"""What an export hands back to its caller (the publish assets, the CLI, tests).

The report carries counts per file and the exact statistics dict the card was rendered
from, so a caller can put them in Dagster metadata or compare them with the lake without
parsing Markdown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ExportError(RuntimeError):
    """An export could not be produced; the previous export (if any) was left in place."""


@dataclass(frozen=True)
class ExportReport:
    """Outcome of one export.

    ``rows`` maps each data file (path relative to ``out_dir``, POSIX separators) to its
    row count; ``sizes`` maps every file written, data or not, to its size in bytes;
    ``stats`` is the statistics dict the README was rendered from.
    """

    dataset: str
    out_dir: Path
    rows: dict[str, int]
    sizes: dict[str, int]
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes.values())

    def metadata(self) -> dict[str, Any]:
        """Flat, JSON-safe summary for asset metadata (no paths outside the export)."""
        return {
            "dataset": self.dataset,
            "files": len(self.sizes),
            "bytes": self.total_bytes,
            "rows_per_file": dict(self.rows),
        }


def file_sizes(root: Path) -> dict[str, int]:
    """Size of every regular file under ``root``, keyed by POSIX path relative to it."""
    return {
        p.relative_to(root).as_posix(): p.stat().st_size
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
