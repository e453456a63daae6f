"""Every kernelhouse setting in one typed place, read from the environment at run time.

Nothing here runs at import: call ``load_settings()`` when a command, resource or asset
needs configuration, so tests and the CLI can change the environment freely. Secrets
(tokens) are kept in ``SecretStr`` so they never end up in a repr, a log line, a table
or an export by accident.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

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

# Seeds: every default seed has this one home (issue 23); the simulators import theirs.
#: The generators' own defaults (``sim.kernelinfer.DEFAULT_SEED``,
#: ``sim.kernelswarm.DEFAULT_SEED``), used where a caller passes no seed: benchmarks,
#: tests, ``sim.kernelinfer.session_frames`` without a shard (its lookup of the library's
#: default task list). The sim oracle asked the GPU about ``KERNELINFER_DEFAULT_SEED``'s
#: sessions, so the shipped H100 answers (the measured tier) are that seed's.
KERNELINFER_DEFAULT_SEED = 20251129
KERNELSWARM_DEFAULT_SEED = 20251203
#: ``KERNELHOUSE_SIM_SEED``'s default, the seed of the simulated datasets a build writes:
#: every simulated asset passes ``Settings.sim_seed`` to both generators explicitly. It is
#: the seed the measured tier was asked for (stop 39; 20260 before), so the default build
#: publishes the tier's sessions with ``measured:h100`` labels instead of 3 of them.
DEFAULT_SIM_SEED = KERNELINFER_DEFAULT_SEED


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


def _env(
    name: str, default: str | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    value = (os.environ if environ is None else environ).get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip()


def _secret(name: str, environ: Mapping[str, str] | None = None) -> SecretStr | None:
    value = _env(name, environ=environ)
    return SecretStr(value) if value else None


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where kernelhouse keeps what it derives from the installed package alone, shared by
    every home on the machine: ``KERNELHOUSE_CACHE_DIR``, else ``$XDG_CACHE_HOME/kernelhouse``,
    else ``~/.cache/kernelhouse``. Today it holds the shipped code model's fit
    (``sim.model_cache``); what depends on a lake stays in its home (``cache/nvcc``)."""
    explicit = _env("KERNELHOUSE_CACHE_DIR", environ=environ)
    if explicit:
        return Path(explicit).expanduser()
    xdg = _env("XDG_CACHE_HOME", environ=environ)
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "kernelhouse"


@dataclass(frozen=True)
class LLMSettings:
    """The gains LLM endpoint, as the environment sets it (the one reader of
    ``KERNELHOUSE_LLM_*``: ``Settings.llm_*`` and ``gains.llm_extractor.LLMConfig.from_env``
    both come from here)."""

    base_url: str | None
    api_key: SecretStr | None = field(repr=False)
    model: str
    fallback_model: str


def load_llm_settings(environ: Mapping[str, str] | None = None) -> LLMSettings:
    """``KERNELHOUSE_LLM_*`` from ``environ`` (default: the process environment).

    Blank counts as unset; the key is ``KERNELHOUSE_LLM_API_KEY``, else ``HF_TOKEN``; an
    unset base URL means the deterministic extractor only.
    """
    return LLMSettings(
        base_url=_env("KERNELHOUSE_LLM_BASE_URL", environ=environ),
        api_key=_secret("KERNELHOUSE_LLM_API_KEY", environ) or _secret("HF_TOKEN", environ),
        model=_env("KERNELHOUSE_LLM_MODEL", DEFAULT_LLM_MODEL, environ) or DEFAULT_LLM_MODEL,
        fallback_model=_env("KERNELHOUSE_LLM_FALLBACK_MODEL", DEFAULT_LLM_FALLBACK_MODEL, environ)
        or DEFAULT_LLM_FALLBACK_MODEL,
    )


