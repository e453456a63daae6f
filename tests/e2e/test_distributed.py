"""Beyond one machine, end to end: a real Dask cluster (scheduler + 2 worker processes on
127.0.0.1), a real S3-compatible server (moto), the real CLI.

`kernelhouse build --distributed` backfills several simulated shards through the Dask
executor into the bucket; the same build in process into a local folder must give the
same rows and the very same Parquet bytes; `kernelhouse sql` then answers over the
bucket-backed views."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from tests.unit.test_lake_object_store import S3Server, moto_s3

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

EXE = str(Path(sys.executable).with_name("kernelhouse"))
# Three shard runs, small enough for two cores: kernelinfer 40 sessions (shard 000; 001
# and 002 are beyond the build and were never written here, so the planner does not run
# them), kernelswarm 100 + 50 episodes (shards 000 and 001, in flight together).
SIZES = {"KERNELHOUSE_SIM_SESSIONS": "40", "KERNELHOUSE_SIM_EPISODES": "150"}
SHARD_FILES = {"kernelinfer": ["000.parquet"], "kernelswarm": ["000.parquet", "001.parquet"]}
SELECT = [
    "--select",
    "kernelinfer_sessions,kernelswarm_episodes",
    "-p",
    "000",
    "-p",
    "001",
    "-p",
    "002",
]
TABLES = (
    "kernelinfer_sessions",
    "kernelinfer_steps",
    "kernelswarm_episodes",
    "kernelswarm_agents",
    "kernelswarm_messages",
)
# Float sums are rounded: DuckDB's parallel aggregation adds in no fixed order.
SUMMARY = (
    "\n"
    "SELECT 'sessions' AS t, shard, count(*) AS n, sum(num_steps) AS x "
    "FROM sim.kernelinfer_sessions GROUP BY ALL\n"
    "UNION ALL SELECT 'steps', -1, count(*), round(sum(time_ms), 3) FROM sim.kernelinfer_steps\n"
    "UNION ALL SELECT 'episodes', shard, count(*), sum(num_messages) "
    "FROM sim.kernelswarm_episodes GROUP BY ALL\n"
    "UNION ALL SELECT 'messages', -1, count(*), round(sum(reward), 6) "
    "FROM sim.kernelswarm_messages\n"
    "ORDER BY 1, 2\n"
)


def _kh(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [EXE, *args],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "COLUMNS": "200", **env},
    )


@pytest.fixture
def s3() -> Iterator[S3Server]:
    with moto_s3() as server:
        yield server


def test_distributed_backfill_into_a_bucket_matches_in_process(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dask.distributed import Client, LocalCluster

    # The reference: the same backfill in process, into a local folder.
    local_home = tmp_path / "in-process"
    ref = _kh("build", *SELECT, env={**SIZES, "KERNELHOUSE_HOME": str(local_home)})
    assert ref.returncode == 0, ref.stdout + ref.stderr

    # The distributed build. Workers read the lake settings from their own environment,
    # so it is set before the cluster starts (as it would be on real worker machines).
    bucket = s3.new_bucket()
    dist_home = tmp_path / "distributed"
    env = {
        **SIZES,
        **s3.env(),
        "KERNELHOUSE_HOME": str(dist_home),
        "KERNELHOUSE_LAKE_URI": f"s3://{bucket}/kernelhouse",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        worker_pids = set(client.run(os.getpid).values())
        res = _kh(
            "build",
            "--distributed",
            *SELECT,
            env={**env, "KERNELHOUSE_DASK_SCHEDULER": cluster.scheduler_address},
        )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "KERNELHOUSE_DASK_SCHEDULER, 2 worker threads" in " ".join(res.stderr.split())

    # Every shard step ran on the cluster's workers, and on both of them.
    import dagster as dg

    with dg.DagsterInstance.from_config(str(dist_home / "dagster")) as instance:
        runs = instance.get_runs()
        assert len(runs) == 3 and all(r.job_name == "kernelhouse_distributed" for r in runs)
        assert all(r.is_success for r in runs)
        step_pids = {
            e.dagster_event.pid
            for r in runs
            for e in instance.all_logs(r.run_id)
            if e.dagster_event and e.dagster_event.event_type_value == "STEP_SUCCESS"
        }
    assert step_pids == worker_pids

    # Partition files: only in the bucket, the same files, the same bytes.
    from dagster_project.storage.lake import Lake

    lake = Lake(dist_home / "lake.duckdb", f"s3://{bucket}/kernelhouse")
    fs = lake.filesystem()
    assert not (dist_home / "lake").exists()
    for table in TABLES:
        local_files = sorted((local_home / "lake" / table).glob("*.parquet"))
        assert [p.name for p in local_files] == SHARD_FILES[table.split("_")[0]], table
        remote = lake.partition_files(table)
        assert [u.rsplit("/", 1)[1] for u in remote] == [p.name for p in local_files]
        for path, uri in zip(local_files, remote, strict=True):
            data = fs.cat_file(uri.removeprefix("s3://"))
            assert data == path.read_bytes(), f"{uri} differs from the in-process {path}"
            assert pl.read_parquet(data).equals(pl.read_parquet(path))

    # `kernelhouse sql` (read-only, a fresh process) over the bucket-backed views gives
    # the in-process lake's answers.
    q_dist = _kh("sql", SUMMARY, "--format", "json", env=env)
    q_ref = _kh(
        "sql",
        SUMMARY,
        "--format",
        "json",
        env={**SIZES, "KERNELHOUSE_HOME": str(local_home), "KERNELHOUSE_LAKE_URI": ""},
    )
    assert q_dist.returncode == 0, q_dist.stderr
    assert q_ref.returncode == 0, q_ref.stderr
    rows = json.loads(q_dist.stdout)
    assert rows == json.loads(q_ref.stdout)
    counts = {(r["t"], r["shard"]): r["n"] for r in rows}
    assert counts[("sessions", 0)] == 40 and ("sessions", 1) not in counts
    assert counts[("episodes", 0)] == 100 and counts[("episodes", 1)] == 50


def test_distributed_build_names_an_unreachable_scheduler(tmp_path: Path) -> None:
    # Dask's own connect timeout (default 30 s) bounds the wait; shortened for the test.
    res = _kh(
        "build",
        "--distributed",
        "--select",
        "kernelswarm_episodes",
        "-p",
        "000",
        env={
            "KERNELHOUSE_HOME": str(tmp_path / "h"),
            "KERNELHOUSE_DASK_SCHEDULER": "tcp://127.0.0.1:9",
            "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "3s",
        },
    )
    assert res.returncode == 1
    assert "KERNELHOUSE_DASK_SCHEDULER=tcp://127.0.0.1:9" in " ".join(res.stderr.split())


def test_workers_with_another_lake_are_refused(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers started without the lake variables would write to their own folder and
    the build would look fine: the build refuses to start instead."""
    from dask.distributed import LocalCluster

    home = tmp_path / "h"
    monkeypatch.setenv("KERNELHOUSE_HOME", str(home))
    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        env = {
            **s3.env(),
            "KERNELHOUSE_HOME": str(home),
            "KERNELHOUSE_LAKE_URI": f"s3://{s3.new_bucket()}/x",
            "KERNELHOUSE_DASK_SCHEDULER": cluster.scheduler_address,
        }
        res = _kh(
            "build", "--distributed", "--select", "kernelswarm_episodes", "-p", "000", env=env
        )
    assert res.returncode == 1
    text = " ".join(res.stderr.split())
    assert "KERNELHOUSE_LAKE_URI" in text and "same KERNELHOUSE_* and AWS_* variables" in text


