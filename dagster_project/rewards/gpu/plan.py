"""From (row, config) to concrete kernel launches, without touching a GPU.

A row is one or two GEMM *problems* (``GemmProblem``): the MoE gate+up GEMM, the MoE
down GEMM, or one block-scaled matmul. A problem fixes the tensors (shapes, dtypes,
quantisation) independently of the config. A config then fixes everything else the
runtime's launcher derives from it: the alignment buffers (they depend on
``BLOCK_SIZE_M``), ``EM`` and the grid, and the constexpr flags some launchers compute
(``even_Ks``, ``needs_masking``, ``swap_ab``). The result is a ``Launch``: every kernel
parameter bound *by name* to an int, a bool, ``None``, a dtype or a reference to one of
the problem's tensors. The GPU side only allocates the tensors and calls
``kernel[grid](**args)``; everything else is decided (and unit-tested) here.

Launcher behaviour differs per engine, and the measured time should be the time the
engine would see, so each repo has a ``LaunchPolicy`` written from how its launcher
behaves at the snapshot: vLLM narrows ``EM`` for batches smaller than one block, takes a
no-sort path for very sparse batches (when the kernel has ``naive_block_assignment``),
caps ``BLOCK_SIZE_K`` at the quantisation block and forces ``SPLIT_K=1``; SGLang
reserves one more expert of padding, and on Hopper swaps the dot operands
(``swap_ab``) for fp8 when ``BLOCK_SIZE_M < 64 <= BLOCK_SIZE_N``. Both shrink the
alignment buffer, and with it the grid, to ``pairs·BLOCK_SIZE_M`` when a batch has
fewer (token, expert) pairs than padded experts (``sparse_cap``, harness 1.2.0; 1.1.0
and earlier launched such batches on the uncapped grid).

The policies were written by reading the launchers (``invoke_fused_moe_kernel``, the
alignment helper ``moe_align_block_size`` and, for vLLM, the no-sort decision before it)
at the snapshot the rows' kernel sources come from: vLLM ``28be48fa944d`` (2026-05-24),
SGLang ``30cb848d4b45`` (2026-08-11). ``tests/unit/rewards/test_engine_grid.py`` pins
each kernel family's grid to a table of cases derived from that reading.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .routing import Routing, align_block_size, buffer_len, naive_assignment
from .source import KernelSignature
from .spec import REQUIRED_KEYS, MeasureRow


class BindError(ValueError):
    """The kernel's signature asks for something the harness cannot give."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class TensorRef:
    """A kernel argument that is one of the problem's tensors (by role)."""

    role: str


@dataclass(frozen=True)
class DTypeRef:
    """A kernel argument that is a Triton dtype (``compute_type``), by ``tl`` name."""

    name: str


@dataclass(frozen=True)
class TensorSpec:
    role: str
    shape: tuple[int, ...]
    dtype: str  # "bf16" | "fp8" | "f32" | "i32"

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * {"bf16": 2, "fp8": 1, "f32": 4, "i32": 4}[self.dtype]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    out = []
    acc = 1
    for dim in reversed(shape):
        out.append(acc)
        acc *= dim
    return tuple(reversed(out))


