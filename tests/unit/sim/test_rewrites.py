"""Compile-identical rewrites (issue 39, 39d, 39e): what each rewrite writes, the Triton
front-end check (evaluation order included), the evidence gate, and measured answers reaching a
variant through its canonical text.
"""

from __future__ import annotations

import csv
import json

from dagster_project.sim import rewrites
from dagster_project.sim.codegen import render_candidate
from dagster_project.sim.ops import get_op
from dagster_project.sim.oracle import answer_key
from dagster_project.sim.styles import Style, style_for_seed
from dagster_project.sim.variants import get_variant, iter_params

_CUDA = """\
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__global__ void k(const float* __restrict__ x, float* out) {
  const int row = blockIdx.x;
  const float* src = x + int64_t(row) * 64;
  float acc = 0.0f;
  for (int u = 0; u < 4; ++u) acc += src[u] * 2.0f;
  if (row == 0) acc -= 1.0f;
  if (row > 1) acc = 1.0f; else acc = 2.0f;
  out[row] = acc;
}
extern "C" int launch(const float* x, float* out) {
  const int n = int(64);
  return n;
}"""


def _one(axis: str) -> str:
    return rewrites.rewrite_cuda(_CUDA, (axis,))


def test_each_cuda_rewrite_writes_the_same_statement_another_way() -> None:
    assert "acc = acc + (src[u] * 2.0f);" in _one("aug")
    assert "acc = acc - 1.0f;" in _one("aug")
    assert "v = v + __shfl_xor_sync(0xffffffffu, v, o);" in _one("aug")
    assert "u < 4; u++)" in _one("postinc")
    assert "if (row == 0) { acc -= 1.0f; }" in _one("braces")
    assert "if (row > 1) acc = 1.0f; else acc = 2.0f;" in _one("braces")  # two statements
    assert "  int row = blockIdx.x;" in _one("noconst")
    assert "const float* src" in _one("noconst")  # a pointer keeps its const
    assert "x + static_cast<int64_t>(row) * 64" in _one("cast")
    every = rewrites.rewrite_cuda(_CUDA, rewrites.CUDA_AXES)
    assert "for (int u = 0; u < 4; u++) { acc = acc + (src[u] * 2.0f); }" in every
    # line for line, and the host wrapper (whose allocations memory.py reads) untouched
    assert len(every.split("\n")) == len(_CUDA.split("\n"))
    assert every.split('extern "C"')[1] == _CUDA.split('extern "C"')[1]
    assert rewrites.rewrite(_CUDA, "cuda", ()) == _CUDA


_CUDA_11 = """\
using act_t = __half;
template <typename T> __device__ __forceinline__ T from_f32(float v);
constexpr int kThreads = 256;
__global__ void __launch_bounds__(kThreads, 2) k(const act_t* __restrict__ x, float* out) {
  for (int i = threadIdx.x; i < 4096; i += kThreads * 2) out[i] = static_cast<float>(i);
  const int n = static_cast<int>(out[0]);
  out[1] = static_cast<float>(x[0]).f;
}
extern "C" int launch(const float* x, float* out) {
  using host_t = float;
  return 0;
}"""


def test_each_1_1_cuda_rewrite_writes_the_same_declaration_another_way() -> None:
    def one(axis: str) -> str:
        return rewrites.rewrite_cuda(_CUDA_11, (axis,))

    assert "typedef __half act_t;" in one("typedef")
    assert "template <class T> __device__" in one("classt")
    assert "__forceinline__ __device__ T from_f32" in one("specorder")
    assert "__global__ __launch_bounds__(kThreads, 2) void k(const" in one("lbpos")
    assert "static constexpr int kThreads = 256;" in one("staticcx")
    assert "i < 4096; i = i + (kThreads * 2)) out[i]" in one("stepaug")
    assert "out[i] = (float)(i);" in one("ccast")
    assert "= static_cast<int>(out[0]);" in one("ccast")  # a line memory.py evaluates
    assert "out[1] = ((float)(x[0])).f;" in one("ccast")  # a postfix operator follows
    every = rewrites.rewrite_cuda(_CUDA_11, rewrites.CUDA_AXES)
    assert every.split('extern "C"')[1] == _CUDA_11.split('extern "C"')[1]
    assert len(every.split("\n")) == len(_CUDA_11.split("\n"))


def _triton_render(op: str, tag: str) -> str:
    o = get_op(op)
    v = get_variant(o.family, "triton", tag)
    p = iter_params(v, o, "fp16")[0]
    return render_candidate(o, "h100", "fp16", {"T": 64, "H": 4096}, v, p, rewrite_axes=())


def test_triton_rewrites_are_one_program_to_the_front_end_and_the_check_can_fail() -> None:
    canon = _triton_render("rmsnorm", "v0_scalar")
    var = rewrites.rewrite_triton(canon, rewrites.TRITON_AXES)
    assert "stat = stat + tl.sum(x * x, 0)" in var
    assert "other=0.0, mask=(offs < n_cols))" in var
    assert "x = tl.cast(tl.load(src + offs, other=0.0, mask=(offs < n_cols)), tl.float32)" in var
    assert "row = tl.program_id(axis=0)" in var
    assert rewrites.frontend_form(var) == rewrites.frontend_form(canon)
    # the entry point is plain Python: never rewritten
    assert var.split("\ndef rmsnorm")[1] == canon.split("\ndef rmsnorm")[1]
    # an edit that changes the program (operand order of a float sum) is caught
    swapped = var.replace("stat = stat + tl.sum(x * x, 0)", "stat = tl.sum(x * x, 0) + stat")
    assert swapped != var
    assert rewrites.frontend_form(swapped) != rewrites.frontend_form(canon)
    recast = var.replace("tl.float32)", "tl.float16)", 1)
    assert rewrites.frontend_form(recast) != rewrites.frontend_form(canon)


