"""fetch_pull_requests against a local server speaking the GitHub REST API.

The real PyGithub client talks HTTP to pytest-httpserver; nothing of ours is mocked.
Sleeping and the clock are injected, so rate-limit waits are recorded, not performed.
The waiting and retrying are PyGithub's ``GithubRetry`` (a ``urllib3.Retry``): these tests
pin what that library does for us (which answers are retried, how long it waits, that a
plain 403 is asked once), so an upgrade that changes it fails here.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from dagster_project.github import (
    PR_ROW_FIELDS,
    FetchProgress,
    GitHubFetchError,
    fetch_pull_requests,
    select_pending,
)

NOW = 1_800_000_000.0
TOKEN = "ghp_TestTokenValue0123456789abcdef"
PATH = "/repos/vllm-project/vllm/pulls/{}"


def pr_json(server: HTTPServer, number: int, body: str = "Body text") -> dict[str, Any]:
    return {
        "url": server.url_for(PATH.format(number)),
        "html_url": f"https://github.com/vllm-project/vllm/pull/{number}",
        "number": number,
        "title": f"[Perf] change {number}",
        "body": body,
        "state": "closed",
        "merged_at": "2025-03-04T05:06:07Z",
    }


class Recorder:
    """Collects sleeps and progress events."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.events: list[FetchProgress] = []

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)

    def progress(self, p: FetchProgress) -> None:
        self.events.append(p)


def fetch(
    server: HTTPServer, numbers: list[int], cached: dict[int, dict] | None = None, **kw: Any
) -> tuple[list[dict], Recorder]:
    rec = Recorder()
    kw.setdefault("token", TOKEN)
    kw.setdefault("stale_after", timedelta(days=7))
    rows = list(
        fetch_pull_requests(
            "vllm-project/vllm",
            numbers,
            cached or {},
            base_url=server.url_for("/"),
            sleep=rec.sleep,
            on_progress=rec.progress,
            clock=lambda: NOW,
            **kw,
        )
    )
    return rows, rec


def test_fetches_only_missing_and_yields_full_rows(httpserver: HTTPServer) -> None:
    httpserver.expect_request(PATH.format(2)).respond_with_json(
        pr_json(httpserver, 2), headers={"ETag": 'W/"e2"'}
    )
    fresh = {
        "repo": "vllm",
        "number": 1,
        "status": "ok",
        "body": "cached",
        "fetched_at": datetime.fromtimestamp(NOW - 60, UTC),
    }
    rows, rec = fetch(httpserver, [1, 2, 2], {1: fresh})
    assert [r["number"] for r in rows] == [2]
    row = rows[0]
    assert tuple(row) == PR_ROW_FIELDS
    assert row["repo"] == "vllm" and row["status"] == "ok" and row["error"] is None
    assert row["title"] == "[Perf] change 2" and row["body"] == "Body text"
    assert row["etag"] == 'W/"e2"'
    assert row["merged_at"] == datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert row["fetched_at"] == datetime.fromtimestamp(NOW, UTC)
    assert row["url"].endswith("/pull/2")
    assert len(httpserver.log) == 1
    req = httpserver.log[0][0]
    assert req.headers["Authorization"] == f"token {TOKEN}"  # the token is used, just never shown
    assert [e.event for e in rec.events] == ["fetched"]


def test_stale_row_uses_etag_and_304_keeps_cached_body(httpserver: HTTPServer) -> None:
    httpserver.expect_request(
        PATH.format(5), headers={"If-None-Match": 'W/"abc"'}
    ).respond_with_data("", status=304, headers={"ETag": 'W/"abc"'})
    old = datetime.fromtimestamp(NOW, UTC) - timedelta(days=30)
    cached = {
        5: {
            "repo": "vllm",
            "number": 5,
            "title": "t",
            "body": "old body",
            "state": "closed",
            "merged_at": None,
            "url": "u",
            "fetched_at": old,
            "etag": 'W/"abc"',
            "status": "ok",
            "error": None,
        }
    }
    rows, rec = fetch(httpserver, [5], cached)
    assert rows[0]["body"] == "old body"
    assert rows[0]["fetched_at"] == datetime.fromtimestamp(NOW, UTC)
    assert rec.events[0].event == "not_modified"


