"""Offline proxy reward for ``tuned_configs``: a predicted Triton launch config vs the tuned one.

Only the standard library is used, because this file is also shipped inside the published
``code/reward.py`` (see ``rewards.export``).

Without hardware the only ground truth is the autotuner's winner (``best_config``), so
the reward measures closeness to it, scaled by how much picking a good config matters
for the row. On hardware, prefer ``t_best / t_pred``; the tuned config is only the best
of the tuner's search space.

Parsing
-------
The config is the *last* JSON object in the completion (after the last ``</think>``),
fenced or not, surrounded by prose or not; a Python dict literal (single quotes,
``True``, trailing comma) is accepted too. The reward is ``-1.0`` when:

* no object can be read;
* a key is not a launch parameter: ``BLOCK_SIZE_M/N/K``, ``GROUP_SIZE_M``, ``num_warps``,
  ``num_stages``, ``waves_per_eu``, ``matrix_instr_nonkdim``, ``kpack``, ``SPLIT_K``,
  ``num_ctas``, ``USE_TMA``, plus any key the tuned config itself has (Intel XPU
  configs carry ``"grf_mode": "256"``); for the selective-state-update kernel (row
  ``kernel`` names it or ``family == "ssu"``) only ``BLOCK_SIZE_M`` and ``num_warps``;
* a value of a listed key is not an integer >= 0 (integral floats are accepted;
  ``USE_TMA`` is a bool or 0/1), or ``BLOCK_SIZE_*`` / ``num_warps`` is not a power of
  two (Triton cannot compile it) unless it equals the tuned value; values of the
  tuned config's extra keys only need to be scalars.

Match score ``s`` in [0, 1]
---------------------------
A weighted mean over the union of predicted and tuned keys; a key on one side only
earns 0 (the runtime would fail or use a different value):

* ``BLOCK_SIZE_M/N/K``, ``GROUP_SIZE_M``, ``num_warps``, ``SPLIT_K`` live on a
  power-of-two grid where one step is a real but modest change, so they earn
  ``max(0, 1 - |log2(pred) - log2(best)| / 3)``: 1 octave off keeps 2/3, 3 or more
  octaves off earns nothing (a zero on either side needs an exact match);
* ``num_stages``, ``waves_per_eu``, ``matrix_instr_nonkdim``, ``kpack``, ``num_ctas``,
  ``USE_TMA`` (and extra keys) are small categorical knobs: exact match or nothing.

Weights: tile sizes, ``num_warps`` and ``num_stages`` (which decide the tile shape,
occupancy and pipelining) weigh 1; ``GROUP_SIZE_M`` (L2 swizzle only), ``SPLIT_K`` and
the ROCm / Hopper knobs weigh 0.5.

Row weighting
-------------
``g`` is the documented speedup of the tuned config over the runtime's default at this
M (``speedup_vs_default``), clamped to [1.05, 4.0]; rows without one use the dataset
median 1.30. The reward is::

    reward = g ** (s - 1)        in [1/g, 1]

read as an estimate of ``t_best / t_pred``: the tuned config runs at full speed, a
config sharing nothing with it is assumed to be about as slow as the untuned default,
and log-time is interpolated in between. A row where tuning barely matters (g ~ 1.05)
spreads valid answers over [0.95, 1]; a row with a documented 2x spreads them over
[0.5, 1]. Invalid output stays at -1, below every valid config. (GRPO's per-group std
normalisation cancels the per-row scale; the spread matters with unnormalised
advantages, e.g. Dr. GRPO, and when mixing rows in one batch-level baseline.)
"""

from __future__ import annotations

import ast
import json
import math
import random
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .patch import strip_reasoning

__all__ = [
    "ALLOWED_KEYS",
    "SSU_KEYS",
    "ConfigParseError",
    "config_match",
    "config_reward",
    "config_reward_distribution",
    "parse_config",
    "row_speedup",
]

ALLOWED_KEYS = frozenset(
    {
        "BLOCK_SIZE_M",
        "BLOCK_SIZE_N",
        "BLOCK_SIZE_K",
        "GROUP_SIZE_M",
        "num_warps",
        "num_stages",
        "waves_per_eu",
        "matrix_instr_nonkdim",
        "kpack",
        "SPLIT_K",
        "num_ctas",
        "USE_TMA",
    }
)
#: The selective-state-update kernel only takes these two.
SSU_KEYS = frozenset({"BLOCK_SIZE_M", "num_warps"})
SSU_KERNEL = "_selective_scan_update_kernel"