@dataclass(frozen=True)
class GemmProblem:
    """One GEMM of a row, independent of the launch config.

    ``rows`` are the rows of A; the kernel's ``top_k`` maps output pair ``p`` to A row
    ``p // top_k`` (so it is the routed top-k for the up GEMM, whose A is the tokens, and
    1 for the down GEMM, whose A already has one row per pair).
    """

    name: str  # "up" | "down" | "mm"
    kind: str  # "moe" | "block_mm"
    rows: int
    n: int
    k: int
    quant: str  # "bf16" | "fp8_tensor" | "fp8_channel" | "fp8_block"
    experts: int = 0
    top_k: int = 1
    num_pairs: int = 0
    tokens: int = 0
    routed_top_k: int = 0
    mul_routed_weight: bool = False
    block_shape: tuple[int, int] | None = None

    @property
    def fp8(self) -> bool:
        return self.quant.startswith("fp8")

    def tensors(self) -> list[TensorSpec]:
        """Float input/output tensors of the problem (the int routing buffers depend on
        the config and are listed by ``Launch.int_data``)."""
        a_dtype = "fp8" if self.fp8 else "bf16"
        out = [TensorSpec("A", (self.rows, self.k), a_dtype)]
        bn, bk = self.block_shape or (0, 0)
        if self.quant == "fp8_tensor":
            out.append(TensorSpec("A_scale", (1,), "f32"))
        elif self.quant == "fp8_channel":
            out.append(TensorSpec("A_scale", (self.rows, 1), "f32"))
        elif self.quant == "fp8_block":
            out.append(TensorSpec("A_scale", (self.rows, cdiv(self.k, bk)), "f32"))
        if self.kind == "moe":
            out.append(TensorSpec("B", (self.experts, self.n, self.k), a_dtype))
            if self.quant == "fp8_tensor":
                out.append(TensorSpec("B_scale", (self.experts,), "f32"))
            elif self.quant == "fp8_channel":
                out.append(TensorSpec("B_scale", (self.experts, self.n, 1), "f32"))
            elif self.quant == "fp8_block":
                out.append(
                    TensorSpec("B_scale", (self.experts, cdiv(self.n, bn), cdiv(self.k, bk)), "f32")
                )
            out.append(TensorSpec("C", (self.num_pairs, self.n), "bf16"))
            out.append(TensorSpec("topk_weights", (self.tokens, self.routed_top_k), "f32"))
        else:
            out.append(TensorSpec("B", (self.n, self.k), "fp8"))
            out.append(TensorSpec("B_scale", (cdiv(self.n, bn), cdiv(self.k, bk)), "f32"))
            out.append(TensorSpec("C", (self.rows, self.n), "bf16"))
        return out

    def flops(self) -> int:
        pairs = self.num_pairs if self.kind == "moe" else self.rows
        return 2 * pairs * self.n * self.k


def problems_for(row: MeasureRow) -> list[GemmProblem]:
    """The GEMMs a row's config governs (see ``MeasureRow.moe_gemms``)."""
    if row.kind == "block_mm":
        return [
            GemmProblem(
                "mm", "block_mm", row.M, row.N, row.K, "fp8_block", block_shape=row.block_shape
            )
        ]
    topk = row.routed_top_k
    E = int(row.E or 0)
    pairs = row.M * topk

    def moe_gemm(name: str, rows: int, n: int, k: int, top_k: int, weighted: bool) -> GemmProblem:
        """One of the row's two MoE GEMMs: what they share comes from the row."""
        return GemmProblem(
            name,
            rows=rows,
            n=n,
            k=k,
            top_k=top_k,
            mul_routed_weight=weighted,
            kind="moe",
            quant=row.quant,
            experts=E,
            num_pairs=pairs,
            tokens=row.M,
            routed_top_k=topk,
            block_shape=row.block_shape,
        )

    up = moe_gemm("up", rows=row.M, n=2 * row.N, k=row.K, top_k=topk, weighted=False)
    down = moe_gemm("down", rows=pairs, n=row.K, k=row.N, top_k=1, weighted=True)
    return {"both": [up, down], "up": [up], "down": [down]}[row.moe_gemms]


@dataclass(frozen=True)
class LaunchPolicy:
    """How an engine's launcher turns a config into a launch (module docstring)."""

    repo: str
    extra_expert_padding: bool = False
    small_batch_em: bool = False
    naive_sparsity: int | None = None
    clamp_block_k: bool = False
    swap_ab_sm90: bool = False
    sparse_cap: bool = False


POLICIES: dict[str, LaunchPolicy] = {
    "vllm": LaunchPolicy(
        "vllm", small_batch_em=True, naive_sparsity=4, clamp_block_k=True, sparse_cap=True
    ),
    "sglang": LaunchPolicy("sglang", extra_expert_padding=True, swap_ab_sm90=True, sparse_cap=True),
}


