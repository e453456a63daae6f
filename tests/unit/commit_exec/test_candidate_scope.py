"""The execution reward reads its speedup in the label's scope (``stats.label_scope``): a row
whose launcher CUDA graphs cannot capture (one that synchronises or allocates) is read in
host wall time, as its shipped label is. ``time_shape`` needs a GPU, so its two scopes'
results are given here in the runner's format (block design, harness >= 6); the GPU test
(``tests/gpu/test_commit_exec_gpu.py``) runs the real one."""

from __future__ import annotations

from typing import Any

import pytest

from dagster_project.commit_exec.device import candidate


def _scope(before: float, after: float, n: int = 12, block: int = 4) -> dict[str, Any]:
    jitter = [1.0 + 0.01 * (i % 3) for i in range(n)]
    return {
        "speedup": before / after,
        "block_size": block,
        "samples_before": [before * j for j in jitter],
        "samples_after": [after * j for j in jitter],
        "timed_outputs_ok": True,
    }


def _run(monkeypatch: pytest.MonkeyPatch, timings: list[dict[str, Any]]) -> dict[str, Any]:
    calls = iter(timings)
    monkeypatch.setattr(candidate, "time_shape", lambda *a, **k: next(calls))
    out: dict[str, Any] = {"shapes": [{"shape": f"s{i}"} for i in range(len(timings))]}
    assert (
        candidate._time(None, {"before": None, "after": None}, [0] * len(timings), out, None)
        is False
    )
    return out


def test_uncapturable_launcher_is_read_on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    err = {"error": "RuntimeError: operation not permitted when stream is capturing"}
    out = _run(monkeypatch, [{"graph": err, "host": _scope(3.0, 1.0)}] * 2)
    assert out["scope"] == "host" and out["significant"]
    assert out["speedup"] == pytest.approx(3.0, rel=0.05)
    assert out["shapes"][0]["graph_error"].startswith("RuntimeError")


def test_graph_scope_wins_where_it_captured(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _run(monkeypatch, [{"graph": _scope(2.0, 1.0), "host": _scope(1.0, 1.0)}] * 2)
    assert out["scope"] == "graph" and out["speedup"] == pytest.approx(2.0, rel=0.05)
    assert out["shapes"][1]["host_speedup"] == pytest.approx(1.0)


def test_wrong_output_in_either_timed_scope_is_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = {**_scope(2.0, 1.0), "timed_outputs_ok": False, "timed_outputs_why": "max err 3"}
    calls = iter([{"graph": _scope(2.0, 1.0), "host": bad}])
    monkeypatch.setattr(candidate, "time_shape", lambda *a, **k: next(calls))
    out: dict[str, Any] = {"shapes": [{"shape": "s0"}]}
    assert candidate._time(None, {"before": None, "after": None}, [0], out, None) is True
    assert "host" in out["shapes"][0]["why"] and "speedup" not in out
