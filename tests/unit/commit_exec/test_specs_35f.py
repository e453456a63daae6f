"""The specs of task 35f (the modules ``NEW`` lists, and the mrope rows under
``torch.compile``): each covers exactly its rows, names >= 4 sourced shapes plus a held-out
random one and justifies its tolerance; the census turns their host-side-only rows into
``harness_ready`` and gives a row whose after side cannot run at its sha ``broken_at_sha``;
the references are the operations they claim (checked by hand)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from dagster_project.commit_exec.census import CENSUS_VERSION, census_row
from dagster_project.commit_exec.specs import (
    SPECS,
    Spec,
    fla_op,
    gdn_packed,
    gdn_qkv_split,
    indexer_decode,
    kda_chunk,
    mla_fp8_quant,
    mla_set_kv,
    moe_sum_scale,
    nsa_pool,
    pack_topk,
    shape_label,
    spec_for,
    trtllm_mla_indices,
    vision_rope,
)

NEW: tuple[Spec, ...] = (
    kda_chunk.SPECS
    + gdn_packed.SPECS
    + indexer_decode.SPECS
    + mla_set_kv.SPECS
    + nsa_pool.SPECS
    + vision_rope.SPECS
    + pack_topk.SPECS
    + fla_op.SPECS
    + trtllm_mla_indices.SPECS
    + gdn_qkv_split.SPECS
    + mla_fp8_quant.SPECS
    + moe_sum_scale.SPECS
)
_SG_ROPE = "python/sglang/srt/layers/rotary_embedding.py"
_SG_KDA = "python/sglang/srt/layers/attention/fla/kda.py"

# A Triton file whose commit changes only host code (no @triton function, no launch site).
_BEFORE = "import triton\n\n@triton.jit\ndef k(x):\n    pass\n\ndef helper(a):\n    return a\n"
_AFTER = "import triton\n\n@triton.jit\ndef k(x):\n    pass\n\ndef helper(a):\n    return a + 1\n"


def _full(sha: str) -> str:
    return sha + "f" * (40 - len(sha))


@pytest.mark.parametrize("spec", NEW, ids=lambda s: s.name)
def test_spec_is_registered_and_covers_its_rows(spec: Spec) -> None:
    assert spec in SPECS
    for repo, sha, path in spec.rows:
        assert spec_for(repo, _full(sha), path) is spec
        assert spec_for(repo, _full(sha), path + ".other") is None


@pytest.mark.parametrize("spec", NEW, ids=lambda s: s.name)
def test_spec_has_sourced_shapes_and_a_held_out_shape(spec: Spec) -> None:
    assert len(spec.shapes) >= 4
    assert all(s.get("name") and s.get("source") for s in spec.shapes)
    drawn = {shape_label(spec.random_shape(random.Random(seed))) for seed in range(8)}
    assert len(drawn) > 1, "the held-out shape must be drawn, not fixed"
    assert not drawn & {shape_label(s) for s in spec.shapes}
    assert len(spec.tolerance_why) > 20
    assert any(w in spec.tolerance_why for w in ("ulp", "exact"))
    assert spec.control is None or spec.control_reason
    for atol, rtol in spec.tolerance.values():
        # at most one fp8 e4m3 step (12.5 %) relative, a few bf16 ulps absolute
        assert 0 <= atol < 0.1 and 0 <= rtol <= 0.126


def test_the_torch_compile_mrope_rows_join_the_mrope_spec() -> None:
    for sha in ("f389f017", "f9696641"):
        spec = spec_for("sglang", _full(sha), _SG_ROPE)
        assert spec is not None and spec.name == "sglang_mrope_forward_triton"


def test_census_covers_the_new_rows_and_names_a_broken_after_side() -> None:
    assert CENSUS_VERSION == "4"
    ready = census_row("sglang", _full("03a87068"), _SG_KDA, "Triton", "t", _BEFORE, _AFTER)
    assert ready.status == "harness_ready"
    broken = census_row("sglang", _full("eb3da9c1"), _SG_KDA, "Triton", "t", _BEFORE, _AFTER)
    assert broken.status == "broken_at_sha" and "2f66b067" in broken.reason
    # a commit that only adds its launcher: the spec runs the path it replaces (the sibling)
    packed = census_row(
        "vllm",
        _full("9e19f833"),
        "vllm/model_executor/layers/fla/ops/fused_recurrent.py",
        "Triton",
        "t",
        _BEFORE,
        _BEFORE + "\n@triton.jit\ndef k2(x):\n    pass\n\ndef launch(x):\n    k2[(1,)](x)\n",
    )
    assert packed.status == "harness_ready"
    # the same host-only change in a file no spec covers stays host_side_only
    other = census_row("sglang", _full("03a87068"), _SG_KDA + "x", "Triton", "t", _BEFORE, _AFTER)
    assert other.status == "host_side_only"


def test_kda_siblings_are_written_for_both_sides() -> None:
    spec = kda_chunk.KDA_CHUNK
    paths = spec.siblings_for(_full("03a87068"))
    assert any(p.endswith("/chunk_intra.py") for p in paths)  # the fused intra of 03a87068
    assert any(p.endswith("/chunk_delta_h.py") for p in paths)
    assert not any(p.endswith(("/op.py", "/utils.py")) for p in paths)  # the loader's shims
    assert kda_chunk.KDA_DECODE_VLLM.siblings_for(_full("82405807")) == (
        "vllm/model_executor/layers/fla/ops/fused_recurrent.py",
    )


def _torch() -> Any:
    """torch where installed (the device venv, a dev machine); CI's venv has none."""
    return pytest.importorskip("torch")


