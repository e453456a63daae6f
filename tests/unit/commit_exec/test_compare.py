"""The output comparison in slices (``device.compare.CHUNK``): the same verdict, maximum
error and miss count as one pass, whatever the slice size or the output's layout."""

from __future__ import annotations

import pytest

from dagster_project.commit_exec.device import compare


def test_sliced_comparison_equals_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(0)
    ref = torch.randn(1000, 37, generator=gen).to(torch.bfloat16)
    got = ref.clone()
    got[5, 3] += 0.5
    got[999, 36] = float("nan")
    got[10, 10] = float("inf")
    whole = compare.compare({"x": got}, {"x": ref}, {})
    assert whole["why"] == "x: 3/37000 beyond atol=0.016 rtol=0.016"
    for chunk in (100, 7):
        monkeypatch.setattr(compare, "CHUNK", chunk)
        assert compare.compare({"x": got}, {"x": ref}, {}) == whole
        transposed = got.t().contiguous().t()  # same values, column-major strides
        assert compare.compare({"x": transposed}, {"x": ref}, {}) == whole
    assert compare.compare({"x": ref}, {"x": ref}, {})["ok"] is True
