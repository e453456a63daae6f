"""Specs for SGLang's multi-LoRA kernels (issue 35): the Triton backend's segment GEMMs
(``sgemm_lora_a_fwd``, ``sgemm_lora_b_fwd``, ``qkv_lora_b_fwd``, ``gate_up_lora_b_fwd``) and
the chunked-SGMV backend's ``chunked_sgmv_lora_shrink_forward`` / ``_expand_forward``.

Batches are built as SGLang's backends build their ``LoRABatchInfo`` (re-written here in
torch, as a namespace with the same fields): requests on adapters drawn from a few live
slots of ``max_loras_per_batch``, tokens of one request on one adapter. Where a commit
changed the backend's batch layout together with the kernel, each side gets the layout its
own version built (said where it happens).

Random shapes are fp16 (SGLang serves fp16 models too): Triton's CPU interpreter misreads
bf16 operands of ``tl.dot`` in these kernels (raw bits), which would hide the harness's own
errors on the CPU check; the named serving shapes are bf16.
"""

from __future__ import annotations

import functools
import inspect
import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .lora import _randn, _torch

# --- SGLang Triton backend: segment GEMMs over requests (sgemm_lora_a/b, qkv/gate_up b) ----


def _sg_batch(shape: Shape, gen: Any, device: Any) -> tuple[Any, Any, int]:
    """(per-request batch info, per-adapter merged info or None, tokens) as SGLang's Triton
    backend builds them: requests on adapters drawn from ``active`` of ``loras`` slots, each
    slot with its rank; decode gives one token per request. The merged info is the one
    ``compute_sgemm_routing`` (32d9fe5a) builds for decode: tokens sorted by adapter, one
    segment per adapter slot, through ``permutation``."""
    from types import SimpleNamespace

    torch = _torch()
    bs, loras, r = shape["bs"], shape["loras"], shape["rank"]
    i32 = torch.int32
    if shape.get("extend"):
        lens = torch.randint(1, 2 * shape["extend"], (bs,), generator=gen, device=device)
    else:
        lens = torch.ones(bs, dtype=torch.int64, device=device)
    active = torch.randperm(loras, generator=gen, device=device)[: shape.get("active", loras)]
    wi = active[torch.randint(0, active.numel(), (bs,), generator=gen, device=device)]
    ranks = torch.tensor(shape.get("ranks", [r] * loras), dtype=i32, device=device)
    scalings = torch.rand(loras, generator=gen, device=device) + 0.5
    indptr = torch.zeros(bs + 1, dtype=i32, device=device)
    indptr[1:] = torch.cumsum(lens, 0)
    plain = SimpleNamespace(
        bs=bs,
        num_segments=bs,
        use_cuda_graph=False,
        seg_lens=lens.to(i32),
        seg_indptr=indptr,
        max_len=int(lens.max()),
        weight_indices=wi.to(i32),
        lora_ranks=ranks,
        scalings=scalings,
        permutation=None,
    )
    merged = None
    if not shape.get("extend"):
        perm = torch.sort(wi, stable=True).indices.to(i32)
        per = torch.bincount(wi, minlength=loras).to(i32)
        m_indptr = torch.zeros(loras + 1, dtype=i32, device=device)
        m_indptr[1:] = torch.cumsum(per, 0)
        merged = SimpleNamespace(
            bs=loras,
            num_segments=loras,
            use_cuda_graph=False,
            seg_lens=per,
            seg_indptr=m_indptr,
            max_len=bs,
            weight_indices=torch.arange(loras, dtype=i32, device=device),
            lora_ranks=ranks,
            scalings=scalings,
            permutation=perm,
        )
    return plain, merged, int(lens.sum())


