"""The lake on an S3-compatible bucket: a real S3 API (moto's server mode on 127.0.0.1),
real s3fs, real DuckDB. Same contract as the local lake, same bytes."""

from __future__ import annotations

import contextlib
import logging
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

from dagster_project.settings import ObjectStore, SecretStr, load_settings
from dagster_project.storage.lake import Lake, parquet_bytes


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    key: str = "kh-test-key"
    secret: str = "kh-test-secret"
    region: str = "us-east-1"

    def env(self) -> dict[str, str]:
        """The standard AWS variables a process needs to reach this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.key,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_DEFAULT_REGION": self.region,
        }

    def store(self) -> ObjectStore:
        return ObjectStore(self.endpoint, self.region, self.key, SecretStr(self.secret))

    def new_bucket(self) -> str:
        import boto3

        name = f"kh-{uuid.uuid4().hex[:12]}"
        boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.key,
            aws_secret_access_key=self.secret,
            region_name=self.region,
        ).create_bucket(Bucket=name)
        return name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def moto_s3() -> Iterator[S3Server]:
    """moto's S3-compatible server on a free local port, for as long as the block runs."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        server.stop()


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with moto_s3() as server:
        yield server


@pytest.fixture
def bucket_lake(s3: S3Server, tmp_path: Path) -> Lake:
    return Lake(tmp_path / "lake.duckdb", f"s3://{s3.new_bucket()}/lake", object_store=s3.store())


def test_partitions_and_views_on_a_bucket(bucket_lake: Lake) -> None:
    lake = bucket_lake
    assert lake.write_partition(
        "sessions", "000", pl.DataFrame({"shard": [0, 0], "x": [1, 2]})
    ).startswith("s3://")
    lake.write_partition("sessions", "001", pl.DataFrame({"shard": [1], "x": [3]}))
    assert lake.partition_files("sessions") == [
        f"{lake.parquet_root}/sessions/000.parquet",
        f"{lake.parquet_root}/sessions/001.parquet",
    ]
    assert lake.refresh_view("sim", "sessions") == 2
    assert lake.query("SELECT sum(x) AS s FROM sim.sessions")["s"][0] == 6
    # A rewritten partition and a brand-new one (another worker's) show up through the
    # existing view: no listing is cached anywhere.
    lake.write_partition("sessions", "001", pl.DataFrame({"shard": [1], "x": [10]}))
    lake.write_partition("sessions", "002", pl.DataFrame({"shard": [2], "x": [100]}))
    assert lake.query("SELECT sum(x) AS s FROM sim.sessions")["s"][0] == 113


def test_a_fresh_read_only_connection_reads_bucket_views(bucket_lake: Lake) -> None:
    """What ``kernelhouse sql`` does: a new read-only connection (here a new Lake handle
    that has to find the store itself) must resolve the view's s3:// glob."""
    bucket_lake.write_partition("steps", "000", pl.DataFrame({"v": [1.5, 2.5]}))
    bucket_lake.refresh_view("sim", "steps")
    reader = Lake(bucket_lake.path, bucket_lake.parquet_root, object_store=bucket_lake.object_store)
    with reader.connect(read_only=True) as con:
        assert con.sql("SELECT sum(v) FROM sim.steps").fetchall() == [(4.0,)]
        # Two connections of one process share the database instance and its filesystem.
        with reader.connect(read_only=True) as con2:
            assert con2.sql("SELECT count(*) FROM sim.steps").fetchall() == [(2,)]


def test_bucket_and_folder_hold_the_same_bytes(bucket_lake: Lake, tmp_path: Path) -> None:
    df = pl.DataFrame(
        {
            "id": list(range(500)),
            "name": [f"s{i}" for i in range(500)],
            "best": [{"speedup": i / 7, "step": i % 30} for i in range(500)],
        }
    )
    local = Lake(tmp_path / "local.duckdb", str(tmp_path / "folder"))
    local_path = Path(local.write_partition("t", "000", df))
    remote_uri = bucket_lake.write_partition("t", "000", df)
    remote = bucket_lake.filesystem().cat_file(remote_uri.removeprefix("s3://"))
    assert remote == local_path.read_bytes() == parquet_bytes(df)
    # Written twice, still the same object bytes (a re-run changes nothing).
    bucket_lake.write_partition("t", "000", df)
    assert bucket_lake.filesystem().cat_file(remote_uri.removeprefix("s3://")) == remote


