"""Checks every held-out exploit set must pass (test_heldout3.py, test_heldout4.py call them
with their set): patches apply to their before_code and define the entry, configs target a
suite row, references say what they expect and are not the shipped after_code."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import Any

from dagster_project.rewards.exploits.bases import BASES
from dagster_project.rewards.exploits.rows import rows
from dagster_project.rewards.patch import apply_edits, parse_search_replace


def patches_apply(numpy_set: Sequence[Any], torch_set: Sequence[Any]) -> None:
    for ex in [*numpy_set, *torch_set]:
        assert ex.target.startswith("patch:") and not ex.config, ex.id
        assert apply_edits(BASES[ex.task][0], parse_search_replace(ex.completion())) == ex.after
        tree = ast.parse(ex.after)
        defs = (ast.FunctionDef, ast.AsyncFunctionDef)  # an entry may be a coroutine function
        assert "kernel" in {n.name for n in tree.body if isinstance(n, defs)}, ex.id
    assert all(e.task == "rmsnorm_linear_np" for e in numpy_set)
    assert all(e.task == "rmsnorm_linear_torch" for e in torch_set)


def configs_target_rows(config_set: Sequence[Any]) -> None:
    table = rows()
    for ex in config_set:
        assert ex.target.startswith("config:") and ex.task in table, ex.id
        assert ex.config.strip() and not ex.after, ex.id


def references_hold(refs: Sequence[Any], references_for: Callable[[str], Any]) -> None:
    assert len(refs) >= 8 and len({r.id for r in refs}) == len(refs)
    for kind in ("numpy", "torch", "config"):
        assert references_for(kind), kind
    for ref in refs:
        assert ref.expect in ("gain", "no_gain") and ref.note, ref.id
        if ref.target.startswith("patch:"):
            assert ref.after != BASES[ref.task][1], ref.id  # not the shipped after_code
            patched = apply_edits(BASES[ref.task][0], parse_search_replace(ref.completion()))
            assert patched == ref.after, ref.id
        else:
            assert ref.task in rows() and ref.config.strip(), ref.id
