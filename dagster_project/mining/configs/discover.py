"""Find every tuned-config JSON at a ref, parse its name and check its content.

One ``ls-tree`` lists the files of every config directory the repo ever had (only the
ones present at the ref answer), and one ``cat-file --batch`` reads them all. Nothing is
dropped silently: a name outside the grammar is kept with ``parse_status = 'bad_name'``
a malformed file with ``'bad_json'`` and one over the size cap with ``'too_large'``
(``entries.parse_config_blob``), each with the reason in ``parse_error``; only ``ok``
files become entries and rows, so one bad upstream file never stops the rest.
"""

from __future__ import annotations

import re
from typing import cast

import polars as pl

from dagster_project.mining.configs.entries import BlobCache, load_parsed_blobs
from dagster_project.mining.configs.lookup import is_loaded, read_lookup_rules
from dagster_project.mining.configs.names import (
    ConfigNameError,
    ParsedName,
    normalise_gpu,
    parse_config_name,
)
from dagster_project.mining.configs.specs import CONFIG_DIR_SPECS, ConfigDir, kernel_for
from dagster_project.mining.git import GitRepo

#: Version of config directory layout (which files are configs). Bump it whenever mined
#: output changes: it is part of the miner version (``mining/versions.py``); a bump
#: re-mines.
RULES_VERSION = "1"

FILES_SCHEMA: dict[str, pl.DataType] = {
    "repo": pl.String(),
    "path": pl.String(),
    "basename": pl.String(),
    "config_dir": pl.String(),
    "family": pl.String(),
    "kernel": pl.String(),
    "triton_dir_version": pl.String(),
    "blob_oid": pl.String(),
    "E": pl.Int64(),
    "N": pl.Int64(),
    "K": pl.Int64(),
    "device_name": pl.String(),
    "gpu": pl.String(),
    "gpu_vendor": pl.String(),
    "gpu_model": pl.String(),
    "dtype": pl.String(),
    "block_shape": pl.List(pl.Int64()),
    "per_channel_quant": pl.Boolean(),
    "is_down": pl.Boolean(),
    "headdim": pl.Int64(),
    "dstate": pl.Int64(),
    "cache_dtype": pl.String(),
    "triton_version": pl.String(),
    "n_entries": pl.Int64(),
    "parse_status": pl.String(),
    "parse_error": pl.String(),
    # Would the engine's own lookup at the snapshot open this file? (``lookup.py``)
    "loaded_at_runtime": pl.Boolean(),
    "not_loaded_reason": pl.String(),
}

_VERSION_DIR = re.compile(r"^triton_(\d+(?:_\d+)*)$")


def config_dirs_for(repo_name: str) -> list[ConfigDir]:
    return [d for d in CONFIG_DIR_SPECS if d.repo == repo_name]


def list_config_paths(
    repo: GitRepo, repo_name: str, ref: str = "HEAD"
) -> list[tuple[str, str, ConfigDir, str | None]]:
    """(path, blob oid, directory spec, Triton version folder) of every config JSON at ref.

    Applies the layout rule of ``ConfigDir.versioned``: in a directory that has
    ``triton_X_Y_Z/`` folders at this ref, only files inside them are tuned configs.
    """
    specs = config_dirs_for(repo_name)
    if not specs:
        return []
    listing = repo.ls_tree(ref, [d.path + "/" for d in specs])
    by_dir: dict[str, list[tuple[str, str, str]]] = {}
    for _mode, typ, oid, path in listing:
        if typ != "blob" or not path.endswith(".json"):
            continue
        spec = max((d for d in specs if path.startswith(d.path + "/")), key=lambda d: len(d.path))
        by_dir.setdefault(spec.path, []).append((path, oid, path[len(spec.path) + 1 :]))
    out: list[tuple[str, str, ConfigDir, str | None]] = []
    for spec in specs:
        rows = by_dir.get(spec.path, [])
        has_versions = spec.versioned and any(
            "/" in rel and _VERSION_DIR.match(rel.split("/", 1)[0]) for _, _, rel in rows
        )
        for path, oid, rel in rows:
            parts = rel.split("/")
            if has_versions:
                m = _VERSION_DIR.match(parts[0])
                if len(parts) != 2 or not m:
                    continue  # not read by the runtime (Helion configs, custom formats)
                out.append((path, oid, spec, m.group(1).replace("_", ".")))
            elif len(parts) == 1:
                out.append((path, oid, spec, None))
    return out


def _row(
    repo_name: str, path: str, oid: str, spec: ConfigDir, version: str | None
) -> tuple[dict[str, object], ParsedName | None]:
    basename = path.rsplit("/", 1)[-1]
    row: dict[str, object] = dict.fromkeys(FILES_SCHEMA)
    row.update(
        repo=repo_name,
        path=path,
        basename=basename,
        config_dir=spec.path,
        triton_dir_version=version,
        blob_oid=oid,
        family=None if spec.family == "block" else spec.family,
        parse_status="ok",
    )
    try:
        name = parse_config_name(basename)
    except ConfigNameError as exc:
        row.update(parse_status="bad_name", parse_error=exc.reason)
        return row, None
    gpu = normalise_gpu(name.device_name)
    row.update(
        family=name.family,
        kernel=kernel_for(repo_name, name.family, name.dtype),
        E=name.E,
        N=name.N,
        K=name.K,
        device_name=name.device_name,
        gpu=gpu.label,
        gpu_vendor=gpu.vendor,
        gpu_model=gpu.model,
        dtype=name.dtype,
        block_shape=list(name.block_shape) if name.block_shape else None,
        per_channel_quant=name.per_channel_quant,
        is_down=name.is_down,
        headdim=name.headdim,
        dstate=name.dstate,
        cache_dtype=name.cache_dtype,
    )
    return row, name


def discover_config_files(
    repo: GitRepo,
    repo_name: str,
    ref: str = "HEAD",
    *,
    cache: BlobCache | None = None,
) -> pl.DataFrame:
    """One row per tuned-config JSON at ``ref`` (see ``FILES_SCHEMA``), sorted by path.

    ``ref`` may be any commit-ish, e.g. ``dev/unholy-fusion`` for vLLM's SSU configs
    that exist only on a branch. FlashInfer (no tuned configs) gives an empty frame.
    Content is parsed through the shared blob cache, so ``read_config_entries`` on the
    same files right after costs no further git call.
    """
    found = list_config_paths(repo, repo_name, ref)
    if not found:
        return pl.DataFrame(schema=FILES_SCHEMA)
    rows = [(_row(repo_name, path, oid, spec, ver), oid) for path, oid, spec, ver in found]
    named_oids = [oid for (_, name), oid in rows if name is not None]
    blobs = load_parsed_blobs(repo, named_oids, cache)
    rules = read_lookup_rules(repo, repo_name, ref)
    out = []
    for (row, name), oid in rows:
        if name is not None:
            blob = blobs[oid]
            if blob.error:
                row.update(parse_status=blob.status, parse_error=blob.error)
            else:
                row.update(triton_version=blob.triton_version, n_entries=len(blob.entries))
            # _row set "basename" to the path's last part, a str
            basename = cast(str, row["basename"])
            loaded, why = is_loaded(rules, name.family, basename, name.device_name, name.dtype)
            row.update(loaded_at_runtime=loaded, not_loaded_reason=why)
        out.append(row)
    return pl.DataFrame(out, schema=FILES_SCHEMA).sort("path")
