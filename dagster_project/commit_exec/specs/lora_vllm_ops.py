"""Specs for vLLM's multi-LoRA shrink and expand ops (``lora/ops/triton_ops``), whose jit
bodies live in a sibling module: ``lora_shrink_op.py`` / ``lora_expand_op.py`` launch
``do_shrink_kernel`` / ``do_expand_kernel`` of ``kernel_utils.py``, and read their configs
and weight-pointer tables from ``utils.py``. Each side imports those siblings at its own
commit (``Spec.siblings``), so a row times upstream's helpers, never a stand-in.

Rows: d4d1a602 (tuned configs loaded from json; without a json folder the defaults) and
ffe1fc7a (grid over the active LoRAs only) change the op files; 40e2eeeb changes
``kernel_utils.py`` itself (``mm_k``), run through the shrink op at that commit.

Shapes follow ``tests/lora/test_punica_ops.py`` (hidden sizes of Llama-class models, ranks
8-64, 1-3 fused slices for QKV / gate-up) with 4 adapters, some tokens without LoRA (-1).
"""

from __future__ import annotations

import inspect
import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .fla import _act_dtype
from .lora import _lora_of_tokens, _randn, _torch

_OPS = "vllm/lora/ops/triton_ops"
_SHRINK = f"{_OPS}/lora_shrink_op.py"
_EXPAND = f"{_OPS}/lora_expand_op.py"
_UTILS = f"{_OPS}/utils.py"
_KERNEL_UTILS = f"{_OPS}/kernel_utils.py"
_MAX_LORAS = 4
_PKG = "vllm.lora.ops.triton_ops"


def _metadata(mapping: Any, max_loras: int) -> Inputs:
    """vLLM's ``LoRAKernelMeta.prepare_tensors``: the tokens sorted by adapter, the active
    adapter ids (``torch.unique``, -1 first when present) padded with -1 to ``max_loras + 1``,
    their token counts and start offsets."""
    torch = _torch()
    dev = mapping.device
    ids, counts = torch.unique(mapping, sorted=True, return_counts=True)
    lora_ids = torch.full((max_loras + 1,), -1, dtype=torch.int32, device=dev)
    per_lora = torch.zeros(max_loras + 1, dtype=torch.int32, device=dev)
    lora_ids[: ids.numel()] = ids.to(torch.int32)
    per_lora[: ids.numel()] = counts.to(torch.int32)
    start = torch.zeros(max_loras + 2, dtype=torch.int32, device=dev)
    start[1:] = torch.cumsum(per_lora, 0)
    return {
        "token_lora_mapping": mapping,
        "token_indices_sorted_by_lora_ids": torch.argsort(mapping, stable=True).to(torch.int32),
        "num_tokens_per_lora": per_lora,
        "lora_token_start_loc": start,
        "lora_ids": lora_ids,
        "no_lora_flag_cpu": torch.tensor([False]),
        # ffe1fc7a's grid: the unique ids in the batch (``lora_ids.size(0)`` before padding,
        # as ``prepare_tensors`` sets it with cudagraph specialisation on)
        "num_active_loras": int(ids.numel()),
    }


def _shrink_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    m, k, rank, slices = shape["tokens"], shape["hidden"], shape["rank"], shape["slices"]
    active = list(range(-1, _MAX_LORAS))  # -1: tokens without an adapter
    mapping = _lora_of_tokens(gen, device, m, shape.get("seqs", 4), active)
    x: Inputs = {
        "inputs": _randn(gen, device, m, k),
        "lora_a_weights": [
            _randn(gen, device, _MAX_LORAS, rank, k, scale=k**-0.5) for _ in range(slices)
        ],
        "output_tensor": torch.zeros(slices, m, rank, dtype=torch.float32, device=device),
        "scaling": 0.5,
    }
    x.update(_metadata(mapping, _MAX_LORAS))
    return x


