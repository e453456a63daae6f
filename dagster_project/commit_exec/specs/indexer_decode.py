"""Spec for vLLM bf9a5ddb (issue 35): the DeepSeek-V3.2 sparse-attention indexer's decode
metadata for MTP > 1 (``v1/attention/backends/mla/indexer.py``).

With more than one speculative token the indexer's decode kernels take each draft token as
a request of its own (the flatten path): ``DeepseekV32IndexerMetadataBuilder.
_prepare_decode_tensors`` expands the per-request context lengths to per-token ones, repeats
each request's block-table row per token and sets every decode length to 1. Before the
commit that was two ``repeat_interleave`` calls and buffer writes; the commit adds a Triton
kernel (``_prepare_uniform_decode_kernel``) for the uniform case (every request decoding
``next_n`` tokens, the usual MTP step) and keeps the torch code for variable lengths: the
control shape, whose path the commit does not change.

Each side's method is called on a minimal builder holding the buffers ``__init__`` sizes
(``max_num_batched_tokens`` rows, ``cdiv(max_model_len, 64)`` block columns, the block
table as wide as the buffer, as vLLM's block table is). Compared: the three returned views
and every buffer the method writes. Torch reference: our own statement of the expansion.

Shapes: DeepSeek-V3.2-Exp with MTP (``num_speculative_tokens`` 2 and 3: next_n 3 and 4,
beyond the indexer's native next_n), indexer block 64, max_model_len 163,840 (2,560 blocks),
decode batches of 1 to 256 requests at long contexts.
"""

from __future__ import annotations

import types
from typing import Any

from .base import Inputs, Outputs, Shape, Spec

_DSV32 = "DeepSeek-V3.2-Exp, indexer block 64, max_model_len 163840"


def _torch() -> Any:
    import torch

    return torch


def _decode_lens(shape: Shape) -> list[int]:
    """Every request decodes next_n tokens; the control's lengths vary (1..next_n), as a
    batch whose drafts were partly rejected or cut short."""
    n, nn = shape["reqs"], shape["next_n"]
    if not shape.get("variable"):
        return [nn] * n
    return [1 + (i * 7) % nn for i in range(n - 1)] + [nn]