def test_stale_row_with_changed_etag_is_refetched(httpserver: HTTPServer) -> None:
    httpserver.expect_request(PATH.format(6)).respond_with_json(
        pr_json(httpserver, 6, "new body"), headers={"ETag": '"v2"'}
    )
    cached = {
        6: {"status": "ok", "body": "old", "etag": '"v1"', "fetched_at": "2020-01-01T00:00:00Z"}
    }
    rows, _ = fetch(httpserver, [6], cached)
    assert rows[0]["body"] == "new body" and rows[0]["etag"] == '"v2"'
    assert httpserver.log[0][0].headers["If-None-Match"] == '"v1"'


def test_primary_rate_limit_waits_until_reset(httpserver: HTTPServer) -> None:
    # GithubRetry reads the wall clock for a 403's x-ratelimit-reset, so the reset is real time.
    httpserver.expect_oneshot_request(PATH.format(7)).respond_with_json(
        {"message": "API rate limit exceeded for user ID 1."},
        status=403,
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 120)},
    )
    httpserver.expect_request(PATH.format(7)).respond_with_json(pr_json(httpserver, 7))
    rows, rec = fetch(httpserver, [7])
    assert rows[0]["status"] == "ok"
    assert len(rec.sleeps) == 1 and 115.0 <= rec.sleeps[0] <= 122.0
    limited = [e for e in rec.events if e.event == "rate_limited"]
    assert limited and limited[0].wait_s == rec.sleeps[0] and "HTTP 403" in limited[0].detail


def test_rate_limit_wait_longer_than_allowed_raises_at_once(httpserver: HTTPServer) -> None:
    httpserver.expect_request(PATH.format(16)).respond_with_json(
        {"message": "API rate limit exceeded for user ID 1."},
        status=403,
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 7200)},
    )
    with pytest.raises(GitHubFetchError, match=r"would need a \d+s wait \(more than 600s\)"):
        fetch(httpserver, [16], max_rate_limit_wait_s=600)
    assert len(httpserver.log) == 1


def test_primary_rate_limit_as_429(httpserver: HTTPServer) -> None:
    httpserver.expect_oneshot_request(PATH.format(8)).respond_with_json(
        {"message": "rate limited"},
        status=429,
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 30)},
    )
    httpserver.expect_request(PATH.format(8)).respond_with_json(pr_json(httpserver, 8))
    rows, rec = fetch(httpserver, [8])
    assert rows[0]["status"] == "ok" and rec.sleeps == [31.0]


def test_secondary_rate_limit_honours_retry_after(httpserver: HTTPServer) -> None:
    httpserver.expect_oneshot_request(PATH.format(9)).respond_with_json(
        {
            "message": "You have exceeded a secondary rate limit. "
            "Please wait a few minutes before you try again."
        },
        status=403,
        headers={"retry-after": "7"},
    )
    httpserver.expect_request(PATH.format(9)).respond_with_json(pr_json(httpserver, 9))
    rows, rec = fetch(httpserver, [9])
    assert rows[0]["status"] == "ok" and rec.sleeps == [7.0]


def test_secondary_limit_without_retry_after_waits_a_minute_each_time(
    httpserver: HTTPServer,
) -> None:
    msg = {
        "message": "You have exceeded a secondary rate limit. "
        "Please wait a few minutes before you try again."
    }
    httpserver.expect_oneshot_request(PATH.format(10)).respond_with_json(msg, status=403)
    httpserver.expect_oneshot_request(PATH.format(10)).respond_with_json(msg, status=403)
    httpserver.expect_request(PATH.format(10)).respond_with_json(pr_json(httpserver, 10))
    rows, rec = fetch(httpserver, [10])
    assert rows[0]["status"] == "ok" and rec.sleeps == [60.0, 60.0]  # GithubRetry's default


