"""Config file contents: one row per (file, M), read with one ``cat-file --batch``.

A tuned-config JSON maps batch sizes M (decimal-string keys) to a flat launch config.
The only other top-level key that exists is ``"triton_version"`` (vLLM since 2025), which
the runtimes drop before the lookup, so it is reported per file and never becomes a row.

Parsing is keyed by blob id. A blob id names its content, so a parse can be cached and
re-used forever: ``discover_config_files`` parses every blob once (it needs
``triton_version`` and JSON validity), ``read_config_entries`` then finds them in the
process-wide cache and a refresh only re-parses blobs whose id it has not seen.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from dagster_project.mining.git import GitRepo

ENTRIES_SCHEMA: dict[str, pl.DataType] = {
    "repo": pl.String(),
    "path": pl.String(),
    "blob_oid": pl.String(),
    "M": pl.Int64(),
    "key_index": pl.Int64(),  # position of M in the file: the runtime's tie-break order
    "config_json": pl.String(),
}


#: Version of the parsing rules below (limits, what counts as malformed). It is part of
#: the miner version (``dagster_project.mining.versions``): a change re-mines.
RULES_VERSION = "2"

#: Largest config file parsed. Real tuned configs are at most ~8 KB (vLLM 5.0 KB, SGLang
#: 7.6 KB at the snapshot); a cap 128x that keeps a runaway 20 MB file from adding
#: 100,000 rows while leaving every real file far below it.
MAX_CONFIG_BYTES = 1 << 20
#: Deepest nesting accepted: a tuned config is ``{M: {key: value}}`` (2 levels), at most a
#: list inside a value (3). Anything deeper is not a launch-config map.
MAX_NESTING = 4
INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)


@dataclass(frozen=True)
class ParsedBlob:
    """One config file's content: ``entries`` is ((M, config JSON), …) in file order.

    ``status`` is ``ok`` or why the file is skipped: ``bad_json`` (unreadable or not a
    config map; ``error`` says what and where) or ``too_large`` (over ``MAX_CONFIG_BYTES``).
    """

    entries: tuple[tuple[int, str], ...] = ()
    triton_version: str | None = None
    error: str | None = None  # set when the JSON is malformed or not a config map
    status: str = "ok"


class _Malformed(ValueError):
    """Raised inside the parser for content JSON itself accepts but a config must not have."""


def _reject_constant(name: str) -> float:
    raise _Malformed(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses to inf
        raise _Malformed(f"non-finite number {text[:30]}")
    return value


def _check_values(doc: object) -> str | None:
    """Why ``doc`` is not a plausible config tree (too deep, an int beyond int64), or None.

    Iterative, so a deep document cannot overflow the stack here either.
    """
    stack: list[tuple[object, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > MAX_NESTING:
                return f"nesting deeper than {MAX_NESTING} levels"
            children = node.values() if isinstance(node, dict) else node
            stack.extend((c, depth + 1) for c in children)
        elif (
            isinstance(node, int)
            and not isinstance(node, bool)
            and not INT64_MIN <= node <= INT64_MAX
        ):
            return f"integer {str(node)[:30]}... beyond int64"
    return None


def _m_key(key: str) -> int | None:
    """The batch size a top-level key names, or None: ASCII decimal digits within int64.

    ``str.isdigit`` alone accepts ``"²"`` and other Unicode digits that ``int`` rejects.
    """
    if not (key.isascii() and key.isdigit()) or len(key) > 19:
        return None
    m = int(key)
    return m if m <= INT64_MAX else None


def parse_config_blob(data: bytes) -> ParsedBlob:
    """Parse a config file; malformed files come back with ``error`` set, never raise.

    Malformed means: over ``MAX_CONFIG_BYTES``, not UTF-8, invalid JSON, NaN/Infinity,
    nesting beyond ``MAX_NESTING``, integers beyond int64, top-level keys that are not
    ASCII decimal M values (``triton_version`` aside) or entries that are not objects.
    """
    try:
        return _parse(data)
    except Exception as exc:  # noqa: BLE001 - the contract is "never raises": name it instead
        return ParsedBlob(
            error=f"unparseable: {type(exc).__name__}: {str(exc)[:120]}", status="bad_json"
        )


def too_large(size: int) -> ParsedBlob | None:
    """The ``too_large`` verdict for a blob of ``size`` bytes, ``None`` under the cap: asked
    with ``cat-file --batch-check``'s size before the blob is read (issue 42: a 2 GiB config
    was read whole, 4.4 GB peak, before being rejected), and again on the bytes."""
    if size <= MAX_CONFIG_BYTES:
        return None
    return ParsedBlob(
        error=f"{size:,} bytes, over the {MAX_CONFIG_BYTES:,}-byte cap", status="too_large"
    )


def _parse(data: bytes) -> ParsedBlob:
    big = too_large(len(data))
    if big is not None:
        return big
    try:
        doc = json.loads(
            data.decode("utf-8"), parse_constant=_reject_constant, parse_float=_finite_float
        )
    except UnicodeDecodeError as exc:
        return ParsedBlob(error=f"not UTF-8: {exc.reason} at byte {exc.start}", status="bad_json")
    except json.JSONDecodeError as exc:
        return ParsedBlob(
            error=f"invalid JSON: {exc.msg} (line {exc.lineno} col {exc.colno})", status="bad_json"
        )
    except _Malformed as exc:
        return ParsedBlob(error=str(exc), status="bad_json")
    except RecursionError:
        return ParsedBlob(error=f"nesting deeper than {MAX_NESTING} levels", status="bad_json")
    except ValueError as exc:  # e.g. an integer literal over Python's 4,300-digit limit
        return ParsedBlob(error=f"invalid JSON value: {str(exc)[:120]}", status="bad_json")
    return _blob_of(doc)


def _blob_of(doc: object) -> ParsedBlob:
    """A parsed document as a config map: an object of M -> config objects (plus an optional
    ``triton_version``) with plausible values, else why not."""
    if not isinstance(doc, dict):
        return ParsedBlob(
            error=f"top level is a {type(doc).__name__}, not an object", status="bad_json"
        )
    problem = _check_values(doc)
    if problem:
        return ParsedBlob(error=problem, status="bad_json")
    triton_version = doc.get("triton_version")
    entries: list[tuple[int, str]] = []
    bad_keys: list[str] = []
    for key, value in doc.items():
        if key == "triton_version":
            continue
        m = _m_key(key)
        if m is None or not isinstance(value, dict):
            bad_keys.append(key)
            continue
        entries.append((m, json.dumps(value)))
    if bad_keys:
        shown = ", ".join(ascii(k[:40]) for k in bad_keys[:5])
        return ParsedBlob(
            error=f"top-level keys that are not M -> config objects: {shown}", status="bad_json"
        )
    if not entries:
        return ParsedBlob(error="no M entries", status="bad_json")
    return ParsedBlob(
        entries=tuple(entries),
        triton_version=None if triton_version is None else str(triton_version)[:64],
    )


class BlobCache:
    """A bounded, content-addressed cache of parsed config blobs (oid → ParsedBlob)."""

    def __init__(self, max_items: int = 50_000) -> None:
        self.max_items = max_items
        self._items: OrderedDict[str, ParsedBlob] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, oid: str) -> ParsedBlob | None:
        item = self._items.get(oid)
        if item is not None:
            self._items.move_to_end(oid)
        return item

    def put(self, oid: str, item: ParsedBlob) -> None:
        self._items[oid] = item
        self._items.move_to_end(oid)
        while len(self._items) > self.max_items:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()
        self.hits = self.misses = 0


#: Shared by discovery and entry reading within one process (see the module docstring).
BLOB_CACHE = BlobCache()


def load_parsed_blobs(
    repo: GitRepo, oids: Iterable[str], cache: BlobCache | None = None
) -> dict[str, ParsedBlob]:
    """Parsed content of many blobs; the ones not cached come from ONE ``cat-file --batch``.

    On a blobless clone the missing blobs are fetched first in one batched fetch, because
    lazy fetching would cost one round trip per blob.
    """
    cache = BLOB_CACHE if cache is None else cache
    want = list(dict.fromkeys(oids))
    out: dict[str, ParsedBlob] = {}
    missing: list[str] = []
    for oid in want:
        item = cache.get(oid)
        if item is None:
            missing.append(oid)
        else:
            out[oid] = item
    cache.hits += len(out)
    cache.misses += len(missing)
    if missing:
        repo.prefetch_blobs(missing)
        small = []
        for oid, size in repo.batch_check(missing).items():  # sizes first, nothing read
            big = too_large(size) if size is not None else None
            if big is None:
                small.append(oid)
                continue
            cache.put(oid, big)
            out[oid] = big
        for oid, data in repo.read_blobs(small).items():
            item = parse_config_blob(data)
            cache.put(oid, item)
            out[oid] = item
    return out


def read_config_entries(
    repo: GitRepo,
    files: pl.DataFrame,
    previous: pl.DataFrame | None = None,
    *,
    cache: BlobCache | None = None,
) -> pl.DataFrame:
    """One row per (config file, M) for every file whose ``parse_status`` is ``ok``.

    ``config_json`` keeps every key of the entry, ROCm ones (``waves_per_eu``, ``kpack``,
    ``matrix_instr_nonkdim``) and rare ones (``SPLIT_K``, ``USE_TMA``) included, in file
    order. Rows of ``previous`` (an earlier result) are re-used for every blob id they
    cover, so a refresh reads and parses only the files whose content changed.
    """
    if files.is_empty():
        return pl.DataFrame(schema=ENTRIES_SCHEMA)
    ok = files.filter(pl.col("parse_status") == "ok") if "parse_status" in files else files
    targets = ok.select("repo", "path", "blob_oid").unique(maintain_order=True)

    reused = pl.DataFrame(schema=ENTRIES_SCHEMA)
    todo = targets
    if previous is not None and not previous.is_empty():
        prev = (
            previous.select(list(ENTRIES_SCHEMA))
            .drop("repo", "path")
            .unique(subset=["blob_oid", "M", "key_index"], maintain_order=True)
        )
        known = prev.select("blob_oid").unique()
        hit = targets.join(known, on="blob_oid", how="semi")
        todo = targets.join(known, on="blob_oid", how="anti")
        reused = hit.join(prev, on="blob_oid", how="inner").select(list(ENTRIES_SCHEMA))

    parsed = load_parsed_blobs(repo, todo["blob_oid"].to_list(), cache)
    cols: dict[str, list] = {k: [] for k in ENTRIES_SCHEMA}
    for repo_name, path, oid in todo.iter_rows():
        blob = parsed.get(oid)
        if blob is None or blob.error:
            continue
        for i, (m, cfg) in enumerate(blob.entries):
            cols["repo"].append(repo_name)
            cols["path"].append(path)
            cols["blob_oid"].append(oid)
            cols["M"].append(m)
            cols["key_index"].append(i)
            cols["config_json"].append(cfg)
    fresh = pl.DataFrame(cols, schema=ENTRIES_SCHEMA)
    out = pl.concat([reused, fresh]) if not reused.is_empty() else fresh
    return out.sort(["repo", "path", "key_index"])
