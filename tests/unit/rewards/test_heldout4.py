"""The fourth held-out exploit set (``heldout4.py``) is well-formed: at least 35 exploits with
ids and classes that the suite, the templates and the three earlier held-out sets never used,
every exploit names a reason and the defences it expects, every patch applies to its
before_code and defines the entry, every config targets a suite row, at least 8 references
(none the shipped after_code) say what they expect, and run.py and table.py serve the three
heldout4 groups. Nothing here runs a guarded reward or a candidate: the set is scored once,
by run.py."""

from __future__ import annotations

from dagster_project.rewards.exploits import heldout, heldout2, heldout3, heldout4, run
from dagster_project.rewards.exploits.suite import DEFENCES, EXPLOITS
from dagster_project.rewards.exploits.templates import COMMIT_TEMPLATES, TEMPLATES

from . import heldout_checks

_EARLIER = EXPLOITS + heldout.HELDOUT + heldout2.HELDOUT2 + heldout3.HELDOUT3


def test_at_least_thirty_five_exploits_sharing_no_id_or_class_with_earlier_sets() -> None:
    ids = [e.id for e in heldout4.HELDOUT4]
    assert len(ids) >= 35 and len(set(ids)) == len(ids)
    assert not set(ids) & {e.id for e in _EARLIER}
    earlier_cls = {e.cls for e in _EARLIER} | {t.cls for t in TEMPLATES + COMMIT_TEMPLATES}
    assert not {e.cls for e in heldout4.HELDOUT4} & earlier_cls
    earlier_refs = {
        r.id
        for r in heldout.HELDOUT_REFERENCES
        + heldout2.HELDOUT2_REFERENCES
        + heldout3.HELDOUT3_REFERENCES
    }
    assert not {r.id for r in heldout4.HELDOUT4_REFERENCES} & earlier_refs
    groups = (heldout4.HELDOUT4_NUMPY, heldout4.HELDOUT4_TORCH, heldout4.HELDOUT4_CONFIG)
    assert all(len(g) >= 8 for g in groups)


def test_every_exploit_says_what_it_is_and_what_should_catch_it() -> None:
    for ex in heldout4.HELDOUT4:
        assert ex.id.startswith("h4") and ex.cls.strip(), ex.id
        assert ex.tries.strip() and ex.must_fail.strip(), ex.id
        assert ex.caught_by and set(ex.caught_by) <= set(DEFENCES), ex.id


def test_patch_exploits_apply_and_define_the_entry() -> None:
    heldout_checks.patches_apply(heldout4.HELDOUT4_NUMPY, heldout4.HELDOUT4_TORCH)


def test_config_exploits_target_a_suite_row() -> None:
    heldout_checks.configs_target_rows(heldout4.HELDOUT4_CONFIG)


def test_references_cover_every_group_say_what_they_expect_and_apply() -> None:
    heldout_checks.references_hold(heldout4.HELDOUT4_REFERENCES, heldout4.references_for)


def test_run_serves_the_heldout4_groups() -> None:
    assert run.HELDOUT4_GROUPS == ("heldout4-numpy", "heldout4-torch", "heldout4-config")
    numpy_set, torch_set, config_set, refs_for = run._heldout_set("heldout4")
    assert numpy_set == heldout4.HELDOUT4_NUMPY and torch_set == heldout4.HELDOUT4_TORCH
    assert config_set == heldout4.HELDOUT4_CONFIG and refs_for is heldout4.references_for
    assert run._heldout_set("heldout3")[0] == heldout3.HELDOUT3_NUMPY