def test_rate_limit_that_never_lifts_raises(httpserver: HTTPServer) -> None:
    httpserver.expect_request(PATH.format(11)).respond_with_json(
        {"message": "API rate limit exceeded"},
        status=403,
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 5)},
    )
    with pytest.raises(GitHubFetchError, match="did not lift after 2 waits"):
        fetch(httpserver, [11], max_rate_limit_waits=2)
    assert len(httpserver.log) == 3  # the first ask and two retries, then it stops


def test_secondary_limit_that_never_lifts_raises_too(httpserver: HTTPServer) -> None:
    # Only the body says "secondary rate limit" (no headers), and GithubRetry reads it.
    httpserver.expect_request(PATH.format(17)).respond_with_json(
        {"message": "You have exceeded a secondary rate limit. Please wait a few minutes."},
        status=403,
    )
    with pytest.raises(GitHubFetchError, match="did not lift after 1 waits"):
        fetch(httpserver, [17], max_rate_limit_waits=1)
    assert len(httpserver.log) == 2


def test_404_is_missing_and_plain_403_is_error(httpserver: HTTPServer) -> None:
    httpserver.expect_request(PATH.format(12)).respond_with_json(
        {"message": "Not Found"}, status=404
    )
    httpserver.expect_request(PATH.format(13)).respond_with_json(
        {"message": "Resource not accessible"}, status=403
    )
    rows, rec = fetch(httpserver, [12, 13])
    assert [(r["number"], r["status"]) for r in rows] == [(12, "missing"), (13, "error")]
    assert rows[0]["error"] == "HTTP 404" and rows[0]["body"] is None
    assert "403" in rows[1]["error"]
    assert rec.sleeps == []
    assert len(httpserver.log) == 2  # a 403 that is not a rate limit is asked once, never retried


def test_502_twice_then_200_recovers_through_the_clients_retry(httpserver: HTTPServer) -> None:
    httpserver.expect_oneshot_request(PATH.format(14)).respond_with_json(
        {"message": "boom"}, status=502
    )
    httpserver.expect_oneshot_request(PATH.format(14)).respond_with_json(
        {"message": "boom"}, status=502
    )
    httpserver.expect_request(PATH.format(14)).respond_with_json(pr_json(httpserver, 14))
    rows, rec = fetch(httpserver, [14])
    assert rows[0]["status"] == "ok" and len(httpserver.log) == 3
    assert rec.sleeps == [0.0, 2.0]  # urllib3: first retry at once, then factor * 2**(n-1)
    assert [e.event for e in rec.events] == ["retrying", "retrying", "fetched"]
    assert [e.detail for e in rec.events[:2]] == ["HTTP 502", "HTTP 502"]


def test_persistent_500_becomes_error_row_and_cached_content_survives(
    httpserver: HTTPServer,
) -> None:
    httpserver.expect_request(PATH.format(15)).respond_with_json({"message": "down"}, status=503)
    old = "2020-01-01T00:00:00+00:00"
    cached = {
        15: {
            "repo": "vllm",
            "number": 15,
            "title": "t",
            "body": "kept",
            "status": "ok",
            "etag": None,
            "fetched_at": old,
        }
    }
    rows, rec = fetch(httpserver, [15], cached, max_retries=2)
    assert len(httpserver.log) == 3
    assert rows[0]["body"] == "kept" and rows[0]["status"] == "ok" and rows[0]["fetched_at"] == old
    assert rows[0]["error"].startswith("HTTP 503")
    assert rec.sleeps == [0.0, 2.0]


def test_connection_errors_are_retried_then_recorded() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rec = Recorder()
    rows = list(
        fetch_pull_requests(
            "o/r",
            [1],
            {},
            token=TOKEN,
            base_url=f"http://127.0.0.1:{port}",
            stale_after=None,
            sleep=rec.sleep,
            max_retries=1,
            timeout_s=2,
        )
    )
    assert rows[0]["status"] == "error" and rows[0]["error"].startswith("connection error")
    assert rec.sleeps == [0.0]


