"""Every kernelhouse setting in one typed place, read from the environment at run time.

Nothing here runs at import: call ``load_settings()`` when a command, resource or asset
needs configuration, so tests and the CLI can change the environment freely. Secrets
(tokens) are kept in ``SecretStr`` so they never end up in a repr, a log line, a table
or an export by accident.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

REPOS = ("vllm", "sglang", "flashinfer")

DEFAULT_SOURCES = {
    "vllm": "https://github.com/vllm-project/vllm.git",
    "sglang": "https://github.com/sgl-project/sglang.git",
    "flashinfer": "https://github.com/flashinfer-ai/flashinfer.git",
}

GITHUB_SLUGS = {
    "vllm": "vllm-project/vllm",
    "sglang": "sgl-project/sglang",
    "flashinfer": "flashinfer-ai/flashinfer",
}

DEFAULT_LLM_BASE_URL = "https://router.huggingface.co/v1"
DEFAULT_LLM_MODEL = "Qwen/Qwen3-235B-A22B-Instruct-2507"
DEFAULT_LLM_FALLBACK_MODEL = "openai/gpt-oss-120b"


class SettingsError(ValueError):
    """A setting is wrong; the message names the environment variable to fix."""


class SecretStr:
    """A string that refuses to show itself in repr/str (tokens)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "SecretStr('***')"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip()


def _secret(name: str) -> SecretStr | None:
    value = _env(name)
    return SecretStr(value) if value else None


@dataclass(frozen=True)
class Settings:
    """Resolved configuration of one kernelhouse run."""

    home: Path
    sources: dict[str, str]
    refs: dict[str, str | None]
    github_token: SecretStr | None = field(repr=False)
    github_api_url: str | None
    hf_token: SecretStr | None = field(repr=False)
    llm_base_url: str | None
    llm_api_key: SecretStr | None = field(repr=False)
    llm_model: str
    llm_fallback_model: str
    hub_repo_prefix: str | None
    executor: str
    lake_uri: str | None
    dask_scheduler: str | None
    sim_seed: int
    sim_sessions: int
    sim_episodes: int

    # -- derived paths -------------------------------------------------------------
    @property
    def lake_path(self) -> Path:
        return self.home / "lake.duckdb"

    @property
    def parquet_root(self) -> str:
        """Where partitioned tables live: ``KERNELHOUSE_HOME/lake``."""
        return str(self.home / "lake")

    @property
    def repos_dir(self) -> Path:
        return self.home / "repos"

    @property
    def exports_dir(self) -> Path:
        return self.home / "exports"

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"

    def repo_dir(self, repo: str) -> Path:
        return self.repos_dir / f"{repo}.git"

    def env_name(self, repo: str) -> str:
        return f"KERNELHOUSE_{repo.upper()}_SOURCE"

    def public(self) -> dict[str, object]:
        """What may be shown to users (status, metadata): secrets only as set/unset."""
        return {
            "KERNELHOUSE_HOME": str(self.home),
            **{self.env_name(r): self.sources[r] for r in REPOS},
            "GITHUB_TOKEN": "set" if self.github_token else "unset",
            "HF_TOKEN": "set" if self.hf_token else "unset",
            "KERNELHOUSE_LLM_BASE_URL": self.llm_base_url or "unset (deterministic extractor)",
            "KERNELHOUSE_LLM_MODEL": self.llm_model,
            "KERNELHOUSE_LLM_FALLBACK_MODEL": self.llm_fallback_model,
            "KERNELHOUSE_HUB_REPO_PREFIX": self.hub_repo_prefix or "unset (local export only)",
            "KERNELHOUSE_EXECUTOR": self.executor,
        }

    def secrets(self) -> list[str]:
        """Every secret value, so log/export scrubbers can redact them."""
        return [s.get() for s in (self.github_token, self.hf_token, self.llm_api_key) if s]


