"""``gains.schema.validate_json``: jsonschema does the validating, each line names the field."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema.exceptions import SchemaError

from dagster_project.gains.schema import LLM_OUTPUT_SCHEMA, validate_json, validate_llm_output

ITEM: dict[str, Any] = {
    "scope": "kernel",
    "hardware": "H100",
    "model": None,
    "shape": None,
    "batch_size": "8",
    "metric": "latency",
    "unit": "us",
    "higher_is_better": False,
    "baseline": "10.1",
    "optimized": "8.2",
    "stated_speedup": None,
}


def test_each_problem_is_one_line_naming_its_field() -> None:
    bad = ITEM | {"scope": "gpu", "higher_is_better": 1, "batch_size": True, "speedup": 2.0}
    del bad["metric"]
    errors = validate_llm_output({"measurements": [ITEM, bad], "extra": 1})
    assert errors == [
        "$: unexpected 'extra'",
        "$.measurements[1]: missing 'metric'",
        "$.measurements[1]: unexpected 'speedup'",
        "$.measurements[1].batch_size: expected string|integer|null, got bool",
        "$.measurements[1].higher_is_better: expected boolean|null, got int",
        "$.measurements[1].scope: 'gpu' not in ['kernel', 'e2e']",
    ]


def test_a_wrong_type_reports_only_the_type() -> None:
    assert validate_llm_output({"measurements": [ITEM | {"scope": 5}]}) == [
        "$.measurements[0].scope: expected string, got int"
    ]
    assert validate_llm_output("not an object") == ["$: expected object, got str"]
    assert validate_json(3, {"type": "object"}, path="reply") == ["reply: expected object, got int"]


def test_valid_replies_have_no_errors_and_the_schema_itself_is_checked() -> None:
    assert validate_llm_output({"measurements": [ITEM, ITEM | {"baseline": 3.5}]}) == []
    assert validate_json({"a": 1}, LLM_OUTPUT_SCHEMA["properties"]["measurements"]) != []
    with pytest.raises(SchemaError):
        validate_json(1, {"type": "no-such-type"})