def test_kda_decode_reference_is_one_recurrent_step() -> None:
    """One token, one head, K = V = 128: the reference's state is exp(g) S + k beta (v -
    k^T exp(g) S)^T with k l2-normalised, and its output that state read along q."""
    torch = _torch()
    spec = kda_chunk.KDA_DECODE_VLLM
    x = spec.make_inputs({"name": "t", "seqs": 1, "h": 1}, torch.Generator().manual_seed(0), "cpu")
    ref = spec.reference({k: (v.clone() if hasattr(v, "clone") else v) for k, v in x.items()})
    slot = int(x["state_idx"][0])
    s0 = x["state_kv"][slot, 0].double()
    q, k = x["q"][0, 0, 0].double(), x["k"][0, 0, 0].double()
    q, k = q / q.norm() * x["scale"], k / k.norm()
    v, g = x["v"][0, 0, 0].double(), x["g"][0, 0, 0].double()
    beta = x["beta"][0, 0, 0].double()
    s = s0 * torch.exp(g)[:, None]
    s = s + torch.outer(k, beta * (v - k @ s))
    assert torch.allclose(ref["state"][slot, 0].double(), s, atol=1e-4, rtol=1e-4)
    assert torch.allclose(ref["o"][0, 0, 0].double(), (q @ s).to(x["v"].dtype).double())
    other = [i for i in range(x["state_kv"].shape[0]) if i != slot]
    assert torch.equal(ref["state"][other], x["state_kv"][other])  # only the request's slot


def test_indexer_control_varies_the_decode_lengths_and_named_shapes_do_not() -> None:
    """The control takes the path the commit leaves (unequal lengths); named shapes the
    uniform MTP step the new kernel serves (min == max decode length)."""
    spec = indexer_decode.INDEXER_DECODE
    assert spec.control is not None
    lens = indexer_decode._decode_lens(spec.control)
    assert min(lens) < max(lens) == spec.control["next_n"]
    for shape in spec.shapes:
        assert set(indexer_decode._decode_lens(shape)) == {shape["next_n"]}
        assert shape["next_n"] > 2  # MTP > 1: the flatten path, beyond native next_n


