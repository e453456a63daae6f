"""MoE routing and the block alignment the fused-MoE kernel consumes, in numpy.

The kernel does not see tokens, it sees *pairs* (token, chosen expert) grouped by expert
in blocks of ``BLOCK_SIZE_M`` rows: ``sorted_token_ids`` lists pair indices expert by
expert, each expert's run padded with the sentinel ``num_pairs`` to a multiple of
``BLOCK_SIZE_M``; ``expert_ids`` names the expert of every block; and
``num_tokens_post_padded`` is the padded length, past which blocks return at once. This
is what both runtimes' ``moe_align_block_size`` produce; the runtimes compute it on the
GPU, we compute it here because it is cheap, exact and testable on a CPU, and upload it.

The buffers are allocated at their *upper bound* (every expert padded by at most
``BLOCK_SIZE_M - 1``) exactly as the runtimes allocate them, because the launch grid
covers the whole buffer: empty trailing blocks are part of what a config costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Routing:
    """Which experts each token visits (``topk_ids``) and with what weight."""

    topk_ids: np.ndarray  # [M, top_k] int32, distinct per row
    topk_weights: np.ndarray  # [M, top_k] float32, rows sum to 1

    @property
    def num_pairs(self) -> int:
        return int(self.topk_ids.size)


#: The routing the tuners benchmark with and every batch before issue 38 was measured
#: under: each token's experts drawn uniformly (``route``). The default everywhere, so a
#: batch line or result without a ``routing`` field means this.
UNIFORM = "uniform"
#: The skewed routing measured besides uniform (issue 38): Zipf-like expert popularity
#: with exponent 0.5 (``zipf_popularity``).
SKEWED = "zipf:0.5"
#: Version of the routing rules (the names above and how ``route`` draws each): bumped
#: when the same name would draw other experts, since results are stamped by name.
ROUTING_RULES = "1"


def parse_routing(name: str) -> float | None:
    """The Zipf exponent a routing name asks for (``"zipf:0.5"`` -> 0.5), ``None`` for
    ``"uniform"``; ``ValueError`` for anything else (a typo must not measure uniform)."""
    if name == UNIFORM:
        return None
    kind, _, value = name.partition(":")
    try:
        s = float(value)
    except ValueError:
        s = -1.0
    if kind != "zipf" or not 0.0 < s <= 4.0:
        raise ValueError(f"routing {name!r} is not 'uniform' or 'zipf:<exponent in (0, 4]>'")
    return s


def zipf_popularity(routed: int, s: float, rng: np.random.Generator) -> np.ndarray:
    """Per-expert probability of being chosen: ``1 / rank**s``, normalised, over a seeded
    random order of the experts (which experts are hot differs per row, how hot does not).

    Why this shape and exponent: expert load in real traffic is uneven and persistent,
    and a power law over expert rank is the usual model of "a few hot experts, a long
    tail". Its strength is set from measured traces: DODOCO (Ma, Eitzinger, Koestler,
    Wellein, arXiv:2605.20982, 2026) instrumented five MoE checkpoints on H100s and
    reports per-expert token-load Gini coefficients on real text from about 0.10 (an MHA
    model on wikitext) to above 0.24 in every real-text condition for the MLA model
    (DeepSeek-V2-Lite) and the GDN one, and 0.29 to 0.38 for those two on mock tokens.
    Exponent 0.5 gives a Gini of 0.26 to 0.33 for E = 64 to 512 (top-k 6 to 10, 2,048
    tokens; checked by ``tests/unit/rewards/test_routing_skew.py``): the concentrated
    real-text level of the DeepSeek-style models most tuned fused-MoE rows come from
    (E = 256, top-k 8), below the mock-token extreme; exponent 1.0 (Gini ~0.6) is a
    stress case beyond every reported figure.
    """
    p = 1.0 / np.arange(1, routed + 1, dtype=np.float64) ** s
    p /= p.sum()
    return p[rng.permutation(routed)]


def route(
    M: int,
    num_experts: int,
    top_k: int,
    *,
    n_shared: int = 0,
    seed: int = 0,
    routing: str = UNIFORM,
) -> Routing:
    """Random routing: each token picks ``top_k`` distinct routed experts from the first
    ``num_experts - n_shared``, plus every fused shared expert (the last ``n_shared``
    ids), with softmax weights of random logits.

    ``routing="uniform"`` (default) picks uniformly, which matches what the tuners
    benchmark with (random gating), so a tuned config is measured under the load it was
    tuned for; its draws are the ones every batch before issue 38 used. ``"zipf:S"``
    picks without replacement in proportion to ``zipf_popularity`` (Gumbel top-k: adding
    Gumbel noise to log-probabilities and keeping the ``top_k`` largest is sampling
    without replacement in proportion to the probabilities, Kool et al., ICML 2019), so
    every token still visits ``top_k`` distinct experts but the popular ones get most
    pairs.
    """
    routed = num_experts - n_shared
    if top_k < 1 or routed < top_k:
        raise ValueError(f"cannot route top_k={top_k} over {routed} routed experts")
    s = parse_routing(routing)
    rng = np.random.default_rng(seed)
    if s is None:
        # argsort of uniform keys = a uniformly random permutation per row; keep top_k.
        keys = rng.random((M, routed))
        ids = np.argsort(keys, axis=1, kind="stable")[:, :top_k]
    else:
        log_p = np.log(zipf_popularity(routed, s, rng))
        keys = log_p[None, :] + rng.gumbel(size=(M, routed))
        ids = np.argsort(-keys, axis=1, kind="stable")[:, :top_k]
    if n_shared:
        shared = np.broadcast_to(np.arange(routed, num_experts), (M, n_shared))
        ids = np.concatenate([ids, shared], axis=1)
    logits = rng.standard_normal(ids.shape)
    w = np.exp(logits - logits.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    return Routing(ids.astype(np.int32), w.astype(np.float32))


@dataclass(frozen=True)
class Alignment:
    """The three alignment buffers, exactly as the kernel reads them."""

    sorted_token_ids: np.ndarray | None  # [buffer_len] int32; None in vLLM's naive mode
    expert_ids: np.ndarray  # [n_blocks] int32
    num_tokens_post_padded: int
    buffer_len: int  # sorted_token_ids length (the launch grid covers it)


def buffer_len(
    num_pairs: int,
    num_experts: int,
    block_m: int,
    *,
    extra_expert: bool = False,
    sparse_cap: bool = False,
) -> int:
    """Upper bound of the padded length: vLLM ``pairs + E·(BM-1)``, SGLang reserves one
    more expert's padding (``extra_expert``).

    ``sparse_cap``: both engines' ``moe_align_block_size`` (at the snapshot) shrink the
    buffer when there are fewer pairs than padded experts (``pairs < E``, or ``E + 1``
    with the extra expert): no more than ``pairs`` blocks can be non-empty then, so the
    buffer is ``pairs·BM`` (never more than the uncapped bound). The launch grid covers
    the buffer, so without the cap a small batch is launched on too many blocks.
    """
    e = num_experts + (1 if extra_expert else 0)
    bound = num_pairs + e * (block_m - 1)
    if sparse_cap and num_pairs < e:
        return min(bound, num_pairs * block_m)
    return bound


def align_block_size(
    topk_ids: np.ndarray, block_m: int, num_experts: int, length: int | None = None
) -> Alignment:
    """Group pairs by expert (pair order kept within an expert), pad each expert's run
    with the sentinel ``num_pairs`` to a multiple of ``block_m``.

    Unused tail entries of ``expert_ids`` hold 0: the kernel returns before reading
    them (``pid_m * BLOCK_SIZE_M >= num_tokens_post_padded``).
    """
    flat = np.asarray(topk_ids, dtype=np.int64).reshape(-1)
    numel = flat.size
    if numel and (flat.min() < 0 or flat.max() >= num_experts):
        raise ValueError("expert id out of range")
    size = buffer_len(numel, num_experts, block_m) if length is None else int(length)
    counts = np.bincount(flat, minlength=num_experts)
    padded = (counts + block_m - 1) // block_m * block_m
    total = int(padded.sum())
    if total > size:
        raise ValueError(f"buffer of {size} cannot hold {total} padded pairs")
    offsets = np.concatenate([[0], np.cumsum(padded)[:-1]])
    order = np.argsort(flat, kind="stable")
    sorted_e = flat[order]
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.arange(numel) - first[sorted_e]
    sorted_ids = np.full(size, numel, dtype=np.int32)
    sorted_ids[offsets[sorted_e] + rank] = order
    n_blocks = (size + block_m - 1) // block_m
    expert_ids = np.zeros(n_blocks, dtype=np.int32)
    block_experts = np.repeat(np.arange(num_experts), padded // block_m)
    expert_ids[: block_experts.size] = block_experts
    return Alignment(sorted_ids, expert_ids, total, size)


def naive_assignment(topk_ids: np.ndarray, block_m: int) -> Alignment:
    """vLLM's low-latency path for very sparse batches: one block per pair, no sorting
    (``sorted_token_ids`` is None, ``expert_ids`` is the flat routing)."""
    flat = np.asarray(topk_ids, dtype=np.int32).reshape(-1)
    return Alignment(None, flat.copy(), int(flat.size) * block_m, int(flat.size) * block_m)


def row_routing(row: Any) -> Routing | None:
    """The routing a measured row's kernel runs with: ``route`` over the row's own M,
    expert count, top-k, shared experts, seed and ``routing`` for a MoE row, ``None``
    for a dense one. One place, so the planner's batches and the device run route a row
    identically."""
    if row.kind != "moe":
        return None
    return route(
        row.M,
        int(row.E or 0),
        int(row.top_k or 0),
        n_shared=row.n_shared,
        seed=row.seed,
        routing=getattr(row, "routing", UNIFORM) or UNIFORM,
    )
