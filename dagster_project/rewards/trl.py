"""Batch wrappers with TRL's reward-function calling convention (TRL is not imported).

``GRPOTrainer`` calls each reward function as
``fn(prompts=[...], completions=[...], completion_ids=[...], <every other dataset
column>=[...], trainer_state=...)``: one list entry per completion, a dataset row
repeated once per generation. Completions are plain strings for a standard dataset and
lists of chat messages (``{"role": ..., "content": ...}``) for a conversational one;
the answer is then the last assistant message. The wrappers score row by row with the
single-completion rewards and return ``list[float]``, ignoring every column they do not
need, so new dataset columns or trainer arguments never break training.

Usage::

    GRPOTrainer(..., reward_funcs=[patch_reward_fn])     # kernel_commits
    GRPOTrainer(..., reward_funcs=[config_reward_fn])    # tuned_configs
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .config import config_reward
from .patch import patch_reward

__all__ = ["completion_text", "config_reward_fn", "patch_reward_fn"]

#: Trainer arguments that are not per-row dataset columns, and our own parameter names.
_NOT_ROW_COLUMNS = frozenset(
    {
        "prompts",
        "completions",
        "completion_ids",
        "trainer_state",
        "completion",
        "best_config",
        "speedup_vs_default",
        "log_extra",
        "log_metric",
    }
)


def _content_text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a multimodal part list."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [
            part.get("text", "")
            for part in content
            if isinstance(part, Mapping) and part.get("type", "text") == "text"
        ]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def completion_text(completion: Any) -> str:
    """The answer text of one completion: the string itself or the last assistant message.

    A message list without an assistant turn yields its last message's content; anything
    unreadable yields ``""``, which the rewards score as malformed.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return _content_text(completion.get("content"))
    if isinstance(completion, Sequence) and completion:
        messages = [m for m in completion if isinstance(m, Mapping)]
        for message in reversed(messages):
            if message.get("role") == "assistant":
                return _content_text(message.get("content"))
        if messages:
            return _content_text(messages[-1].get("content"))
    return ""


def _column(name: str, values: Sequence[Any] | None, n: int) -> Sequence[Any]:
    """A per-row column, checked to line up with the completions (None → all None)."""
    if values is None:
        return [None] * n
    if isinstance(values, str | bytes) or len(values) != n:
        size = "a string" if isinstance(values, str | bytes) else f"{len(values)} values"
        raise ValueError(f"column {name!r} has {size}, expected a list of {n}")
    return values


def _row_columns(kwargs: Mapping[str, Any], n: int) -> dict[str, Sequence[Any]]:
    """The extra dataset columns: list-valued keyword arguments with one entry per row."""
    return {
        key: value
        for key, value in kwargs.items()
        if key not in _NOT_ROW_COLUMNS and isinstance(value, list | tuple) and len(value) == n
    }


def patch_reward_fn(
    completions: Sequence[Any],
    before_code: Sequence[str],
    after_code: Sequence[str],
    **kwargs: Any,
) -> list[float]:
    """``patch_reward`` over a batch; other columns and trainer arguments are ignored."""
    n = len(completions)
    before = _column("before_code", before_code, n)
    after = _column("after_code", after_code, n)
    return [
        patch_reward(completion_text(c), b, a)
        for c, b, a in zip(completions, before, after, strict=True)
    ]


def config_reward_fn(
    completions: Sequence[Any],
    best_config: Sequence[Any],
    speedup_vs_default: Sequence[float | None] | None = None,
    **kwargs: Any,
) -> list[float]:
    """``config_reward`` over a batch; per-row columns (``kernel``, ``family``, …) are
    forwarded so the SSU key set is recognised, everything else is ignored."""
    n = len(completions)
    best = _column("best_config", best_config, n)
    speedups = _column("speedup_vs_default", speedup_vs_default, n)
    extra = _row_columns(kwargs, n)
    return [
        config_reward(
            completion_text(completions[i]),
            best[i],
            speedups[i],
            **{key: values[i] for key, values in extra.items()},
        )
        for i in range(n)
    ]
