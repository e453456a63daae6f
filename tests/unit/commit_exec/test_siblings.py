"""Sibling modules at the row's sha: the materialiser writes them from a real git repo at
``sha^`` and ``sha``, the loader imports each side's own, side by side in one process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import polars as pl

from dagster_project.commit_exec.device.loader import load_file, module_of, package_of
from dagster_project.commit_exec.materialise import materialise, write_siblings
from dagster_project.commit_exec.specs import spec_for

_PKG = "vllm/lora/ops/triton_ops"
_ROW = f"{_PKG}/lora_expand_op.py"
# the row's file: a module-level absolute import, a relative one, and one inside a function
# (run at call time, as SGLang's chunk_intra imports kda)
_ROW_CODE = (
    "from vllm.lora.ops.triton_ops.kernel_utils import helper\n"
    "from .utils import TILE\n"
    "from vllm.envs import ANYTHING\n"
    "def run():\n"
    "    from vllm.lora.ops.triton_ops.late import late\n"
    "    return helper(), TILE, late()\n"
)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _commit(repo: Path, files: dict[str, str], msg: str) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", msg)
    return _git(repo, "rev-parse", "HEAD")


def _side_files(version: int) -> dict[str, str]:
    return {
        _ROW: _ROW_CODE,
        f"{_PKG}/kernel_utils.py": f"def helper():\n    return {version}\n",
        f"{_PKG}/utils.py": f"TILE = {16 * version}\n",
        f"{_PKG}/late.py": f"def late():\n    return 'v{version}'\n",
    }


def test_write_siblings_takes_each_side_from_its_commit(tmp_path: Path) -> None:
    repo = tmp_path / "vllm"
    repo.mkdir()
    _git(repo, "init", "-q")
    _commit(repo, _side_files(1), "one")
    sha = _commit(repo, _side_files(2), "two")
    sibs = (f"{_PKG}/kernel_utils.py", f"{_PKG}/utils.py", f"{_PKG}/late.py", f"{_PKG}/gone.py")
    folder = tmp_path / "work" / "row1"
    folder.mkdir(parents=True)
    (folder / "before.py").write_text(_ROW_CODE)
    (folder / "after.py").write_text(_ROW_CODE)
    written = write_siblings(repo / ".git", sha, _ROW, sibs, folder)
    assert written["before"] == list(sibs[:3])  # gone.py exists at neither commit
    assert "return 1" in (folder / "before_siblings" / sibs[0]).read_text()
    assert "return 2" in (folder / "after_siblings" / sibs[0]).read_text()
    assert json.loads((folder / "siblings.json").read_text())["path"] == _ROW

    package = package_of(_ROW)
    before = load_file(folder / "before.py", "_t_sib_before", package)
    after = load_file(folder / "after.py", "_t_sib_after", package)
    copy = load_file(folder / "before.py", "_t_sib_bcopy", package)
    # each side runs its own commit's helpers, including the one imported at call time
    assert before.run() == (1, 16, "v1")
    assert after.run() == (2, 32, "v2")
    assert copy.run() == (1, 16, "v1")
    assert before.helper is not copy.helper  # a copy has its own modules
    assert not before.ANYTHING  # names that are not siblings stay stubs


def test_sibling_may_import_the_rows_own_file(tmp_path: Path) -> None:
    # vLLM's kernel_utils.py row: the launcher (lora_shrink_op.py) is the sibling and
    # imports the row's file by its package name, which must be this side's row module
    folder = tmp_path / "row2"
    (folder / "before_siblings" / _PKG).mkdir(parents=True)
    (folder / "before.py").write_text("def mm_k():\n    return 'row'\n")
    (folder / "before_siblings" / _PKG / "lora_shrink_op.py").write_text(
        "from vllm.lora.ops.triton_ops.kernel_utils import mm_k\ndef launch():\n    return mm_k()\n"
    )
    (folder / "siblings.json").write_text(json.dumps({"path": f"{_PKG}/kernel_utils.py"}))
    mod = load_file(folder / "before.py", "_t_sib_row2", package_of(_PKG + "/x.py"))
    launcher = mod._ce_sibling(f"{module_of(_PKG + '/x.py').rpartition('.')[0]}.lora_shrink_op")
    assert launcher.launch() == "row"
    assert launcher.mm_k is mod.mm_k


def test_without_siblings_the_loader_stubs_as_before(tmp_path: Path) -> None:
    f = tmp_path / "before.py"
    f.write_text("from .kernel_utils import helper\n")
    mod = load_file(f, "_t_nosib", "vllm.lora.ops.triton_ops")
    assert not isinstance(mod.helper, int) and not mod.helper  # a Stub


def test_materialise_writes_siblings_only_with_clones(tmp_path: Path) -> None:
    spec = next(
        s
        for s in __import__("dagster_project.commit_exec.specs", fromlist=["SPECS"]).SPECS
        if s.siblings
    )
    repo_name, sha, path = spec.rows[0]
    assert spec_for(repo_name, sha + "0" * 32, path) is spec
    rows = pl.DataFrame(
        {
            "id": ["r1"],
            "repo": [repo_name],
            "sha": [sha + "0" * (40 - len(sha))],
            "path": [path],
            "before_code": ["x = 1\n"],
            "after_code": ["x = 2\n"],
        }
    )
    manifest = materialise(rows, tmp_path / "w")
    assert "siblings" not in manifest[0]
    assert not (tmp_path / "w" / "r1" / "siblings.json").exists()


def test_engine_logger_shim_has_vllms_once_methods(tmp_path: Path) -> None:
    # vLLM's LoRA utils.py calls logger.warning_once(..., scope=...) while picking configs
    f = tmp_path / "utils.py"
    f.write_text(
        "from vllm.logger import init_logger\n"
        "logger = init_logger(__name__)\n"
        "def pick():\n"
        "    logger.warning_once('no config %s', 'x', scope='local')\n"
        "    logger.info_once('defaults')\n"
        "    return 1\n"
    )
    assert load_file(f, "_t_logger_once", "vllm.lora.ops.triton_ops").pick() == 1


def test_lora_op_rows_name_their_siblings() -> None:
    ops = "vllm/lora/ops/triton_ops"
    cases = {
        ("d4d1a6024f526129941d2fecaec504d93f9072ed", "lora_shrink_op.py"): "kernel_utils.py",
        ("ffe1fc7a28841973135b981fb68ce515b409a236", "lora_expand_op.py"): "kernel_utils.py",
        ("40e2eeeb92d926b9773c4ed339375d26b10456e2", "kernel_utils.py"): "lora_shrink_op.py",
    }
    for (sha, name), sibling in cases.items():
        spec = spec_for("vllm", sha, f"{ops}/{name}")
        assert spec is not None, name
        assert f"{ops}/{sibling}" in spec.siblings_for(sha)
        assert f"{ops}/utils.py" in spec.siblings_for(sha)


def test_kda_chunk_intra_rows_import_kda_at_their_commit() -> None:
    fla = "python/sglang/srt/layers/attention/fla"
    for sha in (
        "48daa831ead725e62ff37de5bacf89b35bdd0d78",
        "a61a14f416c4003809a82112b4a591eec38a0a10",
    ):
        spec = spec_for("sglang", sha, f"{fla}/chunk_intra.py")
        assert spec is not None and spec.name == "sglang_kda_chunk_fwd_intra"
        assert f"{fla}/kda.py" in spec.siblings_for(sha)
        assert f"{fla}/chunk_intra_token_parallel.py" in spec.siblings_for(sha)


def test_sandbox_layout_gives_both_sides_the_tasks_siblings(tmp_path: Path) -> None:
    """``run_candidate(siblings=...)`` writes one tree (the task's, at ``sha^``) for the
    before file and the candidate, in the loader's layout: both import the same helpers
    as real modules, each in a namespace of its own."""
    from dagster_project.commit_exec.sandbox import write_sibling_sides

    files = _side_files(1)
    sibs = {rel: text for rel, text in files.items() if rel != _ROW}
    (tmp_path / "before.py").write_text(_ROW_CODE)
    (tmp_path / "candidate.py").write_text(_ROW_CODE.replace("helper(), TILE", "helper(), -TILE"))
    write_sibling_sides(tmp_path, _ROW, sibs, ("before", "candidate"))
    package = package_of(_ROW)
    before = load_file(tmp_path / "before.py", "_t_sand_before", package)
    cand = load_file(tmp_path / "candidate.py", "_t_sand_cand", package)
    assert before.run() == (1, 16, "v1")
    assert cand.run() == (1, -16, "v1")  # the candidate's own edit, the same helpers
    assert before.helper is not cand.helper


def test_sandbox_layout_refuses_a_path_out_of_its_folder(tmp_path: Path) -> None:
    from dagster_project.commit_exec.sandbox import write_sibling_sides

    for rel in ("../escape.py", "/abs/escape.py"):
        try:
            write_sibling_sides(tmp_path, _ROW, {rel: "x = 1\n"}, ("before",))
        except ValueError as exc:
            assert "leaves its folder" in str(exc)
        else:
            raise AssertionError(f"{rel} was written")
    assert not (tmp_path.parent / "escape.py").exists()


def test_reward_siblings_without_their_clone_name_it(tmp_path: Path) -> None:
    """``sibling_texts`` for a row whose spec imports siblings: no clone is a clear error
    naming it (stubs would only score run_error); a row without siblings needs none."""
    from dagster_project.commit_exec.materialise import sibling_texts
    from dagster_project.commit_exec.specs import SPECS

    spec = next(s for s in SPECS if s.siblings)
    repo_name, sha, path = spec.rows[0]
    full = sha + "0" * (40 - len(sha))
    try:
        sibling_texts(tmp_path, repo_name, full, path)
    except FileNotFoundError as exc:
        assert f"{repo_name}.git" in str(exc) and "repos=" in str(exc)
    else:
        raise AssertionError("a missing clone passed silently")
    assert sibling_texts(tmp_path, "vllm", "f" * 40, "vllm/not/a/kernel.py") == {}
