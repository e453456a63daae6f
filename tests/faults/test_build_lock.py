"""Issue 42 probes of the build lock: a symlink, hard link or FIFO planted at
``build.lock`` is refused without touching its target; a run outside the CLI build (the
path of the UI, the daemon and ``dagster asset materialize``: the lake resource of a
Dagster run) cannot write while a build holds the lock; the holder's own workers can;
and a ``kill -9`` of the holder stops its workers too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from dagster_project.storage.home import LOCK_NAME, BuildLocked, build_lock, pid_alive
from dagster_project.storage.lake import Lake
from dagster_project.wiring.resources import LakeResource

# A build holding the lock (the CLI's ``exclusive_build`` takes exactly this), which starts
# one worker process of its own that enters a run step's lock and reports, then sleeps.
HOLDER = textwrap.dedent(
    """
    import subprocess, sys, time
    from pathlib import Path
    from dagster_project.storage.home import build_lock
    WORKER = '''
    import sys, time
    from pathlib import Path
    from dagster_project.storage.home import writer_lock
    with writer_lock(Path(sys.argv[1]), wait_s=0):
        print("worker-in", flush=True)
        time.sleep(120)
    '''
    home = Path(sys.argv[1])
    with build_lock(home):
        worker = subprocess.Popen([sys.executable, "-c", WORKER, str(home)])
        print(f"held {worker.pid}", flush=True)
        time.sleep(120)
    """
)


def _holder(home: Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(home)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline().split()
    assert first[:1] == ["held"], first
    assert proc.stdout.readline().strip() == "worker-in"  # the holder's worker may write
    return proc, int(first[1])


@dg.asset
def lock_probe(lake: LakeResource) -> None:
    """A table-writing asset on the real lake resource (the path every run takes)."""
    lake.lake().replace_table("raw", "lock_probe", pl.DataFrame({"x": [1]}))


def _materialize(home: Path) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [lock_probe], resources={"lake": LakeResource(home=str(home))}, raise_on_error=False
    )


def test_symlink_at_build_lock_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("do not truncate me\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / LOCK_NAME).symlink_to(target)
    with pytest.raises(BuildLocked, match="symbolic link"), build_lock(home):
        pass
    assert target.read_text() == "do not truncate me\n"


def test_hard_link_and_fifo_at_build_lock_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep\n")
    home = tmp_path / "home"
    home.mkdir()
    os.link(target, home / LOCK_NAME)
    with pytest.raises(BuildLocked, match="hard links"), build_lock(home):
        pass
    assert target.read_text() == "keep\n"
    (home / LOCK_NAME).unlink()
    os.mkfifo(home / LOCK_NAME)
    with pytest.raises(BuildLocked, match="not a regular file"), build_lock(home):
        pass


def test_a_run_outside_the_build_cannot_write_while_it_holds_the_lock(kh_home: Path) -> None:
    kh_home.mkdir(parents=True, exist_ok=True)
    holder, worker = _holder(kh_home)
    try:
        result = _materialize(kh_home)
        assert not result.success
        events = " ".join(repr(e) for e in result.all_events)
        assert "another build is running" in events  # the holder's message, in the run's log
        lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))
        assert not lake.path.exists() or not lake.table_exists("raw", "lock_probe")
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 20
    while pid_alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pid_alive(worker), "the killed build's worker outlived it"
    assert _materialize(kh_home).success  # the lock passed on: the run writes now


def test_kill_9_of_the_build_stops_its_workers(kh_home: Path) -> None:
    kh_home.mkdir(parents=True, exist_ok=True)
    holder, worker = _holder(kh_home)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    deadline = time.monotonic() + 20
    while pid_alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pid_alive(worker)


def test_a_step_of_the_holding_builds_own_run_may_write_from_anywhere(kh_home: Path) -> None:
    """A Dask worker of a cluster started elsewhere is neither the build's descendant nor
    sees its environment: its run's ``kernelhouse/process`` tag names the holder."""
    import json

    from dagster_project.storage.home import writer_lock

    kh_home.mkdir(parents=True, exist_ok=True)
    holder, _worker = _holder(kh_home)
    try:
        identity = json.loads((kh_home / LOCK_NAME).read_text())["identity"]
        with writer_lock(kh_home, wait_s=0, run_process=identity):
            pass  # the holder's own run: allowed while it holds the lock
        foreign = writer_lock(kh_home, wait_s=0, run_process="otherhost:1:1")
        with pytest.raises(BuildLocked, match="another build is running"), foreign:
            pass
    finally:
        holder.kill()
        holder.wait()
