"""The measured_configs dataset card (issue 34: the export had a Parquet file and no card,
and the Hub push left it out).

``write_measured_card`` writes ``README.md`` beside ``measured_configs.parquet`` (which
``rewards.measured.export_measured`` writes): front matter with the declared schema
(``features.py``), the figures of ``sql/publish/measured_summary.sql`` and
``measured_by_kernel.sql``, and how to load it. No dagster import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from dagster_project.rewards import remeasure
from dagster_project.storage.lake import Lake, write_atomically

from . import exploits
from ._sql import records
from .cards import render_card, size_category
from .features import dataset_info

DATASET = "measured_configs"
DATA_FILE = "measured_configs.parquet"


def write_measured_card(lake: Lake, folder: Path, repo_id: str | None = None) -> Path:
    """``folder/README.md`` for the measured_configs export in ``folder``."""
    schema = pq.read_schema(folder / DATA_FILE)
    with lake.connect(read_only=True) as con:
        (stats,) = records(con, "measured_summary")
        by_kernel = records(con, "measured_by_kernel")
    text = render_card(
        "measured_configs.md.j2",
        _front_matter(stats, schema),
        {
            "s": stats,
            "by_kernel": by_kernel,
            "load_path": repo_id or f"./{DATASET}",
            # the shipped second-session re-measures (issue 38): read from the package's
            # batches, as the tables are, not from a lake table
            "repeats": remeasure.summaries(),
            **exploits.card_context(),
        },
    )
    return write_atomically(folder / "README.md", lambda tmp: tmp.write_text(text, "utf-8"))


def _front_matter(stats: dict[str, Any], schema: Any) -> dict[str, Any]:
    return {
        "license": "apache-2.0",
        "pretty_name": "Measured tuned Triton configs",
        "language": ["en", "code"],
        "task_categories": ["tabular-regression", "reinforcement-learning"],
        "tags": ["gpu", "triton", "kernel-tuning", "benchmarks", "kernelhouse"],
        "size_categories": [size_category(int(stats["rows"] or 0))],
        "configs": [
            {"config_name": "default", "data_files": [{"split": "train", "path": DATA_FILE}]}
        ],
        "dataset_info": [dataset_info("default", schema)],
    }