def _sg_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """x, weights and base output for one of the four launchers (``shape["op"]``)."""
    torch = _torch()
    plain, merged, s = _sg_batch(shape, gen, device)
    op, r, loras = shape["op"], shape["rank"], shape["loras"]
    dt = shape.get("dtype", "bfloat16")
    x: Inputs = {"batch_info": plain, "merged_info": merged}
    x["token_adapter"] = torch.repeat_interleave(plain.weight_indices.long(), plain.seg_lens.long())
    if op == "a":
        k, stack = shape["k"], shape["stack"]
        x.update(
            x=_randn(gen, device, s, k, dtype=dt),
            weights=_randn(gen, device, loras, stack * r, k, scale=k**-0.5, dtype=dt),
            stack_num=stack,
        )
        return x
    outs = shape["outs"]  # output width of each slice (q, k, v / gate, up / one)
    total = sum(outs)
    w = _randn(gen, device, loras, total, r, scale=r**-0.5, dtype=dt)
    offsets = [0]
    for o in outs:
        offsets.append(offsets[-1] + o)
    x.update(
        x=_randn(gen, device, s, len(outs) * r, dtype=dt),
        weights=w,
        qkv_lora_b=w,
        gate_up_lora_b=w,
        output_offset=torch.tensor(offsets, dtype=torch.int32, device=device),
        max_qkv_out_dim=max(outs),
        output_dim=outs[0],
        base_output=_randn(gen, device, s, total, dtype=dt),
    )
    return x


def _sg_call(fn_name: str) -> Any:
    def call(mod: Any, x: Inputs, sha: str) -> Outputs:
        values = dict(x)
        if hasattr(mod, "_resolve_token_positions"):
            # 32d9fe5a on: the helper lives in a sibling file (stubbed); ours is handed in,
            # and decode batches get the merged per-adapter layout that version's backend
            # builds (its caller change), prefill keeps the per-request one, as there.
            from . import lora_jit

            mod._resolve_token_positions = lora_jit.token_rows
            if x["merged_info"] is not None:
                values["batch_info"] = x["merged_info"]
        out = call_by_name(getattr(mod, fn_name), values)
        return {"output": out}

    return call


def _sg_reference(x: Inputs) -> Outputs:
    """Per adapter, its tokens' rows times its weights (fp32 from the stored inputs): lora A
    ``x @ W.T``; lora B adds ``scaling * x_slice[:, :rank] @ W_slice[:, :rank].T`` per slice
    to the base output, the slices of an adapter of rank r_w packed at stride r_w."""
    torch = _torch()
    bi = x["batch_info"]
    tok_w = x["token_adapter"]
    xs = x["x"].float()
    w = x["weights"]
    out = torch.zeros(xs.shape[0], w.shape[1], device=xs.device)
    offs = [0, w.shape[1]] if "stack_num" in x else x["output_offset"].tolist()
    if "stack_num" not in x:
        out = x["base_output"].float().clone()
    for adapter in torch.unique(tok_w).tolist():
        rows = (tok_w == adapter).nonzero().flatten()
        wa = w[adapter].float()
        if "stack_num" in x:
            out[rows] = xs[rows] @ wa.T
            continue
        rank, scale = int(bi.lora_ranks[adapter]), float(bi.scalings[adapter])
        for i in range(len(offs) - 1):
            xi = xs[rows, i * rank : (i + 1) * rank]
            out[rows, offs[i] : offs[i + 1]] += scale * (xi @ wa[offs[i] : offs[i + 1], :rank].T)
    return {"output": out.to(x["x"].dtype)}


_SG_OPS = "python/sglang/srt/lora/triton_ops/"
_SG_TOL = (
    "bf16 GEMM with fp32 accumulation over K <= 4096 (lora A) or the rank (lora B, added "
    "to an O(1) base output and rounded once): a few bf16 ulps at O(1) values, so 1.6e-2 "
    "relative 2e-2 absolute; no atomics"
)
_LLAMA_DECODE = "Llama-3-8B (hidden 4096, q 4096, kv 1024, MLP 14336), decode batch"