def policy_for(repo: str) -> LaunchPolicy:
    return POLICIES.get(repo, LaunchPolicy(repo))


@dataclass(frozen=True)
class Launch:
    """One kernel launch, fully decided: ``kernel[grid](**args, **options)``."""

    problem: str
    grid: tuple[int, ...]
    args: dict[str, Any]
    options: dict[str, int]
    int_data: dict[str, np.ndarray] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def spec_key(self, constexprs: frozenset[str] = frozenset()) -> tuple:
        """What Triton specialises a compiled kernel on (constexpr parameters, named in
        ``constexprs``, by value; other ints by divisibility by 16 and equality to 1;
        tensors by dtype), so two launches with equal keys share one compile: used to
        deduplicate the parallel pre-compile. (Harness 1.0.0 keyed constexpr tile sizes
        by divisibility too, so BLOCK_SIZE_N=64 and 128 shared one key and every tile
        neighbour was compiled in the timing process instead.)"""

        def spec(name: str, value: Any) -> Any:
            if isinstance(value, bool) or value is None:
                return value
            if name in constexprs:
                return ("c", repr(value))
            if isinstance(value, int):
                return ("i", value % 16 == 0, value == 1, value >= 2**31)
            if isinstance(value, TensorRef):
                return ("t", value.role)
            return repr(value)

        return (
            tuple(sorted((k, spec(k, v)) for k, v in self.args.items())),
            tuple(sorted(self.options.items())),
        )


def _scale_strides(problem: GemmProblem) -> dict[str, int]:
    """``stride_as*`` / ``stride_bs*`` as the launchers compute them from the scale
    tensors' shapes (0 for a 1-D scale, which the kernels index directly)."""
    specs = {t.role: t for t in problem.tensors()}
    out = {"stride_asm": 0, "stride_ask": 0, "stride_bse": 0, "stride_bsk": 0, "stride_bsn": 0}
    a_s = specs.get("A_scale")
    if a_s is not None and len(a_s.shape) == 2:
        st = contiguous_strides(a_s.shape)
        out["stride_asm"], out["stride_ask"] = st[0], st[1]
    b_s = specs.get("B_scale")
    if b_s is not None and len(b_s.shape) == 3:
        st = contiguous_strides(b_s.shape)
        out["stride_bse"], out["stride_bsn"], out["stride_bsk"] = st[0], st[1], st[2]
    return out


def moe_extent(
    problem: GemmProblem, bm: int, policy: LaunchPolicy, names: frozenset[str]
) -> tuple[bool, int, int]:
    """(naive, buffer length, ``EM``) of one MoE launch, as the engine's launcher
    derives them from the batch and ``BLOCK_SIZE_M``; the grid is
    ``cdiv(EM, BM) · cdiv(N, BN)``. Independent of the routing itself."""
    naive = (
        policy.naive_sparsity is not None
        and "naive_block_assignment" in names
        and problem.tokens * problem.routed_top_k * policy.naive_sparsity <= problem.experts
    )
    if naive:
        length = problem.num_pairs * bm
        return True, length, length
    length = buffer_len(
        problem.num_pairs,
        problem.experts,
        bm,
        extra_expert=policy.extra_expert_padding,
        sparse_cap=policy.sparse_cap,
    )
    em = length
    if policy.small_batch_em and problem.rows < bm:
        em = min(length, problem.rows * problem.top_k * bm)
    return False, length, em


