"""Render the reward modules as one self-contained ``reward.py`` for the published dataset.

Users of the Hub dataset should not need kernelhouse, so the publish step ships the
rewards as a single stdlib-only file (``code/reward.py``). It is generated from the very
modules the lake and the tests use, so the two can never drift: ``patch``, ``config`` and
``trl`` are concatenated in dependency order, their module docstrings become comment
blocks, their standard-library imports are merged at the top, and imports between them
and their ``__all__`` lists are dropped (one combined ``__all__`` is written instead).
The modules keep distinct top-level names so that concatenation is safe; a test checks
that and that the rendered file scores exactly like the package.
"""

from __future__ import annotations

import ast
import inspect
import sys
from types import ModuleType

from . import config, patch, pr_patch, trl

__all__ = ["MODULES", "render_reward_module"]

#: Concatenation order: each module only uses names of the ones before it.
MODULES: tuple[ModuleType, ...] = (patch, config, trl, pr_patch)

_HEADER = '''"""Reward functions for the Kernel-Opt RL dataset (its three subsets).

Generated from kernelhouse's ``dagster_project.rewards`` package; standard library only.

    from reward import patch_reward, config_reward, patch_reward_fn, config_reward_fn

``patch_reward(completion, before_code, after_code)`` and
``config_reward(completion, best_config, speedup_vs_default=None, **row)`` score one
completion; ``patch_reward_fn`` / ``config_reward_fn`` take TRL GRPOTrainer's batch
arguments. ``pr_patch_reward(completion, files)`` / ``pr_patch_reward_fn`` score the
multi-file edits of ``pr_tasks`` (``files``: the row's list of path / before_code /
after_code). The schemes are documented in the comment block before each section.
"""
'''


class _ModuleParts:
    """One module split into docstring, external imports, ``__all__`` and the rest."""

    def __init__(self, module: ModuleType) -> None:
        source = inspect.getsource(module)
        tree = ast.parse(source)
        lines = source.splitlines()
        self.name = module.__name__
        self.docstring = ast.get_docstring(tree) or ""
        self.imports: list[ast.Import | ast.ImportFrom] = []
        self.exports: list[str] = []
        self.names: list[str] = []
        drop: set[int] = set()
        for node in tree.body:
            start, end = node.lineno, node.end_lineno or node.lineno
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                if isinstance(node.value.value, str) and node is tree.body[0]:
                    drop.update(range(start, end + 1))
                continue
            if isinstance(node, ast.Import | ast.ImportFrom):
                drop.update(range(start, end + 1))
                internal = isinstance(node, ast.ImportFrom) and (
                    node.level > 0 or (node.module or "").startswith("dagster_project")
                )
                future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
                if not internal and not future:
                    self.imports.append(node)
                continue
            targets = _assigned_names(node)
            if targets == ["__all__"]:
                drop.update(range(start, end + 1))
                assert isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
                self.exports.extend(ast.literal_eval(node.value))
                continue
            self.names.extend(targets)
        body = [line for number, line in enumerate(lines, start=1) if number not in drop]
        self.body = "\n".join(body).strip("\n")


def _assigned_names(node: ast.stmt) -> list[str]:
    """Top-level names a statement defines (functions, classes, plain assignments)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        names: list[str] = []
        for target in node.targets:
            elements = target.elts if isinstance(target, ast.Tuple) else [target]
            names.extend(e.id for e in elements if isinstance(e, ast.Name))
        return names
    if isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _import_lines(nodes: list[ast.Import | ast.ImportFrom]) -> list[str]:
    """Merged, isort-ordered import lines (plain ``import`` first, then ``from``)."""
    plain: set[str] = set()
    froms: dict[str, set[str]] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            plain.update(alias.name for alias in node.names)
        else:
            froms.setdefault(node.module or "", set()).update(a.name for a in node.names)
    for module in [*plain, *froms]:
        top = module.split(".")[0]
        if top not in sys.stdlib_module_names:
            raise ValueError(f"reward modules must use the standard library only, not {module}")
    out = [f"import {name}" for name in sorted(plain)]
    for module in sorted(froms):
        names = sorted(froms[module], key=_isort_key)
        out.append(f"from {module} import {', '.join(names)}")
    return out


def _isort_key(name: str) -> tuple[int, str]:
    """isort's order-by-type: CONSTANTS, then Classes, then functions and variables."""
    if name.isupper() and len(name) > 1:
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name.lower())


def _comment(text: str) -> str:
    return "\n".join(f"# {line}".rstrip() for line in text.splitlines())


def render_reward_module() -> str:
    """The text of the standalone ``reward.py`` (stdlib only, no kernelhouse import)."""
    parts = [_ModuleParts(module) for module in MODULES]
    seen: dict[str, str] = {}
    for part in parts:
        for name in part.names:
            if name in seen and seen[name] != part.name:
                raise ValueError(f"{name!r} is defined in both {seen[name]} and {part.name}")
            seen[name] = part.name
    exports = sorted({name for part in parts for name in part.exports})
    imports = _import_lines([node for part in parts for node in part.imports])
    head = (
        _HEADER
        + "\nfrom __future__ import annotations\n\n"
        + "\n".join(imports)
        + "\n\n__all__ = [\n"
        + "".join(f'    "{name}",\n' for name in exports)
        + "]\n"
    )
    sections = [
        f"# {'=' * 77}\n# {part.name.rsplit('.', 1)[-1]}: generated from {part.name}\n#\n"
        + _comment(part.docstring)
        + "\n\n"
        + part.body
        + "\n"
        for part in parts
    ]
    return "\n\n".join([head, *sections])