def test_indexer_reference_expands_per_token() -> None:
    torch = _torch()
    spec = indexer_decode.INDEXER_DECODE
    shape = {
        "name": "t",
        "reqs": 2,
        "next_n": 3,
        "max_ctx": 50,
        "max_model_len": 256,
        "max_batched": 16,
    }
    x = spec.make_inputs(shape, torch.Generator().manual_seed(0), "cpu")
    ref = spec.reference(x)
    s0, s1 = (int(v) for v in x["seq_lens"])
    assert ref["seq_lens"].tolist() == [s0 - 2, s0 - 1, s0, s1 - 2, s1 - 1, s1]
    assert torch.equal(ref["block_table"][4], x["block_table"][1])
    assert ref["decode_seq_lens_buffer"][6:].eq(0).all()
    assert ref["decode_lens_out"].eq(1).all()


def test_mla_reference_writes_the_concatenation_at_the_slots() -> None:
    torch = _torch()
    spec = mla_set_kv.MLA_SET_KV
    shape = {"name": "t", "tokens": 3, "pool": 16, "dtype": "float8_e4m3fn"}
    x = spec.make_inputs(shape, torch.Generator().manual_seed(0), "cpu")
    assert x["k_pe"].stride(0) == 576  # the rope part is a strided view, as in the model
    assert int(x["loc"].min()) >= 1  # the padded dummy slot 0 is never a target
    buf = spec.reference(x)["kv_buffer"]
    assert buf.dtype == torch.uint8
    row = buf[int(x["loc"][1]), 0].view(torch.float8_e4m3fn).float()
    assert torch.equal(row[:512], x["k_nope"][1, 0].to(torch.float8_e4m3fn).float())
    assert torch.equal(row[512:], x["k_pe"][1, 0].to(torch.float8_e4m3fn).float())
    untouched = [i for i in range(17) if i not in x["loc"].tolist()]
    assert buf[untouched].eq(0).all()


def test_pack_reference_puts_the_id_high_and_the_bf16_weight_low() -> None:
    torch = _torch()
    spec = pack_topk.PACK_TOPK
    shape = {"name": "t", "tokens": 2, "topk": 2, "experts": 8}
    x = spec.make_inputs(shape, torch.Generator().manual_seed(0), "cpu")
    packed = spec.reference(x)["packed"]
    assert packed.dtype == torch.int32
    assert torch.equal(packed >> 16, x["topk_ids"])
    low = (packed & 0xFFFF).to(torch.int16).view(torch.bfloat16)
    assert torch.equal(low, x["topk_weights"].to(torch.bfloat16))


def test_vision_rope_reference_rotates_half_the_head() -> None:
    """At angle 0 the rotation is the identity; at 90 degrees it maps (a, b) to (-b, a)."""
    torch = _torch()
    x = {"q": torch.arange(4.0).reshape(1, 1, 4), "k": torch.ones(1, 1, 4)}
    out = vision_rope._rope_reference({**x, "cos": torch.ones(1, 4), "sin": torch.zeros(1, 4)})
    assert torch.equal(out["q"], x["q"])
    quarter = {**x, "cos": torch.zeros(1, 4), "sin": torch.ones(1, 4)}
    assert vision_rope._rope_reference(quarter)["q"].flatten().tolist() == [-2, -3, 0, 1]


def test_gdn_split_input_is_the_convs_transposed_view() -> None:
    torch = _torch()
    spec = gdn_qkv_split.GDN_QKV_SPLIT
    shape = {"name": "t", "tokens": 3, "hq": 1, "hv": 2, "head": 4}
    x = spec.make_inputs(shape, torch.Generator().manual_seed(0), "cpu")
    assert x["mixed_qkv"].stride() == (1, 3) and x["mixed_qkv"].shape == (3, 16)
    ref = spec.reference(x)
    assert ref["v"].shape == (1, 3, 2, 4) and ref["v"].is_contiguous()
    assert torch.equal(ref["k"][0, 2, 0], x["mixed_qkv"][2, 4:8])
