"""The standalone reward.py: stdlib only, and it scores exactly like the package."""

from __future__ import annotations

import ast
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from dagster_project import rewards
from dagster_project.rewards import render_reward_module
from tests.unit.rewards.generators import random_pair

BEST = {
    "BLOCK_SIZE_M": 64,
    "BLOCK_SIZE_N": 64,
    "BLOCK_SIZE_K": 128,
    "GROUP_SIZE_M": 8,
    "num_warps": 8,
    "num_stages": 2,
}


def _load(text: str) -> dict:
    namespace: dict = {"__name__": "reward"}
    exec(compile(text, "reward.py", "exec"), namespace)
    return namespace


def test_rendered_module_imports_only_the_standard_library() -> None:
    text = render_reward_module()
    assert "dagster" not in text.replace("dagster_project.rewards", "")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            tops = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import left in reward.py"
            tops = [(node.module or "").split(".")[0]]
        else:
            continue
        for top in tops:
            assert top == "__future__" or top in sys.stdlib_module_names, top


def test_rendered_module_exports_the_public_api() -> None:
    namespace = _load(render_reward_module())
    for name in (
        "patch_reward",
        "oracle_edit",
        "config_reward",
        "patch_reward_fn",
        "config_reward_fn",
        "parse_search_replace",
        "config_reward_distribution",
    ):
        assert callable(namespace[name]), name
    assert set(namespace["__all__"]) <= set(namespace)


def test_rendered_module_gives_the_same_scores() -> None:
    namespace = _load(render_reward_module())
    rng = random.Random(5)
    for _ in range(200):
        before, after = random_pair(rng)
        other_before, other_after = random_pair(rng)
        for completion in (
            rewards.oracle_edit(before, after),
            rewards.oracle_edit(before, other_after),
            rewards.oracle_edit(other_before, after),
            "not an edit",
        ):
            assert namespace["oracle_edit"](before, after) == rewards.oracle_edit(before, after)
            assert namespace["patch_reward"](completion, before, after) == rewards.patch_reward(
                completion, before, after
            )
    completions = [json.dumps({**BEST, "BLOCK_SIZE_M": m}) for m in (16, 32, 64, 128, 48)]
    for speedup in (None, 1.1, 2.0):
        for completion in completions:
            assert namespace["config_reward"](completion, BEST, speedup) == rewards.config_reward(
                completion, BEST, speedup
            )
    chats = [[{"role": "assistant", "content": c}] for c in completions]
    kwargs: dict[str, Any] = {
        "best_config": [json.dumps(BEST)] * 5,
        "prompts": ["p"] * 5,
        "M": [1] * 5,
    }
    assert namespace["config_reward_fn"](chats, **kwargs) == rewards.config_reward_fn(
        chats, **kwargs
    )


def test_rendered_module_runs_as_a_file_in_a_bare_interpreter(tmp_path: Path) -> None:
    """Written to disk and imported by a plain ``python -I`` (no kernelhouse on the path)."""
    (tmp_path / "reward.py").write_text(render_reward_module())
    script = (
        "import sys\n"
        "sys.path.insert(0, '.')\n"
        "import reward\n"
        "b, a = 'x = 1\\ny = 2\\n', 'x = 1\\ny = 3\\n'\n"
        "print(reward.patch_reward_fn([reward.oracle_edit(b, a)], [b], [a]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[1.0]"


def test_rendered_module_is_ruff_clean(tmp_path: Path) -> None:
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.exists():
        return
    target = tmp_path / "reward.py"
    target.write_text(render_reward_module())
    config = Path(__file__).resolve().parents[3] / "pyproject.toml"
    result = subprocess.run(
        [str(ruff), "check", "--config", str(config), str(target)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout


def test_top_level_names_are_distinct_across_modules() -> None:
    """Concatenation is only safe while the modules do not redefine each other's names."""
    seen: dict[str, str] = {}
    for module in rewards.export.MODULES:
        tree = ast.parse(Path(str(module.__file__)).read_text())
        for node in tree.body:
            names = []
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            for name in names:
                if name == "__all__":
                    continue
                assert name not in seen, f"{name} in {seen.get(name)} and {module.__name__}"
                seen[name] = module.__name__
