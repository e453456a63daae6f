"""Offline, a build says which repo sources it cannot reach within seconds, once each.

Every source is probed (``git ls-remote`` / a path check) before any run starts; the
build then goes on with everything that does not need those repositories (the full
outcome is checked by ``test_cli.py::test_offline_repo_assets_fail_with_guidance``).
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


def test_first_repo_error_within_ten_seconds_once_per_source(kh_home: Path) -> None:
    # Nothing listens on port 9: git fails at once, as it does without network.
    env = {
        **os.environ,
        "COLUMNS": "400",
        **{f"KERNELHOUSE_{r}_SOURCE": f"https://127.0.0.1:9/{r.lower()}.git" for r in REPOS},
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
    assert first_error_s is not None, text
    assert first_error_s < 10.0, f"first repo error after {first_error_s:.1f} s"
    offline = [ln for ln in lines if "offline:" in ln]
    for r in REPOS:
        assert sum(f"KERNELHOUSE_{r}_SOURCE=" in ln for ln in offline) == 1, text
    assert "local clone" in text and "everything else builds" in text
