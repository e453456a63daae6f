"""Specs for the misc vLLM sampling rows (issue 35): the model runner V2 sampling kernels
(Gumbel sampling, penalties and their bincount, token logprobs), rejection sampling of
speculative decoding and the Triton top-k/top-p mask.

Vocabularies: Llama-3 (128256), Qwen2/3 (151936), Llama-2 and Mistral (32000). Batches
follow the engine's decode batches (one row per request; ``1 + k`` rows per request with
k speculative tokens: EAGLE k=1..7, MTP k=1, n-gram k=4).
"""

from __future__ import annotations

import random
import types
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .misc_vllm_common import _perm, _sm_count, _torch

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


# --- apply_top_k_top_p_triton (vLLM v1 sampler): mask logits outside top-k / top-p ---


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


SPECS: tuple[Spec, ...] = (
    COMPUTE_TOKEN_LOGPROBS,
    APPLY_PENALTIES,
    BINCOUNT,
    GUMBEL_SAMPLE,
    REJECTION_SAMPLE,
    SAMPLE_RECOVERED_TOKENS,
    APPLY_TOP_K_TOP_P_TRITON,
)
