"""Templates render complete sources for every op x rung x arch; Triton parses; slips bite."""

from __future__ import annotations

import ast
import random
import re

import pytest

from dagster_project.sim.codegen import (
    CUDA_SLIPS,
    FAMILY_BUGS,
    TRITON_SLIPS,
    inject_slip,
    render_candidate,
)
from dagster_project.sim.hardware import GPUS
from dagster_project.sim.ops import OPS
from dagster_project.sim.variants import default_params, iter_params, ladder

ARCH_GPUS = ("a100", "a10", "h100", "rtx_5090")
# Jinja left-overs: an expression, a statement tag or a comment that was never rendered
# (PTX operand lists such as "{%0, %1}" and C++ brace-init are legitimate output).
UNRENDERED = re.compile(
    r"\{\{\s*[A-Za-z_][^{}]*\}\}|\{%-?\s*(?:if|for|set|end\w+|else|elif|macro|import|include|filter|call)\b|\{#"
)


def _renders(impl: str):
    rng = random.Random(impl)
    for op in OPS.values():
        for v in ladder(op.family, impl):
            for gid in ARCH_GPUS:
                dtype = op.dtypes[-1] if gid in ("h100", "rtx_5090") else op.dtypes[0]
                shape = op.sample(rng)
                params = default_params(v, op, dtype, shape, GPUS[gid])
                yield op, v, gid, dtype, shape, params


@pytest.mark.parametrize("impl", ["cuda", "triton"])
def test_every_instantiation_renders_completely(impl: str) -> None:
    n = 0
    for op, v, gid, dtype, shape, params in _renders(impl):
        code = render_candidate(op, gid, dtype, shape, v, params)
        n += 1
        assert not UNRENDERED.search(code), (op.name, v.tag, gid, UNRENDERED.search(code))
        assert "TODO" not in code and "placeholder" not in code.lower()
        if impl == "cuda":
            assert "__global__" in code and f"launch_{op.name}(" in code
        else:
            assert "@triton.jit" in code and f"def {op.name}(" in code
            ast.parse(code)
    assert n > 300


def test_triton_candidates_with_random_params_and_bugs_parse() -> None:
    rng = random.Random(3)
    for op in OPS.values():
        for v in ladder(op.family, "triton"):
            shape = op.sample(rng)
            dtype = rng.choice(op.dtypes)
            params = rng.choice(iter_params(v, op, dtype))
            for bug in (None, *FAMILY_BUGS[op.family]):
                ast.parse(render_candidate(op, "h100", dtype, shape, v, params, bug))


def test_bugs_change_the_emitted_code() -> None:
    op = OPS["rmsnorm"]
    v = [x for x in ladder("rowwise", "cuda") if x.tag == "v1_block_reduce"][0]
    shape = {"T": 64, "H": 4096}
    p = {"threads": 256, "unroll": 1}
    clean = render_candidate(op, "a100", "bf16", shape, v, p)
    racy = render_candidate(op, "a100", "bf16", shape, v, p, "missing_sync")
    assert clean.count("__syncthreads()") == racy.count("__syncthreads()") + 1
    eps = render_candidate(op, "a100", "bf16", shape, v, p, "eps_outside")
    assert "rsqrtf(st.v / kN) + eps" in eps


@pytest.mark.parametrize("kind", CUDA_SLIPS)
def test_cuda_slips_point_at_the_changed_line(kind: str) -> None:
    op = OPS["swiglu_act"]
    v = [x for x in ladder("elementwise", "cuda") if x.tag == "v3_fused_ilp"][0]
    code = render_candidate(
        op,
        "a10",
        "bf16",
        {"M": 256, "N": 5632},
        v,
        {"vec": 16, "unroll": 2, "threads": 256, "minb": 1},
    )
    res = inject_slip(code, "cuda", kind, random.Random(0))
    if kind == "legacy_shfl":
        v2 = [x for x in ladder("rowwise", "cuda") if x.tag == "v2_warp_shuffle"][0]
        code = render_candidate(
            OPS["rmsnorm"],
            "a10",
            "bf16",
            {"T": 8, "H": 4096},
            v2,
            {"threads": 256, "unroll": 1, "minb": 1},
        )
        res = inject_slip(code, "cuda", kind, random.Random(0))
    assert res is not None
    bad, slip = res
    assert bad != code
    assert slip.diagnostic.startswith(f"candidate.cu({slip.line}): error:")
    assert slip.key in slip.diagnostic


@pytest.mark.parametrize("kind", TRITON_SLIPS)
def test_triton_slips_stay_parseable(kind: str) -> None:
    op = OPS["rmsnorm"]
    v = [x for x in ladder("rowwise", "triton") if x.tag == "v2_multirow"][0]
    code = render_candidate(
        op, "h100", "bf16", {"T": 64, "H": 4096}, v, {"ROWS": 2, "num_warps": 4}
    )
    res = inject_slip(code, "triton", kind, random.Random(0))
    assert res is not None
    bad, slip = res
    ast.parse(bad)
    assert slip.diagnostic.startswith("triton.compiler.errors.CompilationError: at ")


@pytest.mark.parametrize("impl", ["cuda", "triton"])
def test_bug_probe_renders_like_no_bug_and_names_every_spot(impl: str) -> None:
    """``KernelEnv.bugs_for`` trusts ``BugProbe``: a render with it must equal the clean
    one, and a bug it was never asked about must not change the source. A template that
    tests ``bug`` some other way (``is none``, printing it) breaks this test."""
    from dagster_project.sim.codegen import BugProbe

    asked_any = 0
    for op, v, gid, dtype, shape, params in _renders(impl):
        clean = render_candidate(op, gid, dtype, shape, v, params)
        probe = BugProbe()
        assert render_candidate(op, gid, dtype, shape, v, params, probe) == clean, (op.name, v.tag)
        asked_any += bool(probe.asked)
        for bug in FAMILY_BUGS[op.family]:
            if bug not in probe.asked:
                bad = render_candidate(op, gid, dtype, shape, v, params, bug)
                assert bad == clean, (op.name, v.tag, gid, bug)
    assert asked_any  # the probe does see the templates' questions
