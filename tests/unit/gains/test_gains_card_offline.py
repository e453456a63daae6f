"""The kernel-opt-rl card says when gains were not extracted instead of claiming
"0 PRs with benchmark numbers" or a `pr_body` it never read."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from dagster_project.gains.pipeline import STATE_SCHEMA, extraction_state
from dagster_project.publish import export_kernel_opt_rl, read_snapshot
from tests.unit.publish import lakes


def _card(tmp_path: Path, state: dict | None) -> str:
    lake = lakes.new_lake(tmp_path / "lake")
    lakes.build_kernel_opt_rl_lake(lake)
    if state is not None:
        lake.replace_table("derived", "pr_gains_state", pl.DataFrame([state], schema=STATE_SCHEMA))
    out = tmp_path / "export" / "kernel-opt-rl"
    export_kernel_opt_rl(
        lake,
        out,
        reward_module=lakes.REWARD_MODULE,
        licenses=lakes.LICENSES,
        snapshot=read_snapshot(lake),
    )
    return (out / "README.md").read_text()


def test_card_says_gains_were_not_extracted(tmp_path: Path) -> None:
    needed = pl.DataFrame({"repo": ["vllm"] * 845, "number": list(range(1, 846))})
    state = extraction_state(needed, None)
    card = _card(tmp_path, state)
    assert "gains not extracted: 845 of 845 PR bodies unavailable" in card
    assert "with benchmark numbers" not in card
    assert "(empty in this build: gains not extracted" in card


def test_card_without_state_keeps_its_figures(tmp_path: Path) -> None:
    card = _card(tmp_path, None)
    assert "with benchmark numbers" in card and "gains not extracted" not in card