def _indexer_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    torch = _torch()
    n, nn = shape["reqs"], shape["next_n"]
    blocks = -(-shape.get("max_model_len", 163840) // 64)
    lens = _decode_lens(shape)
    tokens = sum(lens)
    max_tokens = max(shape.get("max_batched", 8192), tokens)
    ctx = torch.randint(nn, shape["max_ctx"], (n,), generator=gen, device=device)
    i32 = torch.int32
    qsl = torch.tensor([0, *lens], dtype=i32).cumsum(0).to(i32)
    return {
        "seq_lens": ctx.to(i32),
        "block_table": torch.randint(0, 1 << 20, (n, blocks), generator=gen, device=device).to(i32),
        "decode_lens": torch.tensor(lens, dtype=i32, device=device),
        "decode_lens_cpu": torch.tensor(lens, dtype=i32),
        "query_start_loc": qsl[:n].to(device),
        "num_decodes": n,
        "num_decode_tokens": tokens,
        "use_native": False,
        "next_n": nn,
        "max_decode_len": max(lens),
        # the builder's buffers (``__init__``), filled with stale values of an earlier step
        "decode_seq_lens_buffer": torch.full((max_tokens,), 7, dtype=i32, device=device),
        "decode_lens_buffer": torch.full((max_tokens,), 3, dtype=i32, device=device),
        "expanded_block_table_buffer": torch.full(
            (max_tokens, blocks), 5, dtype=i32, device=device
        ),
        "arange_buffer": torch.arange(max(256 * nn, tokens), dtype=i32, device=device),
        "offsets_buffer": torch.arange(nn, dtype=i32, device=device),
    }


_BUFFERS = ("decode_seq_lens_buffer", "decode_lens_buffer", "expanded_block_table_buffer")
_ARGS = (
    "seq_lens",
    "block_table",
    "decode_lens",
    "decode_lens_cpu",
    "query_start_loc",
    "num_decodes",
    "num_decode_tokens",
    "use_native",
    "next_n",
    "max_decode_len",
)


def _indexer_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    torch = _torch()
    builder = types.SimpleNamespace(
        **{k: x[k] for k in (*_BUFFERS, "arange_buffer", "offsets_buffer")}
    )
    method = mod.DeepseekV32IndexerMetadataBuilder._prepare_decode_tensors
    seq_lens, table, lens, batch, padding = method(builder, **{k: x[k] for k in _ARGS})
    out = {"seq_lens": seq_lens, "block_table": table, "decode_lens_out": lens}
    out["batch_padding"] = torch.tensor([int(batch), int(padding)])
    out.update({k: x[k] for k in _BUFFERS})
    return out


def _indexer_reference(x: Inputs) -> Outputs:
    """Token j of request r attends to seq_len[r] - len[r] + j + 1 keys and keeps r's block
    row; every decode length becomes 1; the rest of the seq-lens buffer is zeroed."""
    torch = _torch()
    lens = x["decode_lens_cpu"].tolist()
    n, tokens = x["num_decodes"], x["num_decode_tokens"]
    seq = x["decode_seq_lens_buffer"].clone()
    table = x["expanded_block_table_buffer"].clone()
    dlen = x["decode_lens_buffer"].clone()
    row = 0
    for r in range(n):
        for j in range(lens[r]):
            seq[row] = int(x["seq_lens"][r]) - lens[r] + j + 1
            table[row] = x["block_table"][r]
            row += 1
    seq[tokens:] = 0
    dlen[:tokens] = 1
    return {
        "seq_lens": seq[:tokens],
        "block_table": table[:tokens],
        "decode_lens_out": dlen[:tokens],
        "batch_padding": torch.tensor([tokens, 0]),
        "decode_seq_lens_buffer": seq,
        "decode_lens_buffer": dlen,
        "expanded_block_table_buffer": table,
    }


def _shape(name: str, reqs: int, next_n: int, max_ctx: int, why: str) -> Shape:
    return {
        "name": name,
        "source": f"{_DSV32}, {why}",
        "reqs": reqs,
        "next_n": next_n,
        "max_ctx": max_ctx,
    }


INDEXER_DECODE = Spec(
    name="vllm_dsv32_indexer_prepare_decode",
    launcher="DeepseekV32IndexerMetadataBuilder._prepare_decode_tensors",
    rows=(("vllm", "bf9a5ddb", "vllm/v1/attention/backends/mla/indexer.py"),),
    shapes=(
        _shape("dsv32-mtp2-b32", 32, 3, 32768, "MTP 2 (next_n 3), 32 requests"),
        _shape("dsv32-mtp3-b128", 128, 4, 65536, "MTP 3 (next_n 4), 128 requests"),
        _shape("dsv32-mtp3-b256-long", 256, 4, 163840, "MTP 3, 256 requests, long contexts"),
        _shape("dsv32-mtp3-b1", 1, 4, 163840, "MTP 3, one request (latency)"),
    ),
    control={
        **_shape("dsv32-mtp3-b64-variable", 64, 4, 65536, "MTP 3, drafts of unequal length"),
        "variable": True,
    },
    control_reason="decode lengths differ between requests: both sides take the torch "
    "repeat_interleave path the commit leaves as it was",
    random_shape=lambda r: {
        "name": "random",
        "reqs": r.choice([1, 3, 9, 40]),
        "next_n": r.choice([3, 4]),
        "max_ctx": r.choice([100, 5000]),
        "max_model_len": r.choice([4096, 8192]),
        "max_batched": 512,
    },
    make_inputs=_indexer_inputs,
    call=_indexer_call,
    reference=_indexer_reference,
    mutated=_BUFFERS,
    tolerance={k: (0.0, 0.0) for k in (*_BUFFERS, "seq_lens", "block_table", "decode_lens_out")},
    tolerance_why="integer lengths and copied block ids: exact",
)

SPECS: tuple[Spec, ...] = (INDEXER_DECODE,)
