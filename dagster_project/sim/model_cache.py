"""The shipped code model, fitted once per package content and kept on disk.

Every process that labels kernelinfer sessions needs the code model fitted on every shipped
answer (``label_columns.shipped_code_model``): each shard of a build, each CLI run, each
test build. Fitting it is the slow part of a shard (measured at stop 44: about 30 s of
features for some 3,700 measured kernels and 16 s of boosted trees, against 7 s to generate
40 sessions), and a build's shards run side by side, each fitting the same model.

The fit is a pure function of the simulator's own files (its source, templates and shipped
answers, all under ``dagster_project/sim``, plus ``gpus.py``, the GPU names it imports) and
of numpy's arithmetic, so it is cached under a key that hashes exactly those, in
``settings.cache_dir()``: a change to any of them (a new answer, a new feature) is a new
key, never a stale model. The file is plain JSON
(``codemodel.model_to_data``), never a pickle, so a cache file is only ever read as data;
it is written to a temporary name and renamed, and an exclusive lock per key makes
concurrent shards fit once while the others wait and read. An unreadable or malformed file
is refitted and replaced; a cache folder that cannot be written costs only the time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..settings import cache_dir
from ..storage.locks import exclusive_lock
from .codemodel import CODEMODEL_VERSION, CodeModel, model_from_data, model_to_data

log = logging.getLogger(__name__)

#: Bumped when the stored format changes (its files then simply stop matching).
CACHE_FORMAT = "1"
#: Fitted models kept per cache folder (one per package content; older ones are removed).
KEEP = 6
SIM_ROOT = Path(__file__).resolve().parent
#: The one module outside ``sim/`` the simulator imports that holds data (GPU names).
EXTRA_FILES = (SIM_ROOT.parent / "gpus.py",)


def content_key(root: Path = SIM_ROOT, extra: tuple[Path, ...] | None = None) -> str:
    """sha256 of every file under ``root`` (path and bytes; compiled ``__pycache__`` left
    out) and of ``extra`` (default ``EXTRA_FILES`` for the package's own root), the stored
    format, the code model's version, numpy's version and Python's."""
    h = hashlib.sha256()
    for part in (CACHE_FORMAT, CODEMODEL_VERSION, np.__version__, platform.python_version()):
        h.update(part.encode() + b"\0")
    files = sorted(
        p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.relative_to(root).parts
    )
    named = [(p.relative_to(root).as_posix(), p) for p in files]
    if extra is None:
        extra = EXTRA_FILES if root == SIM_ROOT else ()
    named += [(f"../{p.name}", p) for p in extra]
    for name, p in named:
        data = p.read_bytes()
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def _default_fit() -> CodeModel:
    from .measured import all_points, fit_code_model

    return fit_code_model(all_points())


def cached_code_model(
    fit: Callable[[], CodeModel] = _default_fit, *, folder: Path | None = None, key: str = ""
) -> CodeModel:
    """The code model ``fit`` gives, read from the cache when this package content was
    fitted before (``folder``: default ``settings.cache_dir() / "codemodel"``; ``key``:
    default ``content_key()``)."""
    key = key or content_key()
    if folder is None:
        try:
            folder = cache_dir() / "codemodel"
        except RuntimeError as exc:  # Path.home() with no home directory to be found
            log.warning("no code model cache folder (%s); fitting without one", exc)
            return fit()
    path = folder / f"{key}.json"
    model = _read(path, key)
    if model is not None:
        return model
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(folder / f"{key}.lock"):
            model = _read(path, key)  # another process fitted it while this one waited
            if model is None:
                model = fit()
                _write(path, key, model)
                _prune(folder, keep=path)
        return model
    except OSError as exc:
        log.warning("code model cache %s not usable (%s); fitting without it", folder, exc)
        return fit()


def _read(path: Path, key: str) -> CodeModel | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("code model cache %s unreadable (%s); fitting again", path, exc)
        return None
    try:
        if data["key"] != key:
            raise ValueError("its key does not match its name")
        return model_from_data(data["model"])
    except (KeyError, TypeError, ValueError) as exc:
        log.warning("code model cache %s malformed (%s); fitting again", path, exc)
        return None


def _write(path: Path, key: str, model: CodeModel) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps({"key": key, "model": model_to_data(model)}))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _prune(folder: Path, keep: Path) -> None:
    """Keep the ``KEEP`` newest fits (``keep`` among them) and their locks."""
    fits = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in [p for p in fits if p != keep][KEEP - 1 :]:
        old.unlink(missing_ok=True)
        old.with_suffix(".lock").unlink(missing_ok=True)