@dataclass(frozen=True)
class ObjectStore:
    """How to reach an S3-compatible lake, from the standard AWS variables.

    Unset values are left to botocore's own chain (``~/.aws``, an instance role), so a
    cluster that already has credentials needs no extra configuration. The secret key and
    session token are ``SecretStr``: a repr, ``public()`` or a log line shows set/unset only.
    """

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: SecretStr | None = field(default=None, repr=False)
    session_token: SecretStr | None = field(default=None, repr=False)

    def storage_options(self) -> dict[str, object]:
        """Keyword arguments for ``s3fs.S3FileSystem``. Holds secrets: never log it."""
        opts: dict[str, object] = {}
        if self.access_key_id:
            opts["key"] = self.access_key_id
        if self.secret_access_key:
            opts["secret"] = self.secret_access_key.get()
        if self.session_token:
            opts["token"] = self.session_token.get()
        if self.endpoint_url:
            opts["endpoint_url"] = self.endpoint_url
        if self.region:
            opts["client_kwargs"] = {"region_name": self.region}
        return opts

    def public(self) -> dict[str, str]:
        endpoint = self.endpoint_url
        if endpoint:  # an endpoint may carry user:password@ — never show it
            parts = urlsplit(endpoint)
            if parts.username or parts.password:
                endpoint = (
                    parts._replace(netloc=parts.hostname or "").geturl() + " (userinfo hidden)"
                )
        return {
            "AWS_ENDPOINT_URL": endpoint or "unset (AWS S3)",
            "AWS_REGION": self.region or "unset",
            "AWS_ACCESS_KEY_ID": "set" if self.access_key_id else "unset",
            "AWS_SECRET_ACCESS_KEY": "set" if self.secret_access_key else "unset",
        }


def load_object_store() -> ObjectStore:
    """Read the AWS variables now (``AWS_ENDPOINT_URL_S3`` wins over ``AWS_ENDPOINT_URL``
    and ``AWS_REGION`` over ``AWS_DEFAULT_REGION``, as the AWS SDKs order them)."""
    endpoint = _env("AWS_ENDPOINT_URL_S3") or _env("AWS_ENDPOINT_URL")
    if endpoint:
        parts = urlsplit(endpoint)
        name = "AWS_ENDPOINT_URL_S3" if _env("AWS_ENDPOINT_URL_S3") else "AWS_ENDPOINT_URL"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SettingsError(
                f"{name} must be an http(s) URL such as http://127.0.0.1:9000 "
                f"(got a value with scheme {parts.scheme or 'none'!r})"
            )
    return ObjectStore(
        endpoint_url=endpoint,
        region=_env("AWS_REGION") or _env("AWS_DEFAULT_REGION"),
        access_key_id=_env("AWS_ACCESS_KEY_ID"),
        secret_access_key=_secret("AWS_SECRET_ACCESS_KEY"),
        session_token=_secret("AWS_SESSION_TOKEN"),
    )


# S3 bucket names: 3-63 of lowercase letters, digits, dots and hyphens, alphanumeric at
# both ends. Checked here so a typo fails before a run, naming the variable.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_GLOB_CHARS = set("*?[]{}")


def parse_lake_uri(raw: str) -> str:
    """Validate ``KERNELHOUSE_LAKE_URI``: ``s3://bucket[/prefix]`` or a local folder.

    Returns the normalised root (no trailing slash; a local path made absolute). Glob
    characters are refused because the DuckDB views read ``<root>/<table>/*.parquet``.
    """
    if any(c in _GLOB_CHARS for c in raw):
        raise SettingsError(
            f"KERNELHOUSE_LAKE_URI={raw!r} contains glob characters (* ? [ ] {{ }}); "
            "the lake root is used inside a glob, pick a plain name"
        )
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", raw)
    if match is None:
        return str(Path(raw).expanduser().resolve())
    scheme = match.group(1).lower()
    if scheme != "s3":
        raise SettingsError(
            f"KERNELHOUSE_LAKE_URI={raw!r}: scheme {scheme}:// is not supported; use "
            "s3://bucket[/prefix] (any S3-compatible store, see AWS_ENDPOINT_URL) or a "
            "local folder path"
        )
    parts = urlsplit(raw)
    bucket = parts.netloc
    if parts.query or parts.fragment or not _BUCKET.match(bucket or ""):
        raise SettingsError(
            f"KERNELHOUSE_LAKE_URI={raw!r}: expected s3://bucket[/prefix] with a valid "
            "bucket name (3-63 lowercase letters, digits, dots, hyphens)"
        )
    prefix = "/".join(p for p in parts.path.split("/") if p)
    return f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"


