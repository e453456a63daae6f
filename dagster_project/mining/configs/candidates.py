"""Which MoE models a tuned (E, N) shape could be for.

The tuners save ``N = moe_intermediate_size / TP`` and ``E = experts`` under tensor
parallelism, or ``E = experts / EP`` with N unsharded under expert parallelism
(configs.md §2). On top of that:

- fused shared experts: SGLang (and vLLM's ROCm AITER path, e.g. ``E=129,N=704``) append
  routed-size shared experts to the routed GEMM, so DeepSeek-V3's 256 experts become
  ``E=257``; older SGLang replicated one shared expert per TP rank (``E=264`` is 256 + 8 at
  TP8).
- int4 packing: both runtimes pack two int4 weights per byte along N. vLLM doubles the
  packed size back before naming the file (``N = N * 2`` in ``try_get_optimal_moe_config``)
  so its file N is the logical one; SGLang does not, so an SGLang int4 file's N may be half
  the logical N. For SGLang int4 files both readings are matched.

Shapes collide (E=160,N=192 is DeepSeek-V2 TP8 and GLM-4.5 TP8), which is exactly what the
list is meant to show.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

#: Version of candidate_models matching. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "2"

TP_SIZES = (1, 2, 4, 8, 16)
EP_SIZES = (2, 4, 8, 16, 32, 64)
#: An EP reading needs E x EP = the model's expert count AND at least this many local
#: experts: a file with E=1 is a dense or shared-expert GEMM (or a tuner test), not one
#: expert per rank of a 64-way EP deployment, so "every E=1 file -> Hunyuan-A13B (EP64)"
#: was noise (issue 21).
MIN_LOCAL_EXPERTS = 2


@dataclass(frozen=True)
class ModelMatch:
    """One model that fits a shape, and how (e.g. ``TP8``, ``EP4``, ``TP8 + fused shared``)."""

    model: str
    how: str
    hidden_size: int
    top_k: int

    def describe(self) -> str:
        return f"{self.model} ({self.how}; hidden {self.hidden_size}, top-{self.top_k})"


def _logical_ns(N: int, dtype: str | None, repo: str) -> list[tuple[int, str]]:
    ns = [(N, "")]
    if dtype == "int4_w4a16" and repo == "sglang":
        ns.append((2 * N, ", int4 packed"))
    return ns


SHAPE_COLUMNS = (
    "model",
    "experts",
    "moe_intermediate_size",
    "hidden_size",
    "top_k",
    "shared_experts",
)
ShapeRow = tuple[str, int, int, int, int, int]


def shape_rows(shapes: pl.DataFrame) -> list[ShapeRow]:
    """The shapes table as plain tuples, for matching many files without frame overhead."""
    return shapes.select(SHAPE_COLUMNS).rows()


def _tp_readings(row: ShapeRow, E: int, n: int, note: str) -> list[ModelMatch]:
    """Tensor-parallel readings of one model's shape: ``N`` is its intermediate size split
    ``tp`` ways, and ``E`` its experts (plus shared experts fused in, or replicated per
    rank)."""
    model, experts, inter, hidden, top_k, shared = row
    out: list[ModelMatch] = []
    for tp in TP_SIZES:
        if inter % tp or inter // tp != n:
            continue
        if experts == E:
            out.append(ModelMatch(model, f"TP{tp}{note}", hidden, top_k))
        elif shared and experts + shared == E:
            out.append(ModelMatch(model, f"TP{tp} + fused shared{note}", hidden, top_k))
        elif shared and tp > 1 and experts + tp * shared == E:
            out.append(ModelMatch(model, f"TP{tp} + replicated shared{note}", hidden, top_k))
    return out


def _ep_readings(row: ShapeRow, E: int, n: int, note: str) -> list[ModelMatch]:
    """Expert-parallel readings: the whole intermediate size, ``E`` the experts per rank
    (plus shared experts fused in); only for enough local experts."""
    model, experts, inter, hidden, top_k, shared = row
    out: list[ModelMatch] = []
    if n == inter and E >= MIN_LOCAL_EXPERTS:
        for ep in EP_SIZES:
            if experts % ep:
                continue
            if experts // ep == E:
                out.append(ModelMatch(model, f"EP{ep}{note}", hidden, top_k))
            elif shared and experts // ep + shared == E:
                out.append(ModelMatch(model, f"EP{ep} + fused shared{note}", hidden, top_k))
    return out


def match_models(
    E: int | None,
    N: int | None,
    dtype: str | None,
    repo: str,
    shapes: pl.DataFrame | list[ShapeRow],
) -> list[ModelMatch]:
    """Every (model, parallelism) reading of the shape, in ``shapes`` order."""
    rows = shape_rows(shapes) if isinstance(shapes, pl.DataFrame) else shapes
    if E is None or N is None or not rows:
        return []
    out: list[ModelMatch] = []
    for model, experts, inter, hidden, top_k, shared in rows:
        if not experts or not inter:
            continue
        row = (model, experts, inter, hidden, top_k, shared or 0)
        for n, note in _logical_ns(N, dtype, repo):
            out += _tp_readings(row, E, n, note)
            out += _ep_readings(row, E, n, note)
    return out


def candidate_models(
    E: int | None, N: int | None, dtype: str | None, repo: str, shapes: pl.DataFrame
) -> list[str]:
    """Distinct model names whose shape matches under TP, EP, fused shared experts or packing."""
    return list(dict.fromkeys(m.model for m in match_models(E, N, dtype, repo, shapes)))
