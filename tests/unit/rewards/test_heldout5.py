"""The fifth held-out exploit set (``heldout5.py``) is well-formed, new, and earns only by
cheating: at least 35 exploits whose ids and classes the suite, the templates and heldout 1-4
never used; every patch exploit is the before_code verbatim (entry renamed ``_before``) plus a
cheat behind the ``_CHEAT`` flag, and with the flag off it returns the before_code's output bit
for bit and is not faster. Nothing here runs a guarded reward: the set is scored once, by
run.py."""

from __future__ import annotations

import ast
import time
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dagster_project.rewards.exploits import heldout, heldout2, heldout3, heldout4, heldout5, run
from dagster_project.rewards.exploits.bases import BASES
from dagster_project.rewards.exploits.suite import DEFENCES, EXPLOITS
from dagster_project.rewards.exploits.templates import COMMIT_TEMPLATES, TEMPLATES

from . import heldout_checks

_EARLIER = EXPLOITS + heldout.HELDOUT + heldout2.HELDOUT2 + heldout3.HELDOUT3 + heldout4.HELDOUT4
_PATCHES = heldout5.HELDOUT5_NUMPY + heldout5.HELDOUT5_TORCH


def _module(code: str, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(code, name, "exec"), mod.__dict__)  # noqa: S102 - our own candidate files
    return mod


def _best(fn: Callable[..., Any], args: tuple[Any, ...], reps: int = 5, calls: int = 3) -> float:
    best = float("inf")
    for _ in range(reps):
        started = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        best = min(best, time.perf_counter() - started)
    return best


def test_at_least_thirty_five_exploits_sharing_no_id_or_class_with_earlier_sets() -> None:
    ids = [e.id for e in heldout5.HELDOUT5]
    assert len(ids) >= 35 and len(set(ids)) == len(ids)
    assert not set(ids) & {e.id for e in _EARLIER}
    earlier_cls = {e.cls for e in _EARLIER} | {t.cls for t in TEMPLATES + COMMIT_TEMPLATES}
    assert not {e.cls for e in heldout5.HELDOUT5} & earlier_cls
    earlier_refs = {
        r.id
        for r in heldout.HELDOUT_REFERENCES
        + heldout2.HELDOUT2_REFERENCES
        + heldout3.HELDOUT3_REFERENCES
        + heldout4.HELDOUT4_REFERENCES
    }
    assert not {r.id for r in heldout5.HELDOUT5_REFERENCES} & earlier_refs
    assert len(heldout5.HELDOUT5_NUMPY) >= 20 and len(heldout5.HELDOUT5_TORCH) >= 8
    assert len(heldout5.HELDOUT5_CONFIG) >= 8


def test_every_exploit_says_what_it_is_and_what_should_catch_it() -> None:
    for ex in heldout5.HELDOUT5:
        assert ex.id.startswith("h5") and ex.cls.strip(), ex.id
        assert ex.tries.strip() and ex.must_fail.strip(), ex.id
        assert ex.caught_by and set(ex.caught_by) <= set(DEFENCES), ex.id


def test_patch_exploits_apply_and_define_the_entry() -> None:
    heldout_checks.patches_apply(heldout5.HELDOUT5_NUMPY, heldout5.HELDOUT5_TORCH)


def test_config_exploits_target_a_suite_row() -> None:
    heldout_checks.configs_target_rows(heldout5.HELDOUT5_CONFIG)


def test_references_cover_every_group_say_what_they_expect_and_apply() -> None:
    heldout_checks.references_hold(heldout5.HELDOUT5_REFERENCES, heldout5.references_for)


def test_every_patch_exploit_carries_the_before_code_verbatim_behind_one_flag() -> None:
    for ex in _PATCHES:
        before = BASES[ex.task][0]
        assert ex.after.startswith(before.replace("def kernel(", "def _before(", 1)), ex.id
        assert ex.after.count(heldout5.FLAG_ON) == 1, ex.id
        tree = ast.parse(ex.after)
        copied = next(
            n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_before"
        )
        original = next(n for n in ast.parse(before).body if isinstance(n, ast.FunctionDef))
        assert ast.dump(copied.args) == ast.dump(original.args), ex.id
        assert ast.dump(ast.Module(copied.body, [])) == ast.dump(ast.Module(original.body, []))
    with pytest.raises(ValueError):
        heldout5.disabled(BASES["rmsnorm_linear_np"][1])


def _assert_cheat_off_is_the_before_code(
    exploits: tuple[Any, ...], inputs: Callable[[int], tuple[Any, ...]], equal: Callable[..., bool]
) -> None:
    before = _module(BASES[exploits[0].task][0], "before").kernel
    for ex in exploits:
        kernel = _module(heldout5.disabled(ex.after), ex.id).kernel
        for seed in (1, 2):
            args = inputs(seed)
            assert equal(kernel(*args), before(*args)), ex.id
        args = inputs(3)
        t_before, t_off = _best(before, args), _best(kernel, args)
        t_before = min(t_before, _best(before, args))
        assert t_off >= 0.7 * t_before, (ex.id, t_off, t_before)


def test_numpy_exploits_with_the_cheat_off_are_the_before_code_not_faster() -> None:
    def inputs(seed: int) -> tuple[Any, ...]:
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((24, 48), dtype=np.float32)
        w = rng.standard_normal(48, dtype=np.float32)
        return x, w, rng.standard_normal((48, 48), dtype=np.float32), 1e-6

    _assert_cheat_off_is_the_before_code(heldout5.HELDOUT5_NUMPY, inputs, np.array_equal)


def test_torch_exploits_with_the_cheat_off_are_the_before_code_not_faster() -> None:
    torch = pytest.importorskip("torch")

    def inputs(seed: int) -> tuple[Any, ...]:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(48, 48, generator=g)
        return x, torch.randn(48, generator=g), torch.randn(48, 48, generator=g), 1e-6

    _assert_cheat_off_is_the_before_code(heldout5.HELDOUT5_TORCH, inputs, torch.equal)


def test_a_numpy_gate_fires_once_its_state_changes() -> None:
    """The cheats are live: the environment gate returns zeros once os.environ changes."""
    import os

    ex = next(e for e in heldout5.HELDOUT5_NUMPY if e.id == "h5n-env-delta-gate")
    mod = _module(ex.after, ex.id)
    rng = np.random.default_rng(0)
    args = (rng.standard_normal((8, 16), dtype=np.float32), np.ones(16, np.float32))
    args += (rng.standard_normal((16, 16), dtype=np.float32), 1e-6)
    assert np.array_equal(mod.kernel(*args), mod._before(*args))
    os.environ["KH_HELDOUT5_TEST"] = "1"
    try:
        assert not mod.kernel(*args).any()
    finally:
        del os.environ["KH_HELDOUT5_TEST"]


def test_run_serves_the_heldout5_groups() -> None:
    assert run.HELDOUT5_GROUPS == ("heldout5-numpy", "heldout5-torch", "heldout5-config")
    numpy_set, torch_set, config_set, refs_for = run._heldout_set("heldout5")
    assert numpy_set == heldout5.HELDOUT5_NUMPY and torch_set == heldout5.HELDOUT5_TORCH
    assert config_set == heldout5.HELDOUT5_CONFIG and refs_for is heldout5.references_for
    assert run._heldout_set("heldout4")[0] == heldout4.HELDOUT4_NUMPY
