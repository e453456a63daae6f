"""The build's progress display: a bar per stage with counts, the running partitions
named, and a long step's own reports as a bar of their own; plain lines without a
terminal."""

from __future__ import annotations

import io
from dataclasses import dataclass

import dagster as dg
from rich.console import Console

from dagster_project import progress
from dagster_project.progress import BuildProgress


@dataclass
class _Stage:
    keys: list[dg.AssetKey]
    partition_keys: list[str | None]

    @property
    def label(self) -> str:
        return ", ".join(k.to_user_string() for k in self.keys)


def _run(console: Console) -> str:
    shards = _Stage([dg.AssetKey("kernelinfer_sessions")], ["000", "001", "002"])
    export = _Stage([dg.AssetKey("kernelinfer_export")], [None])
    # run_build re-plans its stages: equal stages, other objects.
    with BuildProgress(console, [_Stage(shards.keys, shards.partition_keys), export], None) as bp:
        for key in ("000", "001"):
            bp.on_run(shards, key, "start")
        bp.on_run(shards, "000", "ok")
        bp.on_run(shards, "002", "start")
        bp.on_run(shards, "001", "failed")
        bp.on_run(shards, "002", "ok")
        bp.on_run(export, None, "start")
        for i in range(4):
            progress.report("kernelinfer export: batch files", i + 1, 4)
        bp.on_run(export, None, "ok")
    progress.report("nobody listens now", 1, 1)  # no listener: nothing happens
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_bars_with_counts_and_step_reports_on_a_terminal() -> None:
    text = _run(Console(file=io.StringIO(), force_terminal=True, width=140, color_system=None))
    assert "kernelinfer_sessions" in text and "3/3" in text
    assert "kernelinfer export: batch files" in text and "4/4" in text
    assert "ETA" in text
    assert "nobody listens now" not in text


def test_plain_lines_without_a_terminal() -> None:
    text = _run(Console(file=io.StringIO(), force_terminal=False, width=140))
    lines = [ln.strip() for ln in text.splitlines()]
    assert lines[0] == "1/4 kernelinfer_sessions [000]"
    assert any(ln.startswith("failed kernelinfer_sessions [001]") for ln in lines)
    assert "kernelinfer export: batch files: 4/4" in lines
