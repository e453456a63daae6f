"""`kernelhouse --version` and `--help`. `kernelhouse status` as a user reads it (rows
summed over partitions, the latest result of every check, unreachable sources and missing
PR bodies in words) is checked on the offline build of
``test_cli.py::test_offline_build_builds_what_it_can_and_says_how_to_finish``, which builds
the same two kernelswarm shards among everything else."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

EXE = str(Path(sys.executable).with_name("kernelhouse"))


def _kh(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [EXE, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "250", **(env or {})},
    )


def test_version() -> None:
    res = _kh("--version")
    assert res.returncode == 0
    assert re.fullmatch(r"kernelhouse \d+\.\d+\.\d+\S* \(simulator \d+\.\d+\.\d+\)\n", res.stdout)


def test_help_texts_are_whole_sentences() -> None:
    res = _kh("--help")
    listing = [ln for ln in res.stdout.splitlines() if ln.startswith("│ ") and "  " in ln[2:]]
    commands = {}
    for ln in listing:
        name, _, text = ln.strip("│ ").partition(" ")
        if name and not name.startswith("-"):
            commands[name] = text.strip()
    assert {"build", "refresh", "status", "sql", "check", "report", "ui"} <= set(commands)
    for name in ("build", "refresh", "status"):
        assert commands[name].endswith("."), f"{name}: {commands[name]!r}"
