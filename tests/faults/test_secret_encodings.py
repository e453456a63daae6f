"""Issue 42 probe: an LLM endpoint echoes the API key in an encoding a raw-text scrub
misses. One test per encoding (raw, ``\\u`` escapes, split over two fields, base64, hex),
each through a real OpenAI-compatible server on 127.0.0.1 and the real extraction
pipeline: the key must appear nowhere in the stored runs, the ``derived.pr_gains`` frame
or the reply, in any encoding."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import polars as pl
import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from dagster_project.gains.llm_extractor import LLMConfig
from dagster_project.gains.pipeline import extract_bodies, gains_frame
from dagster_project.scrub import contains_secret, scrub_json_text, scrub_value

KEY = "sk-canary-C4n4ryK3y-0123456789abcdef"
BODY = "On H100: 10.0 ms before, 8.0 ms after."


def _escaped(key: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in key)


def _item(hardware: str, model: str | None = None) -> dict[str, Any]:
    return {
        "scope": "kernel",
        "hardware": hardware,
        "model": model,
        "shape": None,
        "batch_size": None,
        "metric": "latency",
        "unit": "ms",
        "higher_is_better": False,
        "baseline": "10.0",
        "optimized": "8.0",
        "stated_speedup": None,
    }


def _raw(key: str) -> str:
    return json.dumps({"measurements": [_item(f"H100 {key}")]})


def _unicode_escapes(key: str) -> str:
    # json.dumps would write the key plainly; the escapes are put in by hand
    return json.dumps({"measurements": [_item("H100 KEYHERE")]}).replace("KEYHERE", _escaped(key))


def _split(key: str) -> str:
    return json.dumps({"measurements": [_item(key[:12], key[12:])]})


def _base64(key: str) -> str:
    return json.dumps({"measurements": [_item("H100 " + base64.b64encode(key.encode()).decode())]})


def _hex(key: str) -> str:
    return json.dumps({"measurements": [_item("H100 " + key.encode().hex())]})


ENCODINGS: dict[str, Callable[[str], str]] = {
    "raw": _raw,
    "unicode_escapes": _unicode_escapes,
    "split_across_fields": _split,
    "base64": _base64,
    "hex": _hex,
}


def _endpoint(httpserver: HTTPServer, encode: Callable[[str], str]) -> None:
    def handler(request: Request) -> Response:
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        payload = json.loads(request.data)
        body = {
            "id": "x",
            "object": "chat.completion",
            "created": 1,
            "model": payload["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": encode(key)},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        return Response(json.dumps(body), 200, content_type="application/json")

    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(handler)


def _leaks(text: str) -> bool:
    """The key in any encoding this probe uses (also the raw form in decoded JSON)."""
    return KEY in text or contains_secret(text, [KEY]) or KEY[12:] in text


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_llm_key_in_any_encoding_never_reaches_the_lake_rows(
    httpserver: HTTPServer, encoding: str
) -> None:
    encode = ENCODINGS[encoding]
    # every encoding but "raw" hides the key from a plain replace on the reply text
    assert (KEY in encode(KEY)) == (encoding == "raw")
    _endpoint(httpserver, encode)
    cfg = LLMConfig(base_url=httpserver.url_for("/v1"), api_key=KEY, model="m", fallback_model=None)
    bodies = pl.DataFrame(
        {
            "repo": ["vllm"],
            "number": [1],
            "title": ["[Perf] faster decode"],
            "body": [BODY],
            "status": ["ok"],
        }
    )
    runs, new = extract_bodies(bodies, None, cfg)
    assert new == 2
    llm = runs.filter(pl.col("extractor") == "llm").row(0, named=True)
    assert llm["ok"], llm["error"]
    stored = runs.write_csv() + gains_frame(runs).write_csv()
    assert not _leaks(stored), encoding
    assert "[redacted]" in llm["measurements_json"]


def test_scrub_value_redacts_every_piece_of_a_split_key() -> None:
    value = {"a": ["x", KEY[:9]], "b": {"c": KEY[9:20] + " ", "d": " " + KEY[20:]}, "e": "keep"}
    clean = scrub_value(value, [KEY])
    redacted = {"c": "[redacted]", "d": "[redacted]"}
    assert clean == {"a": ["x", "[redacted]"], "b": redacted, "e": "keep"}


def test_scrub_keeps_ordinary_text_and_short_keys() -> None:
    text = '{"hardware": "H100 SXM", "shape": "M=4096 N=14336", "sha": "0123456789abcdef"}'
    assert scrub_json_text(text, [KEY]) == text
    assert scrub_json_text(text, ["H100"]) == text  # under 8 characters: not a real key