def test_ui_style_runs_of_one_job_in_parallel_each_compute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the UI's run launcher does for a backfill with KERNELHOUSE_EXECUTOR=dask: one
    process per run, loading the code location, all runs of the same job in flight on one
    cluster. Upstream dagster-dask gives both runs' steps the same Dask key, so the second
    run would get the first one's result and its shard would never be written."""
    import dagster as dg
    from dask.distributed import Client, LocalCluster

    home = tmp_path / "ui"
    env = {
        "KERNELHOUSE_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster"),
        "KERNELHOUSE_EXECUTOR": "dask",
        "KERNELHOUSE_SIM_EPISODES": "120",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (home / "dagster").mkdir(parents=True)
    (home / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.get() as instance:
        instance.get_runs()  # create the storage once, as the webserver does
    dagster = str(Path(sys.executable).with_name("dagster"))
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        worker_pids = set(client.run(os.getpid).values())
        run_env = {**os.environ, "KERNELHOUSE_DASK_SCHEDULER": cluster.scheduler_address}
        procs = [
            subprocess.Popen(
                [
                    dagster,
                    "asset",
                    "materialize",
                    "-m",
                    "dagster_project.definitions",
                    "--select",
                    "kernelswarm_episodes",
                    "--partition",
                    p,
                ],
                env=run_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for p in ("000", "001")
        ]
        outputs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-2000:] for o in outputs)
    files = sorted((home / "lake" / "kernelswarm_episodes").glob("*.parquet"))
    assert [f.name for f in files] == ["000.parquet", "001.parquet"]
    assert [pl.read_parquet(f).height for f in files] == [100, 20]
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        runs = instance.get_runs()
        assert len(runs) == 2
        for run in runs:  # each run's own step, executed on a Dask worker
            pids = [
                e.dagster_event.pid
                for e in instance.all_logs(run.run_id)
                if e.dagster_event and e.dagster_event.event_type_value == "STEP_SUCCESS"
            ]
            assert len(pids) == 1 and pids[0] in worker_pids
