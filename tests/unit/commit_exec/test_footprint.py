"""Every named shape's inputs and torch reference fit well inside one warm-up shard's share
of the card, by each spec's bound from the shape alone (no allocation); and the bound is
an upper bound of what the code really holds (measured under torch where it is installed).

Stop 35's warm-up lost 56 rows to one reference that gathered a weight copy per routed
(token, slot) pair: 68 GB at Mixtral m = 1024, 140 GiB at Qwen2-57B m = 256."""

from __future__ import annotations

import weakref
from typing import Any

import pytest

from dagster_project.commit_exec.device.runner import WARM_CARD_SHARE
from dagster_project.commit_exec.specs import SPECS, Spec
from dagster_project.commit_exec.specs.base import Shape

#: 8 GiB: below one of eight warm-up shards' share of an 80 GB card (0.9 / 8 * 79 GiB).
LIMIT = 8 * 2**30
#: Specs whose reference works per expert / per weight over large weight stacks: each must
#: state its bound (the family the stop-35 blow-ups came from).
MUST_DECLARE = {
    "fused_moe_gemm_bf16",
    "sglang_fused_moe_gemm_bf16_2024",
    "sglang_ep_grouped_gemm_triton",
    "vllm_awq_gemm",
}


def _named(spec: Spec) -> list[Shape]:
    return list(spec.shapes) + ([spec.control] if spec.control is not None else [])


def test_limit_is_below_a_warm_shard_share() -> None:
    assert LIMIT < WARM_CARD_SHARE / 8 * 79 * 2**30


def test_the_weight_stack_specs_declare_a_bound() -> None:
    declared = {s.name for s in SPECS if s.footprint is not None}
    assert declared >= MUST_DECLARE, MUST_DECLARE - declared


@pytest.mark.parametrize("spec", [s for s in SPECS if s.footprint], ids=lambda s: s.name)
def test_named_shapes_fit(spec: Spec) -> None:
    assert spec.footprint is not None
    for shape in _named(spec):
        need = spec.footprint(shape)
        assert 0 < need <= LIMIT, f"{spec.name} {shape['name']}: {need / 2**30:.1f} GiB"


def test_a_gathered_weight_reference_would_fail_the_limit() -> None:
    """The bound of the einsum over B[topk_ids] that stop 35 ran, at the shapes it failed."""
    moe = next(s for s in SPECS if s.name == "sglang_fused_moe_gemm_bf16_2024")
    for name in ("mixtral-8x7b-w1-m1024", "qwen2-57b-w1-m256"):
        x = next(s for s in moe.shapes if s["name"] == name)
        gathered = 4 * x["tokens"] * x["topk"] * x["n"] * x["k"]
        assert gathered > LIMIT
        assert moe.footprint is not None and moe.footprint(x) < gathered / 20


# --- the bound holds for the real code (torch only: CI's venv has none) ---


def _peak_bytes(fn: Any) -> int:
    """Peak bytes of torch storages alive while ``fn`` runs (every op's outputs tracked)."""
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode

    live: dict[int, int] = {}
    peak = [0]

    def track(t: Any) -> None:
        if not isinstance(t, torch.Tensor):
            return
        st = t.untyped_storage()
        key = st.data_ptr()
        if key in live or st.nbytes() == 0:
            return
        live[key] = st.nbytes()
        weakref.finalize(st, live.pop, key, None)
        peak[0] = max(peak[0], sum(live.values()))

    class Track(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                track(t)
            return out

    with Track():
        fn()
    return peak[0]


SMALL = {
    "fused_moe_gemm_bf16": {"tokens": 64, "experts": 8, "topk": 2, "k": 256, "n": 128},
    "sglang_fused_moe_gemm_bf16_2024": {"tokens": 48, "experts": 16, "topk": 2, "k": 256, "n": 64},
    "sglang_ep_grouped_gemm_triton": {"experts": 4, "tokens": 100, "k": 256, "n": 128},
    "vllm_awq_gemm": {"m": 8, "k": 512, "n": 256},
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_bound_covers_what_the_reference_holds(name: str) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    spec = next(s for s in SPECS if s.name == name)
    shape = {"name": "small", **SMALL[name]}
    assert spec.footprint is not None and spec.reference is not None

    def run() -> None:
        x = spec.make_inputs(shape, torch.Generator().manual_seed(0), torch.device("cpu"))
        spec.reference(x)  # type: ignore[misc]

    peak = _peak_bytes(run)
    assert 0 < peak <= spec.footprint(shape), (peak, spec.footprint(shape))
