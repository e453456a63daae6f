"""Specs for the misc vLLM rows of the execution census (issue 35): sampling kernels of the
model runner V2 (Gumbel sampling, penalties, logprobs), the int8 scaled GEMM, the
batch-invariant BMM and the v1 merge of attention states.

Shapes name their source. Vocabularies: Llama-3 (128256), Qwen2/3 (151936), Llama-2 and
Mistral (32000). Llama-3-8B projections: qkv 4096 -> 6144, down 14336 -> 4096. DeepSeek-V3
MLA: 128 heads, latent 512, nope head 128. Sampling batches follow the engine's decode
batches (one row per request; ``1 + k`` rows per request with k speculative tokens).
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import types
from collections.abc import Iterator
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .simple import MERGE_ATTN_STATES


def _torch() -> Any:
    import torch

    return torch


def _cpu_gen(gen: Any, device: Any) -> Any:
    """A CPU generator seeded from ``gen`` (for ``randperm``, which CUDA generators refuse
    when the tensor lives on the CPU)."""
    torch = _torch()
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=device).item())
    return torch.Generator().manual_seed(seed)


def _perm(n: int, gen: Any, device: Any) -> Any:
    torch = _torch()
    return torch.randperm(n, generator=_cpu_gen(gen, device)).to(device)


# --- merge_attn_states, v1 path (vLLM 3bc2734d): the new fp8 output scale is optional ---

#: 3bc2734d adds an optional ``output_scale`` (fp8 output); ``before`` has no such path, so
#: both sides run the bf16/fp16 path the commit rewrote around (the shared-path question).
MERGE_ATTN_STATES_V1 = dataclasses.replace(
    MERGE_ATTN_STATES,
    name="vllm_merge_attn_states_v1",
    rows=(("vllm", "3bc2734d", "vllm/v1/attention/ops/triton_merge_attn_states.py"),),
)


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


@contextlib.contextmanager
def _cpu_device_properties(device: Any) -> Iterator[None]:
    """On the CPU interpreter only: ``torch.cuda.get_device_properties`` answers an H100's
    SM count and ``get_device_capability`` sm_90 (launchers size grids and tiles with them;
    a CPU build of torch has no CUDA to ask). On a GPU nothing is replaced."""
    torch = _torch()
    if device.type == "cuda":
        yield
        return
    saved = torch.cuda.get_device_properties, torch.cuda.get_device_capability
    torch.cuda.get_device_properties = lambda *_a, **_k: types.SimpleNamespace(
        multi_processor_count=132
    )
    torch.cuda.get_device_capability = lambda *_a, **_k: (9, 0)
    try:
        yield
    finally:
        torch.cuda.get_device_properties, torch.cuda.get_device_capability = saved


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
        "dtype": r.choice(["bfloat16", "float16"]),
    },
    make_inputs=_bmm_inputs,
    call=_bmm_call,
    reference=lambda x: {"c": (x["a"].float() @ x["b"].float()).to(x["a"].dtype)},
    tolerance={"c": (2e-2, 1.6e-2)},
    tolerance_why="fp32 accumulation over K <= 1000 of products of ~N(0, 0.25) values (|c| "
    "~ 8): the persistent and the per-batch kernel may split K alike but order tiles "
    "differently; bf16 default relative (4 ulp) plus an absolute floor for sums near zero",
)


# --- compute_token_logprobs (vLLM model runner V2): log_softmax gathered at token ids ---


def _logprob_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, v, k = shape["batch"], shape["vocab"], shape["topk"]
    logits = torch.randn(b, v, generator=gen, device=device) * 4
    sampled = torch.randint(0, v, (b, 1), generator=gen, device=device)
    ids = torch.cat((sampled, torch.topk(logits, k, dim=-1).indices), 1) if k else sampled
    return {"logits": logits, "token_ids": ids}


def _logprob_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    return {"logprobs": mod.compute_token_logprobs(x["logits"], x["token_ids"])}


COMPUTE_TOKEN_LOGPROBS = Spec(
    name="vllm_compute_token_logprobs",
    launcher="compute_token_logprobs",
    rows=(("vllm", "e535d90d", "vllm/v1/worker/gpu/sample/logprob.py"),),
    shapes=(
        {"name": "llama3-decode-b64-top5", "batch": 64, "vocab": 128256, "topk": 5},
        {"name": "llama3-decode-b256-sampled", "batch": 256, "vocab": 128256, "topk": 0},
        {"name": "qwen3-b32-top20", "batch": 32, "vocab": 151936, "topk": 20},
        {"name": "mistral-b8-top1", "batch": 8, "vocab": 32000, "topk": 1},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 9]),
        "vocab": r.choice([1000, 5000, 32000]),
        "topk": r.choice([0, 2, 7]),
    },
    make_inputs=_logprob_inputs,
    call=_logprob_call,
    reference=lambda x: {
        "logprobs": x["logits"].float().log_softmax(-1).gather(1, x["token_ids"].long())
    },
    tolerance={"logprobs": (1e-4, 1e-5)},
    tolerance_why="fp32 log-sum-exp over <= 152k logits (|x| ~ 16): the sum is reordered in "
    "blocks, lse ~ 20 carries fp32 rounding of ~2e-6 absolute; 1e-4 absolute",
)


# --- apply_penalties / bincount (vLLM model runner V2 penalties) ---


def _sparse_counts(rows: int, cols: int, gen: Any, device: Any) -> Any:
    torch = _torch()
    counts = torch.randint(1, 4, (rows, cols), generator=gen, device=device, dtype=torch.int32)
    keep = torch.rand(rows, cols, generator=gen, device=device) < 0.01
    return torch.where(keep, counts, torch.zeros_like(counts))


def _penalty_params(states: int, gen: Any, device: Any) -> dict[str, Any]:
    torch = _torch()
    rep = 1.0 + torch.rand(states, generator=gen, device=device) * 0.5
    freq = torch.rand(states, generator=gen, device=device) * 0.5
    pres = torch.rand(states, generator=gen, device=device) * 0.5
    # every fourth state uses no penalty (the early-return path)
    rep[::4], freq[::4], pres[::4] = 1.0, 0.0, 0.0
    # some use only one kind
    freq[1::4] = 0.0
    pres[2::4] = 0.0
    return {"repetition_penalty": rep, "frequency_penalty": freq, "presence_penalty": pres}


def _penalties_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    r, s, v = shape["reqs"], shape["spec"], shape["vocab"]
    states = 2 * r
    per = s + 1
    req_states = _perm(states, gen, device)[:r].to(torch.int32)
    words = -(-v // 32)
    bits = [
        torch.randint(-(2**31), 2**31 - 1, (states, words), generator=gen, device=device)
        for _ in range(3)
    ]
    return {
        "logits": torch.randn(r * per, v, generator=gen, device=device) * 3,
        "expanded_idx_mapping": req_states.repeat_interleave(per),
        "token_ids": torch.randint(0, v, (r * per,), generator=gen, device=device).int(),
        "expanded_local_pos": torch.arange(per, device=device, dtype=torch.int32).repeat(r),
        **_penalty_params(states, gen, device),
        # about one prompt token in eight per vocabulary word
        "prompt_bin_mask": (bits[0] & bits[1] & bits[2]).to(torch.int32),
        "output_bin_counts": _sparse_counts(states, v, gen, device),
        "num_speculative_tokens": s,
    }


def _penalties_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.apply_penalties, x)
    return {"logits": x["logits"]}


def _prompt_bits(mask_words: Any, vocab: int) -> Any:
    torch = _torch()
    shifts = torch.arange(32, device=mask_words.device, dtype=torch.int32)
    bits = (mask_words[..., None] >> shifts) & 1
    return bits.reshape(*mask_words.shape[:-1], -1)[..., :vocab].bool()


def _penalties_reference(x: Inputs) -> Outputs:
    torch = _torch()
    logits = x["logits"].clone()
    v = logits.shape[1]
    mapping = x["expanded_idx_mapping"].long()
    pos = x["expanded_local_pos"].long()
    counts = x["output_bin_counts"][mapping].clone()
    for t in range(logits.shape[0]):
        start = t - int(pos[t])
        for p in range(int(pos[t])):
            counts[t, int(x["token_ids"][start + p + 1])] += 1
    seen = counts > 0
    prompt = _prompt_bits(x["prompt_bin_mask"][mapping], v)
    rep = x["repetition_penalty"][mapping][:, None]
    scale = torch.where(prompt | seen, rep, torch.ones_like(rep))
    logits = torch.where(logits > 0, logits / scale, logits * scale)
    logits -= x["frequency_penalty"][mapping][:, None] * counts
    logits -= x["presence_penalty"][mapping][:, None] * seen
    return {"logits": logits}


APPLY_PENALTIES = Spec(
    name="vllm_mrv2_apply_penalties",
    launcher="apply_penalties",
    rows=(("vllm", "4e498b5e", "vllm/v1/worker/gpu/sample/penalties.py"),),
    shapes=(
        {"name": "llama3-decode-b64", "reqs": 64, "spec": 0, "vocab": 128256},
        {"name": "llama3-eagle-b32-k3", "reqs": 32, "spec": 3, "vocab": 128256},
        {"name": "qwen3-decode-b128", "reqs": 128, "spec": 0, "vocab": 151936},
        {"name": "qwen3-mtp-b16-k7", "reqs": 16, "spec": 7, "vocab": 151936},
    ),
    random_shape=lambda r: {
        "name": "random",
        "reqs": r.choice([1, 3, 6]),
        "spec": r.choice([0, 1, 3]),
        "vocab": r.choice([1000, 9000, 32000]),
    },
    make_inputs=_penalties_inputs,
    call=_penalties_call,
    reference=_penalties_reference,
    mutated=("logits",),
    tolerance={"logits": (1e-4, 1e-5)},
    tolerance_why="fp32 elementwise: the kernel multiplies by 1/penalty where the reference "
    "divides (1 ulp), then subtracts integer-valued terms; 1e-4 absolute on |x| <= 15",
)


def _bincount_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    r, v, plen, olen = shape["reqs"], shape["vocab"], shape["prompt"], shape["output"]
    states = 2 * r
    max_len = plen + olen + 16
    prompt_len = torch.randint(1, plen + 1, (states,), generator=gen, device=device)
    out_len = torch.randint(0, olen + 1, (states,), generator=gen, device=device)
    prefill_len = prompt_len + out_len
    mapping = _perm(states, gen, device)[:r].to(torch.int32)
    words = -(-v // 32)
    return {
        "expanded_idx_mapping": mapping,
        "all_token_ids": torch.randint(
            0, v, (states, max_len), generator=gen, device=device, dtype=torch.int32
        ),
        "prompt_len": prompt_len.to(torch.int32),
        "prefill_len": prefill_len.to(torch.int32),
        # stale statistics of an earlier request in the same slot: must be cleared
        "prompt_bin_mask": torch.randint(
            -(2**31), 2**31 - 1, (states, words), generator=gen, device=device
        ).to(torch.int32),
        "output_bin_counts": _sparse_counts(states, v, gen, device),
        "max_prefill_len": int(prefill_len[mapping.long()].max()),
    }


def _bincount_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.bincount, x)
    return {"prompt_bin_mask": x["prompt_bin_mask"], "output_bin_counts": x["output_bin_counts"]}


def _bincount_reference(x: Inputs) -> Outputs:
    torch = _torch()
    mask = x["prompt_bin_mask"].clone()
    counts = x["output_bin_counts"].clone()
    v = counts.shape[1]
    for s in x["expanded_idx_mapping"].long().tolist():
        p, f = int(x["prompt_len"][s]), int(x["prefill_len"][s])
        toks = x["all_token_ids"][s].long()
        seen = torch.zeros(-(-v // 32) * 32, dtype=torch.bool, device=mask.device)
        seen[toks[:p]] = True
        weights = 1 << torch.arange(32, device=mask.device, dtype=torch.int64)
        words = (seen.view(-1, 32).long() * weights).sum(1)
        mask[s] = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
        counts[s] = torch.bincount(toks[p:f], minlength=v)[:v].to(torch.int32)
    return {"prompt_bin_mask": mask, "output_bin_counts": counts}


BINCOUNT = Spec(
    name="vllm_mrv2_penalties_bincount",
    launcher="bincount",
    rows=(("vllm", "bbee5329", "vllm/v1/worker/gpu/sample/penalties.py"),),
    shapes=(
        {"name": "llama3-new-b8-2k", "reqs": 8, "vocab": 128256, "prompt": 2048, "output": 0},
        {"name": "llama3-resumed-b4", "reqs": 4, "vocab": 128256, "prompt": 4096, "output": 512},
        {"name": "qwen3-new-b32-512", "reqs": 32, "vocab": 151936, "prompt": 512, "output": 64},
        {"name": "mistral-b1-8k", "reqs": 1, "vocab": 32000, "prompt": 8192, "output": 1024},
    ),
    random_shape=lambda r: {
        "name": "random",
        "reqs": r.choice([1, 2, 5]),
        "vocab": r.choice([1000, 5000, 32000]),
        "prompt": r.choice([10, 300, 1500]),
        "output": r.choice([0, 40, 700]),
    },
    make_inputs=_bincount_inputs,
    call=_bincount_call,
    reference=_bincount_reference,
    mutated=("prompt_bin_mask", "output_bin_counts"),
    tolerance_why="bit masks and integer counts (atomic OR and ADD commute): exact",
)


# --- gumbel_sample (vLLM model runner V2): seeded Gumbel-max sampling ---


def _gumbel_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    r, v = shape["reqs"], shape["vocab"]
    states = 2 * r
    temperature = torch.rand(states, generator=gen, device=device) * 1.2 + 0.1
    temperature[::3] = 0.0  # greedy requests
    temperature[1::5] = 1.0
    mapping = _perm(states, gen, device)[:r].to(torch.int32)
    seeds = torch.randint(0, 2**62, (states,), generator=gen, device=device)
    pos = torch.randint(0, 8192, (r,), generator=gen, device=device)
    return {
        "logits": torch.randn(r, v, generator=gen, device=device) * 3,
        "state_temperature": temperature,
        "state_seed": seeds,
        "expanded_idx_mapping": mapping,
        "pos": pos,
        "apply_temperature": shape.get("apply_temperature", True),
        "processed_logits_out": torch.zeros(states, v, device=device),
    }


def _gumbel_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    """Per side: launchers indexed by request take the state arrays gathered through the
    mapping; the later ones take the mapping and the per-state arrays."""
    import inspect

    fn = mod.gumbel_sample
    params = inspect.signature(fn).parameters
    values = dict(x)
    if "expanded_idx_mapping" in params:
        values["temperature"], values["seed"] = x["state_temperature"], x["state_seed"]
    else:
        idx = x["expanded_idx_mapping"].long()
        values["temperature"], values["seed"] = x["state_temperature"][idx], x["state_seed"][idx]
        values["is_greedy"] = values["temperature"] == 0.0
    out = {"sampled": call_by_name(fn, values)}
    if "processed_logits_out" in params:
        out["processed_logits_out"] = x["processed_logits_out"]
    return out


GUMBEL_SAMPLE = Spec(
    name="vllm_mrv2_gumbel_sample",
    launcher="gumbel_sample",
    rows=(
        ("vllm", "e9af6ba6", "vllm/v1/worker/gpu/sampler.py"),
        ("vllm", "f223ed41", "vllm/v1/worker/gpu/sample/gumbel.py"),
        ("vllm", "5daf6227", "vllm/v1/worker/gpu/sample/gumbel.py"),
    ),
    shapes=(
        {"name": "llama3-decode-b64", "reqs": 64, "vocab": 128256},
        {"name": "llama3-decode-b256", "reqs": 256, "vocab": 128256},
        {"name": "qwen3-decode-b32", "reqs": 32, "vocab": 151936},
        {"name": "mistral-b8-no-temp", "reqs": 8, "vocab": 32000, "apply_temperature": False},
    ),
    random_shape=lambda r: {
        "name": "random",
        "reqs": r.choice([1, 3, 7]),
        "vocab": r.choice([1000, 5000, 32000]),
        "apply_temperature": r.choice([True, False]),
    },
    make_inputs=_gumbel_inputs,
    call=_gumbel_call,
    mutated=("processed_logits_out",),
    tolerance={"processed_logits_out": (1e-6, 1e-6)},
    tolerance_why="sampled ids are exact (same Philox stream, same offsets; a flip needs two "
    "perturbed logits within 1 ulp); the temperature-scaled logits are one fp32 division",
)


SPECS: tuple[Spec, ...] = (
    MERGE_ATTN_STATES_V1,
    TRITON_SCALED_MM,
    BMM_BATCH_INVARIANT,
    COMPUTE_TOKEN_LOGPROBS,
    APPLY_PENALTIES,
    BINCOUNT,
    GUMBEL_SAMPLE,
)

_ = random


# --- rejection sampling of speculative decoding (vLLM v1 rejection_sampler.py) ---


def _rs_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, k, v, mode = shape["reqs"], shape["spec"], shape["vocab"], shape.get("mode", "mixed")
    n_draft = torch.randint(1, k + 1, (b,), generator=gen, device=device)
    n_draft[::5] = 0  # requests that proposed nothing this step
    tokens = int(n_draft.sum())
    logits = torch.randn(tokens, v, generator=gen, device=device) * 3
    guess = torch.randint(0, v, (tokens,), generator=gen, device=device)
    agree = torch.rand(tokens, generator=gen, device=device) < 0.7
    # a draft model agrees with the target most of the time (accepted prefixes vary)
    draft = torch.where(agree, logits.argmax(-1), guess).to(torch.int32)
    temperature = torch.rand(b, generator=gen, device=device) * 0.6 + 0.6
    if mode == "mixed":
        temperature[::3] = -1.0  # GREEDY_TEMPERATURE
    elif mode == "greedy":
        temperature[:] = -1.0
    draft_probs = None
    if shape.get("draft_probs", True):
        draft_probs = (torch.randn(tokens, v, generator=gen, device=device) * 3).softmax(-1)
    return {
        "draft_token_ids": draft,
        "num_draft_tokens": [int(n) for n in n_draft.tolist()],
        "max_spec_len": k,
        "cu_num_draft_tokens": n_draft.cumsum(0).to(torch.int32),
        "draft_probs": draft_probs,
        "target_logits": logits,
        "target_probs": logits.softmax(dim=-1, dtype=torch.float32),
        "bonus_token_ids": torch.randint(
            0, v, (b, 1), generator=gen, device=device, dtype=torch.int32
        ),
        "temperature": temperature,
        "mode": mode,
        "seeds": torch.randint(0, 2**62, (b,), generator=gen, device=device).tolist(),
        "device": device,
    }


def _rs_metadata(x: Inputs) -> Any:
    """The sampling metadata the launcher reads, with a fresh seeded generator per request
    (generators are stateful: a shared one would give the second side other draws)."""
    torch = _torch()
    dev = x["device"]
    return types.SimpleNamespace(
        all_greedy=x["mode"] == "greedy",
        all_random=x["mode"] == "random",
        temperature=x["temperature"],
        generators={
            i: torch.Generator(device=dev).manual_seed(s) for i, s in enumerate(x["seeds"])
        },
        top_k=None,
        top_p=None,
    )


def _rs_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    values = {**x, "sampling_metadata": _rs_metadata(x)}
    return {"output_token_ids": call_by_name(mod.rejection_sample, values)}


def _recovered_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    values = {**x, "sampling_metadata": _rs_metadata(x)}
    return {"recovered_token_ids": call_by_name(mod.sample_recovered_tokens, values)}


_RS_SHAPES: tuple[Shape, ...] = (
    {"name": "llama3-8b-eagle-k3-b32", "reqs": 32, "spec": 3, "vocab": 128256},
    {"name": "llama3-8b-eagle-k5-b16", "reqs": 16, "spec": 5, "vocab": 128256},
    {"name": "qwen3-mtp-k1-b64", "reqs": 64, "spec": 1, "vocab": 151936},
    {"name": "ngram-k4-b8", "reqs": 8, "spec": 4, "vocab": 32000, "draft_probs": False},
    {"name": "llama3-all-random-k3-b16", "reqs": 16, "spec": 3, "vocab": 128256, "mode": "random"},
)


def _rs_random(r: random.Random) -> Shape:
    return {
        "name": "random",
        "reqs": r.choice([1, 3, 6]),
        "spec": r.choice([1, 2, 4]),
        "vocab": r.choice([1000, 5000, 32000]),
        "draft_probs": r.choice([True, False]),
        "mode": r.choice(["mixed", "random"]),
    }


_RS_PATH = "vllm/v1/sample/rejection_sampler.py"

REJECTION_SAMPLE = Spec(
    name="vllm_rejection_sample",
    launcher="rejection_sample",
    rows=(("vllm", "0879736a", _RS_PATH), ("vllm", "8980001c", _RS_PATH)),
    shapes=_RS_SHAPES,
    control={"name": "all-greedy-k3-b32", "reqs": 32, "spec": 3, "vocab": 32000, "mode": "greedy"},
    control_reason="all-greedy batches return after the greedy kernel: 8980001c moves the "
    "softmax past that return (it is the change), so this is the path it speeds up; for "
    "0879736a (num_warps only) it is a second kernel whose launch changed alike",
    random_shape=_rs_random,
    make_inputs=_rs_inputs,
    call=_rs_call,
    tolerance_why="token ids (exact): the same seeded uniforms and exponentials on both sides; "
    "a flip needs two candidate scores within one fp32 ulp",
)

SAMPLE_RECOVERED_TOKENS = Spec(
    name="vllm_sample_recovered_tokens",
    launcher="sample_recovered_tokens",
    rows=(("vllm", "7a5adad4", _RS_PATH),),
    shapes=_RS_SHAPES,
    random_shape=_rs_random,
    make_inputs=_rs_inputs,
    call=_recovered_call,
    tolerance_why="token ids (exact): argmax of prob / q against prob * (1 / q), the same "
    "seeded exponentials; a flip needs two scores within one fp32 ulp of each other",
)

SPECS = SPECS + (REJECTION_SAMPLE, SAMPLE_RECOVERED_TOKENS)


# --- apply_top_k_top_p_triton (vLLM v1 sampler): mask logits outside top-k / top-p ---


def _sm_count(device: Any) -> int:
    torch = _torch()
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).multi_processor_count)
    return 132  # CPU interpreter: an H100's count, so the grid is what the GPU would see


def _topk_topp_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, v, mode = shape["batch"], shape["vocab"], shape.get("mode", "both")
    k = torch.randint(1, min(v, 1024) + 1, (b,), generator=gen, device=device, dtype=torch.int32)
    p = torch.rand(b, generator=gen, device=device) * 0.45 + 0.5
    return {
        "logits": torch.randn(b, v, generator=gen, device=device) * 3,
        "k": None if mode == "topp" else k,
        "p": None if mode == "topk" else p,
    }


def _topk_topp_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    # the engine's SM-count helper is stubbed by the loader; the launcher sizes its grid
    # and scratch buffer with it, so this side gets the device's real count
    mod.num_compute_units = lambda *_a: _sm_count(x["logits"].device)
    mod.apply_top_k_top_p_triton(x["logits"], x["k"], x["p"])
    return {"logits": x["logits"]}


APPLY_TOP_K_TOP_P_TRITON = Spec(
    name="vllm_apply_top_k_top_p_triton",
    launcher="apply_top_k_top_p_triton",
    rows=(("vllm", "51b2333b", "vllm/v1/sample/ops/topk_topp_triton.py"),),
    shapes=(
        {"name": "llama3-b64-topk-topp", "batch": 64, "vocab": 128256},
        {"name": "llama3-b256-topk", "batch": 256, "vocab": 128256, "mode": "topk"},
        {"name": "qwen3-b32-topk-topp", "batch": 32, "vocab": 151936},
        {"name": "test-b8-mistral-topk", "batch": 8, "vocab": 32000, "mode": "topk"},
    ),
    control={"name": "qwen3-b32-topp-only", "batch": 32, "vocab": 151936, "mode": "topp"},
    control_reason="51b2333b fuses the top-k pivot search; with top-k off the kernel takes "
    "only the top-p branch, which the commit leaves as it was",
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2, 3]),
        "vocab": r.choice([1000, 3000, 9000]),
        "mode": r.choice(["both", "topk", "topp"]),
    },
    make_inputs=_topk_topp_inputs,
    call=_topk_topp_call,
    mutated=("logits",),
    tolerance={"logits": (0.0, 0.0)},
    tolerance_why="kept logits are copied, the rest set to -inf: exact (an off-by-one pivot "
    "count shows as a whole logit kept or masked)",
)

SPECS = SPECS + (APPLY_TOP_K_TOP_P_TRITON,)


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
    return _scatter_outputs(x)


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

SPECS = SPECS + (MOE_ALIGN_BLOCK_SIZE_TRITON, EP_SCATTER)


# --- triton_mrope (vLLM multimodal rotary embedding, Qwen2-VL layout) ---


def _mrope_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, nq, nk, hd = shape["tokens"], shape["hq"], shape["hk"], shape["head"]
    section = shape["section"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    # text tokens share one position on all three axes; image tokens get (t, h, w) grids
    pos = torch.randint(0, 8192, (3, t), generator=gen, device=device)
    pos[:, : t // 2] = pos[0, : t // 2]
    inv_freq = 1.0 / (1e6 ** (torch.arange(0, hd, 2, device=device).float() / hd))
    angles = pos.float()[..., None] * inv_freq  # [3, T, hd/2]
    return {
        "q": torch.randn(t, nq * hd, generator=gen, device=device).to(dt),
        "k": torch.randn(t, nk * hd, generator=gen, device=device).to(dt),
        "cos": angles.cos().to(dt),
        "sin": angles.sin().to(dt),
        "mrope_section": list(section),
        "head_size": hd,
        "rotary_dim": hd,
        "mrope_interleaved": False,
    }


def _mrope_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    q, k = call_by_name(mod.triton_mrope, x)
    return {"q": q, "k": k}


def _mrope_reference(x: Inputs) -> Outputs:
    torch = _torch()
    hd = x["head_size"]
    t_sec, h_sec, _ = x["mrope_section"]
    cols = torch.arange(hd // 2, device=x["q"].device)
    axis = (cols >= t_sec).long() + (cols >= t_sec + h_sec).long()  # 0 = t, 1 = h, 2 = w
    cos = x["cos"].float().gather(0, axis[None, None, :].expand(1, x["cos"].shape[1], -1))[0]
    sin = x["sin"].float().gather(0, axis[None, None, :].expand(1, x["sin"].shape[1], -1))[0]

    def rotate(v: Any) -> Any:
        v = v.float().view(v.shape[0], -1, hd)
        a, b = v[..., : hd // 2], v[..., hd // 2 :]
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.cat((a * c - b * s, b * c + a * s), -1).reshape(v.shape[0], -1)

    return {"q": rotate(x["q"]).to(x["q"].dtype), "k": rotate(x["k"]).to(x["k"].dtype)}


TRITON_MROPE = Spec(
    name="vllm_triton_mrope",
    launcher="triton_mrope",
    rows=(("vllm", "cea91a32", "vllm/model_executor/layers/rotary_embedding/mrope.py"),),
    shapes=(
        {
            "name": "qwen2-vl-7b-decode",
            "tokens": 64,
            "hq": 28,
            "hk": 4,
            "head": 128,
            "section": (16, 24, 24),
        },
        {
            "name": "qwen2-vl-7b-prefill",
            "tokens": 4096,
            "hq": 28,
            "hk": 4,
            "head": 128,
            "section": (16, 24, 24),
        },
        {
            "name": "qwen2.5-vl-72b-prefill",
            "tokens": 2048,
            "hq": 64,
            "hk": 8,
            "head": 128,
            "section": (16, 24, 24),
        },
        {
            "name": "qwen3-vl-8b-prefill",
            "tokens": 1024,
            "hq": 32,
            "hk": 8,
            "head": 128,
            "section": (24, 20, 20),
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 9, 100, 333]),
        "hq": r.choice([4, 16, 28]),
        "hk": r.choice([1, 4]),
        "head": 128,
        "section": r.choice([(16, 24, 24), (24, 20, 20)]),
        # fp16: Triton's CPU interpreter computes bf16 arithmetic wrongly (garbage on both
        # sides), so the held-out shape stays checkable there; named shapes are bf16
        "dtype": "float16",
    },
    make_inputs=_mrope_inputs,
    call=_mrope_call,
    reference=_mrope_reference,
    mutated=("q", "k"),  # rotated in place (the launcher returns the same tensors)
    tolerance={"q": (3e-2, 1.6e-2), "k": (3e-2, 1.6e-2)},
    tolerance_why="bf16 cos/sin (the engine's cache dtype) and bf16 q/k: the kernel rounds "
    "each product and the sum to bf16 (up to 3 roundings of values ~|3|, ulp 2^-7) where "
    "the reference rounds once: 3e-2 absolute plus the bf16 relative default",
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


def _eagle_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    """``before`` reads the last sampled / next prefill token by batch row, ``after`` by
    request state (963dc0b8 changed the caller to pass state-sized arrays): each side gets
    the same tokens in its own indexing."""
    import inspect

    by_state = "idx_mapping" in inspect.getsource(mod.prepare_eagle_inputs)
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

SPECS = SPECS + (TRITON_MROPE, PREPARE_EAGLE_INPUTS)


# --- decode_attention_fwd, v1 copy with the MLA single-c_kv path (vLLM d9408ffb) ---


def _mla_decode_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """The split-KV decode inputs of ``decode``; an MLA shape's value cache is the first
    ``head_v`` dims of the one latent cache (how vLLM's Triton MLA backend passes it), so
    ``after``'s new ``is_mla`` path (values read as the transposed keys) and ``before``
    (values loaded from that view) see the same numbers."""
    from .decode import _inputs

    x = _inputs(shape, gen, device)
    dt = getattr(_torch(), shape.get("dtype", "bfloat16"))
    for name in ("q", "k_buffer", "v_buffer", "o"):
        x[name] = x[name].to(dt)
    dt = getattr(_torch(), shape.get("dtype", "bfloat16"))
    for name in ("q", "k_buffer", "v_buffer", "o"):
        x[name] = x[name].to(dt)
    if shape.get("mla"):
        x["v_buffer"] = x["k_buffer"][..., : shape["head_v"]]
        x["is_mla"] = True
    return x


def _mla_decode_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    from .decode import _call

    return _call(mod, x, sha)


def _mla_decode_reference(x: Inputs) -> Outputs:
    from .decode import _reference

    return _reference(x)


DECODE_ATTENTION_V1_MLA = Spec(
    name="vllm_v1_decode_attention_mla",
    launcher="decode_attention_fwd",
    rows=(("vllm", "d9408ffb", "vllm/v1/attention/ops/triton_decode_attention.py"),),
    shapes=(
        {
            "name": "dsv3-mla-tp8-b32-4k",
            "batch": 32,
            "kv_len": 4096,
            "hq": 16,
            "hk": 1,
            "head": 576,
            "head_v": 512,
            "mla": True,
        },
        {
            "name": "dsv3-mla-tp1-b8-8k",
            "batch": 8,
            "kv_len": 8192,
            "hq": 128,
            "hk": 1,
            "head": 576,
            "head_v": 512,
            "mla": True,
        },
        {"name": "llama3-8b-b32-1k", "batch": 32, "kv_len": 1024, "hq": 32, "hk": 8, "head": 128},
        {"name": "qwen2-7b-b16-4k", "batch": 16, "kv_len": 4096, "hq": 28, "hk": 4, "head": 128},
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 6]),
        "kv_len": r.choice([33, 300, 1000]),
        "hq": r.choice([16, 32]),
        "hk": 1,
        **r.choice([{"head": 576, "head_v": 512, "mla": True}, {"head": 128}, {"head": 64}]),
        # fp16: Triton's CPU interpreter computes bf16 dots wrongly (garbage on both sides),
        # so the held-out shape stays checkable there; the named shapes are bf16
        "dtype": "float16",
    },
    make_inputs=_mla_decode_inputs,
    call=_mla_decode_call,
    reference=_mla_decode_reference,
    mutated=("o",),
    tolerance={"o": (2e-2, 2e-2)},
    tolerance_why="softmax over <= 8k keys in 8 partial softmaxes merged in fp32, a bf16 "
    "P@V of up to 512 dims: bf16 default plus an absolute floor for outputs near zero",
)

SPECS = SPECS + (DECODE_ATTENTION_V1_MLA,)


# --- paged KV cache helpers (vLLM's 5-D key / 4-D value cache of the Triton backends) ---


def _paged_cache(lens: list[int], hk: int, d: int, bs: int, dt: Any, gen: Any, device: Any):
    """Logical per-sequence K/V written into a paged cache with shuffled blocks: key cache
    ``[blocks, H, D/x, bs, x]`` (x = 16 bytes of elements), value cache
    ``[blocks, H, D, bs]``, and the block table; returns (k_logical, v_logical,
    key_cache, value_cache, block_table)."""
    torch = _torch()
    per = [-(-n // bs) for n in lens]
    n_blocks = sum(per) + 3
    x = 16 // torch.empty((), dtype=dt).element_size()
    order = _perm(n_blocks, gen, device)
    table = torch.zeros(len(lens), max(per), dtype=torch.int32, device=device)
    k_log, v_log = [], []
    key_cache = torch.randn(n_blocks, hk, d // x, bs, x, generator=gen, device=device).to(dt)
    value_cache = torch.randn(n_blocks, hk, d, bs, generator=gen, device=device).to(dt)
    used = 0
    for i, n in enumerate(lens):
        blocks = order[used : used + per[i]]
        used += per[i]
        table[i, : per[i]] = blocks.to(torch.int32)
        k = torch.randn(n, hk, d, generator=gen, device=device).to(dt)
        v = torch.randn(n, hk, d, generator=gen, device=device).to(dt)
        pos = torch.arange(n, device=device)
        blk, off = blocks[pos // bs], pos % bs
        key_cache[blk, :, :, off, :] = k.view(n, hk, d // x, x)
        value_cache[blk, :, :, off] = v
        k_log.append(k)
        v_log.append(v)
    return k_log, v_log, key_cache, value_cache, table


def _attend(q: Any, k: Any, v: Any, scale: float) -> Any:
    """Softmax attention of query rows [Hq, D] (the last positions, causal) over k/v
    [n, Hkv, D] in fp32: each query head reads its kv head (GQA)."""
    torch = _torch()
    group = q.shape[-2] // k.shape[1]
    kk = k.float().repeat_interleave(group, 1).transpose(0, 1)  # [Hq, n, D]
    vv = v.float().repeat_interleave(group, 1).transpose(0, 1)
    s = torch.einsum("qhd,hnd->hqn", q.float(), kk) * scale
    return torch.einsum("hqn,hnd->qhd", torch.softmax(s, -1), vv)


# --- chunked_prefill_paged_decode (vLLM Triton/ROCm attention backend), decode batches ---


def _paged_decode_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, ctx, hq, hk, d, bs = (shape[k] for k in ("batch", "ctx", "hq", "hk", "head", "block"))
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    lens = [max(1, ctx - (i * 131) % max(1, ctx // 2)) for i in range(b)]
    k_log, v_log, kc, vc, table = _paged_cache(lens, hk, d, bs, dt, gen, device)
    one = torch.ones((), device=device, dtype=torch.float32)
    return {
        "query": torch.randn(b, hq, d, generator=gen, device=device).to(dt),
        # the new tokens' k/v (already in the cache; read by the prefill branch only)
        "key": torch.stack([k[-1] for k in k_log]),
        "value": torch.stack([v[-1] for v in v_log]),
        "output": torch.zeros(b, hq, d, device=device, dtype=dt),
        "kv_cache_dtype": "auto",
        "key_cache": kc,
        "value_cache": vc,
        "block_table": table,
        "query_start_loc": torch.arange(b + 1, device=device, dtype=torch.int32),
        "seq_lens": torch.tensor(lens, device=device, dtype=torch.int32),
        "max_seq_len": max(lens),
        "max_query_len": 1,
        "k_scale": one,
        "v_scale": one,
        "sm_scale": d**-0.5,
        "k_logical": k_log,
        "v_logical": v_log,
    }


def _paged_decode_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.chunked_prefill_paged_decode, x)
    return {"output": x["output"]}


def _paged_decode_reference(x: Inputs) -> Outputs:
    outs = [
        _attend(x["query"][i : i + 1], k, v, x["sm_scale"])[0]
        for i, (k, v) in enumerate(zip(x["k_logical"], x["v_logical"], strict=True))
    ]
    return {"output": _torch().stack(outs).to(x["output"].dtype)}


_CPD = "vllm/attention/ops/chunked_prefill_paged_decode.py"

CHUNKED_PREFILL_PAGED_DECODE = Spec(
    name="vllm_chunked_prefill_paged_decode",
    launcher="chunked_prefill_paged_decode",
    rows=(("vllm", "fb4c7f8e", _CPD), ("vllm", "9a161307", _CPD), ("vllm", "1a19e9cd", _CPD)),
    shapes=(
        {
            "name": "llama3-8b-b32-1k",
            "batch": 32,
            "ctx": 1024,
            "hq": 32,
            "hk": 8,
            "head": 128,
            "block": 16,
        },
        {
            "name": "llama3-8b-b8-8k",
            "batch": 8,
            "ctx": 8192,
            "hq": 32,
            "hk": 8,
            "head": 128,
            "block": 16,
        },
        {
            "name": "qwen3-next-attn-b16-4k",
            "batch": 16,
            "ctx": 4096,
            "hq": 16,
            "hk": 2,
            "head": 256,
            "block": 64,
        },
        {
            "name": "mha-b64-512",
            "batch": 64,
            "ctx": 512,
            "hq": 16,
            "hk": 16,
            "head": 128,
            "block": 32,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 3, 5]),
        "ctx": r.choice([17, 100, 600]),
        **r.choice([{"hq": 8, "hk": 2}, {"hq": 4, "hk": 4}]),
        "head": r.choice([64, 128]),
        "block": r.choice([16, 32]),
        # fp16: Triton's CPU interpreter computes bf16 dots wrongly; named shapes are bf16
        "dtype": "float16",
    },
    make_inputs=_paged_decode_inputs,
    call=_paged_decode_call,
    reference=_paged_decode_reference,
    mutated=("output",),
    tolerance={"output": (2e-2, 2e-2)},
    tolerance_why="online softmax over <= 8k cached keys in fp32 with a bf16 P@V: bf16 "
    "default relative plus an absolute floor for outputs near zero",
)


# --- triton_reshape_and_cache_flash (vLLM): new K/V rows into an NHD paged cache ---


def _reshape_cache_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, h, d, bs, fp8 = shape["tokens"], shape["hk"], shape["head"], shape["block"], shape["fp8"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    n_blocks = -(-t // bs) * 2 + 4
    slots = _perm(n_blocks * bs, gen, device)[:t].to(torch.int64)
    slots[1::9] = -1  # padded tokens (CUDA-graph batches) are skipped
    qkv = torch.randn(t, (shape["hq"] + 2 * h) * d, generator=gen, device=device).to(dt)
    q_end, k_end = shape["hq"] * d, (shape["hq"] + h) * d
    cache_dt = torch.float8_e4m3fn if fp8 else dt
    return {
        # k and v are strided views into the fused qkv projection, as the layer passes them
        "key": qkv[:, q_end:k_end].view(t, h, d),
        "value": qkv[:, k_end:].view(t, h, d),
        "key_cache": torch.zeros(n_blocks, bs, h, d, device=device).to(cache_dt),
        "value_cache": torch.zeros(n_blocks, bs, h, d, device=device).to(cache_dt),
        "slot_mapping": slots,
        "kv_cache_dtype": "fp8" if fp8 else "auto",
        "k_scale": torch.full((), 0.05, device=device),
        "v_scale": torch.full((), 0.08, device=device),
    }


def _reshape_cache_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    with _cpu_device_properties(x["key"].device):
        call_by_name(mod.triton_reshape_and_cache_flash, x)
    return {"key_cache": x["key_cache"], "value_cache": x["value_cache"]}


def _reshape_cache_reference(x: Inputs) -> Outputs:
    out = {}
    fp8 = x["kv_cache_dtype"] != "auto"
    ok = x["slot_mapping"] >= 0
    slots = x["slot_mapping"][ok]
    for name, src, scale in (("key_cache", "key", "k_scale"), ("value_cache", "value", "v_scale")):
        cache = x[name].clone()
        flat = cache.view(-1, *cache.shape[2:])
        rows = x[src][ok].float()
        flat[slots] = (rows / x[scale] if fp8 else rows).to(cache.dtype)
        out[name] = cache
    return out


TRITON_RESHAPE_AND_CACHE_FLASH = Spec(
    name="vllm_triton_reshape_and_cache_flash",
    launcher="triton_reshape_and_cache_flash",
    rows=(("vllm", "1a19e9cd", "vllm/attention/ops/triton_reshape_and_cache_flash.py"),),
    shapes=(
        {
            "name": "llama3-8b-decode-b64",
            "tokens": 64,
            "hq": 32,
            "hk": 8,
            "head": 128,
            "block": 16,
            "fp8": False,
        },
        {
            "name": "llama3-8b-prefill-4k",
            "tokens": 4096,
            "hq": 32,
            "hk": 8,
            "head": 128,
            "block": 16,
            "fp8": False,
        },
        {
            "name": "qwen3-next-attn-prefill-fp8",
            "tokens": 2048,
            "hq": 16,
            "hk": 2,
            "head": 256,
            "block": 64,
            "fp8": True,
        },
        {
            "name": "llama3-70b-tp8-fp8-decode",
            "tokens": 128,
            "hq": 8,
            "hk": 1,
            "head": 128,
            "block": 16,
            "fp8": True,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 9, 100, 700]),
        "hq": 8,
        "hk": r.choice([1, 2, 8]),
        "head": r.choice([64, 128, 256]),
        "block": r.choice([16, 32]),
        # fp16 without an fp8 cache: Triton's CPU interpreter computes bf16 wrongly and
        # rounds fp32 -> e4m3 past a power of two to half the value (on both sides), so
        # the held-out shape stays checkable there; named shapes cover bf16 and fp8
        "fp8": False,
        "dtype": "float16",
    },
    make_inputs=_reshape_cache_inputs,
    call=_reshape_cache_call,
    reference=_reshape_cache_reference,
    mutated=("key_cache", "value_cache"),
    tolerance_why="copies (exact) or one fp8 e4m3 rounding of value / scale (the kernel may "
    "multiply by the reciprocal scale): the fp8 default (one step)",
)

SPECS = SPECS + (CHUNKED_PREFILL_PAGED_DECODE, TRITON_RESHAPE_AND_CACHE_FLASH)


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

SPECS = SPECS + (FUSED_INV_ROPE_FP8_QUANT,)


# --- context_attention_fwd of prefix_prefill (vLLM): new tokens over a paged prefix ---


def _prefix_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    b, ctx, ql, hq, hk, d, bs = (
        shape[k] for k in ("batch", "ctx", "query", "hq", "hk", "head", "block")
    )
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    ctx_lens = [max(1, ctx - (i * 97) % max(1, ctx // 2)) for i in range(b)]
    q_lens = [max(1, ql - (i * 53) % max(1, ql // 2)) for i in range(b)]
    # the cache holds the prefix; the new tokens' k/v come in k and v
    k_log, v_log, kc, vc, table = _paged_cache(ctx_lens, hk, d, bs, dt, gen, device)
    total = sum(q_lens)
    starts = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32)
    seq = [c + n for c, n in zip(ctx_lens, q_lens, strict=True)]
    one = torch.ones((), device=device, dtype=torch.float32)
    return {
        "q": torch.randn(total, hq, d, generator=gen, device=device).to(dt),
        "k": torch.randn(total, hk, d, generator=gen, device=device).to(dt),
        "v": torch.randn(total, hk, d, generator=gen, device=device).to(dt),
        "o": torch.zeros(total, hq, d, device=device, dtype=dt),
        "kv_cache_dtype": "auto",
        "k_cache": kc,
        "v_cache": vc,
        "b_loc": table,
        "b_start_loc": starts.to(device),
        "b_seq_len": torch.tensor(seq, device=device, dtype=torch.int32),
        "max_seq_len": max(seq),
        "max_input_len": max(q_lens),
        "k_scale": one,
        "v_scale": one,
        "sm_scale": d**-0.5,
        "k_logical": k_log,
        "v_logical": v_log,
    }


def _prefix_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    call_by_name(mod.context_attention_fwd, x)
    return {"o": x["o"]}


def _prefix_reference(x: Inputs) -> Outputs:
    """Per sequence: the new tokens attend to the whole prefix and causally to each other."""
    torch = _torch()
    out = torch.zeros_like(x["o"], dtype=torch.float32)
    st = x["b_start_loc"].tolist()
    hq = x["q"].shape[1]
    for i, (kc, vc) in enumerate(zip(x["k_logical"], x["v_logical"], strict=True)):
        a, e = st[i], st[i + 1]
        c, n = kc.shape[0], e - a
        group = hq // kc.shape[1]
        k = torch.cat((kc, x["k"][a:e])).float().repeat_interleave(group, 1).transpose(0, 1)
        v = torch.cat((vc, x["v"][a:e])).float().repeat_interleave(group, 1).transpose(0, 1)
        q = x["q"][a:e].float().transpose(0, 1)  # [H, n, D]
        s = q @ k.transpose(1, 2) * x["sm_scale"]  # [H, n, c + n]
        cols = torch.arange(c + n, device=s.device)
        rows = torch.arange(n, device=s.device)
        s = s.masked_fill(cols[None, :] > c + rows[:, None], float("-inf"))
        out[a:e] = (torch.softmax(s, -1) @ v).transpose(0, 1)
    return {"o": out.to(x["o"].dtype)}


_PP = "vllm/attention/ops/prefix_prefill.py"

PREFIX_PREFILL_CONTEXT_ATTENTION = Spec(
    name="vllm_prefix_prefill_context_attention_fwd",
    launcher="context_attention_fwd",
    rows=(("vllm", "9a161307", _PP), ("vllm", "1a19e9cd", _PP)),
    shapes=(
        {
            "name": "llama3-8b-prefix-b4",
            "batch": 4,
            "ctx": 2048,
            "query": 512,
            "hq": 32,
            "hk": 8,
            "head": 128,
            "block": 16,
        },
        {
            "name": "llama3-8b-chunk-b1",
            "batch": 1,
            "ctx": 6144,
            "query": 2048,
            "hq": 32,
            "hk": 8,
            "head": 128,
            "block": 16,
        },
        {
            "name": "qwen3-next-attn-b2",
            "batch": 2,
            "ctx": 1024,
            "query": 1024,
            "hq": 16,
            "hk": 2,
            "head": 256,
            "block": 64,
        },
        {
            "name": "mha-b8",
            "batch": 8,
            "ctx": 256,
            "query": 128,
            "hq": 16,
            "hk": 16,
            "head": 128,
            "block": 32,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "batch": r.choice([1, 2, 3]),
        "ctx": r.choice([16, 70, 300]),
        "query": r.choice([5, 40, 130]),
        **r.choice([{"hq": 8, "hk": 2}, {"hq": 4, "hk": 4}]),
        "head": r.choice([64, 128]),
        "block": r.choice([16, 32]),
        # fp16: Triton's CPU interpreter computes bf16 dots wrongly; named shapes are bf16
        "dtype": "float16",
    },
    make_inputs=_prefix_inputs,
    call=_prefix_call,
    reference=_prefix_reference,
    mutated=("o",),
    tolerance={"o": (2e-2, 2e-2)},
    tolerance_why="online softmax over <= 8k keys (prefix from the cache, then causal new "
    "tokens) in fp32 with bf16 P@V: bf16 default plus an absolute floor near zero",
)

SPECS = SPECS + (PREFIX_PREFILL_CONTEXT_ATTENTION,)
