"""The device script's point selection (``run --ids``), which picks what a run re-measures."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "device" / "gpu_calibrate.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_calibrate", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_ids_take_single_ids_and_inclusive_ranges() -> None:
    parse_ids = _script().parse_ids
    assert parse_ids("183-186,216, 222") == {183, 184, 185, 186, 216, 222}
    assert parse_ids("7") == {7}
    assert parse_ids("") == set()
    assert parse_ids("5-5,,") == {5}


def test_a_malformed_id_names_the_bad_part() -> None:
    parse_ids = _script().parse_ids
    with pytest.raises(SystemExit, match="'12-x'"):
        parse_ids("3,12-x")
