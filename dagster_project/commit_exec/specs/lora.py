"""Specs for the multi-LoRA kernels of the execution census (issue 35), vLLM's here: the
fused MoE-LoRA launcher (``_fused_moe_lora``) and Punica's prefill SGMV shrink
(``_sgmv_shrink``); SGLang's are in ``lora_sglang``.

Batches are built the way the engines build them, re-written here in torch: requests spread
over several adapters (some adapter slots idle), tokens of one request share an adapter,
LoRA ranks 16-64, weights scaled so every intermediate is O(1). Where a commit changed the
*caller* together with the kernel (the batch layout it passes), the per-side adapter passes
each side the layout its own engine version built, so the row measures what the commit
changed; each such place says so.

Models: Qwen3-30B-A3B (hidden 2048, 128 experts, top-8, expert intermediate 768),
Mixtral-8x7B (4096, 8 experts, top-2, 14336), DeepSeek-V2-Lite (2048, 64 experts, top-6,
1408), gpt-oss-20b (2880, 32 experts, top-4, 2880), Llama-3-8B (hidden 4096, q 4096,
kv 1024, MLP 14336).
"""

from __future__ import annotations

import functools
import inspect
import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name


def _torch() -> Any:
    import torch

    return torch


def _randn(gen: Any, device: Any, *size: int, scale: float = 1.0, dtype: str = "bfloat16") -> Any:
    torch = _torch()
    out = torch.randn(*size, generator=gen, device=device, dtype=torch.float32) * scale
    return out.to(getattr(torch, dtype))


def _lora_of_tokens(gen: Any, device: Any, tokens: int, seqs: int, active: list[int]) -> Any:
    """Per-token adapter id: ``tokens`` split into ``seqs`` requests of random length, the
    requests cycling through the ``active`` adapters in a random order."""
    torch = _torch()
    seqs = max(1, min(seqs, tokens))
    cuts = torch.randperm(tokens - 1, generator=gen, device=device)[: seqs - 1] + 1
    bounds = [0, *sorted(int(c) for c in cuts), tokens]
    ids = [active[i % len(active)] for i in range(seqs)]
    perm = torch.randperm(seqs, generator=gen, device=device).tolist()
    mapping = torch.empty(tokens, dtype=torch.int32, device=device)
    for i in range(seqs):
        mapping[bounds[i] : bounds[i + 1]] = ids[perm[i]]
    return mapping


# --- vLLM fused MoE-LoRA: output[t, k, slice] += (x @ A[l, e].T) @ B[l, e].T ---------------


