"""Fault injection: really ``kill -9`` a ``kernelhouse build`` at chosen points, then check
that the previous data is intact byte for byte, what the kill left is found and swept,
and that a rerun completes.

How a kill lands at an exact point: with ``KERNELHOUSE_FAULT_STOP=<point>`` the build
stops itself (SIGSTOP) when it reaches ``lake.fault_point(<point>)``; the test waits for
the process to show as stopped in ``/proc``, looks at what is on disk at that instant (the
temporary it was writing, its lock), then sends SIGKILL to that PID. No timer races: the
process is frozen exactly between "written" and "renamed" (or "committed", "swapped").

One small build on fixture-free simulated data (shard 000 of kernelswarm, its export and
the kernelinfer task table; no git repositories needed) is made once; every test works on
a ``cp -a`` copy of it, so every test also exercises a moved home.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from dagster_project.storage.lake import TEMP_NAME, Lake

pytestmark = pytest.mark.slow

EXE = str(Path(sys.executable).with_name("kernelhouse"))
BASE = ("--select", "sim_tasks,kernelswarm_episodes,kernelswarm_export", "--partition", "000")


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KERNELHOUSE_", "AWS_"))
        and k not in ("GITHUB_TOKEN", "HF_TOKEN", "DAGSTER_HOME")
    }
    env.update(
        {
            "KERNELHOUSE_HOME": str(home),
            "KERNELHOUSE_SIM_SESSIONS": "40",
            "KERNELHOUSE_SIM_EPISODES": "40",
            "KERNELHOUSE_SIM_COMPILE_SAMPLE": "3",
            "KERNELHOUSE_GITHUB_API_URL": "http://127.0.0.1:9",
            "HF_HUB_OFFLINE": "1",
            "DAGSTER_DISABLE_TELEMETRY": "1",
            "COLUMNS": "200",
        }
    )
    for repo in ("VLLM", "SGLANG", "FLASHINFER"):
        env[f"KERNELHOUSE_{repo}_SOURCE"] = str(home.parent / f"no-{repo.lower()}")
    env.update(extra)
    return env


def _kh(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [EXE, "build", *args], capture_output=True, text=True, timeout=300, env=_env(home, **extra)
    )


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


class Stopped:
    """A build started with a fault point, frozen at it."""

    def __init__(self, home: Path, point: str, *args: str, **extra: str) -> None:
        self.log = home.parent / f"{home.name}-{point}.log"
        with self.log.open("w") as fh:
            self.proc = subprocess.Popen(
                [EXE, "build", *args],
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=_env(home, KERNELHOUSE_FAULT_STOP=point, **extra),
                start_new_session=True,
            )
        deadline = time.monotonic() + 120
        while _state(self.proc.pid) != "T":
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"the build never reached {point}:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.05)

    def kill(self) -> None:
        """``kill -9`` the build by PID, then whatever it started (Dagster's log tails)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def snapshot(home: Path) -> dict[str, str]:
    """Every lake table and view by content (sha of its sorted rows), every partition and
    export file by bytes (temporaries aside: ``leftovers`` checks those). Read through
    ``Lake``, which re-binds a copied home's views."""
    out: dict[str, str] = {}
    lake = Lake(home / "lake.duckdb", str(home / "lake"))
    lake.query("SELECT 1")  # the first connection re-binds moved views
    with duckdb.connect(str(home / "lake.duckdb"), read_only=True) as con:
        names = con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema IN ('raw','derived','datasets','sim','analysis') ORDER BY 1, 2"
        ).fetchall()
        for schema, table in names:
            n, digest = con.execute(
                f"SELECT count(*), md5(coalesce(string_agg(CAST(t AS VARCHAR), chr(10) "
                f'ORDER BY CAST(t AS VARCHAR)), \'\')) FROM "{schema}"."{table}" AS t'
            ).fetchone()
            out[f"{schema}.{table}"] = f"{n}:{digest}"
    for folder in ("lake", "exports"):
        for p in sorted((home / folder).rglob("*")):
            rel = p.relative_to(home)
            if (
                p.is_file()
                and not p.name.endswith(".lock")
                and not TEMP_NAME.match(p.name)
                and not any(part.startswith(".") and ".tmp-" in part for part in rel.parts)
            ):
                out[str(rel)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def leftovers(home: Path) -> list[str]:
    """Temporaries of killed writes: ``write_atomically``'s files, export folders."""
    found = [str(p.relative_to(home)) for p in home.rglob("*") if TEMP_NAME.match(p.name)]
    found += [str(p.relative_to(home)) for p in (home / "exports").glob(".*.tmp-*")]
    return sorted(found)


def runs_in_progress(home: Path) -> list[str]:
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        statuses = [
            dg.DagsterRunStatus.STARTED,
            dg.DagsterRunStatus.STARTING,
            dg.DagsterRunStatus.NOT_STARTED,
        ]
        return [r.run_id for r in instance.get_runs(filters=dg.RunsFilter(statuses=statuses))]


@pytest.fixture(scope="module")
def base_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("faults") / "base"
    res = _kh(home, *BASE)
    assert res.returncode == 0, res.stdout + res.stderr
    yield home


@pytest.fixture
def home(base_home: Path, tmp_path: Path) -> Path:
    """A ``cp -a`` copy of the built home in another folder."""
    dst = tmp_path / "copied-home"
    subprocess.run(["cp", "-a", str(base_home), str(dst)], check=True)
    return dst


def test_kill_mid_partition_write(home: Path) -> None:
    before = snapshot(home)
    build = Stopped(
        home,
        "partition_write",
        "--select",
        "kernelswarm_episodes",
        "--partition",
        "000",
        KERNELHOUSE_SIM_SEED="7",
    )
    tmp = leftovers(home)
    assert len(tmp) == 1 and tmp[0].startswith("lake/kernelswarm_episodes/.000.parquet."), tmp
    assert f".{build.proc.pid}." in tmp[0]
    # A second build on the same home while the first holds the lock: refused at once.
    second = _kh(home, "--select", "sim_tasks")
    assert second.returncode == 1
    assert "another build is running" in second.stderr and f"PID {build.proc.pid}" in second.stderr
    build.kill()
    assert runs_in_progress(home), "the killed run is left STARTED (what the next build repairs)"
    assert snapshot(home) == before, "a kill mid partition write changed the previous data"
    assert leftovers(home) == tmp
    rerun = _kh(
        home, "--select", "kernelswarm_episodes", "--partition", "000", KERNELHOUSE_SIM_SEED="7"
    )
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    notes = " ".join(rerun.stderr.split())
    assert (
        "took over the build lock of a build that died" in notes
        and f"PID {build.proc.pid}" in notes
    )
    assert "removed 1 temporary file(s)" in notes and "marked 1 run(s)" in notes
    assert leftovers(home) == [] and runs_in_progress(home) == []
    after = snapshot(home)
    assert (
        after["lake/kernelswarm_episodes/000.parquet"]
        != before["lake/kernelswarm_episodes/000.parquet"]
    )
    assert after["sim.kernelinfer_tasks"] == before["sim.kernelinfer_tasks"]


def test_kill_mid_duckdb_transaction(home: Path) -> None:
    before = snapshot(home)
    build = Stopped(home, "transaction", "--select", "sim_tasks", KERNELHOUSE_SIM_SEED="7")
    build.kill()
    assert snapshot(home) == before, "a kill before COMMIT changed a table"
    rerun = _kh(home, "--select", "sim_tasks", KERNELHOUSE_SIM_SEED="7")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert runs_in_progress(home) == []
    after = snapshot(home)
    assert after["sim.kernelinfer_tasks"] != before["sim.kernelinfer_tasks"], (
        "the rerun wrote the new seed's tasks"
    )
    assert {k: v for k, v in after.items() if "kernelinfer_tasks" not in k} == {
        k: v for k, v in before.items() if "kernelinfer_tasks" not in k
    }


def test_kill_mid_export(home: Path) -> None:
    before = snapshot(home)
    build = Stopped(home, "export", "--select", "kernelswarm_export")
    tmp = leftovers(home)
    assert len(tmp) == 1 and tmp[0].startswith("exports/.kernelswarm.tmp-"), tmp
    build.kill()
    assert snapshot(home) == before, "a kill mid export changed the previous export"
    rerun = _kh(home, "--select", "kernelswarm_export")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert leftovers(home) == [] and runs_in_progress(home) == []
    after = snapshot(home)
    assert sorted(after) == sorted(before), "the rerun's export has the same files"
    assert {k: v for k, v in after.items() if not k.startswith("exports/")} == {
        k: v for k, v in before.items() if not k.startswith("exports/")
    }


def test_moved_home_queries_every_view(base_home: Path, tmp_path: Path) -> None:
    """``mv`` of a built home (the original gone): every view reads the moved files."""
    copy = tmp_path / "copy"
    shutil.copytree(base_home, copy, symlinks=True)
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    os.rename(copy, moved)
    want = snapshot(base_home)
    env = _env(moved)
    with duckdb.connect(str(moved / "lake.duckdb"), read_only=True) as con:
        views = [
            f"{s}.{v}"
            for s, v in con.execute(
                "SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal "
                "AND schema_name IN ('sim','raw','derived','datasets','analysis')"
            ).fetchall()
        ]
    assert len(views) >= 3
    counts = ", ".join(f'(SELECT count(*) FROM {v}) AS "{v}"' for v in views)
    res = subprocess.run(
        [EXE, "sql", f"SELECT {counts}", "-f", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)[0]
    assert {v: str(got[v]) for v in views} == {v: want[v].split(":")[0] for v in views}
    assert snapshot(moved) == want