def test_offline_makes_no_requests(httpserver: HTTPServer) -> None:
    cached = {1: {"number": 1, "status": "ok", "body": "b", "fetched_at": "2020-01-01T00:00:00Z"}}
    rows, rec = fetch(httpserver, [1, 2], cached, offline=True)
    assert rows == [] and len(httpserver.log) == 0
    assert rec.events[0].event == "offline" and rec.events[0].total == 2
    rows, _ = fetch(
        httpserver, [1], {1: cached[1]}, offline=True, stale_after=None, include_cached=True
    )
    assert rows == [cached[1]]


def test_rows_arrive_one_by_one_and_stopping_stops_requests(httpserver: HTTPServer) -> None:
    for n in (20, 21, 22):
        httpserver.expect_request(PATH.format(n)).respond_with_json(pr_json(httpserver, n))
    gen = fetch_pull_requests(
        "vllm-project/vllm",
        [20, 21, 22],
        {},
        token=TOKEN,
        base_url=httpserver.url_for("/"),
        stale_after=None,
        sleep=lambda s: None,
    )
    first = next(gen)
    assert first["number"] == 20 and len(httpserver.log) == 1
    gen.close()  # the caller was interrupted after persisting one row
    assert len(httpserver.log) == 1


def test_token_never_leaks(httpserver: HTTPServer, caplog: pytest.LogCaptureFixture) -> None:
    """A hostile server echoes the Authorization header everywhere it can."""

    def echo(request: Request) -> Response:
        auth = request.headers.get("Authorization", "")
        number = int(request.path.rsplit("/", 1)[-1])
        if number == 30:
            return Response(
                json.dumps(pr_json(httpserver, 30, body=f"leaked {auth}")),
                200,
                content_type="application/json",
            )
        if number == 31:
            return Response(
                json.dumps({"message": f"server error for {auth}"}),
                500,
                content_type="application/json",
            )
        return Response(
            json.dumps({"message": f"Bad credentials {auth}"}), 401, content_type="application/json"
        )

    httpserver.expect_request("/repos/vllm-project/vllm/pulls/30").respond_with_handler(echo)
    httpserver.expect_request("/repos/vllm-project/vllm/pulls/31").respond_with_handler(echo)
    httpserver.expect_request("/repos/vllm-project/vllm/pulls/32").respond_with_handler(echo)
    caplog.set_level(logging.DEBUG)
    rows, rec = fetch(httpserver, [30, 31], max_retries=1)
    assert rows[0]["status"] == "ok" and rows[1]["status"] == "error"
    with pytest.raises(GitHubFetchError) as info:
        fetch(httpserver, [32])
    blobs = [json.dumps(r, default=str) for r in rows]
    blobs += [
        str(info.value),
        repr(info.value),
        str(info.value.__cause__),
        str(info.value.__context__),
    ]
    blobs += [e.detail for e in rec.events]
    blobs += [r.getMessage() for r in caplog.records]
    assert all(TOKEN not in b for b in blobs)
    assert "***" in rows[0]["body"]


def test_select_pending_rules() -> None:
    now = datetime(2026, 1, 10, tzinfo=UTC)
    cached: dict[int, dict[str, Any]] = {
        1: {"status": "ok", "fetched_at": datetime(2026, 1, 9, tzinfo=UTC)},
        2: {"status": "ok", "fetched_at": datetime(2025, 12, 1, tzinfo=UTC)},
        3: {"status": "error", "fetched_at": datetime(2026, 1, 9, tzinfo=UTC)},
        4: {"status": "missing", "fetched_at": "2026-01-09T00:00:00Z"},
    }
    assert select_pending([1, 2, 3, 4, 5], cached, stale_after=timedelta(days=7), now=now) == [
        2,
        3,
        5,
    ]
    assert select_pending([1, 2, 3, 4, 5], cached, stale_after=None, now=now) == [3, 5]


def test_bad_slug_is_rejected() -> None:
    with pytest.raises(ValueError):
        list(fetch_pull_requests("vllm", [1], {}, token=None, stale_after=None, offline=True))
