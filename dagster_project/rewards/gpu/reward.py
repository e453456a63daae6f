"""``execution_reward``: the on-hardware reward for a predicted launch config.

    reward = t_best / t_pred

where ``t_best`` is the measured time of the row's own tuned config and ``t_pred`` the
measured time of the prediction, both from the same harness on the same inputs. 1.0
means "as fast as the tuned config"; above 1.0 the prediction beat the tuner. A config
that cannot be used gets ``FAILED_REWARD`` (-1.0) and a row the harness cannot measure
gets ``HARNESS_ERROR_REWARD`` (0.0); ``spec`` lists the statuses. The function never
raises: whatever goes wrong comes back as a status and a one-line reason.

Measuring needs a CUDA GPU; ``measure`` is injectable (the batch runner and the tests
pass their own), and the default imports the torch harness only when first called.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .neighbours import Candidate
from .spec import (
    CONFIG_FAILURES,
    FAILED_REWARD,
    HARNESS_ERROR,
    HARNESS_ERROR_REWARD,
    INVALID_CONFIG,
    OK,
    ConfigError,
    Measurement,
    MeasureRow,
    failed,
    normalise_config,
)

#: ``measure(row, candidates) -> one Measurement per candidate, in order``.
Measurer = Callable[[MeasureRow, Sequence[Candidate]], list[Measurement]]


@dataclass(frozen=True)
class RewardResult:
    reward: float
    status: str
    reason: str = ""
    t_pred_us: float | None = None
    t_best_us: float | None = None

    def __float__(self) -> float:
        return self.reward


def reward_from(pred: Measurement, t_best_us: float | None) -> RewardResult:
    """The reward of a measured prediction given the tuned config's time (pure)."""
    if pred.status in CONFIG_FAILURES:
        return RewardResult(FAILED_REWARD, pred.status, pred.reason, None, t_best_us)
    if pred.status != OK or not pred.ok:
        reason = pred.reason or f"prediction status {pred.status!r} without a time"
        return RewardResult(HARNESS_ERROR_REWARD, HARNESS_ERROR, reason, None, t_best_us)
    if t_best_us is None or not math.isfinite(t_best_us) or t_best_us <= 0:
        return RewardResult(
            HARNESS_ERROR_REWARD,
            HARNESS_ERROR,
            "no valid time for the row's tuned config",
            pred.t_us,
            t_best_us,
        )
    assert pred.t_us is not None
    return RewardResult(t_best_us / pred.t_us, OK, "", pred.t_us, t_best_us)


def _default_measure(row: MeasureRow, cands: Sequence[Candidate]) -> list[Measurement]:
    from .device import measure_candidates

    return measure_candidates(row, cands)


def _as_config(config: Mapping[str, Any] | str) -> Mapping[str, Any]:
    if isinstance(config, str):
        from dagster_project.rewards.config import ConfigParseError, parse_config

        try:
            return parse_config(config)
        except ConfigParseError as exc:
            raise ConfigError(f"no config could be read: {exc}") from exc
    return config


def execution_reward(
    config: Mapping[str, Any] | str,
    row: MeasureRow | Mapping[str, Any],
    *,
    measure: Measurer | None = None,
    t_best_us: float | None = None,
) -> RewardResult:
    """Measure ``config`` (a dict, or a completion holding one) on ``row``'s kernel.

    ``t_best_us`` skips re-measuring the tuned config when the caller already has it
    (a batch of completions for one row measures it once). Invalid configs are caught
    before any GPU work.
    """
    try:
        measure_row = row if isinstance(row, MeasureRow) else MeasureRow.from_json(row)
    except Exception as exc:  # noqa: BLE001 - a malformed row is the caller's, not the config's
        return RewardResult(HARNESS_ERROR_REWARD, HARNESS_ERROR, f"bad row: {exc}")
    try:
        cfg = _as_config(config)
        normalise_config(cfg)
    except ConfigError as exc:
        return RewardResult(FAILED_REWARD, INVALID_CONFIG, exc.reason, None, t_best_us)
    problem = measure_row.problem_error()
    if problem:
        return RewardResult(HARNESS_ERROR_REWARD, HARNESS_ERROR, problem, None, t_best_us)
    cands = [Candidate("pred", dict(cfg))]
    if t_best_us is None:
        cands.insert(0, Candidate("tuned", dict(measure_row.best_config)))
    try:
        results = (measure or _default_measure)(measure_row, cands)
    except Exception as exc:  # noqa: BLE001 - never raise out of a reward
        return RewardResult(
            HARNESS_ERROR_REWARD,
            HARNESS_ERROR,
            f"measurement failed: {type(exc).__name__}: {exc}",
            None,
            t_best_us,
        )
    by_label = {m.label: m for m in results}
    pred = by_label.get("pred") or failed(
        measure_row.id, "pred", cfg, HARNESS_ERROR, "the measurer returned no result for the config"
    )
    if pred.status in CONFIG_FAILURES:  # the config's fault, whatever the tuned one did
        return reward_from(pred, t_best_us)
    if t_best_us is None:
        tuned = by_label.get("tuned")
        if tuned is None or not tuned.ok:
            why = tuned.reason if tuned is not None else "not measured"
            return RewardResult(
                HARNESS_ERROR_REWARD,
                HARNESS_ERROR,
                f"the row's tuned config has no valid time ({why})",
                pred.t_us,
                None,
            )
        t_best_us = tuned.t_us
    return reward_from(pred, t_best_us)
