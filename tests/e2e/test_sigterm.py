"""SIGTERM mid-build: every interrupted asset is reported as interrupted, in words.

A user stops a long ``kernelhouse build`` with ``kill PID`` (or a scheduler does). The
runs in flight fail with Dagster's interruption error; the summary must say so per asset
and the command must exit non-zero, not end on a traceback of its own.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXE = str(Path(sys.executable).with_name("kernelhouse"))


def test_sigterm_reports_interrupted_assets(kh_home: Path) -> None:
    # Big enough that the simulated stage is still running when the signal arrives.
    env = {**os.environ, "COLUMNS": "400", "KERNELHOUSE_SIM_SESSIONS": "300"}
    proc = subprocess.Popen(
        [EXE, "build", "--select", "group:simulated"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: list[str] = []
    started = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if re.match(r"\s*1/\d+ ", line):
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert started.wait(timeout=240), "".join(lines)
        time.sleep(3)  # the first stage's runs are executing now
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=30)
    text = "".join(lines)
    assert "Traceback" not in text and "IndexError" not in text, text
    assert "interrupted (the build was stopped by a signal)" in text, text
    assert code != 0, text
