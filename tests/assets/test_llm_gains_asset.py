"""pr_gains with the LLM extractor through the real openai client against a local
OpenAI-compatible server: results cached by (PR, body hash, prompt version, model), a
malformed reply recorded with its reason, the key never stored."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import polars as pl
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from assets.gains import pr_gains
from dagster_project.github.sync import BODIES_SCHEMA
from dagster_project.storage.lake import Lake
from dagster_project.wiring.resources import LakeResource, LLMResource

KEY = "hf_llmTestKey_abcdefghijklmnop"
GOOD_BODY = "Decode kernel: latency went from 12.5 us to 10.0 us on H100 at batch 8."


def _reply(content: str, model: str) -> Response:
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }
    return Response(json.dumps(body), 200, content_type="application/json")


def test_llm_extraction_is_cached_and_failures_recorded(
    tmp_path: Path, httpserver: HTTPServer, monkeypatch
) -> None:  # noqa: ANN001
    seen: list[dict] = []

    def handler(request: Request) -> Response:
        payload = json.loads(request.data)
        seen.append(payload)
        text = json.dumps(payload["messages"])
        if "12.5 us" in text:
            m = {
                "scope": "kernel",
                "hardware": "H100",
                "model": None,
                "shape": None,
                "batch_size": 8,
                "metric": "latency",
                "unit": "us",
                "higher_is_better": False,
                "baseline": "12.5",
                "optimized": "10.0",
                "stated_speedup": None,
            }
            return _reply(json.dumps({"measurements": [m]}), payload["model"])
        return _reply("this is not JSON at all", payload["model"])

    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(handler)
    monkeypatch.setenv("KERNELHOUSE_LLM_API_KEY", KEY)
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))
    bodies = pl.DataFrame(
        [
            {
                "pr_key": "vllm#1",
                "repo": "vllm",
                "number": 1,
                "title": "[Perf] faster decode",
                "body": GOOD_BODY,
                "status": "ok",
            },
            {
                "pr_key": "vllm#2",
                "repo": "vllm",
                "number": 2,
                "title": "[Perf] other",
                "body": "No numbers, sorry.",
                "status": "ok",
            },
        ],
        schema=BODIES_SCHEMA,
    )
    lake.replace_table("raw", "pr_bodies", bodies)
    resources = {
        "lake": LakeResource(home=str(tmp_path)),
        "llm": LLMResource(
            base_url=httpserver.url_for("/v1"),
            model="primary-model",
            fallback_model="fallback-model",
        ),
    }
    res = dg.materialize([pr_gains], resources=resources)
    assert res.success
    calls = len(seen)
    runs = lake.read_table("derived", "pr_extractions")
    llm = runs.filter(pl.col("extractor") == "llm").sort("number")
    assert llm["ok"].to_list() == [True, False]
    assert "JSON" in (llm["error"][1] or "") or llm["error"][1]
    gains = lake.read_table("derived", "pr_gains")
    primary = gains.filter(pl.col("primary"))
    assert set(primary["extractor"]) == {"llm"}
    assert primary.select("baseline", "optimized", "speedup", "audit_pass").row(0) == (
        12.5,
        10.0,
        1.25,
        True,
    )
    md = res.asset_materializations_for_node("pr_gains")[0].metadata
    assert md["new_extractions"].value == 4 and md["tokens"].value > 0

    # A refresh with unchanged bodies pays nothing.
    assert dg.materialize([pr_gains], resources=resources).success
    assert len(seen) == calls
    assert not any(KEY.encode() in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
