"""Specs for the misc vLLM rows of the execution census (issue 35). This module holds the
GEMM, MoE and model-runner rows (int8 scaled GEMM, batch-invariant BMM, MoE block
alignment, DeepGEMM EP scatter, EAGLE input preparation, DeepSeek-V4 inverse RoPE + fp8
quant) and collects the sampling (``misc_vllm_sampling``) and attention
(``misc_vllm_attn``) modules' specs into ``SPECS``.

Shapes name their source. Llama-3-8B projections: qkv 4096 -> 6144, down 14336 -> 4096,
up 4096 -> 14336. DeepSeek-V3: 256 routed experts, top-8, hidden 7168, MLA 128 heads (nope
128, latent 512). Mixtral-8x7B: 8 experts, top-2. Qwen3-30B-A3B: 128 experts, top-8.
"""

from __future__ import annotations

import functools
import types
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .misc_vllm_attn import SPECS as _ATTN
from .misc_vllm_common import DeferredOutputs, _cpu_device_properties, _perm, _torch
from .misc_vllm_sampling import SPECS as _SAMPLING

# --- triton_scaled_mm (vLLM compressed-tensors w8a8): C = (A @ B) * sa * sb ---


def _scaled_mm_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    m, k, n = shape["m"], shape["k"], shape["n"]

    def i8(*s: int) -> Any:
        return torch.randint(-127, 128, s, generator=gen, device=device, dtype=torch.int8)

    def scale(rows: int) -> Any:
        return torch.rand(rows, 1, generator=gen, device=device) * 0.01 + 1e-3

    return {
        "input": i8(m, k),
        # the layer stores the weight as [N, K] and passes its transpose (weak contiguous)
        "weight": i8(n, k).t(),
        "scale_a": scale(m) if shape.get("per_token", True) else scale(1),
        "scale_b": scale(n),
        "out_dtype": torch.bfloat16,
    }


def _scaled_mm_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    return {"c": call_by_name(mod.triton_scaled_mm, x)}


def _scaled_mm_reference(x: Inputs) -> Outputs:
    acc = x["input"].double() @ x["weight"].double()
    out = acc * x["scale_a"].double() * x["scale_b"].double().T
    return {"c": out.to(x["out_dtype"])}


TRITON_SCALED_MM = Spec(
    name="vllm_triton_scaled_mm",
    launcher="triton_scaled_mm",
    rows=(
        (
            "vllm",
            "526de822",
            "vllm/model_executor/layers/quantization/compressed_tensors/triton_scaled_mm.py",
        ),
    ),
    shapes=(
        {"name": "test-m1-llama3-8b-qkv", "m": 1, "k": 4096, "n": 6144},
        {"name": "llama3-8b-down-m32", "m": 32, "k": 14336, "n": 4096},
        {"name": "llama3-8b-up-m128", "m": 128, "k": 4096, "n": 14336},
        {"name": "llama3-8b-qkv-prefill", "m": 2048, "k": 4096, "n": 6144},
        {"name": "test-per-tensor-m64", "m": 64, "k": 4096, "n": 4096, "per_token": False},
    ),
    random_shape=lambda r: {
        "name": "random",
        "m": r.choice([1, 5, 40, 130]),
        "k": r.choice([256, 512, 1024]),
        "n": r.choice([256, 384, 1000]),
        "per_token": r.choice([True, False]),
    },
    make_inputs=_scaled_mm_inputs,
    call=_scaled_mm_call,
    reference=_scaled_mm_reference,
    tolerance_why="int8 x int8 products summed in int32 (exact in any order), then two fp32 "
    "scales and one bf16 rounding: the bf16 default (4 ulp) covers the fp32 scale order",
)


# --- bmm_batch_invariant (vLLM batch-invariant mode): (B, M, K) x (B, K, N) ---


def _bmm_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, m, k, n = shape["batch"], shape["m"], shape["k"], shape["n"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))

    def rnd(*s: int) -> Any:
        return (torch.randn(*s, generator=gen, device=device) * 0.5).to(dt)

    return {"a": rnd(b, m, k), "b": rnd(b, k, n)}


