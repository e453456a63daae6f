"""Progress of a build: one bar per stage, and long steps reporting their own progress.

Two halves that never import each other's heavy dependencies:

* ``report(task, done, total)`` — called by domain code in a long step (an export
  writing batch files, a compile check) to say how far it is. It imports nothing (no
  dagster, no rich) and costs nothing when no one listens, so domain code may call it.
* ``BuildProgress`` — the CLI's display (``rich.progress``): a bar per stage with runs
  done of total, elapsed time and an ETA from the stage's own pace (``stage_eta``), the
  running asset and partition named, and one bar per task that ``report`` announces while
  its step runs. On a console that is not a
  terminal (a log file, CI) it prints one line per run instead, as before.

Reports reach the display only from steps that run in the CLI's own process (the
unpartitioned stages, ``execution.local.LocalRuns``); partition runs in worker processes are
counted by the stage bar.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

Listener = Callable[[str, int, int | None], None]
_listeners: list[Listener] = []
_lock = threading.Lock()


def report(task: str, done: int, total: int | None = None) -> None:
    """Say that ``task`` has done ``done`` of ``total`` units (total None: unknown)."""
    for listener in list(_listeners):
        listener(task, done, total)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Deliver every ``report`` to ``listener`` inside the block."""
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)


def stage_eta(elapsed: float | None, done: float, total: float | None) -> float | None:
    """Seconds left in a stage: its elapsed time per finished run, times the runs left.

    Why not rich's own ``TimeRemainingColumn``: it divides by the speed of the last
    completions only, and partition runs finish in bursts (the workers' runs end within the
    same second), so two shards done at once read as "1 s left" with minutes to go. The
    stage's own average since it started is what the remaining runs will take. None until
    a run has finished, or when nothing is left."""
    if not total or not elapsed or done <= 0 or done >= total:
        return None
    return elapsed / done * (total - done)


def _eta_column() -> Any:
    """A rich column showing ``stage_eta`` (rich is imported only with a live display)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class StageEta(ProgressColumn):
        def render(self, task: Any) -> Text:
            left = stage_eta(task.elapsed, task.completed, task.total)
            if left is None:
                return Text("")
            minutes, seconds = divmod(int(round(left)), 60)
            return Text(f"ETA {minutes}:{seconds:02d}", style="progress.remaining")

    return StageEta()


def _sid(stage: Any) -> tuple[str, ...]:
    return tuple(k.to_user_string() for k in stage.keys)


class BuildProgress:
    """The build's display; ``on_run`` is ``run_build``'s callback."""

    def __init__(self, console: Any, stages: list[Any], partitions: list[str] | None) -> None:
        self.console = console
        self.started = time.monotonic()
        # run_build plans the stages again, so a stage is known by its assets, not its id.
        self.totals = {
            _sid(s): sum(
                1 for k in s.partition_keys if k is None or not partitions or k in partitions
            )
            for s in stages
        }
        self.total = sum(self.totals.values())
        self.launched = self.done = 0
        self.live = bool(getattr(console, "is_terminal", False))
        self._bars: dict[tuple[str, ...], Any] = {}
        self._tasks: dict[str, Any] = {}
        self._running: dict[tuple[str, ...], list[str]] = {}
        self._progress: Any = None

    # -- context: start/stop the live display and listen to step reports -------------
    def __enter__(self) -> BuildProgress:
        if self.live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                _eta_column(),
                console=self.console,
                transient=False,
            )
            self._progress.start()
        self._listen = listening(self._on_report)
        self._listen.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._listen.__exit__(exc_type, exc, tb)
        if self._progress is not None:
            self._progress.stop()

    # -- run_build callback ----------------------------------------------------------
    def on_run(self, stage: Any, pkey: str | None, state: str) -> None:
        from dagster_project.terminal import escape

        sid = _sid(stage)
        tag = f"[{pkey}]" if pkey else ""
        if state == "start":
            self.launched += 1
            self._running.setdefault(sid, []).append(tag)
            if not self.live:
                self.console.print(
                    f"[dim]{self.launched}/{self.total}[/] {escape(stage.label)} {escape(tag)}"
                )
        else:
            self.done += 1
            running = self._running.get(sid, [])
            if tag in running:
                running.remove(tag)
            if not self.live:
                colour = "green" if state == "ok" else "red"
                self.console.print(
                    f"    [{colour}]{state}[/] {escape(stage.label)} {escape(tag)} "
                    f"({time.monotonic() - self.started:.1f}s)"
                )
        if self._progress is None:
            return
        if sid not in self._bars:
            self._bars[sid] = self._progress.add_task("", total=self.totals.get(sid) or 1)
        finished = state != "start"
        now = ", ".join(self._running.get(sid, [])[:3])
        description = f"{escape(stage.label)} [dim]{escape(now)}[/]" if now else escape(stage.label)
        self._progress.update(
            self._bars[sid], advance=1 if finished else 0, description=description
        )

    # -- step reports --------------------------------------------------------------------
    def _on_report(self, task: str, done: int, total: int | None) -> None:
        if self._progress is None:
            if total and (done == total or done == 1):
                self.console.print(f"      [dim]{task}: {done}/{total}[/]")
            return
        from dagster_project.terminal import escape

        if task not in self._tasks:
            self._tasks[task] = self._progress.add_task(f"  {escape(task)}", total=total)
        self._progress.update(self._tasks[task], completed=done, total=total)
