"""Deterministic randomness that does not depend on process, order or PYTHONHASHSEED.

Every random choice in the simulator comes from a ``random.Random`` seeded by a BLAKE2b
digest of a tuple of plain values (seed, generator version, task key, purpose...). Two
processes that generate different shards in any order therefore draw identical numbers
for the same session, which is what makes shard output byte-identical.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any


def _canon(parts: tuple[Any, ...]) -> bytes:
    return json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode()


def derive_seed(*parts: Any) -> int:
    """A 63-bit integer seed from any JSON-able parts."""
    return int.from_bytes(hashlib.blake2b(_canon(parts), digest_size=8).digest(), "big") >> 1


def stream(*parts: Any) -> random.Random:
    """An independent ``random.Random`` for the given purpose."""
    return random.Random(derive_seed(*parts))


def unit(*parts: Any) -> float:
    """A deterministic uniform number in [0, 1) keyed by parts (no state)."""
    return derive_seed(*parts) / float(1 << 63)
