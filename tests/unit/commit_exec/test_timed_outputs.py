"""The timing loop compares what the timed calls returned (issue 37, 37f's finding): a side that
is right when checked and wrong once timing starts is caught. Host scope on CPU torch (the graph
scope needs CUDA); skipped where torch is absent, as in CI's environment."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")

from dagster_project.commit_exec.device import runner  # noqa: E402


def _spec() -> types.SimpleNamespace:
    return types.SimpleNamespace(
        mutated=(),
        tolerance_for=lambda shape: {},
        make_inputs=lambda shape, gen, dev: {"x": torch.randn(shape["n"], generator=gen)},
    )


def test_a_side_wrong_only_when_timed_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(runner, "MAX_SETS", 2)
    calls = {"n": 0}

    def cheat(inp: dict) -> dict:
        calls["n"] += 1  # the warm-up calls (one per set) are right, the timed ones are not
        return {"y": inp["x"] * 2 if calls["n"] <= 2 else torch.zeros_like(inp["x"])}

    def honest(inp: dict) -> dict:
        return {"y": inp["x"] + inp["x"]}

    def before(inp: dict) -> dict:
        return {"y": inp["x"] * 2}

    spec = _spec()
    ok = runner.time_shape(spec, before, honest, {"n": 256}, torch.device("cpu"))["host"]
    bad = runner.time_shape(spec, before, cheat, {"n": 256}, torch.device("cpu"))["host"]
    assert ok["timed_outputs_ok"] is True
    assert bad["timed_outputs_ok"] is False and "y" in bad["timed_outputs_why"]
