"""Specs for vLLM rows the first spec rounds left (issue 35, task 35d).

* ``_sgmv_expand`` (b2785579, "Punica prefill kernels fusion"): the LoRA B projection of a
  prefill batch, ``output[t] += inputs[t] @ B[adapter(t)]^T``. The commit turns the one
  weight into a list of slices launched together (weights found through a pointer table
  that ``lora/ops/utils.py`` builds: a sibling the loader stubs, so ours, below, is handed
  in, as ``specs.lora`` does for the shrink side). The shapes are single-slice projections
  (``o_proj``, ``down_proj``): the before side expands one weight per call, and a
  multi-slice layer went through another file (``sgmv_expand_slice.py``) before the commit.

Models: Llama-3-8B (hidden 4096, MLP 14336), Qwen2.5-7B (hidden 3584, MLP 18944), adapters
of rank 8-64, as vLLM's LoRA tests and ``benchmarks/kernels/benchmark_lora.py`` use.
"""

from __future__ import annotations

import inspect
import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name


def _torch() -> Any:
    import torch

    return torch


#: Pointer tables by weight addresses, cached as vLLM caches them after its profile run.
_B_TABLES: dict[tuple[int, ...], tuple[Any, ...]] = {}


def lora_b_table(weights: list[Any], offset_start: int, device: Any) -> tuple[Any, ...]:
    """Our writing of the contract of vLLM's ``_get_lora_b_ptr`` at b2785579:
    ``(slice_start, weight_ptrs, stride_d0, stride_d1, stride_d2, hidden_sizes,
    same_stride, MAX_N)``. Each 3-D weight is ``(loras, n, rank)`` (a 4-D one has a unit
    second axis); one weight is passed as itself with its slice start as an int, several as
    device tensors of addresses and starts; equal strides and sizes as plain ints."""
    torch = _torch()
    key = (offset_start, *(w.data_ptr() for w in weights))
    if key in _B_TABLES:
        return _B_TABLES[key]
    ws = [w.squeeze(1) if w.ndim == 4 else w for w in weights]
    starts, sizes, start = [], [], offset_start
    for w in ws:
        starts.append(start)
        sizes.append(w.size(1))
        start += w.size(1)
    strides = [tuple(w.stride()) for w in ws]
    if len(ws) == 1:
        slice_start, ptrs = starts[0], ws[0]
    else:
        slice_start = torch.tensor(starts, device=device)
        ptrs = torch.tensor([w.data_ptr() for w in ws], device=device)
    same = len(set(strides)) == 1 and len(set(sizes)) == 1
    if same:
        d0, d1, d2 = strides[0]
        hidden: Any = sizes[0]
    else:
        d0, d1, d2 = (torch.tensor([s[i] for s in strides], device=device) for i in range(3))
        hidden = torch.tensor(sizes, device=device)
    _B_TABLES[key] = (slice_start, ptrs, d0, d1, d2, hidden, same, max(sizes))
    return _B_TABLES[key]


def _expand_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """A prefill batch of ``seqs`` prompts of random length around ``avg``, one on no
    adapter (index -1); the shrink side's fp32 buffer as input, a bf16 layer output the
    expansion adds into."""
    torch = _torch()
    seqs, avg, r, loras, n = shape["seqs"], shape["avg"], shape["rank"], shape["loras"], shape["n"]
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    lens = torch.randint(max(1, avg // 2), avg * 3 // 2 + 1, (seqs,), generator=gen, device=device)
    idx = torch.randint(0, loras, (seqs,), generator=gen, device=device)
    if seqs > 1:
        idx[int(torch.randint(0, seqs, (1,), generator=gen, device=device))] = -1
    t = int(lens.sum())
    return {
        "b_seq_start_loc": torch.cumsum(lens, 0) - lens,
        "seq_len_tensor": lens,
        "lora_indices_tensor": idx,
        "batches": seqs,
        "max_seq_length": int(lens.max()),
        "token_nums": t,
        "inputs": torch.randn(1, t, r, generator=gen, device=device),
        "weight": (torch.randn(loras, n, r, generator=gen, device=device) * r**-0.5).to(dt),
        "output_tensor": torch.randn(t, n, generator=gen, device=device).to(dt),
        "add_inputs": True,
    }


def _expand_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    fn = mod._sgmv_expand
    if "offset_start" in inspect.signature(fn).parameters:
        # b2785579: a list of slices, inputs (slices, tokens, rank), the pointer table ours
        mod._get_lora_b_ptr = lora_b_table
        call_by_name(fn, dict(x, lora_b_weights=[x["weight"]], offset_start=0))
    else:
        call_by_name(fn, dict(x, inputs=x["inputs"][0], lora_b_weights=x["weight"]))
    return {"output_tensor": x["output_tensor"]}


def _expand_reference(x: Inputs) -> Outputs:
    torch = _torch()
    tok = torch.repeat_interleave(x["lora_indices_tensor"].long(), x["seq_len_tensor"].long())
    out = x["output_tensor"].float().clone()
    xs = x["inputs"][0].float()
    for adapter in torch.unique(tok[tok >= 0]).tolist():
        rows = (tok == adapter).nonzero().flatten()
        out[rows] += xs[rows] @ x["weight"][adapter].float().T
    return {"output_tensor": out.to(x["output_tensor"].dtype)}


_LLAMA = "Llama-3-8B prefill with LoRA adapters"

SGMV_EXPAND = Spec(
    name="vllm_punica_sgmv_expand",
    launcher="_sgmv_expand",
    rows=(("vllm", "b2785579", "vllm/lora/ops/sgmv_expand.py"),),
    shapes=(
        {
            "name": "llama3-8b-o-proj-4x512-r16",
            "source": _LLAMA + ", o_proj (n 4096)",
            "seqs": 4,
            "avg": 512,
            "rank": 16,
            "loras": 4,
            "n": 4096,
        },
        {
            "name": "llama3-8b-down-proj-2x1024-r64",
            "source": _LLAMA + ", down_proj (n 4096)",
            "seqs": 2,
            "avg": 1024,
            "rank": 64,
            "loras": 2,
            "n": 4096,
        },
        {
            "name": "qwen25-7b-o-proj-8x256-r8",
            "source": "Qwen2.5-7B prefill, o_proj (n 3584)",
            "seqs": 8,
            "avg": 256,
            "rank": 8,
            "loras": 8,
            "n": 3584,
        },
        {
            "name": "llama3-8b-lm-head-1x2048-r32",
            "source": _LLAMA + ", a 14336-wide expand (gate/up as one weight)",
            "seqs": 1,
            "avg": 2048,
            "rank": 32,
            "loras": 1,
            "n": 14336,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "seqs": r.choice([1, 3, 5]),
        "avg": r.choice([4, 20, 70]),
        "rank": r.choice([8, 16]),
        "loras": r.choice([2, 4]),
        "n": r.choice([128, 384, 512]),
        "dtype": "float16",  # the CPU interpreter misreads bf16 weights (specs.lora)
    },
    make_inputs=_expand_inputs,
    call=_expand_call,
    reference=_expand_reference,
    mutated=("output_tensor",),
    tolerance_why="a fp32 sum over the rank (<= 64) of products added once to a bf16 "
    "layer output of O(1): one bf16 rounding, dtype defaults (4 ulp)",
)


SPECS: tuple[Spec, ...] = (SGMV_EXPAND,)

_ = random
