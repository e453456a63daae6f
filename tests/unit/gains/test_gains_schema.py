"""The card's gains format and the LLM output schema."""

from __future__ import annotations

from dagster_project.gains.schema import (
    GAIN_FIELDS,
    LLM_OUTPUT_SCHEMA,
    Measurement,
    validate_llm_output,
)


def test_gain_dict_has_exactly_the_card_fields_in_order() -> None:
    m = Measurement(
        scope="kernel", metric="latency", baseline=2.0, optimized=1.0, repo="vllm", pr_number=3
    )
    assert (
        tuple(m.to_gain())
        == GAIN_FIELDS
        == (
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
        )
    )
    row = m.to_row()
    assert row["repo"] == "vllm" and "audit_pass" in row
    assert Measurement.from_dict(row | {"unknown": 1}) == m


def test_llm_schema_validation() -> None:
    item = {
        "scope": "e2e",
        "hardware": None,
        "model": None,
        "shape": None,
        "batch_size": 8,
        "metric": "TTFT",
        "unit": "ms",
        "higher_is_better": False,
        "baseline": "12.0",
        "optimized": 11.5,
        "stated_speedup": None,
    }
    assert validate_llm_output({"measurements": [item]}) == []
    assert validate_llm_output({"measurements": []}) == []
    errors = validate_llm_output(
        {"measurements": [item | {"scope": "gpu", "speedup": 2.0}], "extra": 1}
    )
    assert (
        any("not in" in e for e in errors)
        and any("speedup" in e for e in errors)
        and any("extra" in e for e in errors)
    )
    assert validate_llm_output({"measurements": [{k: v for k, v in item.items() if k != "metric"}]})
    assert validate_llm_output({"measurements": [item | {"higher_is_better": 1}]})
    assert validate_llm_output([]) != []
    # strict structured-output compatible: every property required, nothing extra allowed
    props = LLM_OUTPUT_SCHEMA["properties"]["measurements"]["items"]
    assert (
        set(props["required"]) == set(props["properties"])
        and props["additionalProperties"] is False
    )
    assert "speedup" not in props["properties"]  # the model never supplies computed speedups
