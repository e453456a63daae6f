"""A home that moves and cleans up after a killed build (``lake.rebind_views``,
``home.py``): re-bound views after ``cp -a``/``mv``, broken views that a refresh rebuilds
instead of calling up to date, the build lock, the temporary sweep, dead builds' runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from dagster_project.settings import load_settings
from dagster_project.storage import home as kh_home_mod
from dagster_project.storage.home import (
    BuildLocked,
    build_lock,
    fail_dead_runs,
    orphaned_temporaries,
    process_identity,
    sweep_temporaries,
)
from dagster_project.storage.lake import Lake, temp_path


def _built(root: Path) -> Lake:
    lake = Lake(root / "lake.duckdb", str(root / "lake"))
    lake.replace_table("raw", "repo_heads", pl.DataFrame({"repo": ["vllm"], "n": [3]}))
    for shard, rows in (("000", [1, 2]), ("001", [3])):
        lake.write_partition("kernelswarm_episodes", shard, pl.DataFrame({"x": rows}))
    lake.write_partition("kernelswarm_agents", "000", pl.DataFrame({"a": ["p"]}))
    lake.refresh_view("sim", "kernelswarm_episodes")
    lake.refresh_view("sim", "kernelswarm_agents")
    return lake


# -- relocation ---------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["cp -a", "mv", "restore"])
def test_moved_home_reads_its_own_files(tmp_path: Path, how: str) -> None:
    original = tmp_path / "home"
    _built(original)
    moved = tmp_path / "elsewhere" / "home"
    moved.parent.mkdir()
    if how == "cp -a":
        subprocess.run(["cp", "-a", str(original), str(moved)], check=True)
        # The old home changes afterwards: the copy must not read its files.
        Lake(original / "lake.duckdb", str(original / "lake")).write_partition(
            "kernelswarm_episodes", "002", pl.DataFrame({"x": [99]})
        )
    elif how == "mv":
        os.rename(original, moved)
    else:  # a tar backup restored elsewhere, the original gone
        archive = tmp_path / "backup.tar"
        subprocess.run(["tar", "-cf", str(archive), "-C", str(tmp_path), "home"], check=True)
        shutil.rmtree(original)
        subprocess.run(["tar", "-xf", str(archive), "-C", str(moved.parent)], check=True)
    lake = Lake(moved / "lake.duckdb", str(moved / "lake"))
    assert lake.query("SELECT sum(x) AS s FROM sim.kernelswarm_episodes")["s"].to_list() == [6]
    assert lake.query("SELECT count(*) AS n FROM sim.kernelswarm_agents")["n"].to_list() == [1]
    assert lake.moved_views() == [] and lake.broken_views() == []
    # The view now names the new root, so plain DuckDB clients (GX, a user's shell) read it too.
    import duckdb

    with duckdb.connect(str(moved / "lake.duckdb"), read_only=True) as con:
        assert con.execute("SELECT sum(x) FROM sim.kernelswarm_episodes").fetchone() == (6,)


def test_moved_view_without_files_is_reported_broken(tmp_path: Path) -> None:
    original = tmp_path / "home"
    _built(original)
    moved = tmp_path / "moved"
    os.rename(original, moved)
    shutil.rmtree(moved / "lake" / "kernelswarm_agents")  # lost in the move
    lake = Lake(moved / "lake.duckdb", str(moved / "lake"))
    assert lake.query("SELECT sum(x) AS s FROM sim.kernelswarm_episodes")["s"].to_list() == [6]
    assert lake.broken_views() == ["sim.kernelswarm_agents"]


def test_view_whose_files_are_gone_is_broken(tmp_path: Path) -> None:
    lake = _built(tmp_path)
    for f in (tmp_path / "lake" / "kernelswarm_episodes").glob("*.parquet"):
        f.unlink()
    assert lake.broken_views() == ["sim.kernelswarm_episodes"]


def test_refresh_rebuilds_broken_views_instead_of_calling_them_up_to_date(kh_home: Path) -> None:
    from dagster_project.definitions import build_definitions
    from dagster_project.execution.planner import run_build

    (kh_home / "dagster").mkdir(parents=True)
    with dg.DagsterInstance.local_temp(str(kh_home / "dagster")) as instance:
        select = "kernelswarm_episodes"
        assert run_build(build_definitions(), instance, select, partitions=["000"]).ok
        out = run_build(build_definitions(), instance, select, partitions=["000"], refresh=True)
        assert out.ok and not out.reasons and out.fresh == ["kernelswarm_episodes[000]"]
        for table in ("kernelswarm_episodes", "kernelswarm_agents", "kernelswarm_messages"):
            (kh_home / "lake" / table / "000.parquet").unlink()
        out = run_build(build_definitions(), instance, select, partitions=["000"], refresh=True)
        assert out.ok, out.failed
        assert "no longer reads" in out.reasons["kernelswarm_episodes[000]"]
        assert any("kernelswarm_episodes runs again" in n for n in out.notes)
        lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))
        assert lake.broken_views() == []
        assert lake.query("SELECT count(*) AS n FROM sim.kernelswarm_episodes")["n"].to_list() == [
            40
        ]


# -- the build lock -----------------------------------------------------------------------
_HOLD = """
import sys, time
from pathlib import Path
from dagster_project.storage.home import build_lock
with build_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


