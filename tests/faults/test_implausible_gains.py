"""Issue 42 probes of implausible gains: an LLM that pairs a shape column with a latency
(both numbers verbatim, from one row), a crafted ``5000 -> 5`` row, and the published
columns' bound in the suites. Real extractors, a real OpenAI-compatible server on
127.0.0.1, the real Great Expectations suites."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from dagster_project.gains.audit import PLAUSIBLE_SPEEDUP
from dagster_project.gains.extract import extract_pr_gains, extract_text
from dagster_project.gains.llm_extractor import LLMConfig, LLMExtractor
from dagster_project.quality.suites import SUITES_DIR, load_suite, run_suite

SHAPE_TABLE = """[Kernel] faster fused_moe
On H100:

| batch | M | before (us) | after (us) |
|---|---|---|---|
| 8 | 4096 | 10.5 | 10.0 |
"""

CRAFTED = """[Kernel] faster fused_moe
On H100:

| kernel | before (us) | after (us) |
|---|---|---|
| fused_moe | 5000 | 5 |
"""


def _llm_pairing(httpserver: HTTPServer, baseline: str, optimized: str) -> None:
    def handler(request: Request) -> Response:
        item = {
            "scope": "kernel",
            "hardware": "H100",
            "model": None,
            "shape": None,
            "batch_size": None,
            "metric": "latency",
            "unit": "us",
            "higher_is_better": False,
            "baseline": baseline,
            "optimized": optimized,
            "stated_speedup": None,
        }
        content = json.dumps({"measurements": [item]})
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

    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(handler)


def test_llm_pairing_a_shape_column_with_a_latency_fails_the_audit(
    httpserver: HTTPServer,
) -> None:
    _llm_pairing(httpserver, "4096", "10.0")  # M paired with "after": 409.6x
    cfg = LLMConfig(base_url=httpserver.url_for("/v1"), api_key="k" * 12, model="m")
    res = extract_pr_gains(SHAPE_TABLE, extractor="llm", llm=LLMExtractor(cfg))
    (m,) = res.measurements
    assert (m.baseline, m.optimized) == (4096.0, 10.0)
    assert m.audit_pass is False and m.usable_speedup is None
    assert "not from one row/record/sentence" in m.audit_reason
    assert "beyond the plausible bound of 100x" in m.audit_reason
    # the row's own pair passes: 10.5 -> 10.0, 1.05x
    table = [x for x in extract_text(SHAPE_TABLE) if x.is_pair]
    assert [(x.baseline, x.optimized, x.audit_pass) for x in table] == [(10.5, 10.0, True)]


def test_a_key_column_value_is_never_a_pair_value_even_within_the_bound(
    httpserver: HTTPServer,
) -> None:
    _llm_pairing(httpserver, "8", "10.0")  # batch paired with "after": 0.8x, plausible
    cfg = LLMConfig(base_url=httpserver.url_for("/v1"), api_key="k" * 12, model="m")
    (m,) = extract_pr_gains(SHAPE_TABLE, extractor="llm", llm=LLMExtractor(cfg)).measurements
    assert m.audit_pass is False
    assert m.audit_reason == (
        "values not from one row/record/sentence under baseline and optimized roles"
    )


def test_crafted_thousandfold_row_is_held_back_with_its_reason() -> None:
    ms = [m for m in extract_text(CRAFTED) if m.is_pair]
    assert [(m.baseline, m.optimized) for m in ms] == [(5000.0, 5.0)]
    assert ms[0].audit_pass is False and ms[0].usable_speedup is None
    assert ms[0].audit_reason == "speedup 1000x is beyond the plausible bound of 100x for kernel"


def test_published_speedup_columns_are_bounded_by_the_suites(tmp_path: Path) -> None:
    suite = load_suite(SUITES_DIR / "kernel_commits.json")
    bounds = {
        e["kwargs"]["column"]: e["kwargs"].get("max_value")
        for e in suite["expectations"]
        if e["kwargs"].get("column") in ("kernel_speedup", "e2e_speedup")
    }
    assert bounds == {
        "kernel_speedup": PLAUSIBLE_SPEEDUP["kernel"],
        "e2e_speedup": PLAUSIBLE_SPEEDUP["e2e"],
    }
    tuned = load_suite(SUITES_DIR / "tuned_configs.json")
    spec = [e for e in tuned["expectations"] if e["kwargs"].get("column") == "speedup_vs_default"]
    assert spec[0]["kwargs"]["max_value"] == PLAUSIBLE_SPEEDUP["kernel"]
    only = {**suite, "expectations": [e for e in suite["expectations"] if "speedup" in str(e)]}
    frame = pl.DataFrame({"kernel_speedup": [1.05, 431.0], "e2e_speedup": [1.1, 2.0]})
    result = run_suite(only, tmp_path / "none.duckdb", frame=frame)
    failed = [o.column for o in result.outcomes if not o.success]
    assert failed == ["kernel_speedup"]