def _bmm_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    with _cpu_device_properties(x["a"].device):
        return {"c": mod.bmm_batch_invariant(x["a"], x["b"])}


BMM_BATCH_INVARIANT = Spec(
    name="vllm_bmm_batch_invariant",
    launcher="bmm_batch_invariant",
    rows=(("vllm", "0b0aa874", "vllm/model_executor/layers/batch_invariant.py"),),
    shapes=(
        # DeepSeek-V3 MLA absorbed q_nope @ W_UK: per head (tokens x 128) @ (128 x 512)
        {"name": "dsv3-mla-uk-decode", "batch": 128, "m": 32, "k": 128, "n": 512},
        {"name": "dsv3-mla-uk-prefill", "batch": 128, "m": 1024, "k": 128, "n": 512},
        # ... and the latent output @ W_UV: (tokens x 512) @ (512 x 128)
        {"name": "dsv3-mla-uv-decode", "batch": 128, "m": 64, "k": 512, "n": 128},
        {"name": "test-fp16-b4", "batch": 4, "m": 300, "k": 1000, "n": 700, "dtype": "float16"},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 8]),
        "m": r.choice([1, 17, 130]),
        "k": r.choice([64, 128, 200]),
        "n": r.choice([64, 128, 300]),
        # fp16: Triton's CPU interpreter computes bf16 dots wrongly (garbage on both sides),
        # so the held-out shape stays checkable there; named shapes are mostly bf16
        "dtype": "float16",
    },
    make_inputs=_bmm_inputs,
    call=_bmm_call,
    reference=lambda x: {"c": (x["a"].float() @ x["b"].float()).to(x["a"].dtype)},
    tolerance={"c": (2e-2, 1.6e-2)},
    tolerance_why="fp32 accumulation over K <= 1000 of products of ~N(0, 0.25) values (|c| "
    "~ 8): the persistent and the per-batch kernel may split K alike but order tiles "
    "differently; bf16 default relative (4 ulp) plus an absolute floor for sums near zero",
)


# --- moe_align_block_size_triton (vLLM fused MoE): sort token slots by expert, padded ---