def test_the_front_end_check_sees_triton_evaluate_keywords_first() -> None:
    """Triton 3.6 evaluates keyword arguments before positional ones: passing an IR-emitting
    mask by position reorders the ops (a Triton 3.6 compile of such a probe gave different
    PTX), so the check refuses it, and ``loadpos`` moves only names and constants."""
    canon = "def k(p, n, m):\n    x = tl.load(p + 1, mask=n < 4, other=0.0)\n"
    moved = "def k(p, n, m):\n    x = tl.load(p + 1, n < 4, 0.0)\n"
    assert rewrites.frontend_form(moved) != rewrites.frontend_form(canon)
    assert rewrites.rewrite_triton("@triton.jit\n" + canon, ("loadpos",)) == "@triton.jit\n" + canon
    named = "@triton.jit\ndef k(p, n, m):\n    x = tl.load(p + 1, mask=m, other=0.0)\n"
    var = rewrites.rewrite_triton(named, ("loadpos",))
    assert "tl.load(p + 1, m, 0.0)" in var
    assert rewrites.frontend_form(var) == rewrites.frontend_form(named)
    store = (
        "@triton.jit\ndef k(p, v, m):\n    tl.store(p, v + 1, mask=m)\n"
        "    a = tl.zeros([4], dtype=tl.float32)\n"
    )
    var = rewrites.rewrite_triton(store, ("storepos", "dtypepos", "maskparen"))
    assert "tl.store(p, v + 1, m)" in var and "tl.zeros([4], tl.float32)" in var
    assert rewrites.frontend_form(var) == rewrites.frontend_form(store)
    loops = (
        "@triton.jit\ndef k(p, n):\n    for i in range(0, n, 4):\n        p += 1\n"
        "    for j in range(0, n, 4, num_stages=3):\n        p += 1\n"
    )
    var = rewrites.rewrite_triton(loops, ("tlrange",))
    assert "for i in tl.range(0, n, 4):" in var
    assert "for j in range(0, n, 4, num_stages=3):" in var  # builtin range ignores the option
    assert rewrites.frontend_form(var) == rewrites.frontend_form(loops)
    staged = var.replace("in range(0, n, 4, num", "in tl.range(0, n, 4, num")
    assert rewrites.frontend_form(staged) != rewrites.frontend_form(loops)
    paren = rewrites.rewrite_triton("@triton.jit\n" + canon, ("maskparen",))
    assert "mask=(n < 4), other" in paren
    assert rewrites.frontend_form(paren) == rewrites.frontend_form("@triton.jit\n" + canon)


def _author_with(axis: str, impl: str) -> Style:
    for i in range(200):
        st = style_for_seed(f"t{i}")
        if axis in rewrites.author_axes(repr(st), impl):
            return st
    raise AssertionError("no author draws the axis")


def test_renders_rewrite_only_with_evidence_and_reach_the_canonical_answer() -> None:
    with rewrites.evidence_path().open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["impl"] == "cuda" and r["params"] != "{}"]
    # a small template first (rowwise / elementwise): the test stays quick
    rows.sort(key=lambda r: get_op(r["op"]).family not in ("rowwise", "elementwise"))
    r = next(r for r in rows if rewrites.allowed(r["op"], "cuda", r["variant"], r["arch"]))
    op = get_op(r["op"])
    v = get_variant(op.family, "cuda", r["variant"])
    shape, params = json.loads(r["shape"]), json.loads(r["params"])
    st = _author_with("aug", "cuda")
    # the author's structure as drawn (``gate_structure=False``: the rewrite gate is its own)
    gpu, dt = r["gpu"], r["dtype"]
    canon = render_candidate(op, gpu, dt, shape, v, params, None, st, False, rewrite_axes=())
    var = render_candidate(op, gpu, dt, shape, v, params, None, st, False)
    assert var != canon
    ok = rewrites.allowed_axes(r["op"], "cuda", r["variant"], r["arch"])
    axes = tuple(a for a in rewrites.author_axes(repr(st), "cuda") if a in ok)
    assert var == rewrites.rewrite(canon, "cuda", axes)
    assert rewrites.canonical(var) == canon
    assert answer_key(var, shape, r["dtype"], "h100") == answer_key(
        canon, shape, r["dtype"], "h100"
    )
    # a key without evidence keeps the canonical text
    assert not rewrites.allowed(r["op"], "cuda", r["variant"], "sm_99")
    # a text never rendered here is its own canonical text (a miss, never another answer)
    assert rewrites.canonical(var + "\n") == var + "\n"


def test_shipped_evidence_has_no_counter_example_where_renders_rewrite() -> None:
    with rewrites.evidence_path().open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["rewrites_version"] == rewrites.REWRITES_VERSION]
    assert rows
    for r in rows:
        assert r["identical"] in ("0", "1") and r["toolchain"] and r["stage"]
        if r["impl"] == "cuda":
            assert r["stage"].startswith("ptx") and r["toolchain"].startswith("nvcc")
        if r["identical"] == "0":  # the axes it compiled together are never all used there
            ok = rewrites.allowed_axes(r["op"], r["impl"], r["variant"], r["arch"])
            assert not set(r["axes"].split("+")) <= ok
    impls = {r["impl"] for r in rows}
    assert impls == {"cuda", "triton"}
