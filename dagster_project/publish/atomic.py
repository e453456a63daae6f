"""Build an export folder beside its final place and swap it in only when complete.

A half-written export is worse than an old one: ``datasets`` would happily load a card
that promises files which are not there, and ``hub_push`` would upload them. So every
exporter writes into ``.<name>.tmp-<random>`` next to ``out_dir`` (same filesystem, so the
renames are cheap and atomic) and, on success, swaps it in:

1. the current ``out_dir`` (if any) is renamed to ``.<name>.old-<random>``;
2. the new folder is renamed to ``out_dir``;
3. the old one is deleted.

On any exception the temporary folder is removed and ``out_dir`` is untouched. POSIX has no
portable "exchange two directories" call, so between steps 1 and 2 ``out_dir`` briefly does
not exist; if the process dies exactly there, the next export finds the ``.old`` folder and
puts it back before doing anything else, so a previous export is never lost.

Exports of the same folder are serialised with an advisory lock (``.<name>.lock``), so
that clean-up of leftovers never removes the temporary folder of an export still running.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from dagster_project.storage.lake import fault_point
from dagster_project.storage.locks import exclusive_lock

__all__ = ["atomic_export_dir"]


def _siblings(out_dir: Path, kind: str) -> list[Path]:
    return sorted(out_dir.parent.glob(f".{out_dir.name}.{kind}-*"))


def _recover(out_dir: Path) -> None:
    """Undo what an interrupted swap or build left behind."""
    olds = _siblings(out_dir, "old")
    if olds and not out_dir.exists():
        # The process died between the two renames: restore the newest previous export.
        newest = max(olds, key=lambda p: p.stat().st_mtime)
        os.replace(newest, out_dir)
        olds.remove(newest)
    for leftover in [*olds, *_siblings(out_dir, "tmp")]:
        shutil.rmtree(leftover, ignore_errors=True)


@contextlib.contextmanager
def atomic_export_dir(out_dir: Path) -> Iterator[Path]:
    """Yield an empty folder to write the export into; it becomes ``out_dir`` on success."""
    out_dir = Path(out_dir).absolute()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(out_dir.with_name(f".{out_dir.name}.lock")):
        yield from _swap_in(out_dir)


def _swap_in(out_dir: Path) -> Iterator[Path]:
    _recover(out_dir)
    tag = uuid.uuid4().hex[:12]
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{tag}")
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fault_point("export")  # tests/faults kills a build here: written, not swapped in
    old = out_dir.with_name(f".{out_dir.name}.old-{tag}")
    if out_dir.exists():
        os.replace(out_dir, old)
    os.replace(tmp, out_dir)
    shutil.rmtree(old, ignore_errors=True)