def _align_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, e, k, bs = shape["tokens"], shape["experts"], shape["topk"], shape["block"]
    # distinct experts per token, as a router's top-k gives
    topk_ids = torch.rand(t, e, generator=gen, device=device).topk(k, -1).indices
    numel = t * k
    padded = numel + e * (bs - 1)
    return {
        "topk_ids": topk_ids.to(torch.int32),
        "num_experts": e,
        "block_size": bs,
        # the caller at sha^ filled these (the commit moves the fill into the launcher)
        "sorted_token_ids": torch.full((padded,), numel, device=device, dtype=torch.int32),
        "expert_ids": torch.zeros(-(-padded // bs), device=device, dtype=torch.int32),
        "num_tokens_post_pad": torch.empty(1, device=device, dtype=torch.int32),
    }


def _align_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.moe_align_block_size_triton, x)
    return {k: x[k] for k in ("sorted_token_ids", "expert_ids", "num_tokens_post_pad")}


def _align_reference(x: Inputs) -> Outputs:
    torch = _torch()
    flat = x["topk_ids"].reshape(-1).long()
    e, bs = x["num_experts"], x["block_size"]
    sorted_ids = x["sorted_token_ids"].clone()
    expert_ids = x["expert_ids"].clone()
    counts = torch.bincount(flat, minlength=e).tolist()
    start = 0
    for expert, n in enumerate(counts):
        slots = torch.nonzero(flat == expert).reshape(-1)
        sorted_ids[start : start + n] = slots.to(torch.int32)
        span = -(-n // bs) * bs
        expert_ids[start // bs : (start + span) // bs] = expert
        start += span
    post = torch.tensor([start], device=flat.device, dtype=torch.int32)
    return {"sorted_token_ids": sorted_ids, "expert_ids": expert_ids, "num_tokens_post_pad": post}


MOE_ALIGN_BLOCK_SIZE_TRITON = Spec(
    name="vllm_moe_align_block_size_triton",
    launcher="moe_align_block_size_triton",
    rows=(("vllm", "0ec82edd", "vllm/model_executor/layers/fused_moe/moe_align_block_size.py"),),
    shapes=(
        {"name": "dsv3-decode-64", "tokens": 64, "experts": 256, "topk": 8, "block": 16},
        {"name": "dsv3-prefill-4k", "tokens": 4096, "experts": 256, "topk": 8, "block": 64},
        {"name": "mixtral-prefill-8k", "tokens": 8192, "experts": 8, "topk": 2, "block": 128},
        {"name": "qwen3-30b-a3b-1k", "tokens": 1024, "experts": 128, "topk": 8, "block": 64},
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 7, 100, 600]),
        "experts": r.choice([8, 16, 64]),
        "topk": r.choice([1, 2, 6]),
        "block": r.choice([16, 32, 64]),
    },
    make_inputs=_align_inputs,
    call=_align_call,
    reference=_align_reference,
    mutated=("sorted_token_ids", "expert_ids", "num_tokens_post_pad"),
    tolerance_why="integer indices (each program writes its own slots in token order): exact",
)


# --- ep_scatter (vLLM DeepGEMM MoE permute): tokens to per-expert 128-aligned rows ---


def _scatter_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, g, local, k, h = (
        shape["tokens"],
        shape["experts"],
        shape["local"],
        shape["topk"],
        shape["hidden"],
    )
    chosen = torch.rand(t, g, generator=gen, device=device).topk(k, -1).indices
    # this rank owns experts [0, local): other ranks' experts arrive as -1
    topk = torch.where(chosen < local, chosen, torch.full_like(chosen, -1)).to(torch.int32)
    valid = topk[topk >= 0].long()
    counts = torch.bincount(valid, minlength=local).to(torch.int32)
    m_sum = int(sum(-(-c // 128) * 128 for c in counts.tolist()))
    return {
        "recv_x": torch.randn(t, h, generator=gen, device=device).to(torch.float8_e4m3fn),
        "recv_x_scale": torch.rand(t, h // 128, generator=gen, device=device) + 0.01,
        "recv_topk": topk,
        "num_recv_tokens_per_expert": counts,
        "expert_map": None,
        "expert_start_loc": torch.empty(local, device=device, dtype=torch.int32),
        "output_tensor": torch.empty(m_sum, h, device=device, dtype=torch.float8_e4m3fn),
        "output_tensor_scale": torch.empty(m_sum, h // 128, device=device),
        # deepgemm_moe_permute initialises the row experts to -1 (c817b141)
        "m_indices": torch.full((m_sum,), -1, device=device, dtype=torch.int32),
        "output_index": torch.zeros(t, k, device=device, dtype=torch.int32),
    }


def _scatter_defined_rows(x: Inputs) -> Any:
    """Rows of ``m_indices`` that hold a real token: the first ``count`` of each expert's
    128-aligned span (the padding rows are what c817b141 changes, from the expert's id to
    the -1 they were initialised with, so DeepGEMM skips them)."""
    torch = _torch()
    counts = x["num_recv_tokens_per_expert"].long()
    spans = (counts + 127) // 128 * 128
    starts = torch.cumsum(spans, 0) - spans
    rows = torch.arange(x["m_indices"].shape[0], device=counts.device)
    owner = torch.bucketize(rows, torch.cumsum(spans, 0), right=True).clamp(max=len(counts) - 1)
    return rows - starts[owner] < counts[owner]


def _scatter_outputs(x: Inputs) -> Outputs:
    """Order-free views: tokens land at atomically claimed rows, so the row order differs
    from run to run; each (token, k) slot's copied row, scale and destination expert do
    not."""
    torch = _torch()
    ok = x["recv_topk"] >= 0
    idx = torch.where(ok, x["output_index"], torch.zeros_like(x["output_index"])).long()
    rows = x["output_tensor"][idx].float() * ok[..., None]
    scales = x["output_tensor_scale"][idx] * ok[..., None]
    dest = torch.where(ok, x["m_indices"][idx], torch.full_like(x["recv_topk"], -1))
    defined = _scatter_defined_rows(x)
    m_idx = torch.where(defined, x["m_indices"], torch.full_like(x["m_indices"], -1))
    return {
        "rows": rows,
        "scales": scales,
        "dest_expert": dest,
        "m_indices": m_idx,
        "expert_end": x["expert_start_loc"],
    }


def _scatter_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.ep_scatter, x)
    # the order-free views gather [tokens, topk, hidden]: built only when the runner reads
    # the outputs to compare them, so the timed calls time the launcher alone
    return DeferredOutputs(lambda: _scatter_outputs(x))


def _scatter_reference(x: Inputs) -> Outputs:
    torch = _torch()
    ok = x["recv_topk"] >= 0
    counts = x["num_recv_tokens_per_expert"].long()
    spans = (counts + 127) // 128 * 128
    starts = torch.cumsum(spans, 0) - spans
    m_idx = torch.full_like(x["m_indices"], -1)
    for e, (s, n) in enumerate(zip(starts.tolist(), counts.tolist(), strict=True)):
        m_idx[s : s + n] = e
    return {
        "rows": x["recv_x"].float()[:, None, :] * ok[..., None],
        "scales": x["recv_x_scale"][:, None, :] * ok[..., None],
        "dest_expert": x["recv_topk"],
        "m_indices": m_idx,
        "expert_end": (starts + counts).to(torch.int32),
    }


EP_SCATTER = Spec(
    name="vllm_ep_scatter",
    launcher="ep_scatter",
    rows=(("vllm", "c817b141", "vllm/model_executor/layers/fused_moe/deep_gemm_utils.py"),),
    shapes=(
        {
            "name": "dsv3-ep8-decode",
            "tokens": 128,
            "experts": 256,
            "local": 32,
            "topk": 8,
            "hidden": 7168,
        },
        {
            "name": "dsv3-ep8-prefill",
            "tokens": 4096,
            "experts": 256,
            "local": 32,
            "topk": 8,
            "hidden": 7168,
        },
        {
            "name": "dsv3-ep32-prefill",
            "tokens": 8192,
            "experts": 256,
            "local": 8,
            "topk": 8,
            "hidden": 7168,
        },
        {
            "name": "qwen3-30b-ep4",
            "tokens": 2048,
            "experts": 128,
            "local": 32,
            "topk": 8,
            "hidden": 2048,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([3, 50, 300]),
        "experts": 64,
        "local": r.choice([8, 16]),
        "topk": r.choice([2, 6]),
        "hidden": r.choice([256, 512]),
    },
    make_inputs=_scatter_inputs,
    call=_scatter_call,
    reference=_scatter_reference,
    mutated=(
        "expert_start_loc",
        "output_tensor",
        "output_tensor_scale",
        "m_indices",
        "output_index",
    ),
    tolerance_why="copies and integer bookkeeping: exact (compared through order-free views, "
    "since rows are claimed by atomics)",
)


# --- prepare_eagle_inputs (vLLM model runner V2 EAGLE): shift ids, place the next token ---


def _eagle_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    r, k, chunk = shape["reqs"], shape["spec"], shape.get("prefill_chunk", 0)
    lens = [1 + k] * r
    if chunk:
        lens[0] = chunk  # a chunked prefill in flight (samples nothing this step)
    total = sum(lens)
    states = 2 * r
    n_rej = torch.randint(0, k + 1, (r,), generator=gen, device=device, dtype=torch.int32)
    n_sampled = (1 + k - n_rej).to(torch.int32)
    if chunk:
        n_rej[0], n_sampled[0] = 0, 0
    qsl = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    return {
        "idx_mapping": _perm(states, gen, device)[:r].to(torch.int32),
        "query_start_loc": qsl.to(device),
        "target_input_ids": torch.randint(
            0, 128256, (total,), generator=gen, device=device, dtype=torch.int32
        ),
        "target_positions": torch.randint(0, 8192, (total,), generator=gen, device=device),
        "num_sampled": n_sampled,
        "num_rejected": n_rej,
        "state_last_sampled": torch.randint(0, 128256, (states, 1), generator=gen, device=device),
        "state_next_prefill_tokens": torch.randint(
            0, 128256, (states,), generator=gen, device=device, dtype=torch.int32
        ),
        "eagle_input_ids": torch.zeros(total + 64, device=device, dtype=torch.int32),
        "eagle_positions": torch.zeros(total + 64, device=device, dtype=torch.int64),
    }


@functools.cache
def _reads_by_state(mod: Any) -> bool:
    """Whether this side's launcher passes the batch-to-state mapping (read once per module,
    so the timed host calls do not re-read the source)."""
    import inspect

    return "idx_mapping" in inspect.getsource(mod.prepare_eagle_inputs)


def _eagle_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    """``before`` reads the last sampled / next prefill token by batch row, ``after`` by
    request state (963dc0b8 changed the caller to pass state-sized arrays): each side gets
    the same tokens in its own indexing."""
    by_state = _reads_by_state(mod)
    idx = x["idx_mapping"].long()
    last = x["state_last_sampled"] if by_state else x["state_last_sampled"][idx]
    nxt = x["state_next_prefill_tokens"] if by_state else x["state_next_prefill_tokens"][idx]
    buffers = types.SimpleNamespace(input_ids=x["eagle_input_ids"], positions=x["eagle_positions"])
    batch = types.SimpleNamespace(
        num_reqs=int(idx.shape[0]),
        input_ids=x["target_input_ids"],
        positions=x["target_positions"],
        idx_mapping=x["idx_mapping"],
        query_start_loc=x["query_start_loc"],
    )
    last_idx = mod.prepare_eagle_inputs(
        buffers, batch, x["num_sampled"], x["num_rejected"], last, nxt
    )
    return {
        "last_token_indices": last_idx,
        "eagle_input_ids": x["eagle_input_ids"],
        "eagle_positions": x["eagle_positions"],
    }


def _eagle_reference(x: Inputs) -> Outputs:
    ids, pos = x["eagle_input_ids"].clone(), x["eagle_positions"].clone()
    qsl = x["query_start_loc"].tolist()
    lasts = []
    for b, s in enumerate(x["idx_mapping"].tolist()):
        start, n = qsl[b], qsl[b + 1] - qsl[b] - int(x["num_rejected"][b])
        ids[start : start + n - 1] = x["target_input_ids"][start + 1 : start + n]
        sampled = int(x["num_sampled"][b]) > 0
        nxt = x["state_last_sampled"][s, 0] if sampled else x["state_next_prefill_tokens"][s]
        ids[start + n - 1] = nxt.to(ids.dtype)
        pos[start : start + n] = x["target_positions"][start : start + n]
        lasts.append(start + n - 1)
    import torch

    out = torch.tensor(lasts, device=ids.device, dtype=torch.int64)
    return {"last_token_indices": out, "eagle_input_ids": ids, "eagle_positions": pos}


PREPARE_EAGLE_INPUTS = Spec(
    name="vllm_mrv2_prepare_eagle_inputs",
    launcher="prepare_eagle_inputs",
    rows=(("vllm", "963dc0b8", "vllm/v1/worker/gpu/spec_decode/eagle.py"),),
    shapes=(
        {"name": "llama3-8b-eagle-k3-b64", "reqs": 64, "spec": 3},
        {"name": "llama3-8b-eagle-k1-b256", "reqs": 256, "spec": 1},
        {"name": "eagle-k3-b32-with-prefill-2k", "reqs": 32, "spec": 3, "prefill_chunk": 2048},
        {"name": "eagle3-k7-b16", "reqs": 16, "spec": 7},
    ),
    random_shape=lambda r: {
        "name": "random",
        "reqs": r.choice([1, 4, 13]),
        "spec": r.choice([1, 2, 5]),
        "prefill_chunk": r.choice([0, 0, 300, 1500]),
    },
    make_inputs=_eagle_inputs,
    call=_eagle_call,
    reference=_eagle_reference,
    mutated=("eagle_input_ids", "eagle_positions"),
    tolerance_why="token ids, positions and indices: exact",
)


# --- fused inverse RoPE + fp8 block quant of DeepSeek-V4 attention output (998714b2) ---


def _inv_rope_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, h, g = shape["tokens"], shape["heads"], shape["groups"]
    head_dim, rope, qgs, max_pos = 512, 64, 128, 16384
    inv_freq = 1.0 / (1e4 ** (torch.arange(0, rope, 2, device=device).float() / rope))
    ang = torch.arange(max_pos, device=device).float()[:, None] * inv_freq
    return {
        "o": torch.randn(t, h, head_dim, generator=gen, device=device).to(torch.bfloat16),
        "positions": torch.randint(0, max_pos, (t,), generator=gen, device=device),
        "cos_sin_cache": torch.cat((ang.cos(), ang.sin()), -1),
        "heads_per_group": h // g,
        "quant_group_size": qgs,
        "chunks_per_head": head_dim // qgs,
        "rope_start": (head_dim - rope) % qgs,
        "half_rope": rope // 2,
        "tma_aligned_scales": False,  # the sm_90 layout (fp32 scales)
        "fp8_max": 448.0,
        "tma_aligned_T": -(-t // 4) * 4,
        "num_tokens": t,
        "n_groups": g,
        "d": h // g * head_dim,
        "scale_inner": h // g * head_dim // qgs,
    }


def _inv_rope_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    q, s = call_by_name(mod._fused_inv_rope_fp8_quant_kernel_impl, x)
    return {"o_fp8": q, "o_scale": s}


FUSED_INV_ROPE_FP8_QUANT = Spec(
    name="vllm_dsv4_fused_inv_rope_fp8_quant",
    launcher="_fused_inv_rope_fp8_quant_kernel_impl",
    rows=(
        (
            "vllm",
            "998714b2",
            "vllm/v1/attention/ops/deepseek_v4_ops/fused_inv_rope_fp8_quant.py",
        ),
    ),
    shapes=(
        {"name": "test-H64-G8-t32", "tokens": 32, "heads": 64, "groups": 8},
        {"name": "test-H128-G8-t128", "tokens": 128, "heads": 128, "groups": 8},
        {"name": "dsv4-H64-G8-prefill-4k", "tokens": 4096, "heads": 64, "groups": 8},
        {"name": "dsv4-H128-G8-prefill-2k", "tokens": 2048, "heads": 128, "groups": 8},
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 7, 50]),
        **r.choice([{"heads": 8, "groups": 2}, {"heads": 16, "groups": 4}]),
    },
    make_inputs=_inv_rope_inputs,
    call=_inv_rope_call,
    tolerance={"o_fp8": (0.0, 0.0), "o_scale": (0.0, 0.0)},
    tolerance_why="998714b2 only stops specialising num_tokens: the same arithmetic, so the "
    "fp8 values and the power-of-two scales must match bit for bit. No torch reference: "
    "the CPU interpreter's fp32 -> e4m3 rounding is wrong past powers of two, so a "
    "reference could only be checked on the GPU",
)


SPECS: tuple[Spec, ...] = (
    (
        TRITON_SCALED_MM,
        BMM_BATCH_INVARIANT,
        MOE_ALIGN_BLOCK_SIZE_TRITON,
        EP_SCATTER,
        PREPARE_EAGLE_INPUTS,
        FUSED_INV_ROPE_FP8_QUANT,
    )
    + _SAMPLING
    + _ATTN
)