LOG2_KEYS = frozenset(
    {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "SPLIT_K"}
)
POW2_REQUIRED = frozenset({"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "num_warps"})
BOOL_KEYS = frozenset({"USE_TMA"})
KEY_WEIGHTS: dict[str, float] = {
    "BLOCK_SIZE_M": 1.0,
    "BLOCK_SIZE_N": 1.0,
    "BLOCK_SIZE_K": 1.0,
    "num_warps": 1.0,
    "num_stages": 1.0,
}
OTHER_KEY_WEIGHT = 0.5
#: Octaves of distance at which a power-of-two parameter stops earning credit.
LOG2_TOLERANCE = 3.0
#: speedup_vs_default assumed where the row has none (the card's median, 1.30x).
DEFAULT_SPEEDUP = 1.30
SPEEDUP_MIN, SPEEDUP_MAX = 1.05, 4.0
INVALID_REWARD = -1.0

#: int for sizes and counts, bool for USE_TMA, anything scalar for backend-only keys.
ConfigValue = int | bool | float | str


class ConfigParseError(ValueError):
    """No usable config in the text; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _closing_brace(text: str, start: int) -> int:
    """Index just past the ``}`` balancing ``text[start] == "{"`` (strings not special-cased)."""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def _objects(text: str) -> list[Any]:
    """Top-level JSON objects / Python dict literals in ``text``, in order."""
    found: list[Any] = []
    decoder = json.JSONDecoder()
    i = text.find("{")
    while i >= 0:
        value: Any = None
        end = -1
        try:
            value, end = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):  # JSONDecodeError, and an int past the digit cap
            close = _closing_brace(text, i)
            if close > 0:
                try:
                    value, end = ast.literal_eval(text[i:close]), close
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    value = None
        if isinstance(value, dict) and end > i:
            found.append(value)
            i = text.find("{", end)
        else:
            i = text.find("{", i + 1)
    return found


def _is_pow2(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def _normalise(
    config: Mapping[str, Any], allowed: frozenset[str], best: Mapping[str, ConfigValue] | None
) -> dict[str, ConfigValue]:
    """Validated copy of ``config``; raises ``ConfigParseError`` naming the first problem."""
    if not config:
        raise ConfigParseError("empty config")
    out: dict[str, ConfigValue] = {}
    for key, raw in config.items():
        if not isinstance(key, str) or key not in allowed:
            raise ConfigParseError(f"unknown key {key!r}")
        out[key] = _config_value(key, raw, best)
    return out


def _config_value(key: str, raw: Any, best: Mapping[str, ConfigValue] | None) -> ConfigValue:
    """One allowed key's validated value: any scalar for a backend knob, a bool for a
    flag, else a non-negative integer (a power of two where required, unless it is the
    tuned config's own value)."""
    if key not in ALLOWED_KEYS:
        # A backend knob only the tuned config has (Intel XPU's "grf_mode": "256"):
        # its values are not ours to validate, so any scalar goes, scored exactly.
        if isinstance(raw, str | int | float):
            return raw
        raise ConfigParseError(f"{key} must be a scalar, got {raw!r}")
    if key in BOOL_KEYS:
        if raw in (True, False, 0, 1) and not isinstance(raw, float | str):
            return bool(raw)
        raise ConfigParseError(f"{key} must be a bool, got {raw!r}")
    value = _config_integer(key, raw)
    if value < 0:
        raise ConfigParseError(f"{key} must be >= 0, got {value}")
    tuned = None if best is None else best.get(key)
    if key in POW2_REQUIRED and not _is_pow2(value) and value != tuned:
        raise ConfigParseError(f"{key} must be a power of two, got {value}")
    return value


def _config_integer(key: str, raw: Any) -> int:
    """``raw`` as an integer: an int, or a float with no fractional part (a bool is not
    an integer here)."""
    if isinstance(raw, bool):
        raise ConfigParseError(f"{key} must be an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    raise ConfigParseError(f"{key} must be an integer, got {raw!r}")


def _allowed_keys(best: Mapping[str, Any], row: Mapping[str, Any]) -> frozenset[str]:
    kernel = str(row.get("kernel") or "")
    ssu = row.get("family") == "ssu" or kernel == SSU_KERNEL or "selective_scan" in kernel
    return (SSU_KEYS if ssu else ALLOWED_KEYS) | frozenset(best)


def _load_best(best_config: str | Mapping[str, Any]) -> dict[str, Any]:
    """The row's tuned config as a dict; a broken one is a data bug and raises ValueError."""
    value: Any = json.loads(best_config) if isinstance(best_config, str) else best_config
    if not isinstance(value, Mapping) or not value:
        raise ValueError(f"best_config is not a non-empty JSON object: {best_config!r}")
    return dict(value)


def parse_config(
    completion: str,
    best_config: str | Mapping[str, Any] | None = None,
    **row: Any,
) -> dict[str, ConfigValue]:
    """The validated launch config of a completion; raises ``ConfigParseError`` otherwise.

    ``best_config`` and ``row`` only decide which keys are allowed (see the module doc).
    """
    best = _load_best(best_config) if best_config is not None else {}
    return _normalise_completion(completion, best, row)


def _key_credit(key: str, pred: ConfigValue, best: ConfigValue) -> float:
    """Credit in [0, 1] for one key present on both sides."""
    if (
        key in LOG2_KEYS
        and isinstance(pred, int)
        and isinstance(best, int)
        and not isinstance(pred, bool)
        and not isinstance(best, bool)
        and pred > 0
        and best > 0
    ):
        distance = abs(math.log2(pred) - math.log2(best))
        return max(0.0, 1.0 - distance / LOG2_TOLERANCE)
    return 1.0 if pred == best else 0.0


def config_match(predicted: Mapping[str, ConfigValue], best: Mapping[str, ConfigValue]) -> float:
    """Match score ``s`` in [0, 1]: weighted per-key credit over the union of keys."""
    keys = set(predicted) | set(best)
    if not keys:
        return 1.0
    total = credit = 0.0
    for key in keys:
        weight = KEY_WEIGHTS.get(key, OTHER_KEY_WEIGHT)
        total += weight
        if key in predicted and key in best:
            credit += weight * _key_credit(key, predicted[key], best[key])
    return credit / total


def row_speedup(speedup_vs_default: float | None) -> float:
    """``g``: the documented speedup, clamped, or the dataset prior when undocumented."""
    if speedup_vs_default is None:
        return DEFAULT_SPEEDUP
    try:
        value = float(speedup_vs_default)
    except (TypeError, ValueError):
        return DEFAULT_SPEEDUP
    if math.isnan(value):
        return DEFAULT_SPEEDUP
    return min(SPEEDUP_MAX, max(SPEEDUP_MIN, value))


def config_reward(
    completion: str,
    best_config: str | Mapping[str, Any],
    speedup_vs_default: float | None = None,
    **row: Any,
) -> float:
    """Reward of one completion for one ``tuned_configs`` row (scheme in the module doc).

    ``row`` takes the row's other columns; ``kernel`` / ``family`` pick the SSU key set.
    """
    best = _load_best(best_config)
    try:
        predicted = _normalise_completion(completion, best, row)
    except ConfigParseError:
        return INVALID_REWARD
    score = config_match(predicted, _normalise_best(best))
    return float(row_speedup(speedup_vs_default) ** (score - 1.0))


def _normalise_completion(
    completion: str, best: Mapping[str, Any], row: Mapping[str, Any]
) -> dict[str, ConfigValue]:
    if not isinstance(completion, str):
        raise ConfigParseError(f"completion is a {type(completion).__name__}, not text")
    objects = _objects(strip_reasoning(completion))
    if not objects:
        raise ConfigParseError("no JSON object in the completion")
    return _normalise(objects[-1], _allowed_keys(best, row), best)


def _normalise_best(best: Mapping[str, Any]) -> dict[str, ConfigValue]:
    """The tuned config with bools for bool keys, so ``USE_TMA: 1`` equals ``true``."""
    return {k: bool(v) if k in BOOL_KEYS else v for k, v in best.items()}


# --------------------------------------------------------------------------- reporting


def _summary(values: Sequence[float], shares: bool = True) -> dict[str, float | int]:
    """count / mean / quantiles of a list of rewards, and the shares at 1.0 and at -1."""
    if not values:
        return {"count": 0}
    ordered = sorted(values)

    def quantile(q: float) -> float:
        pos = q * (len(ordered) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(ordered) - 1)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    out: dict[str, float | int] = {
        "count": len(ordered),
        "mean": round(statistics.fmean(ordered), 4),
        "min": round(ordered[0], 4),
        "p10": round(quantile(0.10), 4),
        "p50": round(quantile(0.50), 4),
        "p90": round(quantile(0.90), 4),
        "max": round(ordered[-1], 4),
    }
    if shares:
        out["share_full"] = round(sum(v >= 1.0 for v in ordered) / len(ordered), 4)
        out["share_invalid"] = round(sum(v <= INVALID_REWARD for v in ordered) / len(ordered), 4)
    return out


#: A fixed, runtime-independent stand-in for the untuned default (the classic vLLM MoE
#: fallback with Triton's default warps/stages); SSU rows get a 2-key version.
FIXED_DEFAULT = {
    "BLOCK_SIZE_M": 64,
    "BLOCK_SIZE_N": 64,
    "BLOCK_SIZE_K": 32,
    "GROUP_SIZE_M": 8,
    "num_warps": 4,
    "num_stages": 3,
}
FIXED_DEFAULT_SSU = {"BLOCK_SIZE_M": 16, "num_warps": 4}


def config_reward_distribution(
    rows: Iterable[Mapping[str, Any]],
    completions: Sequence[str] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """How the reward spreads over a dataset, for the card and for sanity checks.

    ``rows`` are ``tuned_configs`` rows (mappings with ``best_config`` and optionally
    ``speedup_vs_default``, ``kernel``, ``family``; a polars frame's
    ``iter_rows(named=True)`` works). Reported per answer strategy:

    * ``best``: the tuned config itself; anything below 1.0 is a data problem;
    * ``fixed_default``: always answer ``FIXED_DEFAULT`` (a generic untuned config);
    * ``modal``: always answer the most common tuned config with the row's key set;
    * ``random``: each key drawn from the values tuned configs with that key set use;
    * ``completions``: the given completions, one per row, when passed.

    ``spread`` summarises ``1 - 1/g``, the reward range valid answers share per row.
    """
    data = [dict(row) for row in rows]
    bests = [_normalise_best(_load_best(row["best_config"])) for row in data]
    speedups = [row.get("speedup_vs_default") for row in data]
    by_keys: dict[frozenset[str], list[dict[str, ConfigValue]]] = {}
    for best in bests:
        by_keys.setdefault(frozenset(best), []).append(best)
    modal: dict[frozenset[str], dict[str, ConfigValue]] = {}
    choices: dict[frozenset[str], dict[str, list[ConfigValue]]] = {}
    for keys, group in by_keys.items():
        counts = Counter(json.dumps(cfg, sort_keys=True) for cfg in group)
        modal[keys] = json.loads(counts.most_common(1)[0][0])
        choices[keys] = {k: sorted({cfg[k] for cfg in group}) for k in keys}
    rng = random.Random(seed)

    strategies: dict[str, list[float]] = {
        "best": [],
        "fixed_default": [],
        "modal": [],
        "random": [],
    }
    for row, best, speedup in zip(data, bests, speedups, strict=True):
        extra = {k: v for k, v in row.items() if k not in ("best_config", "speedup_vs_default")}
        keys = frozenset(best)
        ssu = _allowed_keys({}, extra) == SSU_KEYS
        answers = {
            "best": best,
            "fixed_default": FIXED_DEFAULT_SSU if ssu else FIXED_DEFAULT,
            "modal": modal[keys],
            "random": {k: rng.choice(choices[keys][k]) for k in sorted(keys)},
        }
        for name, answer in answers.items():
            strategies[name].append(
                config_reward(json.dumps(answer), row["best_config"], speedup, **extra)
            )
    report: dict[str, Any] = {
        "rows": len(data),
        "documented_speedup_rows": sum(
            s is not None and not (isinstance(s, float) and math.isnan(s)) for s in speedups
        ),
        "spread": _summary([1.0 - 1.0 / row_speedup(s) for s in speedups], shares=False),
        "strategies": {name: _summary(values) for name, values in strategies.items()},
    }
    if completions is not None:
        if len(completions) != len(data):
            raise ValueError(f"{len(completions)} completions for {len(data)} rows")
        report["strategies"]["completions"] = _summary(
            [
                config_reward(
                    text,
                    row["best_config"],
                    row.get("speedup_vs_default"),
                    **{
                        k: v
                        for k, v in row.items()
                        if k not in ("best_config", "speedup_vs_default")
                    },
                )
                for text, row in zip(completions, data, strict=True)
            ]
        )
    return report
