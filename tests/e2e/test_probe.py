"""The repo-source probe a build runs before anything else (``build.probe_sources``)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from dagster_project.execution.probes import probe_source, probe_sources


def test_local_paths_are_checked_on_disk(tmp_path: Path) -> None:
    assert "does not exist" in (probe_source(str(tmp_path / "missing")) or "")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert "is not a git repository" in (probe_source(str(plain)) or "")
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert probe_source(str(repo)) is None
    assert probe_source(f"file://{repo}") is None


def test_unreachable_urls_are_named_at_once_and_in_parallel(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    started = time.monotonic()
    got = probe_sources(
        {
            "vllm": "https://127.0.0.1:9/vllm.git",
            "sglang": str(repo),
            "flashinfer": "git://127.0.0.1:9/flashinfer.git",
        }
    )
    assert time.monotonic() - started < 10
    assert set(got) == {"vllm", "flashinfer"}
    assert "127.0.0.1" in got["vllm"]
