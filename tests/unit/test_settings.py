"""Settings are read at run time, name the variable on error, and never show secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagster_project.settings import (
    SettingsError,
    ensure_home,
    load_settings,
    validate_sources,
)


def test_defaults_and_layout(kh_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for repo in ("VLLM", "SGLANG", "FLASHINFER"):
        monkeypatch.delenv(f"KERNELHOUSE_{repo}_SOURCE")
    s = load_settings()
    assert s.home == kh_home.resolve()
    assert s.lake_path == kh_home.resolve() / "lake.duckdb"
    assert s.sources["vllm"] == "https://github.com/vllm-project/vllm.git"
    assert s.executor == "in_process"
    ensure_home(s)
    assert (s.dagster_home / "dagster.yaml").read_text().count("enabled: false") == 1


def test_read_at_run_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KERNELHOUSE_HOME", str(tmp_path / "elsewhere"))
    assert load_settings().home == (tmp_path / "elsewhere").resolve()


def test_secrets_never_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_supersecret123")
    monkeypatch.setenv("HF_TOKEN", "hf_alsosecret456")
    s = load_settings()
    text = repr(s) + str(s.public())
    assert "supersecret" not in text and "alsosecret" not in text
    assert s.github_token and s.github_token.get() == "ghp_supersecret123"
    assert set(s.secrets()) == {"ghp_supersecret123", "hf_alsosecret456"}


def test_missing_local_source_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELHOUSE_SGLANG_SOURCE", str(tmp_path / "nowhere"))
    with pytest.raises(SettingsError, match="KERNELHOUSE_SGLANG_SOURCE"):
        validate_sources(load_settings(), ("sglang",))


def test_non_repo_source_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plain").mkdir()
    monkeypatch.setenv("KERNELHOUSE_VLLM_SOURCE", str(tmp_path / "plain"))
    with pytest.raises(SettingsError, match="not a git repository"):
        validate_sources(load_settings(), ("vllm",))


def test_unwritable_home_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Works as root too: a home that is a regular file can never be created.
    f = tmp_path / "afile"
    f.write_text("x")
    monkeypatch.setenv("KERNELHOUSE_HOME", str(f))
    with pytest.raises(SettingsError, match="KERNELHOUSE_HOME"):
        ensure_home(load_settings())


def test_bad_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELHOUSE_EXECUTOR", "threads")
    with pytest.raises(SettingsError, match="KERNELHOUSE_EXECUTOR"):
        load_settings()


def test_lake_uri_unset_keeps_the_lake_under_home(kh_home: Path) -> None:
    s = load_settings()
    assert s.lake_uri is None
    assert s.parquet_root == str(kh_home.resolve() / "lake")


@pytest.mark.parametrize(
    ("raw", "root"),
    [
        ("s3://kh-lake/prefix/", "s3://kh-lake/prefix"),
        ("s3://kh-lake", "s3://kh-lake"),
        ("s3://kh-lake//a//b", "s3://kh-lake/a/b"),
    ],
)
def test_s3_lake_uri_is_the_parquet_root(
    monkeypatch: pytest.MonkeyPatch, raw: str, root: str
) -> None:
    monkeypatch.setenv("KERNELHOUSE_LAKE_URI", raw)
    s = load_settings()
    assert s.lake_uri == root and s.parquet_root == root


def test_local_lake_uri_is_made_absolute(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERNELHOUSE_LAKE_URI", "shared/lake")
    assert load_settings().parquet_root == str((tmp_path / "shared" / "lake").resolve())


@pytest.mark.parametrize(
    "raw",
    [
        "gs://bucket/x",
        "https://example.com/lake",
        "s3://Bad_Bucket/x",
        "s3:///nobucket",
        "s3://bucket/x?versionId=1",
        "s3://bucket/shard-*",
    ],
)
def test_bad_lake_uri_names_the_variable(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("KERNELHOUSE_LAKE_URI", raw)
    with pytest.raises(SettingsError, match="KERNELHOUSE_LAKE_URI"):
        load_settings()


def test_aws_variables_configure_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELHOUSE_LAKE_URI", "s3://kh-lake/p")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9001")  # the S3-specific one wins
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_REGION", "eu-central-1")  # AWS_REGION wins, as in the SDKs
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-value-xyz")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "sessiontoken-abc")
    s = load_settings()
    opts = s.object_store.storage_options()
    assert opts == {
        "key": "AKIAEXAMPLEKEY",
        "secret": "s3cr3t-value-xyz",
        "token": "sessiontoken-abc",
        "endpoint_url": "http://127.0.0.1:9001",
        "client_kwargs": {"region_name": "eu-central-1"},
    }
    public = s.public()
    assert public["KERNELHOUSE_LAKE_URI"] == "s3://kh-lake/p"
    assert public["AWS_SECRET_ACCESS_KEY"] == "set" and public["AWS_ACCESS_KEY_ID"] == "set"
    assert public["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9001"
    shown = repr(s) + str(public) + repr(s.object_store)
    for secret in ("s3cr3t-value-xyz", "sessiontoken-abc", "AKIAEXAMPLEKEY"):
        assert secret not in shown
    assert {"s3cr3t-value-xyz", "sessiontoken-abc"} <= set(s.secrets())


def test_endpoint_userinfo_is_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELHOUSE_LAKE_URI", "s3://kh-lake")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://user:hunter2@minio.internal:9000")
    public = load_settings().public()
    assert "hunter2" not in str(public) and "minio.internal" in str(public)


def test_bad_endpoint_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELHOUSE_LAKE_URI", "s3://kh-lake")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "127.0.0.1:9000")
    with pytest.raises(SettingsError, match="AWS_ENDPOINT_URL"):
        load_settings()


def test_aws_variables_ignored_for_a_local_lake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "not a url")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-value-xyz")
    s = load_settings()
    assert "AWS_SECRET_ACCESS_KEY" not in s.public() and s.object_store.storage_options() == {}


@pytest.mark.parametrize(
    ("raw", "address"),
    [("tcp://10.0.0.5:8786", "tcp://10.0.0.5:8786"), ("127.0.0.1:8786", "tcp://127.0.0.1:8786")],
)
def test_dask_scheduler(monkeypatch: pytest.MonkeyPatch, raw: str, address: str) -> None:
    monkeypatch.setenv("KERNELHOUSE_DASK_SCHEDULER", raw)
    assert load_settings().dask_scheduler == address


@pytest.mark.parametrize("raw", ["http://10.0.0.5:8786", "tcp://10.0.0.5", "tcp://:8786"])
def test_bad_dask_scheduler_names_the_variable(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("KERNELHOUSE_DASK_SCHEDULER", raw)
    with pytest.raises(SettingsError, match="KERNELHOUSE_DASK_SCHEDULER"):
        load_settings()


def test_gpu_batch_defaults_and_values(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = load_settings().gpu
    assert (gpu.disabled, gpu.rows, gpu.budget_s, gpu.workers) == (False, 24, 900.0, None)
    monkeypatch.setenv("KERNELHOUSE_GPU_DISABLE", "true")
    monkeypatch.setenv("KERNELHOUSE_GPU_BATCH_ROWS", "40")
    monkeypatch.setenv("KERNELHOUSE_GPU_BUDGET_S", "390")
    monkeypatch.setenv("KERNELHOUSE_GPU_WORKERS", "0")
    s = load_settings()
    assert (s.gpu.disabled, s.gpu.rows, s.gpu.budget_s, s.gpu.workers) == (True, 40, 390.0, 0)
    assert s.public()["KERNELHOUSE_GPU_BATCH_ROWS"] == "40"
    assert s.public()["KERNELHOUSE_GPU_DISABLE"] == "1"


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("KERNELHOUSE_GPU_DISABLE", "maybe"),
        ("KERNELHOUSE_GPU_BATCH_ROWS", "0"),
        ("KERNELHOUSE_GPU_BATCH_ROWS", "many"),
        ("KERNELHOUSE_GPU_BUDGET_S", "-5"),
        ("KERNELHOUSE_GPU_BUDGET_S", "nan"),
        ("KERNELHOUSE_GPU_WORKERS", "-3"),
        ("KERNELHOUSE_SIM_COMPILE_SAMPLE", "-1"),
        ("KERNELHOUSE_SIM_COMPILE_SAMPLE", "all"),
        ("KERNELHOUSE_SIM_COMPILE_SHIPPED", "maybe"),
    ],
)
def test_bad_gpu_batch_variable_is_named(
    monkeypatch: pytest.MonkeyPatch, name: str, raw: str
) -> None:
    """A malformed batch setting fails loudly instead of silently measuring a default-sized
    batch on a lent GPU."""
    monkeypatch.setenv(name, raw)
    with pytest.raises(SettingsError, match=name):
        load_settings()


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("KERNELHOUSE_SIM_SESSIONS", "-5"),
        ("KERNELHOUSE_SIM_SESSIONS", "0"),
        ("KERNELHOUSE_SIM_SESSIONS", "lots"),
        ("KERNELHOUSE_SIM_EPISODES", "-1"),
        ("KERNELHOUSE_SIM_EPISODES", "0"),
        ("KERNELHOUSE_SIM_SEED", "1.5"),
    ],
)
def test_meaningless_sizes_are_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, name: str, raw: str
) -> None:
    """Issue 22: SESSIONS=-5 built an empty dataset and reported ok; EPISODES=-1 failed 24
    runs without naming the variable. Now the setting is refused before any run."""
    monkeypatch.setenv(name, raw)
    with pytest.raises(SettingsError, match=name):
        load_settings()


def test_bad_size_fails_the_cli_before_any_run(kh_home: Path) -> None:
    import os
    import subprocess
    import sys

    exe = str(Path(sys.executable).with_name("kernelhouse"))
    for name, raw in (("KERNELHOUSE_SIM_SESSIONS", "-5"), ("KERNELHOUSE_SIM_EPISODES", "-1")):
        res = subprocess.run(
            [exe, "build", "--select", "group:simulated"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, name: raw, "COLUMNS": "200"},
        )
        assert (
            res.returncode == 1 and f"{name}={raw}" in res.stderr and "Traceback" not in res.stderr
        )
        assert not (kh_home / "lake.duckdb").exists()


def test_shipped_nvcc_answers_are_on_by_default_and_can_be_switched_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings().sim_compile_shipped is True
    monkeypatch.setenv("KERNELHOUSE_SIM_COMPILE_SHIPPED", "0")
    s = load_settings()
    assert s.sim_compile_shipped is False
    assert s.public()["KERNELHOUSE_SIM_COMPILE_SHIPPED"] == 0
