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


def test_object_store_lake_is_refused_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELHOUSE_LAKE_URI", "s3://bucket/prefix")
    with pytest.raises(SettingsError, match="KERNELHOUSE_LAKE_URI"):
        load_settings()
