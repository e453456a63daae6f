"""What the GPU harness measures: one tuned-config row, a launch config, a result.

Everything here is plain Python (no torch, triton, polars or duckdb) because the same
module runs in three places: the CPU planner that writes a batch, the GPU machine that
measures it (Python 3.12, torch and triton only) and the CPU tests.

Statuses and rewards
--------------------
A measurement ends in exactly one status. ``ok`` is the only one with a time; every
other status means the config could not be used as the runtime would use it, and the
execution reward is ``FAILED_REWARD`` (-1.0, the same floor as the offline
``config_reward``: below every config that runs, whatever its speed):

=====================  ==============================================================
``ok``                 compiled, ran, matched the reference, timed
``invalid_config``     rejected before compiling: missing tile key, non-integer value,
                       tile not a power of two, value out of range, unknown key
``out_of_resources``   Triton refused it (shared memory or registers over the limit)
``compile_failed``     any other compile error
``launch_failed``      compiled but the launch raised (or left a CUDA error behind)
``wrong_result``       ran, but the output differs from the higher-precision reference
                       beyond the dtype's tolerance, or left elements unwritten
``harness_error``      the *row* cannot be measured (kernel source needs a name we do
                       not shim, an unbound kernel parameter, unsupported dtype, the
                       row's own tuned config fails): reward ``HARNESS_ERROR_REWARD``
                       (0.0), which says "no signal" rather than punishing the config
=====================  ==============================================================
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

#: Bumped whenever a change would alter measured times or statuses (stored per result).
HARNESS_VERSION = "1.2.0"  # 1.2.0: the engines' small-batch alignment cap (issue 38)

OK = "ok"
INVALID_CONFIG = "invalid_config"
OUT_OF_RESOURCES = "out_of_resources"
COMPILE_FAILED = "compile_failed"
LAUNCH_FAILED = "launch_failed"
WRONG_RESULT = "wrong_result"
HARNESS_ERROR = "harness_error"

STATUSES = (
    OK,
    INVALID_CONFIG,
    OUT_OF_RESOURCES,
    COMPILE_FAILED,
    LAUNCH_FAILED,
    WRONG_RESULT,
    HARNESS_ERROR,
)
#: Statuses that blame the config (reward ``FAILED_REWARD``).
CONFIG_FAILURES = frozenset(STATUSES) - {OK, HARNESS_ERROR}

FAILED_REWARD = -1.0
HARNESS_ERROR_REWARD = 0.0

#: Keys that shape the kernel (compile-time parameters of the kernel).
TILE_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")
REQUIRED_KEYS = (*TILE_KEYS, "GROUP_SIZE_M")
#: Launch options; when absent Triton's defaults apply (SGLang's default configs omit
#: them and the runtime passes ``**config`` straight to the launch).
TRITON_DEFAULT_OPTIONS = {"num_warps": 4, "num_stages": 3}
#: Keys the runtimes accept but that do not change what runs on an NVIDIA GPU here:
#: ``SPLIT_K`` is forced to 1 by vLLM's launcher and unknown to SGLang's kernel;
#: ``USE_TMA`` asks SGLang for TMA descriptors, which this harness does not build (the
#: config is measured without them and the note says so); the ROCm knobs are ignored
#: by the CUDA backend.
IGNORED_KEYS = ("SPLIT_K", "USE_TMA", "waves_per_eu", "matrix_instr_nonkdim", "kpack")

# Ranges are wide on purpose: a config outside them cannot compile for these kernels,
# while anything inside is left to the compiler and the GPU to judge.
TILE_RANGE = (16, 512)  # tl.dot needs >= 16 per dimension
GROUP_RANGE = (1, 1024)
WARPS = (1, 2, 4, 8, 16, 32)
STAGES_RANGE = (1, 8)

MOE_KERNELS = frozenset({"fused_moe_kernel"})
BLOCK_MM_KERNELS = frozenset({"_w8a8_triton_block_scaled_mm", "_w8a8_block_fp8_matmul"})
SUPPORTED_DTYPES = {
    "moe": frozenset({"bf16/fp16", "fp8_w8a8"}),
    "block_mm": frozenset({"fp8_w8a8"}),
}


def kernel_kind(kernel: str) -> str | None:
    """``"moe"`` / ``"block_mm"`` for kernels the harness can launch, else ``None``."""
    if kernel in MOE_KERNELS:
        return "moe"
    if kernel in BLOCK_MM_KERNELS:
        return "block_mm"
    return None


class ConfigError(ValueError):
    """A launch config the harness refuses before compiling; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _is_pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def normalise_config(config: Mapping[str, Any]) -> tuple[dict[str, int], tuple[str, ...]]:
    """The config as the harness launches it, plus notes on keys it ignored.

    Returns the tile keys, ``GROUP_SIZE_M`` and the launch options (Triton's defaults
    filled in where absent), all as ints. Raises ``ConfigError`` for anything a
    runtime launch would reject or that cannot compile (see the module docstring).
    """
    if not isinstance(config, Mapping):
        raise ConfigError(f"config is a {type(config).__name__}, not a JSON object")
    out: dict[str, int] = {}
    notes: list[str] = []
    for key, value in config.items():
        if key in IGNORED_KEYS:
            note = _ignored_note(key, value)
            if note is not None:
                notes.append(note)
            continue
        if key not in (*REQUIRED_KEYS, *TRITON_DEFAULT_OPTIONS):
            raise ConfigError(f"unknown key {key!r}")
        out[key] = _launch_int(key, value)
    _check_tiles(out)
    for key, default in TRITON_DEFAULT_OPTIONS.items():
        out.setdefault(key, default)
    if out["num_warps"] not in WARPS:
        raise ConfigError(f"num_warps={out['num_warps']} is not one of {WARPS}")
    if not STAGES_RANGE[0] <= out["num_stages"] <= STAGES_RANGE[1]:
        raise ConfigError(
            f"num_stages={out['num_stages']} outside [{STAGES_RANGE[0]}, {STAGES_RANGE[1]}]"
        )
    order = (*REQUIRED_KEYS, *TRITON_DEFAULT_OPTIONS)
    return {k: out[k] for k in order}, tuple(notes)


