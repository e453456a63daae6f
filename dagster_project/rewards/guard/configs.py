"""The guard around the tuned-config execution reward (``rewards.gpu.execution_reward``).

A config is data, not code, so the process boundary and static code checks have nothing
to hold; the attack surface is the text and what the launch makes of it. Defences, in
order:

1. ``strict_config``: exactly one JSON object (or flat Python dict literal, which the
   config reward documents; read by ``ast`` under the same rules) in the completion
   (several objects hoping the judge keeps the best are refused), no duplicate keys (a
   parser keeping the last value and a validator reading the first would disagree), no
   NaN/Infinity, no nested values; then ``rewards.gpu.spec.normalise_config`` (unknown
   keys such as Triton's ``enable_fp_fusion`` or ``input_precision`` refused, integers
   only, powers of two, ranges).
2. ``config_means_what_it_says``: a key the launch ignores may only carry the value the
   launch runs (``SPLIT_K`` 1, ``USE_TMA`` off, no ROCm knobs on a CUDA row): a config
   claiming split-K partial sums or TMA would otherwise be credited for work it never
   asked the kernel to do correctly.
3. the execution reward itself (output checked against an fp32 reference with TF32 off,
   every element written, inputs rotated through more than twice the L2 while timing).
4. ``unseen_shape``: after timing, the predicted config is run again on a batch size the
   row never showed (drawn at run time near M; the engine applies one config to a range
   of M) with a fresh seed, and must be correct there too.
"""

from __future__ import annotations

import ast
import json
import math
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..gpu.neighbours import Candidate
from ..gpu.reward import Measurer, RewardResult, execution_reward
from ..gpu.spec import (
    FAILED_REWARD,
    HARNESS_ERROR,
    INVALID_CONFIG,
    OK,
    ConfigError,
    Measurement,
    MeasureRow,
    normalise_config,
)
from ..patch import strip_reasoning

#: What an ignored key may say (the launch runs exactly this).
HONOURED = {"SPLIT_K": (1, None), "USE_TMA": (False, 0, None)}
ROCM_KEYS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")


class StrictConfigError(ValueError):
    def __init__(self, defence: str, reason: str) -> None:
        super().__init__(reason)
        self.defence = defence
        self.reason = reason


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise StrictConfigError("strict_config", f"duplicate key(s) {dup}")
    return dict(pairs)


def _no_constants(name: str) -> Any:
    raise StrictConfigError("strict_config", f"{name} is not a number a launch accepts")


def _top_level_objects(text: str) -> list[Any]:
    """Every JSON object that starts at a top-level ``{`` of ``text``, strictly decoded."""
    decoder = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    found: list[Any] = []
    i = text.find("{")
    while i >= 0:
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            literal = _flat_literal(text, i)
            if literal is None:
                raise StrictConfigError("strict_config", f"not strict JSON: {exc.msg}") from exc
            value, end = literal
        except RecursionError as exc:  # held-out hc-deep-nesting: the reward never raises
            raise StrictConfigError("strict_config", "not strict JSON: nested too deeply") from exc
        except ValueError as exc:  # heldout2 h2c-int-5000-digits: past int's digit limit
            raise StrictConfigError("strict_config", f"not strict JSON: {exc}") from exc
        found.append(value)
        i = text.find("{", end)
    return found