def parse_dask_scheduler(raw: str) -> str:
    """Validate ``KERNELHOUSE_DASK_SCHEDULER`` (``tcp://host:port``; a bare ``host:port``
    means tcp, as in Dask)."""
    address = raw if "://" in raw else f"tcp://{raw}"
    parts = urlsplit(address)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in ("tcp", "tls", "ucx", "ws", "wss") or not parts.hostname or port is None:
        raise SettingsError(
            f"KERNELHOUSE_DASK_SCHEDULER={raw!r}: expected a scheduler address such as "
            "tcp://10.0.0.5:8786"
        )
    return address


@dataclass(frozen=True)
class GpuBatch:
    """How the ``measured_configs`` asset uses a CUDA GPU on the machine it runs on.

    ``KERNELHOUSE_GPU_DISABLE`` (``1``/``true``) keeps it off the GPU even where one
    exists (a shared workstation); ``KERNELHOUSE_GPU_BATCH_ROWS`` rows per
    materialisation, measured within ``KERNELHOUSE_GPU_BUDGET_S`` seconds by
    ``KERNELHOUSE_GPU_WORKERS`` pre-compile processes (unset: CPUs - 1, at most 12).
    """

    disabled: bool = False
    rows: int = 24
    budget_s: float = 900.0
    workers: int | None = None

    def public(self) -> dict[str, str]:
        return {
            "KERNELHOUSE_GPU_DISABLE": "1" if self.disabled else "0",
            "KERNELHOUSE_GPU_BATCH_ROWS": str(self.rows),
            "KERNELHOUSE_GPU_BUDGET_S": f"{self.budget_s:g}",
            "KERNELHOUSE_GPU_WORKERS": str(self.workers)
            if self.workers is not None
            else "unset (CPUs - 1, at most 12)",
        }


def _flag_env(name: str, default: bool = False) -> bool:
    raw = _env(name)
    if raw is None:
        return default
    low = raw.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name}={raw!r}: use 1 or 0")


def _positive_env(name: str, default: float) -> float:
    raw = _env(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise SettingsError(f"{name}={raw!r} is not a number") from exc
    if not 0 < value < float("inf"):
        raise SettingsError(f"{name}={raw!r} must be a positive number")
    return value


def load_gpu_batch() -> GpuBatch:
    """The ``KERNELHOUSE_GPU_*`` variables, each checked and named when malformed."""
    rows = _int_env("KERNELHOUSE_GPU_BATCH_ROWS", 24)
    if rows < 1:
        raise SettingsError(f"KERNELHOUSE_GPU_BATCH_ROWS={rows} must be at least 1")
    workers = _int_env("KERNELHOUSE_GPU_WORKERS", -1)
    if workers < -1:
        raise SettingsError(f"KERNELHOUSE_GPU_WORKERS={workers} must be 0 or more")
    return GpuBatch(
        disabled=_flag_env("KERNELHOUSE_GPU_DISABLE"),
        rows=rows,
        budget_s=_positive_env("KERNELHOUSE_GPU_BUDGET_S", 900.0),
        workers=None if workers == -1 else workers,
    )


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
    #: Template instantiations ``sim_compile_validation`` compiles (0: every class).
    sim_compile_sample: int = 48
    #: Whether ``sim_compile_validation`` may take nvcc's answers from the package's shipped
    #: answers of the same nvcc build (``sim/compile_check``); 0 compiles every case here.
    sim_compile_shipped: bool = True
    object_store: ObjectStore = field(default_factory=ObjectStore, repr=False)
    gpu: GpuBatch = field(default_factory=GpuBatch)

    # -- derived paths -------------------------------------------------------------
    @property
    def lake_path(self) -> Path:
        return self.home / "lake.duckdb"

    @property
    def parquet_root(self) -> str:
        """Where partitioned tables live: ``KERNELHOUSE_LAKE_URI`` when set (a bucket
        prefix or a folder), else ``KERNELHOUSE_HOME/lake``."""
        return self.lake_uri or str(self.home / "lake")

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
            "KERNELHOUSE_DASK_SCHEDULER": self.dask_scheduler
            or ("unset (a local cluster per run)" if self.executor == "dask" else "unset"),
            "KERNELHOUSE_LAKE_URI": self.lake_uri or "unset (KERNELHOUSE_HOME/lake)",
            **(self.object_store.public() if self.parquet_root.startswith("s3://") else {}),
            "KERNELHOUSE_SIM_SEED": self.sim_seed,
            "KERNELHOUSE_SIM_SESSIONS": self.sim_sessions,
            "KERNELHOUSE_SIM_EPISODES": self.sim_episodes,
            "KERNELHOUSE_SIM_COMPILE_SAMPLE": self.sim_compile_sample,
            "KERNELHOUSE_SIM_COMPILE_SHIPPED": int(self.sim_compile_shipped),
            **self.gpu.public(),
        }

    def secrets(self) -> list[str]:
        """Every secret value, so log/export scrubbers can redact them."""
        store = self.object_store
        return [
            s.get()
            for s in (
                self.github_token,
                self.hf_token,
                self.llm_api_key,
                store.secret_access_key,
                store.session_token,
            )
            if s
        ]