def _sg_spec(name: str, fn: str, rows: tuple[tuple[str, str, str], ...], shapes: Any) -> Spec:
    return Spec(
        name=name,
        launcher=fn,
        rows=rows,
        shapes=shapes[0],
        random_shape=shapes[1],
        make_inputs=_sg_inputs,
        call=_sg_call(fn),
        reference=_sg_reference,
        mutated=() if fn == "sgemm_lora_a_fwd" else ("base_output",),
        tolerance={"output": (2e-2, 1.6e-2), "base_output": (2e-2, 1.6e-2)},
        tolerance_why=_SG_TOL,
    )


def _sg_random(op: str, outs: Any) -> Any:
    def draw(r: random.Random) -> Shape:
        extend = r.choice([0, 0, 5])
        return {
            "name": "random",
            "op": op,
            "bs": r.choice([1, 3, 9, 20]),
            "extend": extend,
            "loras": r.choice([2, 4]),
            "rank": 16,
            "k": r.choice([256, 512]),
            "stack": r.choice([1, 2, 3]),
            "outs": outs(r),
            "dtype": "float16",  # see the module docstring
        }

    return draw


SGEMM_LORA_A = _sg_spec(
    "sglang_sgemm_lora_a",
    "sgemm_lora_a_fwd",
    (("sglang", "32d9fe5a", _SG_OPS + "sgemm_lora_a.py"),),
    (
        (
            {
                "name": "test-sorted-bs8",
                "source": "test_sgemm_sorted_by_adapter.py at the sha",
                "op": "a",
                "bs": 8,
                "loras": 3,
                "rank": 16,
                "k": 256,
                "stack": 1,
            },
            {
                "name": "llama3-8b-qkv-decode64",
                "source": _LLAMA_DECODE + " 64, 8 slots",
                "op": "a",
                "bs": 64,
                "loras": 8,
                "active": 6,
                "rank": 16,
                "k": 4096,
                "stack": 3,
            },
            {
                "name": "llama3-8b-down-decode256",
                "source": _LLAMA_DECODE + " 256, rank 64",
                "op": "a",
                "bs": 256,
                "loras": 4,
                "rank": 64,
                "k": 14336,
                "stack": 1,
            },
            {
                "name": "llama3-8b-gate-up-prefill",
                "source": "Llama-3-8B, 4 prompts ~512",
                "op": "a",
                "bs": 4,
                "extend": 512,
                "loras": 4,
                "rank": 32,
                "k": 4096,
                "stack": 2,
            },
        ),
        _sg_random("a", lambda r: [0]),
    ),
)

SGEMM_LORA_B = _sg_spec(
    "sglang_sgemm_lora_b",
    "sgemm_lora_b_fwd",
    (("sglang", "32d9fe5a", _SG_OPS + "sgemm_lora_b.py"),),
    (
        (
            {
                "name": "test-sorted-bs8",
                "source": "test_sgemm_sorted_by_adapter.py at the sha",
                "op": "b",
                "bs": 8,
                "loras": 3,
                "rank": 16,
                "outs": [256],
            },
            {
                "name": "llama3-8b-o-decode64",
                "source": _LLAMA_DECODE + " 64, mixed ranks",
                "op": "b",
                "bs": 64,
                "loras": 4,
                "rank": 64,
                "ranks": [16, 64, 32, 64],
                "outs": [4096],
            },
            {
                "name": "llama3-8b-down-decode256",
                "source": _LLAMA_DECODE + " 256, 8 slots",
                "op": "b",
                "bs": 256,
                "loras": 8,
                "active": 5,
                "rank": 32,
                "outs": [4096],
            },
            {
                "name": "llama3-8b-o-prefill",
                "source": "Llama-3-8B, 4 prompts ~512",
                "op": "b",
                "bs": 4,
                "extend": 512,
                "loras": 4,
                "rank": 32,
                "outs": [4096],
            },
        ),
        _sg_random("b", lambda r: [r.choice([128, 320])]),
    ),
)

