"""LLMExtractor against a local server speaking the OpenAI chat-completions API.

The real ``openai`` client makes real HTTP requests to pytest-httpserver; replies are
chosen per requested model. Sleeps are injected and recorded, never performed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from dagster_project.gains.extract import extract_pr_gains, extract_text
from dagster_project.gains.llm_extractor import (
    PROMPT_VERSION,
    LLMConfig,
    LLMExtractor,
    llm_cache_key,
    parse_reply,
)

PRIMARY = "Qwen/Qwen3-235B-A22B-Instruct-2507"
FALLBACK = "openai/gpt-oss-120b"
KEY = "hf_SecretKeyForTests123"

PR_TEXT = """[Perf] Faster decode attention
Measured on H100 with Llama-3.1-8B.

| batch | main (us) | PR (us) |
|---|---|---|
| 8 | 1,234.50 | 1,010.0 |

Runs: 10.1 and 10.3 ms before, 9.0 and 9.2 ms after.
"""

GOOD_ITEMS = [
    {
        "scope": "kernel",
        "hardware": "H100",
        "model": "Llama-3.1-8B",
        "shape": None,
        "batch_size": "8",
        "metric": "latency",
        "unit": "us",
        "higher_is_better": False,
        "baseline": "1,234.50",
        "optimized": "1,010.0",
        "stated_speedup": None,
    },
    {
        "scope": "e2e",
        "hardware": "H100",
        "model": None,
        "shape": None,
        "batch_size": None,
        "metric": "latency",
        "unit": "ms",
        "higher_is_better": False,
        "baseline": "10.2",
        "optimized": "9.1",
        "stated_speedup": None,  # averages: not verbatim
    },
]


def completion(content: str, model: str, finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def serve(
    httpserver: HTTPServer, by_model: dict[str, list[Callable[[], Response]]]
) -> list[dict[str, Any]]:
    """Answer each model from its queue (the last answer repeats). Returns the request log."""
    seen: list[dict[str, Any]] = []

    def handler(request: Request) -> Response:
        payload = json.loads(request.data)
        seen.append(payload)
        queue = by_model[payload["model"]]
        return queue.pop(0)() if len(queue) > 1 else queue[0]()

    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(handler)
    return seen


def ok(content: str, model: str, finish: str = "stop") -> Callable[[], Response]:
    return lambda: Response(
        json.dumps(completion(content, model, finish)), 200, content_type="application/json"
    )


def err(status: int, headers: dict[str, str] | None = None) -> Callable[[], Response]:
    body = json.dumps({"error": {"message": "nope", "type": "server_error"}})
    return lambda: Response(body, status, headers=headers or {}, content_type="application/json")


def extractor(httpserver: HTTPServer, **cfg: Any) -> tuple[LLMExtractor, list[float]]:
    sleeps: list[float] = []
    config = LLMConfig(
        base_url=httpserver.url_for("/v1"),
        api_key=KEY,
        model=PRIMARY,
        fallback_model=FALLBACK,
        **cfg,
    )
    return LLMExtractor(config, sleep=sleeps.append), sleeps


def test_valid_reply_is_parsed_finalised_and_audited(httpserver: HTTPServer) -> None:
    seen = serve(httpserver, {PRIMARY: [ok(json.dumps({"measurements": GOOD_ITEMS}), PRIMARY)]})
    llm, sleeps = extractor(httpserver)
    res = extract_pr_gains(PR_TEXT, extractor="llm", llm=llm, repo="vllm", pr_number=42)
    assert res.ok and res.error is None and res.model_used == PRIMARY
    assert res.usage["total_tokens"] == 120 and res.usage["requests"] == 1
    first, second = res.measurements
    assert (first.baseline, first.optimized, first.batch_size) == (1234.5, 1010.0, 8)
    assert first.speedup == round(1234.5 / 1010.0, 4)  # computed in code, latency → base/opt
    assert first.audit_pass is True
    assert second.audit_pass is False and second.baseline_verbatim is False  # model averaged
    assert all(
        m.extractor == "llm" and m.model_used == PRIMARY and m.pr_number == 42
        for m in res.measurements
    )
    body = seen[0]
    assert body["temperature"] == 0 and body["response_format"]["type"] == "json_schema"
    assert "compute" in body["messages"][0]["content"].lower()
    assert "[Perf] Faster decode attention" in body["messages"][1]["content"]
    assert sleeps == []
    assert res.cache_key == llm.cache_key(PR_TEXT, repo="vllm", pr_number=42)


def test_malformed_reply_falls_back(httpserver: HTTPServer) -> None:
    seen = serve(
        httpserver,
        {
            PRIMARY: [ok("Sure! Here are the numbers: baseline 1234.5", PRIMARY)],
            FALLBACK: [
                ok("```json\n" + json.dumps({"measurements": GOOD_ITEMS[:1]}) + "\n```", FALLBACK)
            ],
        },
    )
    llm, _ = extractor(httpserver)
    res = llm.extract(PR_TEXT)
    assert res.ok and res.model_used == FALLBACK
    assert [p["model"] for p in seen] == [PRIMARY, FALLBACK]
    assert res.measurements[0].model_used == FALLBACK
    assert res.usage["total_tokens"] == 240


def test_schema_violation_counts_as_malformed(httpserver: HTTPServer) -> None:
    bad = {"measurements": [{"scope": "gpu", "metric": "x"}]}
    serve(
        httpserver,
        {PRIMARY: [ok(json.dumps(bad), PRIMARY)], FALLBACK: [ok(json.dumps(bad), FALLBACK)]},
    )
    llm, _ = extractor(httpserver)
    res = extract_pr_gains(PR_TEXT, extractor="llm", llm=llm)
    assert not res.ok and res.measurements == []
    assert (
        "schema" in (res.error or "")
        and PRIMARY in (res.error or "")
        and FALLBACK in (res.error or "")
    )


def test_truncated_reply_goes_to_fallback(httpserver: HTTPServer) -> None:
    serve(
        httpserver,
        {
            PRIMARY: [ok('{"measurements": [{"scope": "kernel", "hardw', PRIMARY, finish="length")],
            FALLBACK: [ok(json.dumps({"measurements": []}), FALLBACK)],
        },
    )
    llm, _ = extractor(httpserver)
    res = llm.extract(PR_TEXT)
    assert res.ok and res.model_used == FALLBACK and res.measurements == []


def test_429_then_success_waits_retry_after(httpserver: HTTPServer) -> None:
    serve(
        httpserver,
        {PRIMARY: [err(429, {"retry-after": "3"}), ok(json.dumps({"measurements": []}), PRIMARY)]},
    )
    llm, sleeps = extractor(httpserver)
    res = llm.extract(PR_TEXT)
    assert res.ok and res.model_used == PRIMARY
    assert sleeps == [3.0] and res.attempts == 2


def test_500_everywhere_fails_with_reason_after_bounded_retries(httpserver: HTTPServer) -> None:
    seen = serve(httpserver, {PRIMARY: [err(500)], FALLBACK: [err(503)]})
    llm, sleeps = extractor(httpserver, max_retries=2)
    res = extract_pr_gains(PR_TEXT, extractor="llm", llm=llm)
    assert not res.ok and res.measurements == [] and res.gains() == []
    assert len(seen) == 6 and sleeps == [2.0, 4.0, 2.0, 4.0]
    assert "InternalServerError" in (res.error or "")
    assert KEY not in (res.error or "")


def test_500_then_success(httpserver: HTTPServer) -> None:
    serve(
        httpserver, {PRIMARY: [err(500), ok(json.dumps({"measurements": GOOD_ITEMS[:1]}), PRIMARY)]}
    )
    llm, sleeps = extractor(httpserver)
    assert len(extract_text(PR_TEXT, extractor="llm", llm=llm)) == 1
    assert sleeps == [2.0]


def test_long_input_goes_to_fallback_first(httpserver: HTTPServer) -> None:
    seen = serve(
        httpserver,
        {FALLBACK: [ok(json.dumps({"measurements": []}), FALLBACK)], PRIMARY: [err(500)]},
    )
    llm, _ = extractor(httpserver, long_input_chars=50)
    res = llm.extract(PR_TEXT)
    assert res.model_used == FALLBACK and [p["model"] for p in seen] == [FALLBACK]


def test_stated_only_measurement_and_no_llm_speedup(httpserver: HTTPServer) -> None:
    item = dict(GOOD_ITEMS[0], baseline=None, optimized=None, stated_speedup="23% lower latency")
    serve(httpserver, {PRIMARY: [ok(json.dumps({"measurements": [item]}), PRIMARY)]})
    llm, _ = extractor(httpserver)
    (m,) = extract_text(PR_TEXT, extractor="llm", llm=llm)
    # the phrase is not in the PR text: kept with its flags, never usable
    assert m.stated_speedup == round(1 / 0.77, 4) and m.speedup is None
    assert (m.stated_verbatim, m.audit_pass, m.usable_speedup) == (False, False, None)


def test_cache_key_changes_with_each_input() -> None:
    base = llm_cache_key("vllm", 1, "a" * 64, PROMPT_VERSION, PRIMARY)
    assert base == llm_cache_key("vllm", 1, "a" * 64, PROMPT_VERSION, PRIMARY)
    variants = [
        llm_cache_key("sglang", 1, "a" * 64, PROMPT_VERSION, PRIMARY),
        llm_cache_key("vllm", 2, "a" * 64, PROMPT_VERSION, PRIMARY),
        llm_cache_key("vllm", 1, "b" * 64, PROMPT_VERSION, PRIMARY),
        llm_cache_key("vllm", 1, "a" * 64, "other-prompt", PRIMARY),
        llm_cache_key("vllm", 1, "a" * 64, PROMPT_VERSION, FALLBACK),
    ]
    assert base not in variants and len(set(variants)) == 5


def test_config_from_env_and_key_not_in_repr() -> None:
    assert LLMConfig.from_env({}) is None
    cfg = LLMConfig.from_env({"KERNELHOUSE_LLM_BASE_URL": "http://x/v1", "HF_TOKEN": KEY})
    assert (
        cfg is not None
        and cfg.api_key == KEY
        and cfg.model == PRIMARY
        and cfg.fallback_model == FALLBACK
    )
    assert KEY not in repr(cfg)


def test_llm_extractor_requires_endpoint() -> None:
    with pytest.raises(ValueError, match="KERNELHOUSE_LLM_BASE_URL"):
        extract_text(PR_TEXT, extractor="llm")


@pytest.mark.parametrize(
    "reply",
    [
        '{"measurements": []}',
        '```json\n{"measurements": []}\n```',
        '<think>hmm</think>{"measurements": []}',
        'Here you go: {"measurements": []} done',
    ],
)
def test_parse_reply_tolerates_wrapping(reply: str) -> None:
    assert parse_reply(reply) == []


def test_one_llm_settings_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """``LLMConfig.from_env`` and ``Settings.llm_*`` come from one reader
    (``settings.load_llm_settings``): the same environment gives the same endpoint."""
    from dagster_project.settings import load_settings

    env = {
        "KERNELHOUSE_LLM_BASE_URL": " http://x/v1 ",
        "KERNELHOUSE_LLM_API_KEY": KEY,
        "HF_TOKEN": "other",
        "KERNELHOUSE_LLM_MODEL": "m",
        "KERNELHOUSE_LLM_FALLBACK_MODEL": " ",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    s, cfg = load_settings(), LLMConfig.from_env(env)
    assert cfg is not None and cfg.api_key == KEY and s.llm_api_key is not None
    assert (
        (cfg.base_url, cfg.api_key, cfg.model, cfg.fallback_model)
        == (s.llm_base_url, s.llm_api_key.get(), s.llm_model, s.llm_fallback_model)
        == ("http://x/v1", KEY, "m", FALLBACK)
    )
