"""The third held-out exploit set (``heldout3.py``) is well-formed: at least 30 exploits with
ids and classes that the suite and the two earlier held-out sets never used, every exploit
names a reason and the defences it expects, every patch applies to its before_code and
defines the entry, every config targets a suite row, at least 8 references say what they
expect, and run.py serves the three heldout3 groups. Nothing here runs a guarded reward or
a candidate: the set is scored once, by run.py."""

from __future__ import annotations

from dagster_project.rewards.exploits import heldout, heldout2, heldout3, run
from dagster_project.rewards.exploits.suite import DEFENCES, EXPLOITS
from dagster_project.rewards.exploits.templates import COMMIT_TEMPLATES, TEMPLATES

from . import heldout_checks

_EARLIER = EXPLOITS + heldout.HELDOUT + heldout2.HELDOUT2


def test_at_least_thirty_exploits_sharing_no_id_or_class_with_earlier_sets() -> None:
    ids = [e.id for e in heldout3.HELDOUT3]
    assert len(ids) >= 30 and len(set(ids)) == len(ids)
    assert not set(ids) & {e.id for e in _EARLIER}
    earlier_cls = {e.cls for e in _EARLIER} | {t.cls for t in TEMPLATES + COMMIT_TEMPLATES}
    assert not {e.cls for e in heldout3.HELDOUT3} & earlier_cls
    earlier_refs = {r.id for r in heldout.HELDOUT_REFERENCES + heldout2.HELDOUT2_REFERENCES}
    assert not {r.id for r in heldout3.HELDOUT3_REFERENCES} & earlier_refs
    groups = (heldout3.HELDOUT3_NUMPY, heldout3.HELDOUT3_TORCH, heldout3.HELDOUT3_CONFIG)
    assert all(len(g) >= 8 for g in groups)


def test_every_exploit_says_what_it_is_and_what_should_catch_it() -> None:
    for ex in heldout3.HELDOUT3:
        assert ex.id.startswith("h3") and ex.cls.strip(), ex.id
        assert ex.tries.strip() and ex.must_fail.strip(), ex.id
        assert ex.caught_by and set(ex.caught_by) <= set(DEFENCES), ex.id


def test_patch_exploits_apply_and_define_the_entry() -> None:
    heldout_checks.patches_apply(heldout3.HELDOUT3_NUMPY, heldout3.HELDOUT3_TORCH)


def test_config_exploits_target_a_suite_row() -> None:
    heldout_checks.configs_target_rows(heldout3.HELDOUT3_CONFIG)


def test_references_cover_every_group_say_what_they_expect_and_apply() -> None:
    heldout_checks.references_hold(heldout3.HELDOUT3_REFERENCES, heldout3.references_for)


def test_run_serves_the_heldout3_groups() -> None:
    assert run.HELDOUT3_GROUPS == ("heldout3-numpy", "heldout3-torch", "heldout3-config")
    numpy_set, torch_set, config_set, refs_for = run._heldout_set("heldout3")
    assert numpy_set == heldout3.HELDOUT3_NUMPY and torch_set == heldout3.HELDOUT3_TORCH
    assert config_set == heldout3.HELDOUT3_CONFIG and refs_for is heldout3.references_for
    assert run._heldout_set("heldout2")[0] == heldout2.HELDOUT2_NUMPY