def moe_lora_align(topk_ids: Any, mapping: Any, experts: int, bm: int, loras: int) -> Any:
    """vLLM's ``moe_lora_align_block_size`` (a CUDA op there) in torch: per adapter, its
    (token, k) slots grouped by expert, each group padded to ``bm`` with the sentinel
    ``topk_ids.numel()``; returns (sorted_token_ids (L, P), expert_ids (L, P/bm) with -1 for
    unused blocks, num_tokens_post_padded (L,))."""
    torch = _torch()
    dev = topk_ids.device
    numel = topk_ids.numel()
    topk = topk_ids.shape[1]
    padded_max = -(-(numel + experts * (bm - 1)) // bm) * bm
    key = mapping.long().repeat_interleave(topk) * experts + topk_ids.flatten().long()
    order = torch.sort(key, stable=True).indices
    counts = torch.bincount(key, minlength=loras * experts).view(loras, experts)
    padded = (counts + bm - 1) // bm * bm
    start = torch.cumsum(padded, 1) - padded  # per adapter, where each expert's run begins
    group_first = (torch.cumsum(counts.flatten(), 0) - counts.flatten())[key[order]]
    rank_in_group = torch.arange(numel, device=dev) - group_first
    lora_of, exp_of = key[order] // experts, key[order] % experts
    sorted_ids = torch.full((loras, padded_max), numel, dtype=torch.int32, device=dev)
    sorted_ids[lora_of, start[lora_of, exp_of] + rank_in_group] = order.to(torch.int32)
    expert_ids = torch.full((loras, padded_max // bm), -1, dtype=torch.int32, device=dev)
    for lora in range(loras):
        blocks = torch.repeat_interleave(torch.arange(experts, device=dev), padded[lora] // bm)
        expert_ids[lora, : blocks.numel()] = blocks.to(torch.int32)
    return sorted_ids, expert_ids, padded.sum(1).to(torch.int32)


def _moe_lora_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    m, topk, e = shape["tokens"], shape["topk"], shape["experts"]
    k, n, r, loras = shape["k"], shape["n"], shape["rank"], shape["max_loras"]
    slices, bm, w2 = shape["slices"], shape["bm"], shape.get("w2", False)
    dt = shape.get("dtype", "bfloat16")
    active = sorted(torch.randperm(loras, generator=gen, device=device)[: shape["active"]].tolist())
    mapping = _lora_of_tokens(gen, device, m, shape.get("seqs") or m, active)
    scores = torch.rand(m, e, generator=gen, device=device)
    topk_ids = scores.topk(topk, dim=1).indices.to(torch.int32)
    weights = torch.rand(m, topk, generator=gen, device=device) + 0.1
    weights = weights / weights.sum(1, keepdim=True)
    sorted_ids, expert_ids, post = moe_lora_align(topk_ids, mapping, e, bm, loras)
    lora_ids = torch.full((loras + 1,), -1, dtype=torch.int32, device=device)
    lora_ids[: len(active)] = torch.tensor(active, dtype=torch.int32, device=device)
    split_s = split_e = 1  # see the note above FUSED_MOE_LORA
    bn_shrink, bk_expand = min(64, r), max(16, min(32, r))  # vLLM's default configs
    x: Inputs = {
        "output": _randn(gen, device, m, topk, n * slices, dtype=dt),
        "qcurr_hidden_states": _randn(gen, device, m * topk if w2 else m, k, dtype=dt),
        "lora_a_stacked": [
            _randn(gen, device, loras, e, r, k, scale=k**-0.5, dtype=dt) for _ in range(slices)
        ],
        "lora_b_stacked": [
            _randn(gen, device, loras, e, n, r, scale=r**-0.5, dtype=dt) for _ in range(slices)
        ],
        "topk_weights": weights,
        "topk_ids": topk_ids,
        "sorted_token_ids": sorted_ids,
        "expert_ids": expert_ids,
        "num_tokens_post_padded": post,
        "token_lora_mapping": mapping,
        "max_lora_rank": r,
        "top_k_num": topk,
        "lora_ids": lora_ids,
        "num_active_loras": len(active),
        "adapter_enabled": torch.ones(loras + 1, dtype=torch.int32, device=device),
        "mul_routed_weight": w2,
        "fully_sharded": False,
        "offset": 0,
        # one config for the versions with a single one (before the shrink/expand split)
        "block_size_m": bm,
        "block_size_n": bn_shrink,
        "block_size_k": 32,
        "group_size_m": 8,
        "split_k": split_s,
    }
    for side, bn, bk, split in (
        ("shrink", bn_shrink, 32, split_s),
        ("expand", 64, bk_expand, split_e),
    ):
        x.update(
            {
                f"{side}_block_size_m": bm,
                f"{side}_block_size_n": bn,
                f"{side}_block_size_k": bk,
                f"{side}_group_size_m": 8,
                f"{side}_num_warps": 4,
                f"{side}_num_stages": 3,
                f"{side}_split_k": split,
            }
        )
    return x


def _moe_lora_naive(x: Inputs) -> bool:
    """vLLM's caller rule from 7320ca39 on: skip the alignment when the batch's (token, k)
    slots, times a sparsity margin of 8, are at most experts x max_loras."""
    e, loras = x["lora_a_stacked"][0].shape[1], x["lora_a_stacked"][0].shape[0]
    return bool(x["topk_ids"].numel() * 8 <= e * loras)


@functools.cache
def _takes(fn: Any, name: str) -> bool:
    """Whether this side's launcher has parameter ``name`` (read once per launcher)."""
    return name in inspect.signature(fn).parameters


def _moe_lora_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    fn = mod._fused_moe_lora
    values = dict(x)
    if _takes(fn, "token_lora_mapping") and _moe_lora_naive(x):
        values.update(
            sorted_token_ids=None,
            num_tokens_post_padded=None,
            expert_ids=x["topk_ids"].reshape(-1),
        )
    call_by_name(fn, values)
    return {"output": x["output"]}


def _moe_lora_reference(x: Inputs) -> Outputs:
    torch = _torch()
    out = x["output"].float().clone()
    hidden, ids, mapping = (
        x["qcurr_hidden_states"].float(),
        x["topk_ids"].long(),
        x["token_lora_mapping"].long(),
    )
    m, topk = ids.shape
    w2 = x["mul_routed_weight"]
    rows = hidden.view(m, topk, -1) if w2 else hidden[:, None, :].expand(m, topk, -1)
    n = x["lora_b_stacked"][0].shape[2]
    lora_of = mapping[:, None].expand(m, topk)
    for s, (a, b) in enumerate(zip(x["lora_a_stacked"], x["lora_b_stacked"], strict=True)):
        for lora, expert in torch.unique(
            torch.stack([lora_of, ids], -1).view(-1, 2), dim=0
        ).tolist():
            sel = (lora_of == lora) & (ids == expert)
            inter = (rows[sel] @ a[lora, expert].float().T).to(a.dtype).float()
            delta = inter @ b[lora, expert].float().T
            if w2:
                delta = delta * x["topk_weights"][sel][:, None]
            out[..., s * n : (s + 1) * n][sel] += delta
    return {"output": out.to(x["output"].dtype)}


_VL_MOE = "vllm/lora/ops/triton_ops/fused_moe_lora_op.py"

_MOE_LORA_SHAPES: tuple[Shape, ...] = (
    {
        "name": "test-dsv2-lite-w13-m100",
        "source": "tests/lora/test_fused_moe_lora_kernel.py at the sha (100 tokens, "
        "64 experts, top-6, K 2048, N 1408, block 16), both w13 slices",
        "tokens": 100,
        "seqs": 10,
        "topk": 6,
        "experts": 64,
        "k": 2048,
        "n": 1408,
        "rank": 16,
        "max_loras": 4,
        "active": 4,
        "slices": 2,
        "bm": 16,
        "dtype": "float16",
    },
    {
        "name": "qwen3-30b-a3b-w13-decode8",
        "source": "Qwen3-30B-A3B config, decode batch of 8 over 8 adapter slots, 4 live",
        "tokens": 8,
        "topk": 8,
        "experts": 128,
        "k": 2048,
        "n": 768,
        "rank": 16,
        "max_loras": 8,
        "active": 4,
        "slices": 2,
        "bm": 16,
    },
    {
        "name": "qwen3-30b-a3b-w2-decode64",
        "source": "Qwen3-30B-A3B down projection (routed weights), decode batch 64",
        "tokens": 64,
        "topk": 8,
        "experts": 128,
        "k": 768,
        "n": 2048,
        "rank": 32,
        "max_loras": 4,
        "active": 3,
        "slices": 1,
        "bm": 16,
        "w2": True,
    },
    {
        "name": "mixtral-w2-prefill512",
        "source": "Mixtral-8x7B down projection (K 14336 -> 4096), prefill 512 tokens",
        "tokens": 512,
        "seqs": 4,
        "topk": 2,
        "experts": 8,
        "k": 14336,
        "n": 4096,
        "rank": 16,
        "max_loras": 4,
        "active": 2,
        "slices": 1,
        "bm": 64,
        "w2": True,
    },
    {
        "name": "gpt-oss-20b-w13-prefill1024",
        "source": "gpt-oss-20b (hidden 2880, 32 experts, top-4), prefill 1024 tokens, rank 64",
        "tokens": 1024,
        "seqs": 8,
        "topk": 4,
        "experts": 32,
        "k": 2880,
        "n": 2880,
        "rank": 64,
        "max_loras": 4,
        "active": 4,
        "slices": 2,
        "bm": 64,
    },
)


def _moe_lora_random(dtype: str) -> Any:
    return lambda r: {
        "name": "random",
        "tokens": r.choice([1, 5, 24]),
        "seqs": r.choice([1, 3]),
        "topk": r.choice([2, 4]),
        "experts": r.choice([8, 16]),
        "k": r.choice([256, 512]),
        "n": r.choice([128, 192]),
        "rank": 16,
        "max_loras": r.choice([2, 4]),
        "active": r.choice([1, 2]),
        "slices": r.choice([1, 2]),
        "bm": 16,
        "w2": r.choice([False, True]),
        "dtype": dtype,
    }


def _moe_lora_spec(name: str, shas: tuple[str, ...], shapes: tuple[Shape, ...], dt: str) -> Spec:
    return Spec(
        name=name,
        launcher="_fused_moe_lora",
        rows=tuple(("vllm", sha, _VL_MOE) for sha in shas),
        shapes=shapes,
        random_shape=_moe_lora_random(dt),
        make_inputs=_moe_lora_inputs,
        call=_moe_lora_call,
        reference=_moe_lora_reference,
        mutated=("output",),
        tolerance={"output": (4e-2, 2e-2)},
        tolerance_why="output = base + a LoRA delta of O(1): the rank-r intermediate is "
        "stored in the activation dtype (one rounding, bf16 2^-8 relative) and, with split-K, "
        "summed by atomics in a run-dependent order; that error, carried through the "
        "rank-16..64 expand, gives a few bf16 ulps at O(1) outputs: 4e-2 absolute plus 2 ulp",
    )


#: Split-K stays 1 on both launches (vLLM's default fused-MoE-LoRA configs): with split-K > 1
#: 29de3cde sums shrink partials into an uninitialised buffer and the expand kernel before
#: ee484b3f adds wrong partials (both seen on the CPU check), so those configs have no
#: correct ``before`` to time against. Once ``before`` reads B through the activations'
#: dtype (5a3adf58^ on), fp16 (the repo's test runs fp16 and bf16) is a valid shape; the
#: random shape is fp16 because Triton's CPU interpreter misreads bf16 loaded through the
#: launcher's pointer table (int -> pointer cast), which would hide the harness's own
#: errors on the CPU check.
FUSED_MOE_LORA = _moe_lora_spec(
    "vllm_fused_moe_lora",
    ("5a3adf58", "d5503ca7", "ee484b3f", "e33192b2", "7320ca39", "ffe1fc7a"),
    _MOE_LORA_SHAPES,
    "float16",
)

#: Up to a806c14c the kernel read B through a bf16 pointer and allocated the intermediate
#: bf16 whatever the activations, so these rows (a806c14c, and 29de3cde whose ``before`` is
#: that version) are defined for bf16 activations only: bf16 shapes (no CPU check, above).
FUSED_MOE_LORA_BF16 = _moe_lora_spec(
    "vllm_fused_moe_lora_bf16",
    ("a806c14c", "29de3cde"),
    tuple({**s, "dtype": "bfloat16"} for s in _MOE_LORA_SHAPES),
    "bfloat16",
)


# --- vLLM Punica SGMV shrink (prefill): b2785579 fused the per-slice launches into one ----
# (its sgmv_expand.py row is skipped: both sides build the kernel's A pointer as a 1-tuple,
# a trailing comma, which Triton 3.6 rejects)


#: Pointer tables by (kind, weight addresses), as vLLM caches them after its profile run.
_PTR_TABLES: dict[tuple[Any, ...], Any] = {}


def lora_a_table(weights: list[Any], device: Any) -> tuple[Any, int, int, int]:
    """vLLM's ``_get_lora_a_ptr`` (lora/ops/utils.py at b2785579, a sibling file the loader
    stubs): one weight is passed as itself, several as a device tensor of their addresses;
    the (equal) strides of the 3-D weights. Cached by addresses, as there, so a warm call
    costs a dict lookup."""
    torch = _torch()
    key = ("a", *(w.data_ptr() for w in weights))
    if key not in _PTR_TABLES:
        ws = [w.squeeze(1) if w.ndim == 4 else w for w in weights]
        table = ws[0] if len(ws) == 1 else torch.tensor([w.data_ptr() for w in ws], device=device)
        _PTR_TABLES[key] = (table, *ws[0].stride())
    return _PTR_TABLES[key]


def _sgmv_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """A prefill batch: ``seqs`` prompts of random length around ``avg``, one of them on no
    adapter (index -1), the others on adapters of ``loras`` slots."""
    torch = _torch()
    seqs, avg, r, loras = shape["seqs"], shape["avg"], shape["rank"], shape["loras"]
    dt = shape.get("dtype", "bfloat16")
    lens = torch.randint(max(1, avg // 2), avg * 3 // 2 + 1, (seqs,), generator=gen, device=device)
    starts = torch.cumsum(lens, 0) - lens
    idx = torch.randint(0, loras, (seqs,), generator=gen, device=device)
    if seqs > 1:
        idx[int(torch.randint(0, seqs, (1,), generator=gen, device=device))] = -1
    t = int(lens.sum())
    x: Inputs = {
        "b_seq_start_loc": starts,
        "seq_len_tensor": lens,
        "lora_indices_tensor": idx,
        "batches": seqs,
        "max_seq_length": int(lens.max()),
        "token_nums": t,
    }
    k, n_slices = shape["k"], shape["slices"]
    x.update(
        inputs=_randn(gen, device, t, k, dtype=dt),
        lora_a_weights=[
            _randn(gen, device, loras, r, k, scale=k**-0.5, dtype=dt) for _ in range(n_slices)
        ],
        # vLLM's Punica buffer: fp32, zeroed (split-K partial sums are added atomically)
        output_tensor=torch.zeros(n_slices, t, r, device=device, dtype=torch.float32),
        scaling=1.0,
    )
    return x


@functools.cache
def _fused_slices(fn: Any) -> bool:
    """b2785579's signature: ``lora_a_weights`` is a list, one launch for all slices."""
    return "List" in str(inspect.signature(fn).parameters["lora_a_weights"].annotation)


def _sgmv_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    fn = mod._sgmv_shrink
    if _fused_slices(fn):
        # b2785579: one launch for every slice, weights as a list (the pointer-table helper
        # lives in a sibling file: ours, above, is handed in)
        mod._get_lora_a_ptr = lora_a_table
        call_by_name(fn, x)
    else:
        # before: the Punica wrapper launched once per slice into that slice's buffer
        for i, w in enumerate(x["lora_a_weights"]):
            call_by_name(fn, dict(x, lora_a_weights=w, output_tensor=x["output_tensor"][i]))
    return {"output_tensor": x["output_tensor"]}


def _sgmv_reference(x: Inputs) -> Outputs:
    """Per adapter, its tokens' rows times each slice's weights, scaled; tokens on no
    adapter (index -1) keep the zeroed buffer."""
    torch = _torch()
    tok = torch.repeat_interleave(x["lora_indices_tensor"].long(), x["seq_len_tensor"].long())
    out = x["output_tensor"].float().clone()
    xs = x["inputs"].float()
    for adapter in torch.unique(tok[tok >= 0]).tolist():
        rows = (tok == adapter).nonzero().flatten()
        for i, w in enumerate(x["lora_a_weights"]):
            out[i, rows] += (xs[rows] @ w[adapter].float().T) * x["scaling"]
    return {"output_tensor": out.to(x["output_tensor"].dtype)}


def _sgmv_random(r: random.Random) -> Shape:
    return {
        "name": "random",
        "seqs": r.choice([1, 3, 5]),
        "avg": r.choice([4, 20, 70]),
        "rank": 16,
        "loras": r.choice([2, 4]),
        "k": r.choice([256, 512]),
        "slices": r.choice([1, 2, 3]),
        "dtype": "float16",  # the CPU interpreter misreads bf16 through the pointer table
    }


_SGMV_TOL = (
    "fp32 output of bf16 products, split-K partial sums added by fp32 atomics in a "
    "run-dependent order over K <= 14336: about 1e-3 relative of O(1) values"
)
_LLAMA_PREFILL = "Llama-3-8B (hidden 4096, MLP 14336), prefill"

SGMV_SHRINK = Spec(
    name="vllm_punica_sgmv_shrink",
    launcher="_sgmv_shrink",
    rows=(("vllm", "b2785579", "vllm/lora/ops/sgmv_shrink.py"),),
    shapes=(
        {
            "name": "llama3-8b-qkv-prefill-4x512",
            "source": _LLAMA_PREFILL + ", q/k/v slices",
            "seqs": 4,
            "avg": 512,
            "rank": 16,
            "loras": 4,
            "k": 4096,
            "slices": 3,
        },
        {
            "name": "llama3-8b-gate-up-prefill-8x256",
            "source": _LLAMA_PREFILL + ", rank 64",
            "seqs": 8,
            "avg": 256,
            "rank": 64,
            "loras": 8,
            "k": 4096,
            "slices": 2,
        },
        {
            "name": "llama3-8b-o-prefill-2x1024",
            "source": _LLAMA_PREFILL + ", o_proj",
            "seqs": 2,
            "avg": 1024,
            "rank": 32,
            "loras": 2,
            "k": 4096,
            "slices": 1,
        },
        {
            "name": "llama3-8b-down-prefill-4x256",
            "source": _LLAMA_PREFILL + ", down_proj",
            "seqs": 4,
            "avg": 256,
            "rank": 16,
            "loras": 4,
            "k": 14336,
            "slices": 1,
        },
    ),
    random_shape=_sgmv_random,
    make_inputs=_sgmv_inputs,
    call=_sgmv_call,
    reference=_sgmv_reference,
    mutated=("output_tensor",),
    tolerance={"output_tensor": (2e-3, 1e-3)},
    tolerance_why=_SGMV_TOL,
)


SPECS: tuple[Spec, ...] = (
    FUSED_MOE_LORA,
    FUSED_MOE_LORA_BF16,
    SGMV_SHRINK,
)