QKV_LORA_B = _sg_spec(
    "sglang_qkv_lora_b",
    "qkv_lora_b_fwd",
    (
        ("sglang", "f8a173bb", _SG_OPS + "qkv_lora_b.py"),
        ("sglang", "32d9fe5a", _SG_OPS + "qkv_lora_b.py"),
    ),
    (
        (
            {
                "name": "test-sorted-bs8",
                "source": "test_sgemm_sorted_by_adapter.py (32d9fe5a)",
                "op": "b",
                "bs": 8,
                "loras": 3,
                "rank": 16,
                "outs": [256, 128, 128],
            },
            {
                "name": "llama3-8b-qkv-decode64",
                "source": _LLAMA_DECODE + " 64, mixed ranks",
                "op": "b",
                "bs": 64,
                "loras": 4,
                "rank": 64,
                "ranks": [16, 64, 32, 64],
                "outs": [4096, 1024, 1024],
            },
            {
                "name": "llama3-8b-qkv-decode256",
                "source": _LLAMA_DECODE + " 256, 8 slots",
                "op": "b",
                "bs": 256,
                "loras": 8,
                "active": 5,
                "rank": 16,
                "outs": [4096, 1024, 1024],
            },
            {
                "name": "llama3-8b-qkv-prefill",
                "source": "Llama-3-8B, 4 prompts ~512",
                "op": "b",
                "bs": 4,
                "extend": 512,
                "loras": 4,
                "rank": 32,
                "outs": [4096, 1024, 1024],
            },
        ),
        _sg_random("b", lambda r: [r.choice([128, 256]), 64, 64]),
    ),
)

GATE_UP_LORA_B = _sg_spec(
    "sglang_gate_up_lora_b",
    "gate_up_lora_b_fwd",
    (("sglang", "32d9fe5a", _SG_OPS + "gate_up_lora_b.py"),),
    (
        (
            {
                "name": "test-sorted-bs8",
                "source": "test_sgemm_sorted_by_adapter.py at the sha",
                "op": "b",
                "bs": 8,
                "loras": 3,
                "rank": 16,
                "outs": [256, 256],
            },
            {
                "name": "llama3-8b-gate-up-decode64",
                "source": _LLAMA_DECODE + " 64",
                "op": "b",
                "bs": 64,
                "loras": 4,
                "rank": 64,
                "ranks": [16, 64, 32, 64],
                "outs": [14336, 14336],
            },
            {
                "name": "llama3-8b-gate-up-decode256",
                "source": _LLAMA_DECODE + " 256, 8 slots",
                "op": "b",
                "bs": 256,
                "loras": 8,
                "active": 5,
                "rank": 16,
                "outs": [14336, 14336],
            },
            {
                "name": "llama3-8b-gate-up-prefill",
                "source": "Llama-3-8B, 4 prompts ~512",
                "op": "b",
                "bs": 4,
                "extend": 512,
                "loras": 4,
                "rank": 32,
                "outs": [14336, 14336],
            },
        ),
        _sg_random("b", lambda r: [r.choice([128, 192])] * 2),
    ),
)


# --- SGLang chunked SGMV (csgmv backend): tokens sorted by adapter, cut into chunks ---------

MIN_CHUNK = 16


def chunk_size(tokens: int, max_chunk: int) -> int:
    """SGLang's ``_determine_chunk_size`` (08ecd0aa on): 128 from 256 tokens, 32 from 64,
    else 16, capped by the server's ``--max-lora-chunk-size``."""
    if max_chunk <= MIN_CHUNK:
        return MIN_CHUNK
    size = 128 if tokens >= 256 else 32 if tokens >= 64 else MIN_CHUNK
    return min(max_chunk, size)


