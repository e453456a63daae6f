"""Content fingerprints that assets report as Dagster data versions.

Why: a refresh must do no work when nothing changed upstream. Dagster marks an asset
stale when the data version of an input differs from the one recorded at the asset's
last materialisation. That only means "the data changed" if data versions describe
content: without them every re-run of an input (a daily fetch that found the same head)
would look like new data and cascade through the whole graph. So every table-writing
asset reports a fingerprint of what it wrote; a re-run that wrote identical rows keeps
its data version and its children stay fresh.

No dagster import here: assets wrap the string in ``dagster.DataVersion``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dagster_project.storage.lake import Lake, qualified


def table_version(
    lake: Lake,
    *tables: str,
    where: str = "",
    params: Sequence[Any] = (),
    columns: Sequence[str] = (),
) -> str:
    """Order-independent fingerprint of the rows of ``schema.table`` names (tables or
    views). ``where`` (with bound ``params``) restricts every table alike, e.g. to one
    repo's partition; ``columns`` limits the fingerprint to content columns (leaving out
    bookkeeping such as fetch times). A missing table fingerprints as missing."""
    parts = []
    with lake.connect() as con:
        for name in tables:
            schema, table = name.split(".", 1)
            exists = con.execute(
                "SELECT count(*) FROM information_schema.tables "
                "WHERE table_schema = ? AND table_name = ?",
                [schema, table],
            ).fetchone()
            if not exists or not exists[0]:
                parts.append(f"{name}:missing")
                continue
            clause = f" WHERE {where}" if where else ""
            # hash() of a whole row (a struct) is DuckDB's own; summing as HUGEINT keeps
            # duplicates (an XOR would cancel them) and makes the result order-independent.
            what = "hash(" + ", ".join(f't."{c}"' for c in columns) + ")" if columns else "hash(t)"
            row = con.execute(
                f"SELECT count(*), coalesce(sum({what}::HUGEINT), 0) "
                f"FROM {qualified(schema, table)} AS t{clause}",
                list(params),
            ).fetchone()
            parts.append(f"{name}:{row[0]}:{row[1]}" if row else f"{name}:none")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


def params_version(**params: object) -> str:
    """Fingerprint of the parameters a pure generator ran with (version, seed, sizes).
    Simulated shards are pure functions of these, so this is an exact data version
    that costs nothing to compute."""
    text = ";".join(f"{k}={params[k]}" for k in sorted(params))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def files_version(root: Path, folders: Sequence[str]) -> str:
    """Fingerprint of every file under ``root/folder`` for each folder: relative paths and
    contents. Shipped device batches are inputs no table records, so an asset that ingests
    them carries this in its code version; a new or changed batch changes it."""
    h = hashlib.sha256()
    for folder in folders:
        base = root / folder
        files = sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else []
        h.update(f"{folder}:{len(files)};".encode())
        for path in files:
            h.update(path.relative_to(root).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]
