"""Issue 42 probe: the UI's GraphQL endpoint accepted a foreign ``Host``/``Origin`` (DNS
rebinding could drive mutations). The real Dagster webserver, started the way ``kernelhouse
ui`` starts it (``python -m dagster_project.cli.webguard``), answers a local Host and
Origin and refuses a foreign one with 403."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _request(port: int, method: str, path: str, headers: dict[str, str], body: str = "") -> int:
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        con.putrequest(method, path, skip_host=True)
        for k, v in headers.items():
            con.putheader(k, v)
        data = body.encode()
        con.putheader("Content-Length", str(len(data)))
        con.endheaders(data)
        return con.getresponse().status
    finally:
        con.close()


def test_foreign_host_and_origin_are_refused(kh_home: Path) -> None:
    (kh_home / "dagster").mkdir(parents=True, exist_ok=True)
    (kh_home / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    port = _free_port()
    local = f"127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "dagster_project.cli.webguard"]
        + ["-m", "dagster_project.definitions", "-h", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "DAGSTER_HOME": str(kh_home / "dagster")},
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, server.communicate()[1][-2000:]
            try:
                if _request(port, "GET", "/server_info", {"Host": local}) == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the webserver never answered"
            time.sleep(1)
        query = json.dumps({"query": "{ version }"})
        post = {"Content-Type": "application/json"}
        assert _request(port, "POST", "/graphql", {**post, "Host": local}, query) == 200
        own_origin = {**post, "Host": local, "Origin": f"http://{local}"}
        assert _request(port, "POST", "/graphql", own_origin, query) == 200
        foreign_host = {**post, "Host": f"rebind.example:{port}"}
        assert _request(port, "POST", "/graphql", foreign_host, query) == 403
        assert _request(port, "GET", "/server_info", {"Host": f"rebind.example:{port}"}) == 403
        foreign_origin = {**post, "Host": local, "Origin": "http://rebind.example"}
        assert _request(port, "POST", "/graphql", foreign_origin, query) == 403
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