def _cs_info(plain: Any, token_adapter: Any, chunk: int) -> Any:
    """The csgmv backend's batch info: tokens stably sorted by adapter (``permutation``),
    each adapter's run cut into segments of at most ``chunk`` tokens."""
    from types import SimpleNamespace

    torch = _torch()
    i32 = torch.int32
    perm = torch.sort(token_adapter, stable=True).indices
    per = torch.bincount(token_adapter, minlength=plain.lora_ranks.numel())
    seg_w, seg_len = [], []
    for adapter, count in enumerate(per.tolist()):
        for start in range(0, count, chunk):
            seg_w.append(adapter)
            seg_len.append(min(chunk, count - start))
    dev = token_adapter.device
    indptr = torch.zeros(len(seg_len) + 1, dtype=i32, device=dev)
    indptr[1:] = torch.cumsum(torch.tensor(seg_len, device=dev), 0)
    return SimpleNamespace(
        bs=plain.bs,
        num_segments=len(seg_len),
        use_cuda_graph=False,
        max_len=chunk,
        seg_lens=None,
        seg_indptr=indptr,
        weight_indices=torch.tensor(seg_w, dtype=i32, device=dev),
        lora_ranks=plain.lora_ranks,
        scalings=plain.scalings,
        permutation=perm.to(i32),
    )


def _cs_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    x = _sg_inputs(shape, gen, device)
    tokens = x["x"].shape[0]
    x["info_fixed"] = _cs_info(x["batch_info"], x["token_adapter"], MIN_CHUNK)
    dyn = chunk_size(tokens, shape.get("max_chunk", MIN_CHUNK))
    x["info_dynamic"] = _cs_info(x["batch_info"], x["token_adapter"], dyn)
    if shape["op"] == "a":
        x["num_slices"] = shape["stack"]
    else:
        x["lora_weight_b"] = x["weights"]
        x["slice_offsets"] = x["output_offset"]
        x["max_slice_size"] = x["max_qkv_out_dim"]
    del x["merged_info"]  # batch_info stays: the reference reads ranks and scalings there
    return x


@functools.cache
def _chunks_per_batch(fn: Any) -> bool:
    """Whether this side's launcher takes its chunk size from the batch (read once per
    launcher, so the timed host path pays no source read)."""
    return "batch_info.max_len" in inspect.getsource(fn)


def _cs_call(fn_name: str) -> Any:
    def call(mod: Any, x: Inputs, sha: str) -> Outputs:
        fn = getattr(mod, fn_name)
        # 08ecd0aa made the chunk (BLOCK_M) the batch's max_len, chosen per batch; before
        # it the backend always cut 16-token segments and the kernel assumed 16.
        dynamic = _chunks_per_batch(fn)
        values = dict(x, batch_info=x["info_dynamic" if dynamic else "info_fixed"])
        if hasattr(mod, "get_lora_shrink_config") or hasattr(mod, "get_lora_expand_config"):
            # 059b287e reads tuned block sizes from JSON files shipped for H200 only; on
            # any other GPU (and on the CPU) its lookup returns these defaults.
            mod.get_lora_shrink_config = lambda **_: {"BLOCK_N": 16, "BLOCK_K": 256}
            mod.get_lora_expand_config = lambda **_: {"BLOCK_N": 64, "BLOCK_K": 16}
        return {"output": call_by_name(fn, values)}

    return call


def _cs_random(op: str) -> Any:
    def draw(r: random.Random) -> Shape:
        shape = _sg_random(op, lambda q: [q.choice([128, 192]), 64, 64][: q.choice([1, 3])])(r)
        shape.update(bs=r.choice([3, 20, 70]), extend=r.choice([0, 3]), max_chunk=128)
        if op == "a":
            shape["outs"] = [0]
        return shape

    return draw


