"""PR bodies and gains through Dagster with the real PyGithub client against a local
server speaking the GitHub REST API: bodies cached, measurements extracted and audited,
gains attached to kernel_commits, and the token nowhere in the lake, exports or logs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from dagster_project.definitions import build_definitions
from dagster_project.execution.planner import run_build
from dagster_project.storage.lake import Lake
from tests.assets.test_mining_assets import MINED

pytestmark = pytest.mark.slow

TOKEN = "ghp_kernelhouseTestToken0123456789"
BODY = (
    Path(__file__).parents[1] / "fixtures" / "prs" / "05_flashinfer_decode_splitk_table.md"
).read_text()
MISSING = 404


def _handler(calls: list[str], authed: list[bool]):  # noqa: ANN202
    def handle(request: Request) -> Response:
        m = re.match(r".*/repos/([^/]+/[^/]+)/pulls/(\d+)$", request.path)
        if not m:
            return Response(json.dumps({"resources": {}}), 200, content_type="application/json")
        calls.append(request.path)
        authed.append(request.headers.get("Authorization", "").endswith(TOKEN))
        number = int(m.group(2))
        if number % 7 == 0:  # some PRs are gone
            return Response(
                json.dumps({"message": "Not Found"}), MISSING, content_type="application/json"
            )
        title, _, body = BODY.partition("\n")
        data = {
            "number": number,
            "title": title,
            "body": body,
            "state": "closed",
            "merged_at": "2025-01-02T03:04:05Z",
            "html_url": f"https://github.com/{m.group(1)}/pull/{number}",
            "url": f"http://127.0.0.1/api/repos/{m.group(1)}/pulls/{number}",
        }
        return Response(
            json.dumps(data),
            200,
            content_type="application/json",
            headers={"ETag": f'"etag-{number}"'},
        )

    return handle


def test_pr_bodies_and_gains(
    use_engine_repos,
    kh_home: Path,
    httpserver: HTTPServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []
    authed: list[bool] = []
    httpserver.expect_request(re.compile(".*")).respond_with_handler(_handler(calls, authed))
    monkeypatch.setenv("KERNELHOUSE_GITHUB_API_URL", httpserver.url_for("/api").rstrip("/"))
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    outcome = run_build(build_definitions(), dg.DagsterInstance.ephemeral(), MINED, quiet=False)
    assert outcome.ok, (outcome.failed, outcome.skipped)
    lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))

    assert calls and all(authed), "every PR request carries the token"
    bodies = lake.read_table("raw", "pr_bodies")
    kc = lake.read_table("datasets", "kernel_commits")
    prs = {(r[0], r[1]) for r in kc.select("repo", "pr_number").drop_nulls().iter_rows()}
    assert {(r[0], r[1]) for r in bodies.select("repo", "number").iter_rows()} >= prs
    assert set(bodies["status"]) == {"ok", "missing"}
    assert bodies.filter(pl.col("status") == "missing")["number"].to_list() == [
        n for n in bodies["number"] if n % 7 == 0
    ]
    gains = lake.read_table("derived", "pr_gains")
    assert gains.height and gains["audit_pass"].drop_nulls().all()
    with_gains = kc.filter(pl.col("pr_number").is_not_null() & (pl.col("pr_number") % 7 != 0))
    assert with_gains["pr_body"].is_not_null().all()
    assert with_gains["kernel_speedup"].is_not_null().all()
    assert (with_gains["kernel_speedup"] > 1).all()
    sample = json.loads(with_gains["gains"][0])
    assert set(sample[0]) == {
        "scope",
        "hardware",
        "model",
        "shape",
        "batch_size",
        "metric",
        "unit",
        "higher_is_better",
        "baseline",
        "optimized",
        "stated_speedup",
        "speedup",
    }

    # A refresh fetches nothing new (all cached and fresh) and re-extracts nothing.
    n_calls = len([c for c in calls if "/pulls/" in c])
    again = run_build(build_definitions(), dg.DagsterInstance.ephemeral(), "pr_bodies,pr_gains")
    assert again.ok
    assert len([c for c in calls if "/pulls/" in c]) == n_calls

    # The token never reaches the lake, the exports or the logs.
    blobs = [p.read_bytes() for p in kh_home.rglob("*") if p.is_file() and "repos" not in p.parts]
    assert not any(TOKEN.encode() in b for b in blobs)
    assert TOKEN not in caplog.text


def test_no_pr_body_readable_is_said_in_words(
    use_engine_repos, kh_home: Path, httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitHub refuses every PR (403, real PyGithub): the build finishes, pr_gains says
    "gains not extracted: N of N PR bodies unavailable" (status/build note, lake state), and
    the pr_gains gate reports not evaluated with that reason instead of passing on 0 rows."""
    from dagster_project.cli.status import gains_note
    from dagster_project.quality.results import failing_gates

    httpserver.expect_request(re.compile(".*/pulls/.*")).respond_with_json(
        {"message": "Resource not accessible by integration"}, status=403
    )
    httpserver.expect_request(re.compile(".*")).respond_with_json({"resources": {}})
    monkeypatch.setenv("KERNELHOUSE_GITHUB_API_URL", httpserver.url_for("/api").rstrip("/"))
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    instance = dg.DagsterInstance.ephemeral()
    outcome = run_build(build_definitions(), instance, MINED, quiet=True)
    assert outcome.ok, (outcome.failed, outcome.skipped)
    lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))
    (state,) = lake.read_table("derived", "pr_gains_state").iter_rows(named=True)
    n = state["prs_needed"]
    assert n > 0 and state["reason"] == f"gains not extracted: {n:,} of {n:,} PR bodies unavailable"
    assert gains_note(instance) == state["reason"]
    results = lake.read_table("derived", "quality_results").filter(pl.col("suite") == "pr_gains")
    assert results.select("expectation", "observed").rows() == [
        ("not_evaluated", json.dumps(state["reason"]))
    ]
    assert failing_gates(lake, ["pr_gains"]) == []
    kc = lake.read_table("datasets", "kernel_commits")
    assert (
        kc["gains"].is_null().all()
        and kc["pr_body"].is_null().all()
        and kc["kernel_speedup"].is_null().all()
    )
