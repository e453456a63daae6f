"""FlashInfer rows of the execution census left by the first spec rounds (issue 35, task 35d).

* ``pack_topk_routes_by_expert`` (28ca04eb, the SM12x W4A16 fused-MoE route packer, Triton):
  each (token, k) route is placed in its expert's segment, segments padded to the GEMM's
  block size, one expert id per block. The commit splits the single-CTA count/prefix kernel
  into a one-launch small path (decode) and a parallel atomic count for large eager batches
  (prefill). The kernels are Triton and run on Hopper. Two host helpers of the sibling
  ``moe_w4a16_host.py`` (the loader stubs it) are handed in as our writing of their
  contract: the route-slot capacity of a batch and the power-of-two token capacity.
  Workspaces are preallocated as a CUDA-graph caller must (the file refuses to allocate
  them during capture). Routes within an expert's segment are placed by atomics, so each
  route is compared by the segment that holds it (``_canonical``); counts and expert ids
  per block are compared exactly.

Shapes: Qwen3-30B-A3B (128 experts, top-8), gpt-oss-20b (32 experts, top-4), Mixtral-8x7B
(8 experts, top-2); decode (small path) and prefill (large path) token counts.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

from .base import Inputs, Outputs, Shape, Spec


def _torch() -> Any:
    import torch

    return torch


def route_slots(numel: int, block_size: int, num_experts: int) -> int:
    """Slots the packed routes can need: every route plus, per expert, the padding of a
    partial block; with fewer routes than experts, at most one block per route."""
    padded = numel + num_experts * (block_size - 1)
    return min(numel * block_size, padded) if numel < num_experts else padded


def route_numel_capacity(numel: int, topk: int = 1) -> int:
    """Routes rounded up to a power-of-two number of tokens (times top-k), so one compiled
    kernel serves a range of batch sizes."""
    topk = max(topk, 1)
    tokens = -(-max(numel, 1) // topk)
    return (1 << (tokens - 1).bit_length()) * topk


def _is_stub(obj: Any) -> bool:
    return type(obj).__name__ == "Stub"


def _pack_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    t, e, k, bs = shape["tokens"], shape["experts"], shape["topk"], shape["block"]
    # skewed routing (a few hot experts), as real MoE traffic
    logits = torch.randn(t, e, generator=gen, device=device) + torch.linspace(
        1.5, 0, e, device=device
    )
    ids = logits.topk(k, dim=1).indices.to(torch.int32)
    cap = route_slots(route_numel_capacity(t * k, k), bs, e)
    blocks = -(-cap // bs)
    return {
        "topk_ids": ids,
        "block_size": bs,
        "num_experts": e,
        "packed_route_indices": torch.full((cap,), -5, dtype=torch.int32, device=device),
        "block_expert_ids": torch.full((blocks,), -5, dtype=torch.int32, device=device),
        "packed_route_count": torch.zeros(1, dtype=torch.int32, device=device),
        "expert_offsets": torch.zeros(e + 1, dtype=torch.int32, device=device),
    }


def _canonical(packed: Any, block_ids: Any, count: Any, bs: int, numel: int) -> Outputs:
    """An order-free form of the tables, from the whole preallocated buffers and without a
    host sync (the call is timed and captured in a CUDA graph): the count; each block's
    expert id (blocks past count / block size masked); and for each route, the expert whose
    segment holds it (one scatter; -1 for a route packed nowhere). A few small ops, the same
    on both sides, so they dilute a decode-size ratio slightly toward 1."""
    torch = _torch()
    n = count.reshape(-1)[:1]
    owner = block_ids.repeat_interleave(bs)[: packed.numel()]
    slots = torch.arange(packed.numel(), device=packed.device, dtype=torch.int32)
    idx = torch.where(slots < n, packed, numel).long().clamp(0, numel)
    route_expert = torch.full((numel + 1,), -1, dtype=torch.int32, device=packed.device)
    route_expert.scatter_(0, idx, owner)
    blocks = torch.arange(block_ids.numel(), device=packed.device, dtype=torch.int32)
    return {
        "count": n.clone(),
        "block_expert_ids": torch.where(blocks < n // bs, block_ids, -9),
        "route_expert": route_expert[:numel],
    }


@contextlib.contextmanager
def _no_capture_on_cpu(device: Any) -> Iterator[None]:
    """On the CPU check only: ``torch.cuda.is_current_stream_capturing`` answers False (what
    it means there) instead of raising for want of a CUDA driver; on a GPU nothing changes."""
    torch = _torch()
    if device.type == "cuda":
        yield
        return
    real = torch.cuda.is_current_stream_capturing
    torch.cuda.is_current_stream_capturing = lambda: False
    try:
        yield
    finally:
        torch.cuda.is_current_stream_capturing = real


def _pack_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    for name, real in (
        ("max_packed_route_slots", route_slots),
        ("route_pack_numel_capacity", route_numel_capacity),
    ):
        if _is_stub(getattr(mod, name, None)):
            setattr(mod, name, real)
    with _no_capture_on_cpu(x["topk_ids"].device):
        mod.pack_topk_routes_by_expert(
            x["topk_ids"],
            x["block_size"],
            x["num_experts"],
            packed_route_indices=x["packed_route_indices"],
            block_expert_ids=x["block_expert_ids"],
            packed_route_count=x["packed_route_count"],
            expert_offsets=x["expert_offsets"],
        )
    # the preallocated buffers (same size on both sides; the returned views are each
    # version's own capacity)
    return _canonical(
        x["packed_route_indices"],
        x["block_expert_ids"],
        x["packed_route_count"],
        x["block_size"],
        x["topk_ids"].numel(),
    )


def _pack_reference(x: Inputs) -> Outputs:
    """Per expert in order, its routes padded with ``numel`` to a block multiple, written
    into copies of the workspaces and put in the call's canonical form."""
    torch = _torch()
    flat, bs = x["topk_ids"].reshape(-1).long(), x["block_size"]
    numel = flat.numel()
    routes, owners = [], []
    for e in range(x["num_experts"]):
        mine = (flat == e).nonzero().flatten()
        if mine.numel() == 0:
            continue
        pad = (-mine.numel()) % bs
        routes.append(torch.cat([mine, torch.full((pad,), numel, device=flat.device)]))
        owners.extend([e] * ((mine.numel() + pad) // bs))
    packed_routes = torch.cat(routes).to(torch.int32)
    packed, block_ids = x["packed_route_indices"].clone(), x["block_expert_ids"].clone()
    packed[: packed_routes.numel()] = packed_routes
    block_ids[: len(owners)] = torch.tensor(owners, dtype=torch.int32, device=flat.device)
    count = torch.tensor([packed_routes.numel()], dtype=torch.int32, device=flat.device)
    return _canonical(packed, block_ids, count, bs, numel)


_QWEN3 = "Qwen3-30B-A3B W4A16 (128 experts, top-8)"

ROUTE_PACK = Spec(
    name="flashinfer_w4a16_route_pack",
    launcher="pack_topk_routes_by_expert",
    rows=(
        (
            "flashinfer",
            "28ca04eb",
            "flashinfer/fused_moe/cute_dsl/blackwell_sm12x/moe_w4a16_route_pack.py",
        ),
    ),
    shapes=(
        {
            "name": "qwen3-30b-decode-32",
            "source": _QWEN3 + ", decode batch 32 (small path)",
            "tokens": 32,
            "experts": 128,
            "topk": 8,
            "block": 16,
        },
        {
            "name": "qwen3-30b-prefill-4k",
            "source": _QWEN3 + ", prefill chunk (large path)",
            "tokens": 4096,
            "experts": 128,
            "topk": 8,
            "block": 64,
        },
        {
            "name": "gpt-oss-20b-prefill-2k",
            "source": "gpt-oss-20b (32 experts, top-4)",
            "tokens": 2048,
            "experts": 32,
            "topk": 4,
            "block": 64,
        },
        {
            "name": "mixtral-decode-64",
            "source": "Mixtral-8x7B (8 experts, top-2), decode",
            "tokens": 64,
            "experts": 8,
            "topk": 2,
            "block": 16,
        },
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([1, 5, 40, 700]),
        "experts": r.choice([8, 32, 64]),
        "topk": r.choice([2, 4, 8]),
        "block": r.choice([16, 32, 64]),
    },
    make_inputs=_pack_inputs,
    call=_pack_call,
    reference=_pack_reference,
    mutated=("packed_route_indices", "block_expert_ids", "packed_route_count", "expert_offsets"),
    tolerance={"count": (0.0, 0.0), "block_expert_ids": (0.0, 0.0), "route_expert": (0.0, 0.0)},
    tolerance_why="integer routing tables: exact (each route compared by the expert segment "
    "that holds it, free of the order atomics leave within a segment)",
)

SPECS: tuple[Spec, ...] = (ROUTE_PACK,)

_ = random
