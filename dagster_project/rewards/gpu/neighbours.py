"""The candidate configs measured for a row: tuned, default, then one-step neighbours.

A latency table around the tuned config answers two questions at once: is the tuned
config still the fastest nearby (on today's Triton and GPU), and how steep is the
landscape (how much a policy loses for one wrong step). The neighbourhood moves one knob
at a time by one step on its natural grid: tile sizes, ``num_warps`` and
``GROUP_SIZE_M`` halve and double (they live on a power-of-two grid), ``num_stages``
moves by one (a pipeline depth, where doubling 4 to 8 would not be a neighbour).
Neighbours outside the harness's accepted ranges are not generated; duplicates of an
earlier candidate are dropped, so the list is deterministic and duplicate-free.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .spec import (
    GROUP_RANGE,
    STAGES_RANGE,
    TILE_KEYS,
    TILE_RANGE,
    WARPS,
    ConfigError,
    config_key,
    normalise_config,
)


@dataclass(frozen=True)
class Candidate:
    label: str  # "tuned", "default", "BLOCK_SIZE_N*2", "num_stages-1", …
    config: dict[str, Any]


def _steps() -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    for key in (*TILE_KEYS, "num_warps", "GROUP_SIZE_M"):
        out += [(key, "/", 2), (key, "*", 2)]
    out += [("num_stages", "-", 1), ("num_stages", "+", 1)]
    return out


def _in_range(key: str, value: int) -> bool:
    if key in TILE_KEYS:
        return TILE_RANGE[0] <= value <= min(TILE_RANGE[1], 256)
    if key == "num_warps":
        return value in WARPS and 2 <= value <= 16
    if key == "GROUP_SIZE_M":
        return GROUP_RANGE[0] <= value <= 64
    return STAGES_RANGE[0] <= value <= min(STAGES_RANGE[1], 6)


def neighbours(config: Mapping[str, Any]) -> list[Candidate]:
    """One-step neighbours of a valid config (normalised), in a fixed order."""
    base, _ = normalise_config(config)
    out: list[Candidate] = []
    for key, op, amount in _steps():
        cur = base[key]
        if op == "/":
            if cur % amount:
                continue
            new = cur // amount
        elif op == "*":
            new = cur * amount
        elif op == "-":
            new = cur - amount
        else:
            new = cur + amount
        if new == cur or not _in_range(key, new):
            continue
        out.append(Candidate(f"{key}{op}{amount}", {**base, key: new}))
    return out


def candidates(
    best: Mapping[str, Any],
    default: Mapping[str, Any] | None,
    *,
    with_neighbours: bool = True,
    limit: int | None = None,
) -> list[Candidate]:
    """``tuned`` first (its time is ``t_best`` of the reward), ``default`` second, then the
    tuned config's neighbours. The tuned and default configs are kept as written (keys
    the harness ignores included) so their rows show what the repo ships; neighbours are
    normalised. A default equal to the tuned config is still listed (its own label), so
    every row has both baselines; later duplicates are dropped."""
    out = [Candidate("tuned", dict(best))]
    if default is not None:
        out.append(Candidate("default", dict(default)))
    seen: set[str] = set()
    for c in out:
        with contextlib.suppress(ConfigError):  # an invalid tuned/default is still listed
            seen.add(config_key(normalise_config(c.config)[0]))
    if with_neighbours:
        try:
            near = neighbours(best)
        except ConfigError:
            near = []
        for c in near:
            key = config_key(c.config)
            if key not in seen:
                seen.add(key)
                out.append(c)
    return out[:limit] if limit else out