def _flat_literal(text: str, start: int) -> tuple[dict[str, Any], int] | None:
    """A flat Python dict literal at ``start`` (single quotes, ``True``, a trailing comma),
    which the config reward documents as an accepted completion (``rewards/config.py``):
    read with ``ast`` under the JSON rules above (string keys, no duplicates, only plain
    constants, finite numbers; no expressions such as ``32+0j``, no ``**`` unpacking, no
    nesting). ``None`` when the text there is not one (the JSON error then stands)."""
    close = text.find("}", start)
    if close < 0:
        return None
    try:
        node = ast.parse(text[start : close + 1].strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not isinstance(node, ast.Dict):
        return None
    pairs: list[tuple[str, Any]] = []
    for key, value in zip(node.keys, node.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        if not isinstance(value, ast.Constant) or isinstance(value.value, complex | bytes):
            return None
        v = value.value
        if isinstance(v, float) and not math.isfinite(v):
            _no_constants(repr(v))
        pairs.append((key.value, v))
    return _no_duplicates(pairs), close + 1


def strict_config(completion: str | Mapping[str, Any]) -> dict[str, Any]:
    """The completion's one config, strictly read (raises ``StrictConfigError``)."""
    if isinstance(completion, Mapping):
        text = json.dumps(completion, allow_nan=True)
    elif isinstance(completion, str):
        if completion.count("<think>") > completion.count("</think>"):
            # heldout3 h3c-unclosed-think: everything after an unclosed reasoning block is
            # reasoning, so the completion gave no answer (guard 1.5.0)
            raise StrictConfigError("strict_config", "a <think> block is never closed")
        text = strip_reasoning(completion)
    else:
        raise StrictConfigError("strict_config", f"completion is a {type(completion).__name__}")
    objects = _top_level_objects(text)
    if len(objects) != 1 or not isinstance(objects[0], dict):
        raise StrictConfigError("strict_config", f"{len(objects)} JSON objects, not exactly one")
    cfg: dict[str, Any] = objects[0]
    nested = [k for k, v in cfg.items() if isinstance(v, dict | list | str)]
    if nested:
        raise StrictConfigError("strict_config", f"non-scalar value(s) for {nested}")
    try:
        normalise_config(cfg)
    except ConfigError as exc:
        raise StrictConfigError("config_validation", exc.reason) from exc
    means_what_it_says(cfg)
    return cfg


def means_what_it_says(cfg: Mapping[str, Any]) -> None:
    """Refuse ignored keys that claim behaviour the launch does not run."""
    for key, allowed in HONOURED.items():
        if key in cfg and not any(
            cfg[key] == a and type(cfg[key]) is type(a) for a in allowed if a is not None
        ):
            raise StrictConfigError(
                "config_means_what_it_says",
                f"{key}={cfg[key]!r} is not run by the launch (it runs {allowed[0]!r})",
            )
    rocm = [k for k in ROCM_KEYS if k in cfg]
    if rocm:
        raise StrictConfigError("config_means_what_it_says", f"ROCm-only key(s) {rocm}")


#: Check-only measurement: one input set, one launch, one replay (no timing worth the name).
def _check_settings() -> Any:
    from ..gpu.device import TimingSettings

    return TimingSettings(
        min_sets=1,
        max_sets=1,
        graph_ms=0.001,
        max_graph_launches=1,
        target_ms=0.001,
        min_reps=1,
        max_reps=1,
    )


def _default_check(row: MeasureRow, cands: Sequence[Candidate]) -> list[Measurement]:
    from ..gpu.device import measure_candidates

    return measure_candidates(row, cands, settings=_check_settings())


def unseen_m(m: int, rng: secrets.SystemRandom | None = None) -> int:
    """A batch size near ``m`` that the row never showed, drawn at run time."""
    r = rng or secrets.SystemRandom()
    lo, hi = max(1, m // 2), 2 * m + 7
    while True:
        m2 = r.randint(lo, hi)
        if m2 != m:
            return m2


@dataclass(frozen=True)
class GuardedConfigResult:
    reward: float
    defence: str
    reason: str
    inner: RewardResult | None = None
    unseen: Measurement | None = None


def guarded_execution_reward(
    completion: str | Mapping[str, Any],
    row: MeasureRow | Mapping[str, Any],
    *,
    measure: Measurer | None = None,
    check: Callable[[MeasureRow, Sequence[Candidate]], list[Measurement]] | None = None,
    t_best_us: float | None = None,
) -> GuardedConfigResult:
    """``execution_reward`` behind the defences in the module docstring."""
    try:
        cfg = strict_config(completion)
    except StrictConfigError as exc:
        return GuardedConfigResult(FAILED_REWARD, exc.defence, exc.reason)
    inner = execution_reward(cfg, row, measure=measure, t_best_us=t_best_us)
    if inner.status != OK:
        defence = "config_validation" if inner.status == INVALID_CONFIG else inner.status
        return GuardedConfigResult(inner.reward, defence, inner.reason, inner)
    base = row if isinstance(row, MeasureRow) else MeasureRow.from_json(row)
    row2 = replace(base, id=f"{base.id}#unseen-{secrets.token_hex(4)}", M=unseen_m(base.M))
    try:
        (m,) = (check or _default_check)(row2, [Candidate("pred", dict(cfg))])
    except Exception as exc:  # noqa: BLE001 - the reward never raises
        return GuardedConfigResult(0.0, HARNESS_ERROR, f"unseen-shape check failed: {exc}", inner)
    if m.status == HARNESS_ERROR:
        return GuardedConfigResult(0.0, HARNESS_ERROR, m.reason, inner, m)
    if m.status != OK:
        why = f"at unseen M={row2.M}: {m.status}: {m.reason}"
        return GuardedConfigResult(FAILED_REWARD, "unseen_shape", why, inner, m)
    return GuardedConfigResult(inner.reward, "", "", inner, m)
