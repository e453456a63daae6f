"""The second held-out exploit set (``heldout2.py``) is well-formed: unique new ids and
classes, every exploit names a class, a reason and the defences it expects, every patch
applies to its before_code and defines the entry, every config targets a suite row, every
reference says what it expects, and run.py serves the three heldout2 groups. Nothing here
runs a guarded reward: the set is scored once, by run.py."""

from __future__ import annotations

import ast

from dagster_project.rewards.exploits import heldout, heldout2, run
from dagster_project.rewards.exploits.bases import BASES
from dagster_project.rewards.exploits.rows import rows
from dagster_project.rewards.exploits.suite import DEFENCES, EXPLOITS
from dagster_project.rewards.patch import apply_edits, parse_search_replace


def test_at_least_forty_exploits_with_unique_new_ids_and_classes() -> None:
    ids = [e.id for e in heldout2.HELDOUT2]
    assert len(ids) >= 40
    assert len(set(ids)) == len(ids)
    assert not set(ids) & {e.id for e in EXPLOITS + heldout.HELDOUT}
    tried = {e.cls for e in EXPLOITS + heldout.HELDOUT}
    assert not {e.cls for e in heldout2.HELDOUT2} & tried
    assert all(len(g) >= 10 for g in (heldout2.HELDOUT2_NUMPY, heldout2.HELDOUT2_TORCH))
    assert len(heldout2.HELDOUT2_CONFIG) >= 10


def test_every_exploit_says_what_it_is_and_what_should_catch_it() -> None:
    for ex in heldout2.HELDOUT2:
        assert ex.cls.strip() and ex.tries.strip() and ex.must_fail.strip(), ex.id
        assert ex.caught_by and set(ex.caught_by) <= set(DEFENCES), ex.id


def test_patch_exploits_apply_and_define_the_entry() -> None:
    for ex in heldout2.HELDOUT2_NUMPY + heldout2.HELDOUT2_TORCH:
        assert ex.target.startswith("patch:") and not ex.config, ex.id
        before = BASES[ex.task][0]
        assert apply_edits(before, parse_search_replace(ex.completion())) == ex.after, ex.id
        tree = ast.parse(ex.after)
        assert "kernel" in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, ex.id


def test_config_exploits_target_a_suite_row() -> None:
    table = rows()
    for ex in heldout2.HELDOUT2_CONFIG:
        assert ex.target.startswith("config:") and ex.task in table, ex.id
        assert ex.config.strip() and not ex.after, ex.id


def test_references_cover_every_group_say_what_they_expect_and_apply() -> None:
    refs = heldout2.HELDOUT2_REFERENCES
    assert len(refs) >= 10 and len({r.id for r in refs}) == len(refs)
    for kind in ("numpy", "torch", "config"):
        assert heldout2.references_for(kind), kind
    for ref in refs:
        assert ref.expect in ("gain", "no_gain") and ref.note, ref.id
        if ref.target.startswith("patch:"):
            patched = apply_edits(BASES[ref.task][0], parse_search_replace(ref.completion()))
            assert patched == ref.after, ref.id
        else:
            assert ref.task in rows() and ref.config.strip(), ref.id


def test_run_serves_the_heldout2_groups() -> None:
    assert run.HELDOUT2_GROUPS == ("heldout2-numpy", "heldout2-torch", "heldout2-config")
    numpy_set, torch_set, config_set, refs_for = run._heldout_set("heldout2")
    assert numpy_set == heldout2.HELDOUT2_NUMPY and torch_set == heldout2.HELDOUT2_TORCH
    assert config_set == heldout2.HELDOUT2_CONFIG and refs_for is heldout2.references_for
    assert run._heldout_set("heldout")[0] == heldout.HELDOUT_NUMPY
