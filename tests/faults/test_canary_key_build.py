"""Issue 42 acceptance probe: a canary LLM key, echoed by the endpoint in every encoding
(raw, ``\\u`` escapes, split over two fields, base64, hex), appears nowhere after a real
mined build with the LLM extractor on: not in the lake file, the Parquet partitions, the
exports, Dagster's storage or the logs."""

from __future__ import annotations

import base64
import itertools
import json
import re
from pathlib import Path

import dagster as dg
import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from dagster_project.definitions import build_definitions
from dagster_project.execution.planner import run_build
from dagster_project.gains.extract import extract_text
from tests.assets.test_mining_assets import MINED

pytestmark = pytest.mark.slow

KEY = "sk-canary-K3yForIssue42-0123456789abcdef"
BODY = (
    Path(__file__).parents[1] / "fixtures" / "prs" / "05_flashinfer_decode_splitk_table.md"
).read_text()


def _escaped(key: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in key)


def _encodings(key: str) -> list[tuple[str, str | None]]:
    """(hardware, model) pairs that carry the key; the \\u form is put into the JSON text."""
    return [
        (f"H100 {key}", None),
        ("H100 KEYHERE", None),
        (key[:15], key[15:]),
        ("H100 " + base64.b64encode(key.encode()).decode(), None),
        ("H100 " + key.encode().hex(), None),
    ]


def _github(request: Request) -> Response:
    m = re.match(r".*/repos/([^/]+/[^/]+)/pulls/(\d+)$", request.path)
    if not m:
        return Response(json.dumps({"resources": {}}), 200, content_type="application/json")
    title, _, body = BODY.partition("\n")
    data = {
        "number": int(m.group(2)),
        "title": title,
        "body": body,
        "state": "closed",
        "merged_at": "2025-01-02T03:04:05Z",
        "html_url": f"https://github.com/{m.group(1)}/pull/{m.group(2)}",
        "url": f"http://127.0.0.1/api/repos/{m.group(1)}/pulls/{m.group(2)}",
    }
    return Response(json.dumps(data), 200, content_type="application/json")


def _llm(pair: tuple[str, str]):  # noqa: ANN202
    turns = itertools.cycle(range(5))

    def handle(request: Request) -> Response:
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        hardware, model = _encodings(key)[next(turns)]
        item = {
            "scope": "kernel",
            "hardware": hardware,
            "model": model,
            "shape": None,
            "batch_size": None,
            "metric": "latency",
            "unit": "us",
            "higher_is_better": False,
            "baseline": pair[0],
            "optimized": pair[1],
            "stated_speedup": None,
        }
        content = json.dumps({"measurements": [item]}).replace("KEYHERE", _escaped(key))
        body = {
            "id": "x",
            "object": "chat.completion",
            "created": 1,
            "model": json.loads(request.data)["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        return Response(json.dumps(body), 200, content_type="application/json")

    return handle


def test_canary_key_in_any_encoding_is_nowhere_after_a_build(
    use_engine_repos,
    kh_home: Path,
    httpserver: HTTPServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = next(m for m in extract_text(BODY) if m.is_pair and m.audit_pass)
    pair = (f"{first.baseline:g}", f"{first.optimized:g}")
    httpserver.expect_request(re.compile(r"/v1/.*")).respond_with_handler(_llm(pair))
    httpserver.expect_request(re.compile(".*")).respond_with_handler(_github)
    monkeypatch.setenv("KERNELHOUSE_GITHUB_API_URL", httpserver.url_for("/api").rstrip("/"))
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_kernelhouseTestToken0123456789")
    monkeypatch.setenv("KERNELHOUSE_LLM_BASE_URL", httpserver.url_for("/v1"))
    monkeypatch.setenv("KERNELHOUSE_LLM_API_KEY", KEY)
    selection = MINED + ",kernel_opt_rl_export"
    outcome = run_build(build_definitions(), dg.DagsterInstance.ephemeral(), selection)
    assert outcome.ok, (outcome.failed, outcome.skipped)
    assert len(httpserver.log) > 5  # the LLM was asked (and echoed the key)

    needles = [
        KEY.encode(),
        KEY[15:].encode(),  # the second half of the split
        base64.b64encode(KEY.encode()),
        KEY.encode().hex().encode(),
        _escaped(KEY).encode(),
        _escaped(KEY).encode().replace(b"\\", b"\\\\"),  # escaped once more by a JSON dump
    ]
    files = [p for p in kh_home.rglob("*") if p.is_file() and "repos" not in p.parts]
    assert any(p.name == "lake.duckdb" for p in files)
    assert any("exports" in p.parts for p in files)
    leaks = [(str(p), n) for p in files for n in needles if n in p.read_bytes()]
    assert leaks == []
    assert not any(n.decode() in caplog.text for n in needles)
