"""The Dagster UI as a user sees it: `kernelhouse ui` serves the asset graph with every
group in a real (headless) browser, a materialisation launched through the UI's GraphQL
API runs on dagster dev's daemon and run launcher and succeeds, and the whole process
group stops on SIGTERM to the one PID.

Browser: Debian's Chromium (`apt-get install -y chromium`, /usr/bin/chromium) driven by
the `playwright` Python package through `executable_path`; Playwright's own browser
download (`playwright install`) is never needed. Without either, the test skips and says
which one is missing. Screenshots land in the test's tmp dir (graph.png, run.png).

Timing: about 25-35 s on two cores, most of it dagster dev loading the code location;
the launch is sent as soon as the location is loaded, so the run executes while the
browser renders the graph.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.ui]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
GROUPS = (
    "sources",
    "tuned_configs",
    "kernel_commits",
    "pull_requests",
    "gains",
    "simulated",
    "publish",
    "analysis",
)
ASSET = "moe_model_shapes"  # reads the checked-in snapshot offline: no network, ~1 s of work
LOAD_TIMEOUT_S = 45
RUN_TIMEOUT_S = 45

LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId status } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on PipelineNotFoundError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""
RUN_STATUS = "query Run($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status } } }"
LATEST_MATERIALIZATION = """
query Asset($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) {
    ... on Asset { assetMaterializations(limit: 1) { runId } }
  }
}
"""


def _browser_or_skip() -> Any:
    """The playwright sync API, or a skip naming what to install."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is missing: install Debian's Chromium (apt-get install -y chromium)"
        )
    try:
        from playwright import sync_api
    except ImportError:
        pytest.skip(
            "the playwright package is missing: pip install playwright "
            "(no `playwright install` needed)"
        )
    return sync_api


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        body = json.loads(resp.read())
    assert "errors" not in body, body["errors"]
    return body["data"]


def _wait_loaded(port: int, proc: subprocess.Popen[bytes], log: Path) -> str:
    """Poll until every code location is LOADED; return the (only) location's name,
    which `dagster dev -m dagster_project.definitions` derives from the module.

    LOADED only means loading finished: a location whose Definitions raised is LOADED
    too, with a PythonError in place of the location, so that is checked here and
    reported with Dagster's own message rather than as a failed launch later."""
    query = (
        "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
        "locationOrLoadError { __typename ... on PythonError { message } } } } } }"
    )
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, "kernelhouse ui exited:\n" + log.read_text()[-3000:]
        try:
            data = _graphql(port, query)
        except OSError:  # not listening yet
            time.sleep(0.3)
            continue
        entries = data["workspaceOrError"]["locationEntries"]
        if entries and all(e["loadStatus"] == "LOADED" for e in entries):
            assert len(entries) == 1, entries
            loaded = entries[0]["locationOrLoadError"] or {}
            if loaded.get("__typename") == "PythonError":
                pytest.fail(
                    f"code location {entries[0]['name']} failed to load: {loaded['message'][:3000]}"
                )
            return str(entries[0]["name"])
        time.sleep(0.3)
    pytest.fail(f"code location not LOADED within {LOAD_TIMEOUT_S}s:\n" + log.read_text()[-3000:])


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the leader (dagster dev, which `kernelhouse ui` exec'd into) and wait until
    no process of its group is left: webserver, daemon, code server and run workers."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("dagster dev did not stop on SIGTERM within 30 s")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail("processes of the dagster dev group were still alive 15 s after it exited")


def test_ui_renders_all_groups_and_runs_a_materialisation(tmp_path: Path) -> None:
    sync_api = _browser_or_skip()
    port = _free_port()
    home = tmp_path / "home"
    log_path = tmp_path / "ui.log"
    env = {
        **os.environ,
        "KERNELHOUSE_HOME": str(home),
        "DAGSTER_DISABLE_TELEMETRY": "1",
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("DAGSTER_HOME", None)  # `kernelhouse ui` sets it to KERNELHOUSE_HOME/dagster
    exe = Path(sys.executable).with_name("kernelhouse")
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(exe), "ui", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=tmp_path,
            env=env,
        )
    try:
        location = _wait_loaded(port, proc, log_path)

        # Launch first: the daemon dequeues and runs it while the browser renders.
        launched = _graphql(
            port,
            LAUNCH,
            {
                "params": {
                    "selector": {
                        "repositoryLocationName": location,
                        "repositoryName": "__repository__",
                        "jobName": "__ASSET_JOB",
                        "assetSelection": [{"path": [ASSET]}],
                    },
                    "runConfigData": {},
                }
            },
        )["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]

        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                page.goto(f"http://127.0.0.1:{port}/asset-groups", wait_until="domcontentloaded")
                # The graph draws nodes as HTML inside SVG <foreignObject>s: a group name
                # there is the graph's group node, not the sidebar's tree entry.
                graph = page.locator("svg foreignObject")
                for group in GROUPS:
                    graph.get_by_text(group, exact=True).first.wait_for(
                        state="visible", timeout=20_000
                    )
                # A fresh instance greets with a "Join the Dagster community" dialog.
                with contextlib.suppress(sync_api.TimeoutError):
                    page.get_by_role("button", name="Skip").click(timeout=3_000)
                page.screenshot(path=str(tmp_path / "graph.png"))

                deadline = time.monotonic() + RUN_TIMEOUT_S
                status = "QUEUED"
                while time.monotonic() < deadline:
                    status = _graphql(port, RUN_STATUS, {"id": run_id})["runOrError"]["status"]
                    if status in ("SUCCESS", "FAILURE", "CANCELED"):
                        break
                    time.sleep(0.5)
                assert status == "SUCCESS", (
                    f"run {run_id} ended {status}:\n" + log_path.read_text()[-3000:]
                )

                page.goto(f"http://127.0.0.1:{port}/runs/{run_id}", wait_until="domcontentloaded")
                page.get_by_text("Success", exact=False).first.wait_for(
                    state="visible", timeout=20_000
                )
                page.screenshot(path=str(tmp_path / "run.png"))
            finally:
                browser.close()

        materialized = _graphql(port, LATEST_MATERIALIZATION, {"key": {"path": [ASSET]}})
        assert materialized["assetOrError"]["assetMaterializations"] == [{"runId": run_id}]
    finally:
        _stop_group(proc)

    for shot in ("graph.png", "run.png"):
        assert (tmp_path / shot).stat().st_size > 10_000, shot
