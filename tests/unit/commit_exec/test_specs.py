"""Every harness spec is complete: >= 4 named shapes with sources, a random shape drawn
from the run's generator, a justified tolerance, rows no other spec claims."""

from __future__ import annotations

import random

import pytest

from dagster_project.commit_exec.specs import SPECS, Spec, shape_label, spec_for
from dagster_project.commit_exec.specs.bind import AdapterGap, call_by_name


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_spec_is_complete(spec: Spec) -> None:
    assert len(spec.shapes) >= 4
    assert all(s.get("name") for s in spec.shapes)
    assert spec.tolerance_why
    assert spec.rows
    a = spec.random_shape(random.Random(1))
    b = spec.random_shape(random.Random(2))
    assert a["name"] == "random"
    assert shape_label(a) != shape_label(spec.shapes[0]) or shape_label(b) != shape_label(a)
    for repo, sha, path in spec.rows:
        assert spec_for(repo, sha + "0" * (40 - len(sha)), path) is spec


def test_rows_belong_to_one_spec() -> None:
    seen: dict[tuple[str, str, str], str] = {}
    for spec in SPECS:
        for row in spec.rows:
            assert row not in seen, f"{row} in {seen.get(row)} and {spec.name}"
            seen[row] = spec.name


def test_call_by_name_binds_each_sides_signature() -> None:
    def old(x, group_size, eps=1e-10):  # noqa: ANN001, ANN202
        return ("old", x, group_size, eps)

    def new(x, group_size, eps=1e-10, out_q=None, column_major_scales=False):  # noqa: ANN001, ANN202
        return ("new", x, group_size, column_major_scales)

    values = {"x": 1, "group_size": 128, "column_major_scales": True, "unused": 0}
    assert call_by_name(old, values) == ("old", 1, 128, 1e-10)
    assert call_by_name(new, values) == ("new", 1, 128, True)
    with pytest.raises(AdapterGap, match="group_size"):
        call_by_name(old, {"x": 1})