@dataclass(frozen=True)
class SqlLimits:
    """Limits of the read-only SQL door (``kernelhouse sql``, issue 42).

    A recursive CTE once ran until killed and a self-join passed 2.5 GB (DuckDB's own cap
    is 80% of RAM): one user statement must not take the machine. ``timeout_s``
    (``KERNELHOUSE_SQL_TIMEOUT_S``) interrupts the statement; ``memory_limit``
    (``KERNELHOUSE_SQL_MEMORY_LIMIT``, DuckDB's size syntax such as ``2GB`` or ``512MiB``)
    caps its memory, with spilling to disk off, so a query past it fails instead of
    filling the disk."""

    timeout_s: float = 120.0
    memory_limit: str = "2GB"

    def public(self) -> dict[str, str]:
        return {
            "KERNELHOUSE_SQL_TIMEOUT_S": f"{self.timeout_s:g}",
            "KERNELHOUSE_SQL_MEMORY_LIMIT": self.memory_limit,
        }


_SIZE = re.compile(r"\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)", re.IGNORECASE)


def load_sql_limits() -> SqlLimits:
    """The ``KERNELHOUSE_SQL_*`` variables, each checked and named when malformed."""
    memory = _env("KERNELHOUSE_SQL_MEMORY_LIMIT") or SqlLimits.memory_limit
    if not _SIZE.fullmatch(memory.strip()):
        raise SettingsError(
            f"KERNELHOUSE_SQL_MEMORY_LIMIT={memory!r}: use a size such as 2GB or 512MiB"
        )
    return SqlLimits(
        timeout_s=_positive_env("KERNELHOUSE_SQL_TIMEOUT_S", SqlLimits.timeout_s),
        memory_limit=memory.strip(),
    )


