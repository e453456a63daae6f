"""Offline, a build says which repo sources it cannot reach within seconds, once each.

Every source is probed (``git ls-remote`` / a path check) before any run starts; the
build then goes on with everything that does not need those repositories (the full
outcome is checked by
``test_cli.py::test_offline_build_builds_what_it_can_and_says_how_to_finish``).

Why two bounds: the probes themselves are timed in-process (tight: refused hosts answer in
milliseconds, so three parallel probes must not approach ``PROBE_TIMEOUT_S``), while the
whole command's first error includes interpreter start and loading the definitions, which a
loaded 2-core CI machine can slow by seconds; that bound is looser so load alone does not fail
it (it did once at 10.2 s against 10 s), but a build that ran anything before probing would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXE = str(Path(sys.executable).with_name("kernelhouse"))
REPOS = ("VLLM", "SGLANG", "FLASHINFER")
UNREACHABLE = {r: f"https://127.0.0.1:9/{r.lower()}.git" for r in REPOS}


def test_probes_of_refused_sources_answer_in_under_two_seconds() -> None:
    from dagster_project.execution.probes import PROBE_TIMEOUT_S, probe_sources

    started = time.monotonic()
    offline = probe_sources(dict(UNREACHABLE))
    took = time.monotonic() - started
    assert set(offline) == set(REPOS), offline
    assert all(offline.values()), offline
    assert took < min(2.0, PROBE_TIMEOUT_S / 2), f"probes took {took:.1f} s"


def test_first_repo_error_comes_before_any_run_once_per_source(kh_home: Path) -> None:
    # Nothing listens on port 9: git fails at once, as it does without network.
    env = {
        **os.environ,
        "COLUMNS": "400",
        **{f"KERNELHOUSE_{r}_SOURCE": url for r, url in UNREACHABLE.items()},
    }
    started = time.monotonic()
    proc = subprocess.Popen(
        [EXE, "build"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    lines: list[str] = []
    first_error_s = None
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if first_error_s is None and "offline:" in line:
                first_error_s = time.monotonic() - started
            # The probes are reported together; the first run after them ends the test.
            if re.match(r"\s*\d+/\d+ ", line) or "kernelswarm_episodes" in line:
                break
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    text = "".join(lines)
    # The loop stops at the first run line, so an error seen at all came before any run.
    assert first_error_s is not None, text
    assert first_error_s < 20.0, f"first repo error after {first_error_s:.1f} s"
    offline = [ln for ln in lines if "offline:" in ln]
    for r in REPOS:
        assert sum(f"KERNELHOUSE_{r}_SOURCE=" in ln for ln in offline) == 1, text
    assert "local clone" in text and "everything else builds" in text
