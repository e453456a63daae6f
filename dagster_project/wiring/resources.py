"""Dagster resources: thin handles that resolve settings at run time.

Each resource is built without touching the environment (``Definitions`` import stays
side-effect free); fields left unset are filled from ``load_settings()`` when an asset
uses the resource. Tests pass explicit values instead of patching code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from dagster_project.mining.git import GitRepo
from dagster_project.settings import Settings, ensure_home, load_settings
from dagster_project.storage.home import writer_lock
from dagster_project.storage.lake import Lake


class LakeResource(dg.ConfigurableResource):
    """The DuckDB lake plus the home folder layout (repos/, exports/)."""

    home: str | None = None

    def settings(self) -> Settings:
        s = load_settings()
        if self.home:
            from dataclasses import replace

            s = replace(s, home=Path(self.home).expanduser().resolve())
        ensure_home(s)
        return s

    @contextlib.contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator[Any]:
        """Hold the home's build lock while a run's step uses the lake (issue 42): every
        writer (a CLI build's workers, the UI, the daemon, ``dagster asset materialize``)
        goes through this, so none writes while another build holds the lock
        (``storage.home.writer_lock``). Outside a run (sensors, schedules) no lock."""
        run = getattr(context, "dagster_run", None)
        if run is None:
            yield self.create_resource(context)
            return
        tags = run.tags or {}
        with writer_lock(self.settings().home, run_process=tags.get("kernelhouse/process")):
            yield self.create_resource(context)

    def lake(self) -> Lake:
        """The lake of these settings; on an ``s3://`` root, with the store's credentials
        and endpoint already resolved from the same environment."""
        s = self.settings()
        return Lake(
            s.lake_path, s.parquet_root, object_store=s.object_store, asset=_current_asset()
        )

    def repo_git(self, repo: str) -> GitRepo:
        """The clone of ``repo``, for assets that read blobs their input tables name
        (so they need no head, and do not read ``raw.repo_heads``)."""
        s = self.settings()
        path = s.repo_dir(repo)
        if not (path / "HEAD").exists():
            raise dg.Failure(
                description=f"no clone of {repo} yet: materialise repo_clone[{repo}] first "
                f"(source {s.env_name(repo)}={s.sources[repo]!r})"
            )
        return GitRepo(path)

    def repo_snapshot(self, repo: str) -> tuple[GitRepo, str]:
        """The clone of ``repo`` and the head sha ``repo_clone`` recorded for it: every
        mining asset reads that one commit, so one build is one consistent snapshot."""
        s = self.settings()
        lake = self.lake()
        heads = lake.read_table_or_none("raw", "repo_heads")
        row = heads.filter(pl.col("repo") == repo) if heads is not None else None
        path = s.repo_dir(repo)
        if row is None or row.height == 0 or not (path / "HEAD").exists():
            raise dg.Failure(
                description=f"no clone of {repo} yet: materialise repo_clone[{repo}] first "
                f"(source {s.env_name(repo)}={s.sources[repo]!r})"
            )
        return GitRepo(path), str(row["head_sha"][0])


def _current_asset() -> str | None:
    """The asset whose step is running in this thread (None outside an asset): the lake
    handle it gets checks its statements against that asset's lineage declaration. A
    separate asset check's step has no asset key (None): the checks write
    ``derived.quality_results``, which ``lineage.CHECK_TABLES`` names."""
    try:
        context = dg.AssetExecutionContext.get()
    except Exception:  # noqa: BLE001 - no step is running: a CLI command, a test
        return None
    try:
        return context.asset_key.to_user_string()
    except Exception:  # noqa: BLE001 - a multi-asset step has no single key
        return None


class GitHubResource(dg.ConfigurableResource):
    """GitHub REST access (PyGithub). Token from ``GITHUB_TOKEN``; base URL overridable
    (``KERNELHOUSE_GITHUB_API_URL``) for GitHub Enterprise and for tests."""

    api_url: str | None = None

    def token(self) -> str | None:
        s = load_settings()
        return s.github_token.get() if s.github_token else None

    def base_url(self) -> str | None:
        return self.api_url or load_settings().github_api_url


class LLMResource(dg.ConfigurableResource):
    """An OpenAI-compatible chat endpoint for gains extraction (unset → deterministic)."""

    base_url: str | None = None
    model: str | None = None
    fallback_model: str | None = None

    def config(self) -> dict[str, Any] | None:
        s = load_settings()
        url = self.base_url or s.llm_base_url
        if not url:
            return None
        return {
            "base_url": url,
            "api_key": s.llm_api_key.get() if s.llm_api_key else "unset",
            "model": self.model or s.llm_model,
            "fallback_model": self.fallback_model or s.llm_fallback_model,
        }


def default_resources() -> dict[str, Any]:
    """Resources for ``Definitions``: constructed without reading the environment."""
    return {
        "lake": LakeResource(),
        "github": GitHubResource(),
        "llm": LLMResource(),
    }