def _int_env(name: str, default: int) -> int:
    raw = _env(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise SettingsError(f"{name}={raw!r} is not an integer") from exc


def load_settings() -> Settings:
    """Read the environment now. Cheap; call it wherever configuration is needed."""
    home = Path(_env("KERNELHOUSE_HOME", "./data") or "./data").expanduser().resolve()
    sources = {r: _env(f"KERNELHOUSE_{r.upper()}_SOURCE", DEFAULT_SOURCES[r]) or "" for r in REPOS}
    refs = {r: _env(f"KERNELHOUSE_{r.upper()}_REF") for r in REPOS}
    executor = _env("KERNELHOUSE_EXECUTOR", "in_process") or "in_process"
    if executor not in ("in_process", "multiprocess", "dask"):
        raise SettingsError(
            f"KERNELHOUSE_EXECUTOR={executor!r}: use in_process, multiprocess or dask"
        )
    if _env("KERNELHOUSE_LAKE_URI"):
        raise SettingsError(
            "KERNELHOUSE_LAKE_URI is set, but an object-store lake is not supported yet; "
            "unset it to keep the lake under KERNELHOUSE_HOME"
        )
    hf_token = _secret("HF_TOKEN")
    llm_key = _secret("KERNELHOUSE_LLM_API_KEY") or hf_token
    return Settings(
        home=home,
        sources=sources,
        refs=refs,
        github_token=_secret("GITHUB_TOKEN"),
        github_api_url=_env("KERNELHOUSE_GITHUB_API_URL"),
        hf_token=hf_token,
        llm_base_url=_env("KERNELHOUSE_LLM_BASE_URL"),
        llm_api_key=llm_key,
        llm_model=_env("KERNELHOUSE_LLM_MODEL", DEFAULT_LLM_MODEL) or DEFAULT_LLM_MODEL,
        llm_fallback_model=_env("KERNELHOUSE_LLM_FALLBACK_MODEL", DEFAULT_LLM_FALLBACK_MODEL)
        or DEFAULT_LLM_FALLBACK_MODEL,
        hub_repo_prefix=_env("KERNELHOUSE_HUB_REPO_PREFIX"),
        executor=executor,
        lake_uri=_env("KERNELHOUSE_LAKE_URI"),
        dask_scheduler=_env("KERNELHOUSE_DASK_SCHEDULER"),
        sim_seed=_int_env("KERNELHOUSE_SIM_SEED", 20260),
        sim_sessions=_int_env("KERNELHOUSE_SIM_SESSIONS", 1899),
        sim_episodes=_int_env("KERNELHOUSE_SIM_EPISODES", 2400),
    )


def ensure_home(settings: Settings) -> None:
    """Create the home layout, failing fast with the setting's name if it is unwritable."""
    try:
        for d in (settings.home, settings.repos_dir, settings.exports_dir, settings.dagster_home):
            d.mkdir(parents=True, exist_ok=True)
        probe = settings.home / ".write-probe"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise SettingsError(
            f"KERNELHOUSE_HOME={settings.home} is not writable ({exc.strerror or exc}); "
            "point KERNELHOUSE_HOME at a writable folder"
        ) from exc
    yaml = settings.dagster_home / "dagster.yaml"
    if not yaml.exists():
        yaml.write_text("telemetry:\n  enabled: false\n")


def validate_sources(settings: Settings, repos: tuple[str, ...] = REPOS) -> None:
    """A local-path source must exist and be a git repository: fail before any work."""
    from dagster_project.mining.git import local_path_of

    for repo in repos:
        source = settings.sources[repo]
        path = local_path_of(source)
        if path is None:
            continue
        if not path.exists():
            raise SettingsError(
                f"{settings.env_name(repo)}={source!r} does not exist; point it at a local "
                f"clone of {repo} or unset it to use {DEFAULT_SOURCES[repo]}"
            )
        if not ((path / "HEAD").exists() or (path / ".git").exists()):
            raise SettingsError(f"{settings.env_name(repo)}={source!r} is not a git repository")
