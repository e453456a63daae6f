"""Probes of issue 22 about untrusted text: an LLM endpoint that echoes the API key, a
Markdown report over hostile labels, and rich markup in values shown by the CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from dagster_project.gains.llm_extractor import LLMConfig, LLMExtractor
from dagster_project.storage.lake import Lake

EXE = str(Path(sys.executable).with_name("kernelhouse"))
KEY = "sk-echoed-SecretKey-0123456789"
PR_TEXT = "[Perf] Faster decode\nOn H100: 10.0 ms before, 8.0 ms after.\n"


def _echoing_endpoint(httpserver: HTTPServer) -> None:
    """An OpenAI-compatible endpoint that copies the caller's bearer token into its reply,
    in free text and inside a measurement field (as a prompt-injected model could)."""

    def handler(request: Request) -> Response:
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        payload = json.loads(request.data)
        item = {
            "scope": "kernel",
            "hardware": f"H100 {key}",
            "model": None,
            "shape": None,
            "batch_size": None,
            "metric": "latency",
            "unit": "ms",
            "higher_is_better": False,
            "baseline": "10.0",
            "optimized": "8.0",
            "stated_speedup": None,
        }
        reply: dict[str, object] = {"measurements": [item]}
        if payload["model"] == "chatty":  # an extra field: a malformed reply, stored too
            reply["note"] = f"your key is {key}"
        content = json.dumps(reply)
        body = {
            "id": "x",
            "object": "chat.completion",
            "created": 1,
            "model": payload["model"],
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

    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(handler)


def test_llm_reply_echoing_the_key_is_scrubbed(httpserver: HTTPServer) -> None:
    _echoing_endpoint(httpserver)
    cfg = LLMConfig(base_url=httpserver.url_for("/v1"), api_key=KEY, model="m", fallback_model=None)
    res = LLMExtractor(cfg, sleep=lambda s: None).extract(PR_TEXT)
    assert res.ok, res.error
    assert res.raw_reply and "[redacted]" in res.raw_reply
    stored = res.raw_reply + json.dumps([m.to_row() for m in res.measurements], default=str)
    assert KEY not in stored
    assert res.measurements[0].hardware == "H100 [redacted]"
    chatty = LLMConfig(
        base_url=httpserver.url_for("/v1"), api_key=KEY, model="chatty", fallback_model=None
    )
    bad = LLMExtractor(chatty, sleep=lambda s: None).extract(PR_TEXT)
    assert not bad.ok and bad.raw_reply and "your key is [redacted]" in bad.raw_reply
    assert KEY not in bad.raw_reply + str(bad.error)


# -- the Markdown report -----------------------------------------------------------------
HOSTILE_LABEL = (
    '<img src=x onerror="alert(1)"> [click](javascript:alert(document.cookie)) <script>x</script>'
)


def test_markdown_report_escapes_html_and_links(tmp_path: Path) -> None:
    from dagster_project.report.document import Note, Report, Section, Table, render_markdown

    frame = pl.DataFrame({"kernel": [HOSTILE_LABEL, "fused_moe"], "n": [1, 2]})
    report = Report(
        lake_path=str(tmp_path / "lake.duckdb"),
        generated_at="now",
        sections=[
            Section(
                "cards",
                "Cards",
                HOSTILE_LABEL,
                [
                    Table(frame, f"by kernel {HOSTILE_LABEL}", 2),
                    Note(f"waiting: {HOSTILE_LABEL}"),
                ],
            )
        ],
        views_created=[],
        views_waiting={},
    )
    md = render_markdown(report)
    assert "<img" not in md and "<script" not in md, md
    assert not re.search(r"(?<!\\)\]\(javascript:", md), "an unescaped link to javascript:"
    assert "&lt;img src=x" in md and "\\[click\\]" in md
    assert "fused_moe" in md  # ordinary names stay readable


def test_markdown_report_refuses_foreign_link_targets() -> None:
    from dagster_project.report.document import _md_target

    assert _md_target("#cards") == "#cards"
    for bad in (
        "javascript:alert(1)",
        "https://evil.example/x.png",
        "data:text/html;base64,PHNjcmlwdD4=",
    ):
        with pytest.raises(ValueError):
            _md_target(bad)


# -- rich markup in the CLI ------------------------------------------------------------------
def _kh(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [EXE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "250", **(env or {})},
    )


def _built_lake(home: Path) -> Lake:
    lake = Lake(home / "lake.duckdb", str(home / "lake"))
    lake.replace_table("raw", "repo_heads", pl.DataFrame({"repo": ["vllm"], "commit_count": [3]}))
    return lake


def test_sql_values_with_markup_print_verbatim(kh_home: Path) -> None:
    _built_lake(kh_home)
    res = _kh("sql", "select 'a[/oops]b' as x, '[red]not red[/red]' as \"[bold]y\"")
    assert res.returncode == 0, res.stderr
    assert (
        "a[/oops]b" in res.stdout and "[red]not red[/red]" in res.stdout and "[bold]y" in res.stdout
    )
    assert "MarkupError" not in res.stderr + res.stdout


def test_bad_lake_uri_shows_the_validation_message(kh_home: Path) -> None:
    res = _kh("status", env={"KERNELHOUSE_LAKE_URI": "ftp://x"})
    assert res.returncode == 1
    assert "MarkupError" not in res.stderr and "Traceback" not in res.stderr
    text = " ".join(res.stderr.split())
    assert "KERNELHOUSE_LAKE_URI='ftp://x': scheme ftp:// is not supported" in text
    assert "s3://bucket[/prefix]" in text  # the bracket is shown, not eaten as a tag


def test_source_path_with_markup_prints_as_is(kh_home: Path, tmp_path: Path) -> None:
    odd = tmp_path / "clones [red]" / "vllm"
    res = _kh("build", "--select", "repo_clone", env={"KERNELHOUSE_VLLM_SOURCE": str(odd)})
    assert res.returncode == 1
    text = " ".join(res.stderr.split())
    assert "clones [red]" in text and "MarkupError" not in text


def test_refused_sql_message_is_shown_verbatim(kh_home: Path) -> None:
    _built_lake(kh_home)
    res = _kh("sql", "COPY raw.repo_heads TO '/tmp/[/x].csv'")
    assert res.returncode == 1 and "COPY statements are refused" in res.stderr
    assert "Traceback" not in res.stderr
