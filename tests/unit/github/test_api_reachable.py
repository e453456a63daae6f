"""``api_reachable``: the offline probe, through ``requests``, against a real local server."""

from __future__ import annotations

import socket

import pytest
from pytest_httpserver import HTTPServer

from dagster_project.github.sync import api_reachable


@pytest.mark.parametrize("status", [200, 401, 403, 503])
def test_any_http_answer_means_reachable(httpserver: HTTPServer, status: int) -> None:
    httpserver.expect_request("/rate_limit").respond_with_json({"message": "x"}, status=status)
    assert api_reachable(httpserver.url_for("/")) is True
    assert len(httpserver.log) == 1  # one request, no retry


def test_nothing_listening_means_offline() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert api_reachable(f"http://127.0.0.1:{port}", timeout_s=2) is False


def test_a_server_that_never_answers_times_out_as_offline() -> None:
    with socket.socket() as s:  # accepts the connection (backlog) but never answers
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        assert api_reachable(f"http://127.0.0.1:{port}", timeout_s=0.5) is False