def test_second_build_is_refused_naming_the_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with (
            pytest.raises(BuildLocked, match=f"another build is running.*PID {holder.pid}"),
            build_lock(tmp_path),
        ):
            pass
    finally:
        holder.kill()
        holder.wait()
    # The holder died without releasing anything: the next build takes the lock over.
    with build_lock(tmp_path) as stale:
        assert stale is not None and f"PID {holder.pid}" in stale
    with build_lock(tmp_path) as stale:
        assert stale is None, "a lock released normally is not stale"


def test_lock_is_reentrant_in_one_process(tmp_path: Path) -> None:
    with build_lock(tmp_path), build_lock(tmp_path) as inner:
        assert inner is None


# -- temporaries --------------------------------------------------------------------------
def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_sweep_removes_orphans_and_keeps_live_writers(kh_home: Path) -> None:
    s = load_settings()
    part = Path(s.parquet_root) / "kernelswarm_episodes" / "000.parquet"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"previous")
    live = temp_path(part)  # this process: a write in progress
    dead = part.with_name(f".000.parquet.{_dead_pid()}.{'a' * 32}.tmp")
    legacy = part.with_name(f".000.parquet.{'b' * 32}.tmp")  # before PIDs were recorded
    old_live = part.with_name(f".001.parquet.{os.getpid()}.{'c' * 32}.tmp")
    export_tmp = s.exports_dir / "measured" / f".measured_configs.csv.{_dead_pid()}.{'d' * 32}.tmp"
    export_tmp.parent.mkdir(parents=True)
    for f in (live, dead, legacy, old_live, export_tmp):
        f.write_bytes(b"torn")
    day_ago = time.time() - 2 * 86400
    os.utime(old_live, (day_ago, day_ago))
    assert set(orphaned_temporaries(s)) == {dead, legacy, old_live, export_tmp}
    removed = sweep_temporaries(s)
    assert len(removed) == 4 and all(not Path(s.home / r).exists() for r in removed)
    assert live.exists() and part.read_bytes() == b"previous"


# -- runs of dead builds ------------------------------------------------------------------
def test_runs_of_dead_builds_are_failed(tmp_path: Path) -> None:
    from dagster._core.storage.dagster_run import DagsterRun

    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:

        def add(
            run_id: str,
            tags: dict[str, str],
            status: dg.DagsterRunStatus = dg.DagsterRunStatus.STARTED,
        ) -> None:
            instance.add_run(
                DagsterRun(job_name="__ASSET_JOB", run_id=run_id, status=status, tags=tags)
            )

        add("dead" * 8, {"kernelhouse/cli": "build", "kernelhouse/process": "host:123:456"})
        add("olds" * 8, {"kernelhouse/cli": "refresh"})  # from before runs carried the process
        add("mine" * 8, {"kernelhouse/cli": "build", "kernelhouse/process": process_identity()})
        add("uirn" * 8, {"dagster/from_ui": "true"})  # a UI run: not ours to judge
        add("done" * 8, {"kernelhouse/cli": "build"}, dg.DagsterRunStatus.SUCCESS)
        assert sorted(fail_dead_runs(instance)) == ["dead" * 8, "olds" * 8]
        status = {
            r: instance.get_run_by_id(r * 8).status
            for r in ("dead", "olds", "mine", "uirn", "done")
        }
        assert status == {
            "dead": dg.DagsterRunStatus.FAILURE,
            "olds": dg.DagsterRunStatus.FAILURE,
            "mine": dg.DagsterRunStatus.STARTED,
            "uirn": dg.DagsterRunStatus.STARTED,
            "done": dg.DagsterRunStatus.SUCCESS,
        }
        assert fail_dead_runs(instance) == []


def test_housekeeping_notes_are_readable() -> None:
    notes = kh_home_mod.Housekeeping(
        stale_lock="PID 7 on h",
        swept=["lake/t/.0.parquet.7.x.tmp"],
        failed_runs=["abcdef0123"],
        damaged={"kernelswarm_episodes": "view sim.kernelswarm_episodes no longer reads"},
    ).notes()
    assert notes == [
        "took over the build lock of a build that died (PID 7 on h)",
        "removed 1 temporary file(s) a killed write left: lake/t/.0.parquet.7.x.tmp",
        "marked 1 run(s) of a build that died as failed: abcdef01",
        "kernelswarm_episodes runs again: view sim.kernelswarm_episodes no longer reads",
    ]
