"""Caches on the render path change no text: the shared macro module and the line memo."""

from __future__ import annotations

import random
import re
from importlib import resources

import pytest

from dagster_project.sim import env as sim_env
from dagster_project.sim.codegen import _env, render_candidate
from dagster_project.sim.hardware import GPUS
from dagster_project.sim.ops import OPS
from dagster_project.sim.styles import style_for_seed
from dagster_project.sim.variants import default_params, ladder


def _cases(impl: str, n: int) -> list[tuple[object, ...]]:
    """``n`` varied candidates (op, rung, GPU, dtype, shape, params, author) of one impl."""
    rng = random.Random(f"render-caches/{impl}")
    ops = list(OPS.values())
    out: list[tuple[object, ...]] = []
    while len(out) < n:
        op = rng.choice(ops)
        v = rng.choice(ladder(op.family, impl))
        gid = rng.choice(("a100", "a10", "h100", "rtx_5090"))
        dtype = rng.choice(op.dtypes)
        shape = op.sample(rng)
        params = default_params(v, op, dtype, shape, GPUS[gid])
        out.append((op, gid, dtype, shape, v, params, style_for_seed(len(out))))
    return out


def test_templates_import_common_without_context() -> None:
    """Jinja caches an imported module once per environment only when it is imported
    without context; the macros then read nothing but their arguments."""
    root = resources.files("dagster_project.sim").joinpath("templates")
    for impl in ("cuda", "triton"):
        for f in root.joinpath(impl).iterdir():
            if not f.name.endswith(".j2"):
                continue
            text = f.read_text()
            assert "with context" not in text, f.name
            if "_common" in text and not f.name.startswith("_common"):
                assert re.search(r'\{% import "\w+/_common\.[a-z.]+\.j2" as c %\}', text), f.name


@pytest.mark.parametrize("impl", ["cuda", "triton"])
def test_cached_module_render_equals_fresh_render(impl: str) -> None:
    """A render through the module cached by earlier renders (other ops, GPUs, dtypes,
    authors) equals the same render in a fresh environment, whose first render builds
    the module anew: nothing of an earlier render's context leaks through the cache."""
    cases = _cases(impl, 12)
    warm = [render_candidate(*c[:6], style=c[6]) for c in cases]  # type: ignore[arg-type]
    _env.cache_clear()
    try:
        for c, text in zip(reversed(cases), reversed(warm), strict=True):
            _env.cache_clear()  # every render below is its environment's first
            assert render_candidate(*c[:6], style=c[6]) == text  # type: ignore[arg-type]
    finally:
        _env.cache_clear()


def test_line_memo_normalises_like_one_substitution(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_normalised`` (line by line through the shared memo, cleared when full) equals one
    digit substitution over the whole file followed by stripping each line."""
    monkeypatch.setattr(sim_env, "_LINE_MEMO_MAX", 50)  # clear the memo many times over
    sim_env._normalised.cache_clear()
    try:
        for impl in ("cuda", "triton"):
            for c in _cases(impl, 6):
                code = render_candidate(*c[:6], style=c[6])  # type: ignore[arg-type]
                code += "\n  x1 = 22;\t\n\n#3 9x  "  # digits at the edges, blank lines
                want = tuple(ln.strip() for ln in re.sub(r"\d+", "#", code).split("\n"))
                assert sim_env._normalised(code) == want
    finally:
        sim_env._normalised.cache_clear()
