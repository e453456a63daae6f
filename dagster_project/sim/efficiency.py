"""Per-GPU achieved-efficiency tables (the calibration surface of the simulator).

One CSV per GPU under ``data/efficiency/<gpu>.csv`` with columns
``family,impl,variant,mem_eff,compute_eff``:

* ``mem_eff``: fraction of *spec* DRAM bandwidth the rung reaches once enough bytes are
  in flight (latency hiding, grid fill and vector width are modelled separately in
  ``timing`` from the ``KernelPlan``);
* ``compute_eff``: fraction of the compute path's dense peak the rung reaches with a
  saturating tile (tile shape, wave quantisation and issue occupancy are separate factors).

Starting values follow the bands of ``reference/roofline.md`` §3 (for example Hopper
mma.sync rungs are capped near 60% while wgmma rungs reach 75-80%). To calibrate against
real measurements, edit one GPU's CSV (or call ``load_table`` on a new file) and bump
``GENERATOR_VERSION``; nothing else needs to change.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType

EffKey = tuple[str, str, str]


def _parse(lines: list[str]) -> Mapping[EffKey, tuple[float, float]]:
    table: dict[EffKey, tuple[float, float]] = {}
    for row in csv.DictReader(lines):
        key = (row["family"], row["impl"], row["variant"])
        mem, comp = float(row["mem_eff"]), float(row["compute_eff"])
        if not (0.0 < mem <= 1.0 and 0.0 < comp <= 1.0):
            raise ValueError(f"efficiency out of (0, 1] for {key}: {mem}, {comp}")
        table[key] = (mem, comp)
    return MappingProxyType(table)


def load_table(path: str | Path) -> Mapping[EffKey, tuple[float, float]]:
    """Read an efficiency CSV from any path (for calibration experiments)."""
    return _parse(Path(path).read_text().splitlines())


@cache
def table_for(gpu_id: str) -> Mapping[EffKey, tuple[float, float]]:
    """The packaged table of one GPU, cached per process."""
    text = (
        resources.files(__package__)
        .joinpath("data")
        .joinpath("efficiency")
        .joinpath(f"{gpu_id}.csv")
        .read_text()
    )
    return _parse(text.splitlines())


def efficiency(gpu_id: str, family: str, impl: str, variant: str) -> tuple[float, float]:
    """``(mem_eff, compute_eff)`` of a rung on a GPU; KeyError if the table lacks it."""
    try:
        return table_for(gpu_id)[(family, impl, variant)]
    except KeyError:
        raise KeyError(f"no efficiency row for {family}/{impl}/{variant} on {gpu_id}") from None
