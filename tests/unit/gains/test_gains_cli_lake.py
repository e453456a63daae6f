"""One PR text, two doors: ``kernelhouse gains extract`` and the lake (issue 40).

The ``pr_gains`` asset reads ``raw.pr_bodies`` through ``pipeline.gains_tables`` and writes
``derived.pr_gains``; the CLI reads a file. Until extractor 2.12 the lake passed the PR's
repository to the extractor and the CLI did not, and the repository decided sides (a
"FlashInfer" column was the baseline in a vLLM PR), so a user checking a PR with the CLI saw
other measurements than the lake held. These tests run the real CLI as a subprocess and the
asset's own domain call into a real DuckDB lake, on our own texts, and compare.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from dagster_project.gains.pipeline import gains_tables
from dagster_project.storage.lake import Lake

EXE = str(Path(sys.executable).with_name("kernelhouse"))
FIXTURES = Path(__file__).parents[2] / "fixtures" / "prs"

#: fields of a measurement that are read from the text (repo / number are stamped)
READ = (
    "scope",
    "metric",
    "baseline",
    "optimized",
    "stated_speedup",
    "speedup",
    "unit",
    "batch_size",
    "shape",
    "hardware",
    "structure",
    "baseline_label",
    "optimized_label",
    "audit_pass",
    "audit_reason",
)

#: our own texts: tables whose sides were decided by the PR's repository before 2.12, and
#: two of the project's fixtures (a split-K table, a revert-free role-line text)
TEXTS: dict[tuple[str, int], str] = {
    ("vllm-project/vllm", 101): (
        "[Kernel] Faster moe align\n"
        "| batch | FlashInfer (us) | Triton (us) |\n|---|---|---|\n"
        "| 1 | 12.0 | 9.0 |\n| 8 | 14.0 | 10.0 |\n"
    ),
    ("sgl-project/sglang", 102): (
        "Use the new topk kernel\n"
        "| batch | vLLM (us) | SGLang (us) |\n|---|---|---|\n"
        "| 1 | 12.0 | 9.0 |\n| 8 | 14.0 | 10.0 |\n"
    ),
    ("flashinfer-ai/flashinfer", 103): (
        "perf: decode\nBefore:\nFlashInfer: 10.5 ms\n\nAfter:\nFlashInfer: 8.5 ms\n"
    ),
    ("flashinfer-ai/flashinfer", 104): (FIXTURES / "05_flashinfer_decode_splitk_table.md")
    .read_text()
    .replace("\r\n", "\n"),
    ("sgl-project/sglang", 105): (FIXTURES / "25_sglang_prose_role_lines.md")
    .read_text()
    .replace("\r\n", "\n"),
}


def _cli(path: Path, *extra: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [EXE, "gains", "extract", str(path), "-f", "json", *extra],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout)["measurements"])


def _lake_rows(tmp_path: Path) -> pl.DataFrame:
    """``derived.pr_gains`` as the asset writes it, read back from a real DuckDB file."""
    bodies = pl.DataFrame(
        [
            {
                "repo": repo,
                "number": number,
                "title": text.partition("\n")[0],
                "body": text.partition("\n")[2],
                "status": "ok",
            }
            for (repo, number), text in TEXTS.items()
        ]
    )
    out = gains_tables(bodies, [], None, None, log=lambda _m: None, warn=lambda _m: None)
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))
    lake.replace_table("derived", "pr_gains", out.gains)
    return lake.read_table("derived", "pr_gains")


def _read(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [tuple(r[k] for k in READ) for r in rows]


@pytest.fixture(scope="module")
def lake_rows(tmp_path_factory: pytest.TempPathFactory) -> pl.DataFrame:
    return _lake_rows(tmp_path_factory.mktemp("lake"))


@pytest.mark.parametrize("key", list(TEXTS), ids=[f"{r}#{n}" for r, n in TEXTS])
def test_cli_and_lake_read_a_text_alike(
    key: tuple[str, int], lake_rows: pl.DataFrame, tmp_path: Path
) -> None:
    repo, number = key
    path = tmp_path / "pr.md"
    path.write_text(TEXTS[key])
    in_lake = (
        lake_rows.filter((pl.col("repo") == repo) & (pl.col("pr_number") == number))
        .sort("idx")
        .to_dicts()
    )
    stamped = _cli(path, "--repo", repo, "--number", str(number))
    bare = _cli(path)  # what a user runs on a saved PR text, repository unknown
    assert _read(stamped) == _read(in_lake)
    assert _read(bare) == _read(in_lake)
    assert all((r["repo"], r["pr_number"]) == key for r in stamped)
    assert all(r["repo"] is None and r["pr_number"] is None for r in bare)


def test_the_texts_are_not_all_empty(lake_rows: pl.DataFrame) -> None:
    """The comparison above means something only if some texts give measurements."""
    per_pr = lake_rows.group_by("pr_number").len()
    assert set(per_pr["pr_number"].to_list()) >= {103, 104, 105}
