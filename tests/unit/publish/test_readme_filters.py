"""Every column the README tells users to filter the mined rows on is in the export
(issue 41: ``rule``, ``reverted_by``, ``duplicate_of`` and ``loaded_at_runtime`` were once
dropped from the Parquet files). The names are read from the README itself, so a column
added to that paragraph without being exported fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dagster_project.publish import ExportReport
from dagster_project.publish.kernel_opt_rl import data_file
from dagster_project.storage.lake import Lake

README = Path(__file__).resolve().parents[3] / "README.md"
START = "Columns to filter the mined rows on:"
END = "Malformed upstream config"
#: Named in the paragraph today; the parse must find at least these (a guard against a
#: reworded README silently leaving nothing to check).
EXPECTED = {
    "kernel_commits": {"reverted_by", "duplicate_of", "rule", "touches_kernel_body"},
    "tuned_configs": {"loaded_at_runtime", "not_loaded_reason", "copied_from"},
}


def readme_filter_names() -> dict[str, set[str]]:
    """{dataset: backquoted names} of the README's filter paragraph, split at the point it
    turns to ``datasets.tuned_configs``; ``rule`` comes from its "filter on `rule = ...`"."""
    text = README.read_text(encoding="utf-8")
    para = text[text.index(START) : text.index(END)]
    commits, _, configs = para.partition("in `datasets.tuned_configs`")
    names = {
        "kernel_commits": set(re.findall(r"`([a-z_][a-z0-9_]*)`", commits)),
        "tuned_configs": set(re.findall(r"`([a-z_][a-z0-9_]*)`", configs)),
    }
    names["kernel_commits"] |= set(re.findall(r"filter on\s+`([a-z_]+)\s*=", text))
    return names


@pytest.mark.parametrize("subset", ["kernel_commits", "tuned_configs"])
def test_every_readme_filter_column_is_exported(
    subset: str, opt_export: ExportReport, opt_lake: Lake
) -> None:
    named = readme_filter_names()[subset]
    assert EXPECTED[subset] <= named, EXPECTED[subset] - named
    # Backquoted values (platform names, task kinds) are not columns of the table.
    columns = named & set(opt_lake.read_table("datasets", subset).columns)
    assert EXPECTED[subset] <= columns
    for split in ("train", "test"):
        shipped = set(pq.read_schema(opt_export.out_dir / data_file(subset, split)).names)
        assert columns <= shipped, (subset, split, sorted(columns - shipped))