def _cs_spec(name: str, fn: str, file: str, shapes: tuple[Shape, ...], op: str) -> Spec:
    return Spec(
        name=name,
        launcher=fn,
        rows=tuple(("sglang", sha, _SG_OPS + file) for sha in ("08ecd0aa", "635ccda6", "059b287e")),
        shapes=shapes,
        random_shape=_cs_random(op),
        make_inputs=_cs_inputs,
        call=_cs_call(fn),
        reference=_sg_reference,
        mutated=() if op == "a" else ("base_output",),
        tolerance={"output": (2e-2, 1.6e-2), "base_output": (2e-2, 1.6e-2)},
        tolerance_why=_SG_TOL,
    )


_CS_SERVER = "; server flag --max-lora-chunk-size 128 (default 16 keeps 16-token chunks)"

CSGMV_SHRINK = _cs_spec(
    "sglang_csgmv_shrink",
    "chunked_sgmv_lora_shrink_forward",
    "chunked_sgmv_shrink.py",
    (
        {
            "name": "llama3-8b-qkv-decode64",
            "source": _LLAMA_DECODE + " 64, default flags",
            "op": "a",
            "bs": 64,
            "loras": 8,
            "active": 6,
            "rank": 16,
            "k": 4096,
            "stack": 3,
        },
        {
            "name": "llama3-8b-gate-up-prefill-chunk128",
            "source": "Llama-3-8B, 4 prompts ~512" + _CS_SERVER,
            "op": "a",
            "bs": 4,
            "extend": 512,
            "loras": 4,
            "rank": 32,
            "k": 4096,
            "stack": 2,
            "max_chunk": 128,
        },
        {
            "name": "llama3-8b-down-decode256-chunk128",
            "source": _LLAMA_DECODE + " 256" + _CS_SERVER,
            "op": "a",
            "bs": 256,
            "loras": 4,
            "rank": 64,
            "k": 14336,
            "stack": 1,
            "max_chunk": 128,
        },
        {
            "name": "llama3-8b-o-prefill-chunk32",
            "source": "Llama-3-8B, 3 prompts ~40" + _CS_SERVER,
            "op": "a",
            "bs": 3,
            "extend": 40,
            "loras": 2,
            "rank": 16,
            "k": 4096,
            "stack": 1,
            "max_chunk": 128,
        },
    ),
    "a",
)

CSGMV_EXPAND = _cs_spec(
    "sglang_csgmv_expand",
    "chunked_sgmv_lora_expand_forward",
    "chunked_sgmv_expand.py",
    (
        {
            "name": "llama3-8b-qkv-decode64",
            "source": _LLAMA_DECODE + " 64, default flags",
            "op": "b",
            "bs": 64,
            "loras": 8,
            "active": 6,
            "rank": 64,
            "ranks": [16, 64] * 4,
            "outs": [4096, 1024, 1024],
        },
        {
            "name": "llama3-8b-gate-up-prefill-chunk128",
            "source": "Llama-3-8B, 4 prompts ~512" + _CS_SERVER,
            "op": "b",
            "bs": 4,
            "extend": 512,
            "loras": 4,
            "rank": 32,
            "outs": [14336, 14336],
            "max_chunk": 128,
        },
        {
            "name": "llama3-8b-o-decode256-chunk128",
            "source": _LLAMA_DECODE + " 256" + _CS_SERVER,
            "op": "b",
            "bs": 256,
            "loras": 4,
            "rank": 64,
            "outs": [4096],
            "max_chunk": 128,
        },
        {
            "name": "llama3-8b-qkv-prefill-chunk32",
            "source": "Llama-3-8B, 3 prompts ~40" + _CS_SERVER,
            "op": "b",
            "bs": 3,
            "extend": 40,
            "loras": 2,
            "rank": 16,
            "outs": [4096, 1024, 1024],
            "max_chunk": 128,
        },
    ),
    "b",
)

SPECS: tuple[Spec, ...] = (
    SGEMM_LORA_A,
    SGEMM_LORA_B,
    QKV_LORA_B,
    GATE_UP_LORA_B,
    CSGMV_SHRINK,
    CSGMV_EXPAND,
)
