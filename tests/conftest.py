"""Shared test set-up: every test gets its own KERNELHOUSE_HOME and no network.

Hugging Face reads HF_ENDPOINT/HF_HUB_OFFLINE at import, so they are set here, before
any test module imports huggingface_hub.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dagster_project.cli.app import restore_interrupt_signals

# Processes the tests start (Dask workers, `kernelhouse ui`) must be stoppable with
# SIGTERM even when the suite itself was started in the background with SIGINT ignored.
restore_interrupt_signals()

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ["DAGSTER_DISABLE_TELEMETRY"] = "1"
os.environ["GX_ANALYTICS_ENABLED"] = "false"

_KH_VARS = [
    "KERNELHOUSE_HOME",
    "KERNELHOUSE_VLLM_SOURCE",
    "KERNELHOUSE_SGLANG_SOURCE",
    "KERNELHOUSE_FLASHINFER_SOURCE",
    "KERNELHOUSE_VLLM_REF",
    "KERNELHOUSE_SGLANG_REF",
    "KERNELHOUSE_FLASHINFER_REF",
    "KERNELHOUSE_LLM_BASE_URL",
    "KERNELHOUSE_LLM_API_KEY",
    "KERNELHOUSE_HUB_REPO_PREFIX",
    "KERNELHOUSE_EXECUTOR",
    "KERNELHOUSE_LAKE_URI",
    "KERNELHOUSE_GITHUB_API_URL",
    "KERNELHOUSE_SIM_SESSIONS",
    "KERNELHOUSE_SIM_EPISODES",
    "KERNELHOUSE_SIM_SEED",
    "KERNELHOUSE_SIM_COMPILE_SAMPLE",
    "KERNELHOUSE_SIM_COMPILE_SHIPPED",
    "KERNELHOUSE_GPU_DISABLE",
    "KERNELHOUSE_GPU_BATCH_ROWS",
    "KERNELHOUSE_GPU_BUDGET_S",
    "KERNELHOUSE_GPU_WORKERS",
    "KERNELHOUSE_DASK_SCHEDULER",
    "GITHUB_TOKEN",
    "HF_TOKEN",
]


@pytest.fixture(scope="session", autouse=True)
def kh_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``KERNELHOUSE_CACHE_DIR`` for the whole run, shared by the xdist workers (their
    common temporary root) and the processes tests start: the shipped code model is
    fitted once per run instead of once per build, and never into the user's own cache."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    path = root / "kernelhouse-cache"
    os.environ["KERNELHOUSE_CACHE_DIR"] = str(path)
    return path


@pytest.fixture(autouse=True)
def kh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, isolated KERNELHOUSE_HOME; no inherited sources or tokens."""
    return isolate_home(tmp_path, monkeypatch)


def isolate_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``kh_home``'s environment under ``tmp_path``, for a module- or session-scoped fixture
    that builds once for several tests (through ``pytest.MonkeyPatch.context()``)."""
    for var in _KH_VARS:
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("KERNELHOUSE_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    # Never GitHub: nothing listens on port 9, so PR fetching falls back to the cache
    # unless a test points this at its own local server.
    monkeypatch.setenv("KERNELHOUSE_GITHUB_API_URL", "http://127.0.0.1:9")
    # Small simulated builds in tests (the default build is 1,899 sessions).
    monkeypatch.setenv("KERNELHOUSE_SIM_SESSIONS", "40")
    monkeypatch.setenv("KERNELHOUSE_SIM_EPISODES", "40")
    monkeypatch.setenv("KERNELHOUSE_SIM_COMPILE_SAMPLE", "3")
    # Repos that do not exist: any test that needs one points at a fixture repo.
    for repo in ("vllm", "sglang", "flashinfer"):
        monkeypatch.setenv(f"KERNELHOUSE_{repo.upper()}_SOURCE", str(tmp_path / f"no-{repo}"))
    return home


@pytest.fixture(scope="session")
def engine_repos(tmp_path_factory: pytest.TempPathFactory):
    """The three engine-shaped fixture repositories, built once per test session."""
    from tests.fixtures.repos import build_all

    return build_all(tmp_path_factory.mktemp("engines"))


@pytest.fixture
def use_engine_repos(engine_repos, monkeypatch: pytest.MonkeyPatch):
    for name, repo in engine_repos.items():
        monkeypatch.setenv(f"KERNELHOUSE_{name.upper()}_SOURCE", str(repo.path))
    return engine_repos


@pytest.fixture
def vllm_upstream(engine_repos, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A private copy of the vLLM fixture repo that a test may add commits to (the other
    engines as built), returned as a ``RepoBuilder`` on that copy. The fixture's PR-less
    fork tip is dropped: commits added on top would turn it into upstream history."""
    import shutil

    from tests.fixtures.factory import RepoBuilder

    up = tmp_path / "vllm-upstream"
    shutil.copytree(engine_repos["vllm"].path, up)
    for name in ("sglang", "flashinfer"):
        monkeypatch.setenv(f"KERNELHOUSE_{name.upper()}_SOURCE", str(engine_repos[name].path))
    monkeypatch.setenv("KERNELHOUSE_VLLM_SOURCE", str(up))
    b = RepoBuilder.__new__(RepoBuilder)
    b.path, b._clock, b.shas = up, 1_790_000_000, {}
    trimmed = engine_repos["vllm"].planted["commits"]["trimmed"]
    if trimmed:
        b.git("reset", "-q", "--hard", f"HEAD~{len(trimmed)}")
    return b