def test_delete_partition_on_a_bucket(bucket_lake: Lake) -> None:
    bucket_lake.write_partition("eps", "000", pl.DataFrame({"x": [1]}))
    bucket_lake.write_partition("eps", "001", pl.DataFrame({"x": [2]}))
    bucket_lake.refresh_view("sim", "eps")
    assert bucket_lake.delete_partition("eps", "001") is True
    assert bucket_lake.delete_partition("eps", "001") is False
    assert bucket_lake.partition_files("eps") == [f"{bucket_lake.parquet_root}/eps/000.parquet"]
    assert bucket_lake.query("SELECT sum(x) AS s FROM sim.eps")["s"][0] == 1


def test_settings_point_the_lake_at_the_bucket(
    s3: S3Server, monkeypatch: pytest.MonkeyPatch, kh_home: Path
) -> None:
    """``KERNELHOUSE_LAKE_URI`` + the AWS variables are all a process needs: the lake
    built from settings alone finds its store, and the secret shows nowhere."""
    bucket = s3.new_bucket()
    monkeypatch.setenv("KERNELHOUSE_LAKE_URI", f"s3://{bucket}/team/lake/")
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert settings.parquet_root == f"s3://{bucket}/team/lake"
    lake = Lake(settings.lake_path, settings.parquet_root)
    lake.write_partition("t", "000", pl.DataFrame({"x": [41, 1]}))
    lake.refresh_view("sim", "t")
    assert lake.query("SELECT sum(x) AS s FROM sim.t")["s"][0] == 42
    assert s3.secret not in repr(lake) + repr(settings) + str(settings.public())
    assert settings.public()["AWS_SECRET_ACCESS_KEY"] == "set"
    # Nothing was written under the home folder's lake/: the partitions are in the bucket.
    assert not (kh_home / "lake").exists()


@pytest.fixture(params=["folder", "bucket"])
def any_lake(request: pytest.FixtureRequest, tmp_path: Path) -> Lake:
    if request.param == "folder":
        return Lake(tmp_path / "lake.duckdb", str(tmp_path / "parts"))
    return request.getfixturevalue("bucket_lake")


def test_refresh_after_a_same_schema_shard_does_not_rebind(any_lake: Lake) -> None:
    """Binding the view reads every file's footer (O(files) requests on a bucket); after
    a shard with the view's exact columns the view is kept. Proven by a broken file the
    re-bind would have to read."""
    lake = any_lake
    df = pl.DataFrame({"shard": [0], "x": [1]})
    lake.write_partition("s", "000", df)
    lake.refresh_view("sim", "s")
    broken = lake.partition_uri("s", "000")
    if lake.on_object_store:
        lake.filesystem().pipe_file(broken.removeprefix("s3://"), b"not parquet")
    else:
        Path(broken).write_bytes(b"not parquet")
    lake.write_partition("s", "001", pl.DataFrame({"shard": [1], "x": [2]}))
    lake.refresh_view("sim", "s")  # would fail reading 000's footer if it re-bound
    lake.write_partition("s", "000", df)  # repaired
    lake.refresh_view("sim", "s")
    assert lake.query("SELECT sum(x) AS s FROM sim.s")["s"][0] == 3


def test_refresh_rebinds_for_a_new_column_or_an_unrecorded_write(any_lake: Lake) -> None:
    lake = any_lake
    lake.write_partition("s", "000", pl.DataFrame({"x": [1]}))
    lake.refresh_view("sim", "s")
    lake.write_partition("s", "001", pl.DataFrame({"x": [2], "extra": ["e"]}))
    lake.refresh_view("sim", "s")
    got = lake.query("SELECT x, extra FROM sim.s ORDER BY x").to_dicts()
    assert got == [{"x": 1, "extra": None}, {"x": 2, "extra": "e"}]
    # A refresh with no write of its own (another process wrote) always re-binds.
    other = Lake(lake.path, lake.parquet_root, object_store=lake.object_store)
    import dagster_project.storage.lake as lake_module

    other.write_partition("s", "002", pl.DataFrame({"x": [3], "more": [1.5]}))
    lake_module._UNVIEWED.clear()  # as if that write happened in another process
    lake.refresh_view("sim", "s")
    assert lake.query("SELECT count(more) AS n FROM sim.s")["n"][0] == 1