def engine_grids(
    row: MeasureRow, config: Mapping[str, int], names: frozenset[str] | None = None
) -> list[tuple[int, ...]]:
    """The grid of each of a row's launches for a normalised config, without a kernel or
    routing: what the engine launches (``names`` are the kernel's parameter names; by
    default the snapshot kernel's, which has vLLM's ``naive_block_assignment``). Used
    to find results measured on another grid (``rewards.measured.superseded``)."""
    policy = policy_for(row.repo)
    names = frozenset({"naive_block_assignment"}) if names is None else names
    bm, bn = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"]
    out: list[tuple[int, ...]] = []
    for problem in problems_for(row):
        if problem.kind == "moe":
            _, _, em = moe_extent(problem, bm, policy, names)
            out.append((cdiv(em, bm) * cdiv(problem.n, bn),))
        else:
            out.append((cdiv(problem.rows, bm) * cdiv(problem.n, bn),))
    return out


def _moe_args(
    problem: GemmProblem,
    cfg: Mapping[str, int],
    policy: LaunchPolicy,
    routing: Routing,
    names: frozenset[str],
) -> tuple[dict[str, Any], dict[str, np.ndarray], tuple[int, ...], list[str]]:
    notes: list[str] = []
    bm, bn, bk = cfg["BLOCK_SIZE_M"], cfg["BLOCK_SIZE_N"], cfg["BLOCK_SIZE_K"]
    if policy.clamp_block_k and problem.block_shape is not None:
        capped = min(bk, *problem.block_shape)
        if capped != bk:
            notes.append(f"BLOCK_SIZE_K {bk} capped to {capped} by the launcher")
            bk = capped
    naive, length, em = moe_extent(problem, bm, policy, names)
    if naive:
        al = naive_assignment(routing.topk_ids, bm)
    else:
        al = align_block_size(routing.topk_ids, bm, problem.experts, length)
    grid = (cdiv(em, bm) * cdiv(problem.n, bn),)
    int_data = {
        "expert_ids": al.expert_ids,
        "num_tokens_post_padded": np.array([al.num_tokens_post_padded], np.int32),
    }
    if al.sorted_token_ids is not None:
        int_data["sorted_token_ids"] = al.sorted_token_ids
    fp8 = problem.fp8
    group_n, group_k = problem.block_shape or (0, 0)
    swap_ab = bool(policy.swap_ab_sm90 and fp8 and bm < 64 and bn >= 64)
    k, n = problem.k, problem.n
    args: dict[str, Any] = {
        "a_ptr": TensorRef("A"),
        "b_ptr": TensorRef("B"),
        "c_ptr": TensorRef("C"),
        "a_scale_ptr": TensorRef("A_scale") if fp8 else None,
        "b_scale_ptr": TensorRef("B_scale") if fp8 else None,
        "topk_weights_ptr": TensorRef("topk_weights"),
        "sorted_token_ids_ptr": None if naive else TensorRef("sorted_token_ids"),
        "expert_ids_ptr": TensorRef("expert_ids"),
        "num_tokens_post_padded_ptr": TensorRef("num_tokens_post_padded"),
        # Optional features the runs never use (bias, TMA, LoRA masks, fused adds).
        "b_bias_ptr": None,
        "bias_ptr": None,
        "a_desc": None,
        "b_desc": None,
        "add_mask_ptr": None,
        "N": n,
        "K": k,
        "EM": em,
        "num_valid_tokens": problem.num_pairs,
        "stride_am": k,
        "stride_ak": 1,
        "stride_be": n * k,
        "stride_bk": 1,
        "stride_bn": k,
        "stride_cm": n,
        "stride_cn": 1,
        **_scale_strides(problem),
        "stride_bbe": 0,
        "stride_bbn": 0,
        "stride_bias_e": 0,
        "stride_bias_n": 0,
        "group_n": group_n,
        "group_k": group_k,
        "naive_block_assignment": naive,
        "BLOCK_SIZE_M": bm,
        "BLOCK_SIZE_N": bn,
        "BLOCK_SIZE_K": bk,
        "GROUP_SIZE_M": cfg["GROUP_SIZE_M"],
        "SPLIT_K": 1,
        "MUL_ROUTED_WEIGHT": problem.mul_routed_weight,
        "top_k": problem.top_k,
        "compute_type": DTypeRef("bfloat16"),
        "use_fp8_w8a8": fp8,
        "use_fp8": fp8,
        "use_int8_w8a8": False,
        "use_int8_w8a16": False,
        "use_int4_w4a16": False,
        "per_channel_quant": problem.quant == "fp8_channel",
        "HAS_BIAS": False,
        "even_Ks": k % bk == 0,
        "c_sorted": False,
        "filter_expert": True,
        "swap_ab": swap_ab,
        "FUSE_ADD_TO_OUTPUT": False,
        "MASK_OUTPUT": False,
        "FUSE_SUM_ALL_REDUCE": False,
        "LORA_PRESERVE_BASE": False,
        "ROUTER_TOPK": 1,
    }
    if naive:
        notes.append("vLLM naive block assignment (sparse batch: no alignment)")
    return args, int_data, grid, notes


