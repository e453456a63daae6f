"""`kernelhouse status` as a user reads it: rows summed over partitions, the latest
result of every check, unreachable sources and missing PR bodies in words, and
`kernelhouse --version`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXE = str(Path(sys.executable).with_name("kernelhouse"))


def _kh(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [EXE, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "250", **(env or {})},
    )


def _row(stdout: str, asset: str) -> list[str]:
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 2 and cells[1] == asset:
            return cells[1:-1]
    raise AssertionError(f"no status row for {asset}:\n{stdout}")


def test_status_sums_partitions_and_names_offline_sources(kh_home: Path) -> None:
    env = {"KERNELHOUSE_SIM_EPISODES": "130"}  # two shards: 100 + 30 episodes
    res = _kh("build", "--select", "kernelswarm_episodes", "-p", "000", "-p", "001", env=env)
    assert "kernelswarm_episodes" in res.stdout, res.stdout + res.stderr
    st = _kh("status", env={**env, "KERNELHOUSE_VLLM_SOURCE": "https://127.0.0.1:9/vllm.git"})
    assert st.returncode == 0, st.stderr
    asset, group, when, rows, parts, checks = _row(st.stdout, "kernelswarm_episodes")
    assert rows == "130" and parts.startswith("2/"), (rows, parts)  # not the last shard's 30
    assert re.search(
        r"episode_invariants: (passed|failed) in \d+ of 2 latest shard runs", checks
    ), checks
    assert _row(st.stdout, "tuned_configs")[2] == "never"
    text = " ".join(st.stderr.split())
    assert "KERNELHOUSE_VLLM_SOURCE='https://127.0.0.1:9/vllm.git' cannot be reached now" in text
    assert "a build skips vllm's clone" in text
    # The conftest points GitHub at a port nothing listens on.
    assert (
        "The GitHub API (http://127.0.0.1:9) is unreachable: PR bodies come from the cache only"
        in text
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
