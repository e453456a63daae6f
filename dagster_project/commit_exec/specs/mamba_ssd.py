"""Specs for the Mamba2 SSD prefill rows of the linear-attention census (issue 35): vLLM's
chunked scan in its two chunk layouts (fixed 256-token chunks over the packed batch with
logical-chunk tables, daefed05 and b690e348; chunks aligned to sequences, 7faba503).

Shapes name their source. Bamba-9B and Codestral-Mamba-7B: 128 heads of 64 channels,
state 128, chunk 256 (Codestral 8 B/C groups); Nemotron-H-8B: 128 heads of 64, state 128,
8 groups. Per-token log decays are dt * A with dt = softplus(...) ~ 0.05 and A in
[-16, -1], as Mamba2's initialisation draws them.
"""

from __future__ import annotations

import inspect
import random
from typing import Any

from .base import Inputs, Outputs, Shape, Spec
from .bind import call_by_name
from .fla import _act_dtype, _torch

# --- Mamba2 SSD prefill (vLLM): the inter-chunk state pass ---
# Bamba-9B / Codestral-Mamba-7B: 128 heads of 64 channels, state 128 (dim = 64 * 128 per
# head, flattened), chunk 256; Nemotron-H-8B: 128 heads of 64, state 128 as well.


def _ssd_seq_chunks(lens: list[int], cs: int) -> list[tuple[int, int, int]]:
    """(sequence, first token, last token + 1) of each chunk when chunks never straddle a
    sequence (vLLM V1's layout: a sequence's last chunk may be short)."""
    out: list[tuple[int, int, int]] = []
    start = 0
    for s, n in enumerate(lens):
        out.extend((s, a, min(a + cs, start + n)) for a in range(start, start + n, cs))
        start += n
    return out


