"""Reward 3 (stop 43): a completion may edit the row's sibling modules; the candidate side
imports them as edited, ``before`` as they were at ``sha^``. The routing of ``### path``
blocks, the oracle completion of a multi-file commit, and the two trees the sandbox writes,
loaded by the real loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagster_project.commit_exec.device.loader import load_file, package_of
from dagster_project.commit_exec.sandbox import write_task
from dagster_project.rewards import commit_reward as R
from dagster_project.rewards.guard.commits import guarded_commit_reward

_PKG = "vllm/model_executor/layers/fla/ops"
ROW = f"{_PKG}/kda.py"
UTILS = f"{_PKG}/utils.py"
REC = f"{_PKG}/fused_recurrent.py"
BEFORE = "from .utils import scale\ndef run():\n    return scale() + 1\n"
AFTER = "from .utils import scale, shift\ndef run():\n    return scale() + shift()\n"
SIBS = {UTILS: "def scale():\n    return 10\n", REC: "STATE = 'nkv'\n"}
SIBS_AFTER = {
    UTILS: "def scale():\n    return 10\ndef shift():\n    return 2\n",
    REC: "STATE = 'nvk'\n",
}


def _block(search: str, replace: str, path: str | None = None) -> str:
    head = f"### {path}\n" if path else ""
    return f"{head}<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


@pytest.mark.parametrize(
    "name",
    [UTILS, "utils.py", f"a/{UTILS}", f"./{UTILS}", f"`{UTILS}`", "ops/utils.py"],
)
def test_a_block_under_a_siblings_path_edits_that_sibling(name: str) -> None:
    done = R.patched_files(_block("    return 10\n", "    return 11\n", name), BEFORE, ROW, SIBS)
    assert done is not None
    code, sibs = done
    assert code == BEFORE
    assert sibs == {**SIBS, UTILS: "def scale():\n    return 11\n"}


@pytest.mark.parametrize("name", [None, ROW, "kda.py", "other/file.py", "ops"])
def test_a_block_naming_no_sibling_edits_the_rows_file(name: str | None) -> None:
    """As under reward 2, whatever path a one-file completion writes."""
    text = _block("    return scale() + 1\n", "    return scale() + 2\n", name)
    done = R.patched_files(text, BEFORE, ROW, SIBS)
    assert done == (BEFORE.replace("+ 1", "+ 2"), SIBS)
    assert R.patched(text, BEFORE) == BEFORE.replace("+ 1", "+ 2")


def test_an_ambiguous_tail_goes_to_the_rows_file() -> None:
    two = {"a/x/utils.py": "u = 1\n", "b/y/utils.py": "u = 1\n"}
    done = R.patched_files(_block("u = 1\n", "u = 2\n", "utils.py"), "u = 1\n", "row.py", two)
    assert done == ("u = 2\n", two)


def test_blocks_apply_in_order_each_to_its_file_and_any_miss_is_malformed() -> None:
    text = (
        _block("def run():\n", "def run():  # edited\n")
        + _block("STATE = 'nkv'\n", "STATE = 'x'\n", REC)
        + _block("STATE = 'x'\n", "STATE = 'y'\n", REC)
    )
    code, sibs = R.patched_files(text, BEFORE, ROW, SIBS) or ("", {})
    assert "# edited" in code and sibs[REC] == "STATE = 'y'\n" and sibs[UTILS] == SIBS[UTILS]
    missing = _block("not there\n", "x\n", UTILS)
    assert R.patched_files(missing, BEFORE, ROW, SIBS) is None
    assert R.execution_reward(missing, {"before_code": BEFORE, "path": ROW}, siblings=SIBS) == (
        R.MALFORMED_REWARD
    )


def test_the_oracle_completion_is_the_whole_commit() -> None:
    """Both sides of the commit: the row's file and every sibling it changed; a sibling the
    commit added cannot be edited into place and is not named."""
    added = {**SIBS_AFTER, f"{_PKG}/new.py": "NEW = 1\n"}
    text, edited = R.oracle_completion(BEFORE, AFTER, ROW, SIBS, added)
    assert edited == sorted([UTILS, REC])
    assert R.patched_files(text, BEFORE, ROW, SIBS) == (AFTER, SIBS_AFTER)
    one, none = R.oracle_completion(BEFORE, AFTER, ROW)
    assert none == [] and R.patched(one, BEFORE) == AFTER


def test_the_sandbox_gives_each_side_its_own_tree(tmp_path: Path) -> None:
    """``before`` imports the siblings at ``sha^``; the candidate the edited ones, each in
    a namespace of its own (the real loader, as the harness process loads them)."""
    text, _ = R.oracle_completion(BEFORE, AFTER, ROW, SIBS, SIBS_AFTER)
    code, edited = R.patched_files(text, BEFORE, ROW, SIBS) or ("", {})
    write_task(tmp_path, ROW, BEFORE, code, SIBS, edited)
    package = package_of(ROW)
    before = load_file(tmp_path / "before.py", "_t_r3_before", package)
    cand = load_file(tmp_path / "candidate.py", "_t_r3_cand", package)
    assert before.run() == 11  # scale() + 1 with the sha^ helpers
    assert cand.run() == 12  # scale() + shift(): shift exists only in the edited utils
    with pytest.raises(ValueError, match="same paths"):
        write_task(tmp_path / "x", ROW, BEFORE, code, SIBS, {UTILS: ""})


def test_the_guard_checks_an_edited_sibling_too() -> None:
    """A sibling runs in the candidate's process as much as the row's file does: what an
    edit adds there is checked statically like the row's own edit."""
    hostile = _block("    return 10\n", "    import os\n    os.system('x')\n    return 10\n", UTILS)
    row = {"id": "x", "repo": "vllm", "sha": "0" * 40, "path": ROW, "before_code": BEFORE}
    got = guarded_commit_reward(hostile, row, siblings=SIBS)
    assert got.defence == "static" and got.reward == -1.0
