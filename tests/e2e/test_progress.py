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
    assert "nobody listens now" not in text


def test_plain_lines_without_a_terminal() -> None:
    text = _run(Console(file=io.StringIO(), force_terminal=False, width=140))
    lines = [ln.strip() for ln in text.splitlines()]
    assert lines[0] == "1/4 kernelinfer_sessions [000]"
    assert any(ln.startswith("failed kernelinfer_sessions [001]") for ln in lines)
    assert "kernelinfer export: batch files: 4/4" in lines


def test_stage_eta_is_the_stage_pace_not_the_last_burst() -> None:
    """Two of 19 shards finished together after 60 s: about 8.5 minutes are left, not the
    "1 s" a speed measured over the last completions gave."""
    assert progress.stage_eta(60.0, 2, 19) == 60.0 / 2 * 17
    assert progress.stage_eta(60.0, 0, 19) is None  # nothing finished: no estimate
    assert progress.stage_eta(60.0, 19, 19) is None  # done
    assert progress.stage_eta(None, 1, 1) is None


def test_the_eta_column_renders_the_stage_pace() -> None:
    from rich.progress import Progress

    bar = Progress(progress._eta_column(), console=Console(file=io.StringIO()), auto_refresh=False)
    task_id = bar.add_task("shards", total=19)
    task = bar.tasks[0]
    bar.update(task_id, completed=2)
    task.start_time = task.start_time - 60.0 if task.start_time is not None else None
    text = bar.columns[0].render(task).plain
    assert text.startswith("ETA 8:") or text == "ETA 9:00", text