def _ssd_pass_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """Per-chunk local states (fp32), decays, and one initial state per sequence. Both
    chunk layouts are built: fixed 256-token chunks over the packed batch (daefed05) and
    chunks aligned to sequences with their tables (7faba503, before and after)."""
    torch = _torch()
    lens, cs, nh = list(shape["lens"]), 256, shape["heads"]
    dim = shape.get("headdim", 64) * shape.get("dstate", 128)
    t, nseq = sum(lens), len(lens)

    def rnd(*s: int) -> Any:
        return torch.randn(*s, generator=gen, device=device)

    seq_of_token = torch.repeat_interleave(torch.arange(nseq), torch.tensor(lens))
    packed = -(-t // cs)
    chunks = _ssd_seq_chunks(lens, cs)
    nck = len(chunks)
    dA = -torch.rand(nh, nck, cs, generator=gen, device=device) * 0.05  # dt * A per token
    valid = torch.zeros(nck, cs, dtype=torch.bool)
    for c, (_, a, b) in enumerate(chunks):
        valid[c, : b - a] = True
    dA = dA * valid.to(device)
    last = [c for c in range(nck) if c == nck - 1 or chunks[c + 1][0] != chunks[c][0]]
    return {
        # daefed05 layout
        "states": rnd(1, packed, nh, dim) * 0.1,
        "dA_chunk_cumsum": -torch.rand(1, nh, packed, generator=gen, device=device) * 4 - 0.1,
        "seq_idx": seq_of_token[None].to(device=device, dtype=torch.int32),
        "chunk_size": cs,
        "is_cont_batched": True,
        # 7faba503 layout
        "states_aligned": rnd(nck, nh, dim) * 0.1,
        "dA_cumsum": dA.cumsum(-1),
        "seq_idx_chunk": torch.tensor([c[0] for c in chunks], dtype=torch.int32, device=device),
        "cu_chunk_seqlens": torch.tensor(
            [c[1] for c in chunks] + [t], dtype=torch.int32, device=device
        ),
        "last_chunk_indices": torch.tensor(last, dtype=torch.int32, device=device),
        "initial_states": rnd(nseq, nh, dim) * 0.1,
        "out_dtype": _act_dtype(device),
    }


def _ssd_pass_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    fn = mod._state_passing_fwd
    params = inspect.signature(fn).parameters
    if "is_cont_batched" in params:
        out, final = call_by_name(fn, x)
        return {"out": out, "final_states": final}
    values = dict(x, states=x["states_aligned"], seq_idx=x["seq_idx_chunk"])
    return {"out": call_by_name(fn, values)}


def _ssd_pass_reference(x: Inputs) -> Outputs:
    """The recurrence s = exp(dA) s + local, restarted from a sequence's initial state at
    its first chunk; for fixed chunks (``is_cont_batched``) a chunk belongs to the sequence
    of its last token, and the state before chunk 0 is the first sequence's."""
    torch = _torch()
    init = x["initial_states"].double()
    states, dacs = x["states"][0].double(), x["dA_chunk_cumsum"][0].double()
    seq_idx = x["seq_idx"][0].long()
    t, cs = seq_idx.numel(), x["chunk_size"]
    s, prev = init[0], 0
    outs = [s]
    for c in range(states.shape[0]):
        seq = int(seq_idx[min((c + 1) * cs, t) - 1])
        if seq != prev:
            s = init[seq]
        prev = seq
        s = torch.exp(dacs[:, c])[:, None] * s + states[c]
        outs.append(s)
    out = torch.stack(outs[:-1])[None].to(x["out_dtype"])
    return {"out": out, "final_states": outs[-1][None].float()}


def _ssd_pass_aligned_reference(x: Inputs) -> Outputs:
    torch = _torch()
    init = x["initial_states"].double()
    states, last_dA = x["states_aligned"].double(), x["dA_cumsum"][:, :, -1].double()
    outs, prev, s = [], -1, init[0]
    for c, seq in enumerate(x["seq_idx_chunk"].tolist()):
        if seq != prev:
            s = init[seq]
        prev = seq
        s = torch.exp(last_dA[:, c])[:, None] * s + states[c]
        outs.append(s)
    return {"out": torch.stack(outs).to(x["out_dtype"])}


_SSD_SHAPES: tuple[Shape, ...] = (
    {"name": "bamba-9b-prefill-4k", "lens": (4096,), "heads": 128},
    {"name": "bamba-9b-prefill-mixed", "lens": (1000, 3000, 17, 600), "heads": 128},
    {"name": "codestral-mamba-tp2-8x1k", "lens": (1024,) * 8, "heads": 64},
    {"name": "nemotron-h-8b-prefill-16k", "lens": (16384,), "heads": 128},
)


def _ssd_random(r: random.Random) -> Shape:
    return {
        "name": "random",
        "lens": tuple(r.choice([1, 100, 256, 600]) for _ in range(r.choice([1, 2, 3]))),
        "heads": r.choice([2, 4]),
        "headdim": r.choice([16, 64]),
        "dstate": r.choice([16, 64]),
    }


_SSD_TOL = {"out": (2e-3, 1.6e-2), "final_states": (1e-4, 1e-4)}
_SSD_WHY = (
    "an fp32 recurrence of a few chunks (one exp and a fused multiply-add per chunk) against "
    "fp64: fp32 ulps for the fp32 final state, one bf16 ulp plus a floor for the bf16 output"
)
_VL_SSD = "vllm/model_executor/layers/mamba/ops/"

SSD_STATE_PASSING = Spec(
    name="vllm_mamba2_ssd_state_passing_packed",
    launcher="_state_passing_fwd",
    rows=(("vllm", "daefed05", _VL_SSD + "ssd_state_passing.py"),),
    shapes=_SSD_SHAPES,
    random_shape=_ssd_random,
    make_inputs=_ssd_pass_inputs,
    call=_ssd_pass_call,
    reference=_ssd_pass_reference,
    tolerance=_SSD_TOL,
    tolerance_why=_SSD_WHY,
)

SSD_STATE_PASSING_ALIGNED = Spec(
    name="vllm_mamba2_ssd_state_passing_aligned",
    launcher="_state_passing_fwd",
    rows=(("vllm", "7faba503", _VL_SSD + "ssd_state_passing.py"),),
    shapes=_SSD_SHAPES,
    random_shape=_ssd_random,
    make_inputs=_ssd_pass_inputs,
    call=_ssd_pass_call,
    reference=_ssd_pass_aligned_reference,
    tolerance=_SSD_TOL,
    tolerance_why=_SSD_WHY,
)

SPECS: tuple[Spec, ...] = (SSD_STATE_PASSING, SSD_STATE_PASSING_ALIGNED)


# --- Mamba2 SSD prefill (vLLM): the chunk scan (intra-chunk outputs plus C @ past state) ---


def _chunk_tokens(chunks: list[tuple[int, int, int]], cs: int, device: Any) -> tuple[Any, Any]:
    """(token index [n, cs], valid mask [n, cs]) of each chunk's positions."""
    torch = _torch()
    idx = torch.zeros(len(chunks), cs, dtype=torch.int64)
    valid = torch.zeros(len(chunks), cs, dtype=torch.bool)
    for c, (_, a, b) in enumerate(chunks):
        idx[c, : b - a] = torch.arange(a, b)
        valid[c, : b - a] = True
    return idx.to(device), valid.to(device)


def _logical_chunks(lens: list[int], cs: int) -> tuple[list[int], list[int]]:
    """vLLM's (chunk_indices, chunk_offsets) for fixed chunks over a packed batch: every
    piece of a sequence inside one physical chunk is a logical chunk; a sequence starting
    mid-chunk gets its start offset there."""
    indices, offsets, start = [], [], 0
    for n in lens:
        first = start - start % cs
        for a in range(first, start + n, cs):
            indices.append(a // cs)
            offsets.append(start % cs if a == first else 0)
        start += n
    return indices, offsets


def _scan_layout(
    x: Inputs, chunks: list[tuple[int, int, int]], shape: Shape, gen: Any, device: Any
) -> dict[str, Any]:
    """cb, dt, dA_cumsum and chunk states for one chunk layout."""
    torch = _torch()
    cs, nh = 256, shape["heads"]
    idx, valid = _chunk_tokens(chunks, cs, device)
    cc = x["C"][idx].float() * valid[..., None, None]  # [n, cs, g, ds]
    bb = x["_B"][idx].float() * valid[..., None, None]
    dt = torch.nn.functional.softplus(
        torch.randn(nh, len(chunks), cs, generator=gen, device=device) - 3.0
    ) * valid.to(torch.float32)
    hd, ds = x["x_tokens"].shape[-1], x["C"].shape[-1]
    return {
        "cb": torch.einsum("cigd,cjgd->cgij", cc, bb).contiguous(),
        "dt": dt,
        "dA_cumsum": (dt * x["_A"][:, None, None]).cumsum(-1),
        "states": (torch.randn(len(chunks), nh, hd, ds, generator=gen, device=device) * 0.1).to(
            x["C"].dtype
        ),
    }


def _ssd_scan_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """A prefill batch for the chunk scan, in both chunk layouts (fixed chunks over the
    packed batch with logical-chunk tables: daefed05, b690e348; chunks aligned to
    sequences: 7faba503), with initial states (chunked prefill continuing)."""
    torch = _torch()
    lens, cs, nh = list(shape["lens"]), 256, shape["heads"]
    hd, ds, ng = shape.get("headdim", 64), shape.get("dstate", 128), shape.get("groups", 1)
    t, dt_ = sum(lens), _act_dtype(device)
    x: Inputs = {
        "x_tokens": torch.randn(t, nh, hd, generator=gen, device=device).to(dt_),
        "C": (torch.randn(t, ng, ds, generator=gen, device=device) * 0.3).to(dt_),
        "_B": (torch.randn(t, ng, ds, generator=gen, device=device) * 0.3).to(dt_),
        "_A": -torch.exp(torch.rand(nh, generator=gen, device=device) * 2.7),  # A in [-16, -1]
    }
    packed = [(0, a, min(a + cs, t)) for a in range(0, t, cs)]
    aligned = _ssd_seq_chunks(lens, cs)
    pk = _scan_layout(x, packed, shape, gen, device)
    al = _scan_layout(x, aligned, shape, gen, device)
    seq_of_token = torch.repeat_interleave(torch.arange(len(lens)), torch.tensor(lens))
    ci, co = _logical_chunks(lens, cs)
    i32 = torch.int32
    flat = {
        "cb": pk["cb"][None],
        "x": x["x_tokens"][None],
        "dt": pk["dt"][None],
        "dA_cumsum": pk["dA_cumsum"][None],
        "C": x["C"][None],
        "states": pk["states"][None],
        "seq_idx": seq_of_token[None].to(device=device, dtype=i32),
        "chunk_indices": torch.tensor(ci, dtype=i32, device=device),
        "chunk_offsets": torch.tensor(co, dtype=i32, device=device),
    }
    aligned_values = {
        **al,
        "x": x["x_tokens"],
        "C": x["C"],
        "B": x["_B"],
        "cu_chunk_seqlens": torch.tensor([c[1] for c in aligned] + [t], dtype=i32, device=device),
        "seq_idx": torch.tensor([c[0] for c in aligned], dtype=i32, device=device),
    }
    return {
        **{"packed_" + k: v for k, v in flat.items()},
        **{"aligned_" + k: v for k, v in aligned_values.items()},
        "D": torch.rand(nh, generator=gen, device=device) + 0.5,
        "z": None,
        "initial_states": (
            torch.randn(len(lens), nh, hd, ds, generator=gen, device=device) * 0.1
        ).to(dt_),
        "out_packed": torch.empty(1, t, nh, hd, device=device, dtype=dt_),
        "out_aligned": torch.empty(t, nh, hd, device=device, dtype=dt_),
    }


def _strip(x: Inputs, prefix: str) -> dict[str, Any]:
    """The inputs of one chunk layout under the launcher's names."""
    return {k[len(prefix) :]: v for k, v in x.items() if k.startswith(prefix)}


def _ssd_scan_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    fn = mod._chunk_scan_fwd
    params = inspect.signature(fn).parameters
    if "cu_chunk_seqlens" in params:
        call_by_name(fn, {**x, **_strip(x, "aligned_"), "out": x["out_aligned"]})
        return {"out": x["out_aligned"]}
    values = {**x, **_strip(x, "packed_")}
    if "out" in params:
        call_by_name(fn, dict(values, out=x["out_packed"]))
        return {"out": x["out_packed"]}
    out, _ = call_by_name(fn, values)
    return {"out": out}


SSD_CHUNK_SCAN = Spec(
    name="vllm_mamba2_ssd_chunk_scan",
    launcher="_chunk_scan_fwd",
    rows=(
        ("vllm", "daefed05", _VL_SSD + "ssd_chunk_scan.py"),
        ("vllm", "b690e348", _VL_SSD + "ssd_chunk_scan.py"),
        ("vllm", "7faba503", _VL_SSD + "ssd_chunk_scan.py"),
    ),
    shapes=(
        {"name": "bamba-9b-prefill-4k", "lens": (4096,), "heads": 128},
        {"name": "bamba-9b-prefill-mixed", "lens": (1000, 3000, 17, 600), "heads": 128},
        {"name": "codestral-mamba-tp2-8x1k", "lens": (1024,) * 8, "heads": 64, "groups": 4},
        {"name": "nemotron-h-8b-prefill-8k", "lens": (8192,), "heads": 128, "groups": 8},
    ),
    random_shape=lambda r: {
        "name": "random",
        "lens": tuple(r.choice([1, 100, 256, 300]) for _ in range(r.choice([1, 2]))),
        "heads": r.choice([2, 4]),
        "headdim": r.choice([16, 32]),
        "dstate": r.choice([16, 32]),
        "groups": r.choice([1, 2]),
    },
    make_inputs=_ssd_scan_inputs,
    call=_ssd_scan_call,
    mutated=("out_packed", "out_aligned"),
    tolerance={"out": (2e-2, 2e-2)},
    tolerance_why="no torch reference for this stage alone (vLLM's tests check the combined "
    "op): after against before, both fp32-accumulating tensor-core dots over a 256-token "
    "chunk and the state (dstate 128) with a bf16 output; tile shapes differ between "
    "versions, so one bf16 ulp plus an absolute floor",
)

SPECS = (*SPECS, SSD_CHUNK_SCAN)


# --- Mamba2 SSD prefill (vLLM 7faba503): each chunk's local state, B^T (decayed dt * x) ---


def _ssd_state_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    values = {**x, **_strip(x, "aligned_"), "B": x["aligned_B"], "states_in_fp32": True}
    values.pop("states")  # the launcher allocates its own (fp32) output
    return {"states": call_by_name(mod._chunk_state_fwd, values)}


def _ssd_state_reference(x: Inputs) -> Outputs:
    """states[c, h] = sum over the chunk's tokens t of x_t (B_t * dt_t * exp(dA_last -
    dA_t))^T, the scaled B rounded to x's dtype before the product (as the kernel)."""
    torch = _torch()
    cu = x["aligned_cu_chunk_seqlens"].tolist()
    xs, bs = x["aligned_x"].float(), x["aligned_B"].float()
    dt, dac = x["aligned_dt"].float(), x["aligned_dA_cumsum"].float()
    rep = xs.shape[1] // bs.shape[1]
    out = []
    for c in range(len(cu) - 1):
        a, b = cu[c], cu[c + 1]
        n = b - a
        scale = dt[:, c, :n] * torch.exp(dac[:, c, -1:] - dac[:, c, :n])  # [H, n]
        bh = bs[a:b].repeat_interleave(rep, 1).transpose(0, 1)  # [H, n, ds]
        bh = (bh * scale[..., None]).to(x["aligned_x"].dtype).float()
        out.append(xs[a:b].transpose(0, 1).transpose(1, 2) @ bh)  # [H, hd, ds]
    return {"states": torch.stack(out)}


SSD_CHUNK_STATE = Spec(
    name="vllm_mamba2_ssd_chunk_state_aligned",
    launcher="_chunk_state_fwd",
    rows=(("vllm", "7faba503", _VL_SSD + "ssd_chunk_state.py"),),
    shapes=SSD_CHUNK_SCAN.shapes,
    random_shape=SSD_CHUNK_SCAN.random_shape,
    make_inputs=_ssd_scan_inputs,
    call=_ssd_state_call,
    reference=_ssd_state_reference,
    tolerance={"states": (5e-4, 2e-2)},
    tolerance_why="an fp32 output of bf16 tensor-core dots over up to 256 tokens (the "
    "decayed B rounded to bf16 as in the kernel, exp computed in fp32): accumulation order "
    "and exp rounding, 2% relative plus a floor for states ~0.2",
)

SPECS = (*SPECS, SSD_CHUNK_STATE)
