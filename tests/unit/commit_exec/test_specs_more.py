"""The specs of task 35d (``specs/more_*.py``): each covers exactly its rows, names >= 4
sourced shapes plus a held-out random one (and an A/A control when it names none), justifies
its tolerance, and its torch reference agrees with what the kernels must produce; the census
turns a ``no_launcher_found`` row a spec launches into ``harness_ready``."""

from __future__ import annotations

import random
from typing import Any

import pytest

from dagster_project.commit_exec.census import CENSUS_VERSION, census_row
from dagster_project.commit_exec.specs import (
    SPECS,
    Spec,
    more_attention,
    more_flashinfer,
    more_sglang,
    more_vllm,
    shape_label,
    spec_for,
)

MORE: tuple[Spec, ...] = (
    more_sglang.SPECS + more_vllm.SPECS + more_attention.SPECS + more_flashinfer.SPECS
)


def _torch() -> Any:
    """torch where installed (the device venv, a dev machine); CI's venv has none."""
    return pytest.importorskip("torch")


def _gen(seed: int = 0) -> Any:
    return _torch().Generator().manual_seed(seed)


def _cpu() -> Any:
    return _torch().device("cpu")


@pytest.mark.parametrize("spec", MORE, ids=lambda s: s.name)
def test_spec_is_registered_and_covers_its_rows(spec: Spec) -> None:
    assert spec in SPECS
    for repo, sha, path in spec.rows:
        assert spec_for(repo, sha + "f" * (40 - len(sha)), path) is spec
        assert spec_for(repo, sha + "f" * (40 - len(sha)), path + ".other") is None


@pytest.mark.parametrize("spec", MORE, ids=lambda s: s.name)
def test_spec_has_sourced_shapes_a_control_and_a_held_out_shape(spec: Spec) -> None:
    assert len(spec.shapes) >= 4
    assert all(s.get("name") and s.get("source") for s in spec.shapes)
    # a named control shape needs its reason; without one the runner times an A/A control
    assert spec.control is None or spec.control_reason
    drawn = {shape_label(spec.random_shape(random.Random(seed))) for seed in range(8)}
    assert len(drawn) > 1, "the held-out shape must be drawn, not fixed"
    assert not drawn & {shape_label(s) for s in spec.shapes}


@pytest.mark.parametrize("spec", MORE, ids=lambda s: s.name)
def test_tolerance_is_justified(spec: Spec) -> None:
    assert len(spec.tolerance_why) > 20
    assert any(w in spec.tolerance_why for w in ("exact", "ulp", "accumulat", "sum"))
    for atol, rtol in spec.tolerance.values():
        # at most one fp8 e4m3 step (12.5 %) relative, a few bf16 ulps absolute
        assert 0 <= atol < 0.1 and 0 <= rtol <= 0.126


@pytest.mark.parametrize("spec", MORE, ids=lambda s: s.name)
def test_reference_is_consistent_with_the_inputs(spec: Spec) -> None:
    """The reference runs on the held-out shape's inputs and returns every compared
    output, with the mutated inputs' shapes (a misfed reference fails both sides)."""
    assert spec.reference is not None
    shape = spec.random_shape(random.Random(3))
    x = spec.make_inputs(shape, _gen(), _cpu())
    ref = spec.reference({k: (v.clone() if hasattr(v, "clone") else v) for k, v in x.items()})
    for name in spec.mutated:
        if name in ref:
            assert ref[name].shape == x[name].shape


def test_alloc_reference_hands_out_unique_slots_in_fresh_pages() -> None:
    spec = more_sglang.KV_ALLOC
    shape = {"name": "t", "mode": "extend", "batch": 6, "page": 16, "prefix": 40, "extend": 50}
    x = spec.make_inputs(shape, _gen(1), _cpu())
    out = spec.reference(x)["out_indices"]
    assert out.numel() == int((x["seq_lens"] - x["prefix_lens"]).sum())
    assert out.unique().numel() == out.numel()
    owned = set((x["last_loc"][x["prefix_lens"] > 0] // 16).tolist())
    assert not owned & set(x["free_pages"].tolist())


def test_flashmla_reference_lists_each_requests_pages() -> None:
    spec = more_sglang.FLASHMLA_KV_INDICES
    x = spec.make_inputs({"name": "t", "batch": 3, "context": 300, "page": 64}, _gen(2), _cpu())
    ref = spec.reference(x)["block_kv_indices"]
    for b, n in enumerate(x["seq_lens"].tolist()):
        pages = -(-n // 64)
        row = x["req_to_token"][x["req_pool_indices"][b]]
        assert ref[b, :pages].tolist() == (row[0:n:64] // 64).tolist()
        assert (ref[b, pages:] == -1).all()


_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def create_flashmla_kv_indices_triton(a, b, N: tl.constexpr):
    tl.store(b + tl.arange(0, N), tl.load(a + tl.arange(0, N)){extra})


class Backend:
    def update(self, a, b):
        create_flashmla_kv_indices_triton[(1,)](a, b, 4)
"""


def test_census_makes_a_spec_launched_method_row_harness_ready() -> None:
    before, after = _KERNEL.format(extra=""), _KERNEL.format(extra=" + 1")
    path = "python/sglang/srt/layers/attention/triton_ops/kv_indices.py"
    covered = census_row("sglang", "bd47869b" + "0" * 32, path, "Triton", "perf", before, after)
    assert covered.status == "harness_ready"
    assert "call site" in covered.reason
    uncovered = census_row("sglang", "0" * 40, path, "Triton", "perf", before, after)
    assert uncovered.status == "no_launcher_found"
    assert CENSUS_VERSION == "4"