def _block_mm_args(
    problem: GemmProblem, cfg: Mapping[str, int]
) -> tuple[dict[str, Any], tuple[int, ...]]:
    bm, bn, bk = cfg["BLOCK_SIZE_M"], cfg["BLOCK_SIZE_N"], cfg["BLOCK_SIZE_K"]
    group_n, group_k = problem.block_shape or (128, 128)
    m, n, k = problem.rows, problem.n, problem.k
    kb = cdiv(k, group_k)
    args: dict[str, Any] = {
        "A": TensorRef("A"),
        "B": TensorRef("B"),
        "C": TensorRef("C"),
        "As": TensorRef("A_scale"),
        "Bs": TensorRef("B_scale"),
        "M": m,
        "N": n,
        "K": k,
        "group_n": group_n,
        "group_k": group_k,
        "stride_am": k,
        "stride_ak": 1,
        "stride_bk": 1,
        "stride_bn": k,
        "stride_cm": n,
        "stride_cn": 1,
        "stride_As_m": kb,
        "stride_As_k": 1,
        "stride_Bs_k": 1,
        "stride_Bs_n": kb,
        "BLOCK_SIZE_M": bm,
        "BLOCK_SIZE_N": bn,
        "BLOCK_SIZE_K": bk,
        "GROUP_SIZE_M": cfg["GROUP_SIZE_M"],
        "needs_masking": k % bk != 0,
    }
    return args, (cdiv(m, bm) * cdiv(n, bn),)


def bind(signature: KernelSignature, values: Mapping[str, Any]) -> dict[str, Any]:
    """Every kernel parameter by name: from ``values``, or left to its default.

    Raises ``BindError`` naming required parameters nothing provides, or config keys the
    kernel does not take (the config could not be applied to this kernel version).
    """
    names = set(signature.names)
    absent = [k for k in REQUIRED_KEYS if k not in names]
    if absent:
        raise BindError(
            f"{signature.name} has no parameter(s) {', '.join(absent)}: the "
            "config cannot be applied to this kernel version"
        )
    bound: dict[str, Any] = {}
    unbound: list[str] = []
    for p in signature.params:
        if p.name in values:
            bound[p.name] = values[p.name]
        elif not p.has_default:
            unbound.append(p.name)
    if unbound:
        raise BindError(
            f"{signature.name} parameter(s) the harness cannot fill: " + ", ".join(unbound)
        )
    return bound


def plan_launches(
    row: MeasureRow, config: Mapping[str, int], signature: KernelSignature, routing: Routing | None
) -> list[Launch]:
    """The launches of one (row, normalised config), in execution order."""
    policy = policy_for(row.repo)
    names = frozenset(signature.names)
    options = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
    launches: list[Launch] = []
    for problem in problems_for(row):
        if problem.kind == "moe":
            if routing is None:
                raise BindError("MoE launch without routing")
            values, int_data, grid, notes = _moe_args(problem, config, policy, routing, names)
        else:
            values, grid = _block_mm_args(problem, config)
            int_data, notes = {}, []
        launches.append(
            Launch(problem.name, grid, bind(signature, values), options, int_data, tuple(notes))
        )
    return launches