def _op_module(mod: Any, x: Inputs, op: str) -> Any:
    """The module holding ``_lora_<op>``: the row's, or for a ``kernel_utils.py`` row the op
    sibling (which imports this side's ``kernel_utils``). On the CPU interpreter only, its
    ``supports_pdl`` answers False: the op asks it of the inputs' device, the loader's
    platform stand-in answers as the H100 there, and the interpreter has no PDL intrinsics
    (``gdc_wait``); on the GPU the op takes upstream's answer."""
    op_mod = mod if hasattr(mod, f"_lora_{op}") else mod._ce_sibling(f"{_PKG}.lora_{op}_op")
    if x["inputs"].device.type == "cpu" and hasattr(op_mod, "supports_pdl"):
        op_mod.supports_pdl = lambda *_a, **_k: False
    return op_mod


def _positional(fn: Any, x: Inputs) -> None:
    """Every parameter of this side's signature, by position (the ops are also registered
    as custom ops, called positionally upstream); ffe1fc7a added ``num_active_loras``."""
    fn(*(x[n] for n in inspect.signature(fn).parameters))


def _shrink_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    _positional(_op_module(mod, x, "shrink")._lora_shrink, x)
    return {"output_tensor": x["output_tensor"]}


def _shrink_reference(x: Inputs) -> Outputs:
    """out[s, t] = scaling * inputs[t] @ A_s[lora(t)]^T in fp32; tokens without an adapter
    keep the zeros they start with."""
    torch = _torch()
    out = x["output_tensor"].clone()
    xs, mapping = x["inputs"].float(), x["token_lora_mapping"].long()
    for s, w in enumerate(x["lora_a_weights"]):
        for lora in range(w.shape[0]):
            rows = (mapping == lora).nonzero().flatten()
            if rows.numel():
                out[s, rows] = x["scaling"] * (xs[rows] @ w[lora].float().T)
    return {"output_tensor": out.to(torch.float32)}


def _shrink_random(r: random.Random) -> Shape:
    return {
        "name": "random",
        "tokens": r.choice([1, 7, 33, 64]),
        "hidden": r.choice([512, 1024, 2048]),
        "rank": r.choice([8, 16, 32]),
        "slices": r.choice([1, 2, 3]),
        "seqs": r.choice([1, 3, 5]),
    }


#: Named shapes both ops are checked at (a 70B prefill, a small-rank decode).
_BOTH_SHAPES: tuple[Shape, ...] = (
    {
        "name": "prefill_70b",
        "tokens": 256,
        "hidden": 8192,
        "rank": 32,
        "slices": 1,
        "seqs": 8,
        "source": "Llama-2-70B hidden 8192",
    },
    {
        "name": "decode_small_rank",
        "tokens": 64,
        "hidden": 2048,
        "rank": 8,
        "slices": 1,
        "seqs": 64,
        "source": "test_punica_ops: hidden 2048, rank 8",
    },
)

_SHRINK_SHAPES: tuple[Shape, ...] = (
    {
        "name": "decode_qkv",
        "tokens": 16,
        "hidden": 4096,
        "rank": 16,
        "slices": 3,
        "seqs": 16,
        "source": "test_punica_ops: decode, Llama-3-8B hidden, QKV slices",
    },
    {
        "name": "prefill_gate_up",
        "tokens": 512,
        "hidden": 4096,
        "rank": 64,
        "slices": 2,
        "seqs": 4,
        "source": "test_punica_ops: prefill, rank 64, gate/up slices",
    },
    *_BOTH_SHAPES,
)

VLLM_LORA_SHRINK = Spec(
    name="vllm_lora_shrink_op",
    launcher="_lora_shrink",
    rows=(
        ("vllm", "d4d1a602", _SHRINK),
        ("vllm", "ffe1fc7a", _SHRINK),
        ("vllm", "40e2eeeb", _KERNEL_UTILS),
    ),
    siblings={
        "d4d1a602": (_KERNEL_UTILS, _UTILS),
        "ffe1fc7a": (_KERNEL_UTILS, _UTILS),
        "40e2eeeb": (_SHRINK, _UTILS),
    },
    shapes=_SHRINK_SHAPES,
    random_shape=_shrink_random,
    make_inputs=_shrink_inputs,
    call=_shrink_call,
    reference=_shrink_reference,
    mutated=("output_tensor",),
    tolerance={"output_tensor": (2e-3, 2e-3)},
    tolerance_why="fp32 output of a bf16 dot over the hidden size, accumulated in fp32 "
    "(split-K adds partial sums atomically, in any order): values are O(1) by the "
    "1/sqrt(hidden) weights, and a reordered fp32 sum of up to 8,192 terms differs by far "
    "less than 2e-3; bf16 inputs are exact in both",
)


