"""Issue 42 probe: a huge simulated size (``KERNELHOUSE_SIM_EPISODES=10**9``) made
``kernelhouse status`` build ten million partitions and run past 15 minutes; it is now
refused at once, naming the variable and the bound."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagster_project.settings import MAX_SIM_ITEMS, SettingsError, load_settings

EXE = str(Path(sys.executable).with_name("kernelhouse"))


@pytest.mark.parametrize("var", ["KERNELHOUSE_SIM_EPISODES", "KERNELHOUSE_SIM_SESSIONS"])
def test_huge_simulated_size_is_refused_by_settings(
    monkeypatch: pytest.MonkeyPatch, var: str
) -> None:
    monkeypatch.setenv(var, str(10**9))
    with pytest.raises(SettingsError, match=f"{var}=1000000000: at most 100,000"):
        load_settings()
    monkeypatch.setenv(var, str(MAX_SIM_ITEMS))
    assert load_settings()


def test_status_with_a_huge_size_answers_at_once(kh_home: Path) -> None:
    start = time.monotonic()
    res = subprocess.run(
        [EXE, "status"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "250", "KERNELHOUSE_SIM_EPISODES": str(10**9)},
    )
    assert res.returncode == 1
    assert "KERNELHOUSE_SIM_EPISODES=1000000000: at most 100,000" in " ".join(res.stderr.split())
    assert time.monotonic() - start < 60
