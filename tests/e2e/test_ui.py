"""`kernelhouse ui` starts dagster dev on 127.0.0.1, loads every asset, and stops cleanly
by its PID (it runs in its own process group, like a job started under `set -m`)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.ui]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


def test_ui_serves_all_assets_and_stops_by_pid(kh_home: Path, tmp_path: Path) -> None:
    from dagster_project.definitions import build_definitions

    expected = {
        k.to_user_string() for k in build_definitions().resolve_asset_graph().get_all_asset_keys()
    }
    port = _free_port()
    exe = Path(sys.executable).with_name("kernelhouse")
    log = (tmp_path / "ui.log").open("wb")
    # Started the way a script's `kernelhouse ui &` is: with SIGINT ignored. Dagster maps
    # SIGTERM onto SIGINT's handler, so without the CLI restoring SIGINT the UI would
    # ignore the SIGTERM this test stops it with.
    proc = subprocess.Popen(
        [str(exe), "ui", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=tmp_path,
        env={**os.environ},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509
    )
    try:
        deadline = time.monotonic() + 120
        loaded = None
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "ui.log").read_text()[-2000:]
            try:
                data = _graphql(
                    port,
                    "{ workspaceOrError { ... on Workspace { locationEntries { name "
                    "loadStatus } } } assetNodes { assetKey { path } } }",
                )
            except OSError:
                time.sleep(0.5)
                continue
            entries = data["data"]["workspaceOrError"]["locationEntries"]
            if (
                entries
                and all(e["loadStatus"] == "LOADED" for e in entries)
                and data["data"]["assetNodes"]
            ):
                loaded = data
                break
            time.sleep(0.5)
        assert loaded, "code location did not load: " + (tmp_path / "ui.log").read_text()[-2000:]
        served = {"/".join(n["assetKey"]["path"]) for n in loaded["data"]["assetNodes"]}
        assert served == expected
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("dagster dev did not stop on SIGTERM")
        log.close()
    # Nothing of the process group is left behind (children get a few seconds to exit).
    alive = "?"
    for _ in range(60):
        alive = subprocess.run(
            ["pgrep", "-g", str(proc.pid)], capture_output=True, text=True
        ).stdout
        if not alive.strip():
            break
        time.sleep(0.25)
    assert alive.strip() == "", f"leftover processes: {alive.split()}"
