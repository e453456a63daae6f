"""Issue 42 probes of terminal safety: escape sequences (ESC/CSI, OSC 52 clipboard
writes, C1 controls, bidi overrides) in lake values, commit subjects and tuned-config file
names are shown as visible escapes by everything the CLI prints, and a config file name
holding one is refused before it can become a GPU label."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from dagster_project.mining.configs.names import ConfigNameError, parse_config_name
from dagster_project.storage.lake import Lake
from dagster_project.terminal import escape, has_control, safe

EXE = str(Path(sys.executable).with_name("kernelhouse"))
OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"  # write "rm -rf ~" to the clipboard
CSI_CLEAR = "\x1b[2J\x1b[H"
C1_CSI = "\x9b31m"
BIDI = "\u202e"
HOSTILE = [OSC52, CSI_CLEAR, C1_CSI, BIDI, "\r", "\x00"]
RAW_MARKERS = ["\x1b", "\x9b", "\x07", "\u202e", "\r", "\x00"]


def _kh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "250", "TERM": "xterm-256color"},
    )


@pytest.mark.parametrize("seq", HOSTILE, ids=["osc52", "csi", "c1", "bidi", "cr", "nul"])
def test_safe_shows_every_control_sequence(seq: str) -> None:
    shown = safe(f"H100{seq}x")
    assert not any(m in shown for m in RAW_MARKERS), repr(shown)
    assert shown.startswith("H100\\") and shown.endswith("x")
    assert has_control(seq)
    assert escape("[red]a\x1b") == "\\[red]a\\x1b"
    assert safe("ordinary text, tabs\tand\nnewlines, ünïcode, 1,234") == (
        "ordinary text, tabs\tand\nnewlines, ünïcode, 1,234"
    )


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_sql_output_never_carries_raw_escape_sequences(kh_home: Path, fmt: str) -> None:
    lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))
    subjects = [f"fix{s}decode" for s in HOSTILE]
    lake.replace_table(
        "raw", "subjects", pl.DataFrame({"subject": subjects, f"col{OSC52}": range(6)})
    )
    res = _kh("sql", "SELECT * FROM raw.subjects", "--format", fmt)
    assert res.returncode == 0, res.stderr
    printed = res.stdout + res.stderr
    assert not any(m in printed for m in RAW_MARKERS), repr(printed[:400])
    assert "fix" in printed and "decode" in printed


def test_refused_query_echo_is_safe(kh_home: Path) -> None:
    Lake(kh_home / "lake.duckdb", str(kh_home / "lake")).replace_table(
        "raw", "t", pl.DataFrame({"x": [1]})
    )
    res = _kh("sql", f"SELECT * FROM no_such_table_{CSI_CLEAR}")
    assert res.returncode == 1
    assert "\x1b" not in res.stdout + res.stderr


@pytest.mark.parametrize("seq", HOSTILE, ids=["osc52", "csi", "c1", "bidi", "cr", "nul"])
def test_config_name_with_an_escape_sequence_is_refused(seq: str) -> None:
    name = f"E=8,N=14336,device_name=NVIDIA_H100{seq}_80GB_HBM3,dtype=fp8_w8a8.json"
    with pytest.raises(ConfigNameError, match="control character"):
        parse_config_name(name)
    ok = parse_config_name("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json")
    assert ok.family == "moe"


def test_gpu_tables_show_lake_values_safely() -> None:
    from dagster_project.cli.gpu import _fmt

    shown = _fmt(f"fused_moe{OSC52}[red]")
    assert "\x1b" not in shown and "\x07" not in shown and "\\[red]" in shown
