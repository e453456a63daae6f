"""Tuned-config files that are copies of another device's file: this rule's one home.

Why: upstream often ships one tuned file under more device names (an MI300X table copied to
MI325X and a Radeon name, H20 copied to H20-3e). The copy's ``best_config`` was never tuned
on the GPU its prompt names, the PR that added the copy is not the PR that tuned the
values, and with the split keyed by deployment a copy and its original could sit on both
sides: a test row whose exact answer is in train under another GPU's name (issue 41).

A file's *content* is its parsed table: every (M, config) pair, each config with sorted
keys, so formatting never matters. Within one repository, files of equal content are one
family, ordered by the date their current content landed (``derived.config_attribution``
``pr_date``; ties by path). A file is a copy when an earlier file of its family has
another ``device_name``: ``copied_from`` is that file's path (the earliest such file of
the same shape, ``SHAPE_COLUMNS``, when there is one, else the earliest: tables are copied
to another shape too, MI325X bf16 to MI325_OAM fp8, E=128 to E=129), and the file's
tuning PR becomes that file's. Same-device files of equal content (another
Triton-version folder) are not copies of another device and keep their own attribution.

The split (``split.apply_deployment_split``) groups by content too, across repositories:
every deployment that shares a file content with another is one split group.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import polars as pl

#: Version of the copy rule (content key, which file is the tuned one, attribution).
#: Bump it whenever mined output changes: it is part of the miner version
#: (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "1"

#: What a file tunes besides the device: a copy keeps all of it.
SHAPE_COLUMNS = (
    "family",
    "kernel",
    "E",
    "N",
    "K",
    "dtype",
    "block_shape",
    "per_channel_quant",
    "is_down",
    "headdim",
    "dstate",
    "cache_dtype",
)

COPIES_SCHEMA: dict[str, pl.DataType] = {
    "repo": pl.String(),
    "path": pl.String(),
    "content_key": pl.String(),
    "copied_from": pl.String(),
}


def content_keys(entries: pl.DataFrame) -> dict[tuple[str, str], str]:
    """{(repo, path): digest of the file's parsed table} from ``raw.config_entries``."""
    tables: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for repo, path, m, cfg in entries.select("repo", "path", "M", "config_json").iter_rows():
        canon = json.dumps(json.loads(cfg), sort_keys=True) if cfg is not None else "null"
        tables.setdefault((repo, path), []).append((m, canon))
    return {
        k: hashlib.sha256(json.dumps(sorted(v)).encode()).hexdigest()[:24]
        for k, v in tables.items()
    }


def _utc(date: str) -> str:
    """An ISO 8601 date with offset as UTC text, so dates compare as strings."""
    return datetime.fromisoformat(date).astimezone(UTC).isoformat()


def find_copies(
    files: pl.DataFrame, entries: pl.DataFrame, attributions: pl.DataFrame
) -> pl.DataFrame:
    """One row per parsed file (``COPIES_SCHEMA``): its content key and, for a copy of
    another device's file, the tuned file's path (see the module docstring)."""
    keys = content_keys(entries)
    dates = (
        {
            (r, p): _utc(d)
            for r, p, d in attributions.select("repo", "path", "pr_date").iter_rows()
            if d
        }
        if not attributions.is_empty()
        else {}
    )
    families: dict[tuple[str, str], list[tuple[str, str, str, tuple]]] = {}
    cols = [c for c in SHAPE_COLUMNS if c in files.columns]
    for repo, path, device, *shape in files.select(
        "repo", "path", "device_name", *cols
    ).iter_rows():
        key = keys.get((repo, path))
        if key is not None:
            families.setdefault((repo, key), []).append(
                (dates.get((repo, path)) or "~", path, device, _hashable(shape))
            )
    rows = []
    for (repo, key), members in families.items():
        members.sort()
        for i, (_, path, device, dims) in enumerate(members):
            earlier = [m for m in members[:i] if m[2] != device]
            same = [m for m in earlier if m[3] == dims]
            source = (same or earlier)[0][1] if earlier else None
            rows.append((repo, path, key, source))
    return pl.DataFrame(rows, schema=COPIES_SCHEMA, orient="row")


def _hashable(values: list) -> tuple:
    return tuple(tuple(v) if isinstance(v, list) else v for v in values)