def _expand_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """The shrink's fp32 output as input (vLLM expands its buffer), bf16 B weights, and a
    bf16 base-layer output the op adds to (``add_inputs``, as the LoRA layers call it).
    fp16 on the CPU interpreter (``fla._act_dtype``): its bf16 load-add-store of the output
    gives garbage there (checked: fp16 matches the reference, bf16 gives 1e37)."""
    m, n, rank, slices = shape["tokens"], shape["hidden"], shape["rank"], shape["slices"]
    mapping = _lora_of_tokens(gen, device, m, shape.get("seqs", 4), list(range(-1, _MAX_LORAS)))
    dt = str(_act_dtype(device)).removeprefix("torch.")
    x: Inputs = {
        "inputs": _randn(gen, device, slices, m, rank, dtype="float32"),
        "lora_b_weights": [
            _randn(gen, device, _MAX_LORAS, n, rank, scale=rank**-0.5, dtype=dt)
            for _ in range(slices)
        ],
        "output_tensor": _randn(gen, device, m, n * slices, dtype=dt),
        "offset_start": 0,
        "add_inputs": True,
    }
    x.update(_metadata(mapping, _MAX_LORAS))
    return x


def _expand_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    _positional(_op_module(mod, x, "expand")._lora_expand, x)
    return {"output_tensor": x["output_tensor"]}


def _expand_reference(x: Inputs) -> Outputs:
    """out[t, slice s] += inputs[s, t] @ B_s[lora(t)]^T (the input cast to the weights'
    dtype first, as the kernel's CAST_TYPE does), accumulated in fp32 and rounded once."""
    out = x["output_tensor"].float().clone()
    mapping = x["token_lora_mapping"].long()
    for s, w in enumerate(x["lora_b_weights"]):
        n = w.shape[1]
        xs = x["inputs"][s].to(w.dtype).float()
        for lora in range(w.shape[0]):
            rows = (mapping == lora).nonzero().flatten()
            if rows.numel():
                out[rows, s * n : (s + 1) * n] += xs[rows] @ w[lora].float().T
    return {"output_tensor": out.to(x["output_tensor"].dtype)}


_EXPAND_SHAPES: tuple[Shape, ...] = (
    {
        "name": "decode_qkv",
        "tokens": 16,
        "hidden": 4096,
        "rank": 16,
        "slices": 3,
        "seqs": 16,
        "source": "test_punica_ops: decode, Llama-3-8B hidden, QKV slices",
    },
    {
        "name": "prefill_gate_up",
        "tokens": 512,
        "hidden": 14336,
        "rank": 64,
        "slices": 2,
        "seqs": 4,
        "source": "Llama-3-8B intermediate 14336, gate/up slices, rank 64",
    },
    *_BOTH_SHAPES,
)

VLLM_LORA_EXPAND = Spec(
    name="vllm_lora_expand_op",
    launcher="_lora_expand",
    rows=(("vllm", "d4d1a602", _EXPAND), ("vllm", "ffe1fc7a", _EXPAND)),
    siblings={"": (_KERNEL_UTILS, _UTILS)},
    shapes=_EXPAND_SHAPES,
    random_shape=_shrink_random,
    make_inputs=_expand_inputs,
    call=_expand_call,
    reference=_expand_reference,
    mutated=("output_tensor",),
    tolerance_why="bf16 output (fp16 on the CPU): the default bound of its dtype (a few ulp), "
    "the sum over the rank accumulated in fp32 and rounded once, the base output added "
    "before that rounding",
)

SPECS: tuple[Spec, ...] = (VLLM_LORA_SHRINK, VLLM_LORA_EXPAND)