def _ignored_note(key: str, value: Any) -> str | None:
    """What a note says about an ignored key whose value the launch does not honour."""
    if key == "SPLIT_K" and value not in (1, True, None):
        return f"SPLIT_K={value} ignored: the launcher runs SPLIT_K=1"
    if key == "USE_TMA" and value:
        return "USE_TMA ignored: measured without TMA descriptors"
    return None


def _launch_int(key: str, value: Any) -> int:
    """A launch key's value as an int: an int, or a float with no fractional part (a
    bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{key}={value!r} is not an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise ConfigError(f"{key}={value!r} is not an integer")
        value = int(value)
    return int(value)


def _check_tiles(out: Mapping[str, int]) -> None:
    """Every required key is present, each tile a power of two within ``TILE_RANGE`` and
    ``GROUP_SIZE_M`` within ``GROUP_RANGE``."""
    missing = [k for k in REQUIRED_KEYS if k not in out]
    if missing:
        raise ConfigError("missing key(s): " + ", ".join(missing))
    for key in TILE_KEYS:
        v = out[key]
        if not _is_pow2(v):
            raise ConfigError(f"{key}={v} is not a power of two")
        if not TILE_RANGE[0] <= v <= TILE_RANGE[1]:
            raise ConfigError(f"{key}={v} outside [{TILE_RANGE[0]}, {TILE_RANGE[1]}]")
    if not GROUP_RANGE[0] <= out["GROUP_SIZE_M"] <= GROUP_RANGE[1]:
        raise ConfigError(
            f"GROUP_SIZE_M={out['GROUP_SIZE_M']} outside [{GROUP_RANGE[0]}, {GROUP_RANGE[1]}]"
        )


def config_key(config: Mapping[str, int]) -> str:
    """Canonical text of a normalised config (sorted keys): equal configs, equal keys."""
    return json.dumps(dict(sorted(config.items())), separators=(",", ":"))


def _parse_json_config(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return json.loads(value) if value.strip() else None
    return dict(value)


@dataclass(frozen=True)
class MeasureRow:
    """One ``tuned_configs`` row with everything the GPU side needs, and nothing else.

    For MoE rows ``N`` is the file's N (per-expert intermediate size after tensor
    parallelism) and ``K`` the model's hidden size (the planner takes it from the
    candidate model, since MoE file names carry no K). The first GEMM then multiplies
    ``[M, K]`` activations by ``[E, 2N, K]`` gate+up weights, the second
    ``[M·top_k, N]`` by ``[E, K, N]`` down weights. ``moe_gemms`` says which of them the
    row's config governs and is therefore timed: ``both`` (vLLM, and SGLang files without
    a ``_down`` twin), ``up`` (an SGLang file whose ``_down`` twin exists) or ``down`` (the
    ``_down`` file itself). Block-matmul rows are ``[M, K] x [N, K]^T`` and use ``mm``.

    ``top_k`` is the model's routed top-k; ``n_shared`` counts routed-size shared experts
    fused into the same GEMM as always-selected extra experts (SGLang's E=257 for
    DeepSeek-V3), so each token really visits ``top_k + n_shared`` experts.

    ``routing`` names the token-to-expert distribution of a MoE row's inputs
    (``routing.route``): ``"uniform"`` (the default, what every batch before issue 38
    was measured under) or a skewed one such as ``"zipf:0.5"``; it is stamped on every
    result, so one row measured under two routings gives two latency tables.
    """

    id: str
    kernel: str
    repo: str
    dtype: str
    kernel_source: str
    M: int
    N: int
    K: int
    best_config: dict[str, Any]
    default_config: dict[str, Any] | None = None
    E: int | None = None
    top_k: int | None = None
    n_shared: int = 0
    block_shape: tuple[int, int] | None = None
    per_channel_quant: bool = False
    moe_gemms: str = "both"
    gpu: str | None = None
    config_path: str | None = None
    model: str | None = None
    routing: str = "uniform"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str | None:
        return kernel_kind(self.kernel)

    @property
    def quant(self) -> str:
        """``bf16``, ``fp8_tensor``, ``fp8_channel`` or ``fp8_block``."""
        if self.kind == "block_mm":
            return "fp8_block"
        if self.dtype != "fp8_w8a8":
            return "bf16"
        if self.block_shape is not None:
            return "fp8_block"
        return "fp8_channel" if self.per_channel_quant else "fp8_tensor"

    @property
    def routed_top_k(self) -> int:
        """Experts each token visits in the fused GEMM (routed + fused shared)."""
        return int(self.top_k or 0) + int(self.n_shared or 0)

    @property
    def seed(self) -> int:
        """Deterministic per-row seed: the same row always gets the same inputs."""
        return int(hashlib.sha256(self.id.encode()).hexdigest()[:8], 16)

    def problem_error(self) -> str | None:
        """Why this row cannot be measured at all, or ``None``."""
        kind = self.kind
        if kind is None:
            return f"kernel {self.kernel!r} is not one the harness launches"
        if self.dtype not in SUPPORTED_DTYPES[kind]:
            return f"dtype {self.dtype!r} not supported for {kind} rows"
        if self.M < 1 or self.N < 1 or self.K is None or self.K < 1:
            return f"shape M={self.M} N={self.N} K={self.K} is incomplete"
        moe_error = self._moe_error() if kind == "moe" else None
        if moe_error is not None:
            return moe_error
        if self.quant == "fp8_block" and self.block_shape is None:
            return "block-quantised row without block_shape"
        if not self.kernel_source or not self.kernel_source.strip():
            return "row has no kernel_source"
        return None

    def _moe_error(self) -> str | None:
        """Why a MoE row cannot be measured (no E or top-k, top-k over E, an unknown
        ``moe_gemms``), or ``None``."""
        if not self.E or self.E < 1:
            return "MoE row without E"
        if not self.top_k or self.top_k < 1:
            return "MoE row without top_k (no candidate model)"
        if self.routed_top_k > self.E:
            return f"top_k {self.routed_top_k} exceeds E={self.E}"
        if self.moe_gemms not in ("both", "up", "down"):
            return f"moe_gemms={self.moe_gemms!r}"
        from .routing import parse_routing

        try:
            parse_routing(self.routing)
        except ValueError as exc:
            return str(exc)
        return None

    # -- JSON ---------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["block_shape"] = list(self.block_shape) if self.block_shape else None
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MeasureRow:
        """Build from a batch line (or a ``tuned_configs`` row dict plus planner fields).

        ``best_config`` / ``default_config`` may be JSON text (as in the lake) or objects.
        """
        known = {f for f in cls.__dataclass_fields__}
        kwargs = {k: v for k, v in d.items() if k in known}
        best = _parse_json_config(d.get("best_config"))
        kwargs["best_config"] = best if best is not None else {}
        kwargs["default_config"] = _parse_json_config(d.get("default_config"))
        bs = d.get("block_shape")
        kwargs["block_shape"] = (int(bs[0]), int(bs[1])) if bs else None
        for key in ("M", "N", "K", "E", "top_k", "n_shared"):
            if kwargs.get(key) is not None:
                kwargs[key] = int(kwargs[key])
        kwargs.setdefault("n_shared", 0)
        if kwargs.get("n_shared") is None:
            kwargs["n_shared"] = 0
        kwargs["routing"] = str(d.get("routing") or "uniform")
        kwargs["per_channel_quant"] = bool(d.get("per_channel_quant") or False)
        kwargs.setdefault(
            "moe_gemms", "mm" if kernel_kind(str(d.get("kernel"))) == "block_mm" else "both"
        )
        kwargs["extra"] = dict(d.get("extra") or {})
        return cls(**kwargs)


@dataclass(frozen=True)
class Measurement:
    """One (row, candidate config) result, exactly as written to the results JSONL."""

    row_id: str
    label: str
    config: dict[str, Any]
    status: str
    reason: str = ""
    t_us: float | None = None
    rel_err: float | None = None
    index: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (
            self.status == OK
            and self.t_us is not None
            and math.isfinite(self.t_us)
            and self.t_us > 0
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Measurement:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})


def failed(
    row_id: str,
    label: str,
    config: Mapping[str, Any],
    status: str,
    reason: str,
    index: int = 0,
    **details: Any,
) -> Measurement:
    """A non-``ok`` measurement (keeps the reason to one line of at most 500 chars)."""
    one_line = " ".join(str(reason).split())[:500]
    return Measurement(
        row_id=row_id,
        label=label,
        config=dict(config),
        status=status,
        reason=one_line,
        index=index,
        details=dict(details),
    )