def _int_env(name: str, default: int) -> int:
    raw = _env(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise SettingsError(f"{name}={raw!r} is not an integer") from exc


def _non_negative_env(name: str, default: int) -> int:
    value = _int_env(name, default)
    if value < 0:
        raise SettingsError(f"{name}={value} must be 0 or more")
    return value


#: The largest simulated build a setting may ask for: 1,000 shards of 100. Every shard is a
#: Dagster partition, and the partition set is built wherever the definitions load (a
#: ``status`` of ``KERNELHOUSE_SIM_EPISODES=10**9`` once ran past 15 minutes, issue 42).
MAX_SIM_ITEMS = 100_000


def _count_env(name: str, default: int, what: str) -> int:
    """A size that must be at least 1: ``KERNELHOUSE_SIM_SESSIONS=-5`` once built an empty
    dataset and reported ok, ``KERNELHOUSE_SIM_EPISODES=-1`` failed 24 runs without naming
    the variable. Refused here, before any run, naming it; so is a size over
    :data:`MAX_SIM_ITEMS`."""
    value = _int_env(name, default)
    if value < 1:
        raise SettingsError(f"{name}={value}: the number of {what} must be at least 1")
    if value > MAX_SIM_ITEMS:
        raise SettingsError(
            f"{name}={value}: at most {MAX_SIM_ITEMS:,} {what} (1,000 shards of 100) per build"
        )
    return value


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
    raw_lake = _env("KERNELHOUSE_LAKE_URI")
    lake_uri = parse_lake_uri(raw_lake) if raw_lake else None
    raw_scheduler = _env("KERNELHOUSE_DASK_SCHEDULER")
    dask_scheduler = parse_dask_scheduler(raw_scheduler) if raw_scheduler else None
    # AWS variables matter only for an s3:// lake; a stray bad one elsewhere is no error.
    store = load_object_store() if lake_uri and lake_uri.startswith("s3://") else ObjectStore()
    hf_token = _secret("HF_TOKEN")
    llm = load_llm_settings()
    return Settings(
        home=home,
        sources=sources,
        refs=refs,
        github_token=_secret("GITHUB_TOKEN"),
        github_api_url=_env("KERNELHOUSE_GITHUB_API_URL"),
        hf_token=hf_token,
        llm_base_url=llm.base_url,
        llm_api_key=llm.api_key,
        llm_model=llm.model,
        llm_fallback_model=llm.fallback_model,
        hub_repo_prefix=_env("KERNELHOUSE_HUB_REPO_PREFIX"),
        executor=executor,
        lake_uri=lake_uri,
        dask_scheduler=dask_scheduler,
        sim_seed=_int_env("KERNELHOUSE_SIM_SEED", DEFAULT_SIM_SEED),
        sim_sessions=_count_env("KERNELHOUSE_SIM_SESSIONS", 1899, "simulated sessions"),
        sim_episodes=_count_env("KERNELHOUSE_SIM_EPISODES", 2400, "simulated episodes"),
        sim_compile_sample=_non_negative_env("KERNELHOUSE_SIM_COMPILE_SAMPLE", 48),
        sim_compile_shipped=_flag_env("KERNELHOUSE_SIM_COMPILE_SHIPPED", default=True),
        object_store=store,
        gpu=load_gpu_batch(),
    )


def ensure_home(settings: Settings) -> None:
    """Create the home layout, failing fast with the setting's name if it is unwritable."""
    try:
        for d in (settings.home, settings.repos_dir, settings.exports_dir, settings.dagster_home):
            d.mkdir(parents=True, exist_ok=True)
        # A per-process probe name: parallel steps of one run (multiprocess executor) all
        # call this, and a shared name let one step unlink another's probe mid-check.
        with tempfile.NamedTemporaryFile(dir=settings.home, prefix=".write-probe-"):
            pass
    except OSError as exc:
        raise SettingsError(
            f"KERNELHOUSE_HOME={settings.home} is not writable ({exc.strerror or exc}); "
            "point KERNELHOUSE_HOME at a writable folder"
        ) from exc
    yaml = settings.dagster_home / "dagster.yaml"
    if not yaml.exists():
        yaml.write_text("telemetry:\n  enabled: false\n")


def is_remote_url(source: str) -> bool:
    """A source git would fetch over a network transport (not a local path / file://).
    What a source setting means is read here, where the setting is; the miner's git
    wrapper and the reachability probes ask the same two functions."""
    return "://" in source and not source.startswith("file://") or source.startswith("git@")


def local_path_of(source: str) -> Path | None:
    """The folder a local source names (a path or ``file://``), None for a remote one."""
    if source.startswith("file://"):
        return Path(source[len("file://") :])
    if is_remote_url(source):
        return None
    return Path(source).expanduser()


def validate_sources(settings: Settings, repos: tuple[str, ...] = REPOS) -> None:
    """A local-path source must exist and be a git repository: fail before any work."""
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
