"""One home per rule and no import circles (issue 34), each with a guard that fails when a
second home or a circle comes back."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import dagster_project

PACKAGE = Path(dagster_project.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """Modules of the package that ``path`` imports anywhere (function bodies too: a lazy
    import that avoids a cycle at import time is still a circle in the design)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base_parts = package[: len(package) - node.level + 1] if node.level else []
            base = ".".join([*base_parts, *([node.module] if node.module else [])])
            if base in modules:
                out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules}
    # A package re-exporting its own submodules is not a circle.
    return {m for m in out if m != name and not m.startswith(name + ".")}


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: _imports(path, name, modules) for name, path in paths.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (the modules along it), or [] when there is none."""
    done: set[str] = set()

    def walk(v: str, path: list[str]) -> list[str]:
        if v in path:
            return [*path[path.index(v) :], v]
        if v in done:
            return []
        for w in sorted(graph.get(v, ())):
            found = walk(w, [*path, v])
            if found:
                return found
        done.add(v)
        return []

    for v in sorted(graph):
        found = walk(v, [])
        if found:
            return found
    return []


def test_no_import_circles() -> None:
    """``execution/local.py`` <-> ``planner.py`` and ``mining/commits/lake_sync.py`` <->
    ``mining/versions.py`` were the two; none may come back, nor a new one."""
    graph = _graph()
    assert (
        "dagster_project.mining.versions" not in graph["dagster_project.mining.commits.lake_sync"]
    )
    assert "dagster_project.execution.planner" not in graph["dagster_project.execution.local"]
    assert _cycle(graph) == []


def test_the_perf_title_rule_default_has_one_home() -> None:
    from dagster_project.mining.commits import perf_filter, specs

    assert specs.RepoSpec.__dataclass_fields__["title_rule"].default is perf_filter.DEFAULT_RULE
    source = inspect.getsource(specs)
    assert not any(f'"{rule}"' in source for rule in perf_filter.RULES), "a second home"


def test_the_kernel_commits_test_fraction_has_one_home() -> None:
    from dagster_project.mining.commits import lake_sync, split

    for fn in (lake_sync.assemble_kernel_commits, split.assign_temporal_split):
        default = inspect.signature(fn).parameters["test_fraction"].default
        assert default is split.TEST_FRACTION, fn.__name__
    assert "0.1" not in inspect.getsource(lake_sync), "a second home of the test fraction"


def test_the_swarm_reward_buckets_follow_the_reward_rule() -> None:
    """The statistics' reward histogram used to spell the penalties (-0.3, -0.1, -0.05) a
    second time in ``sim/kernelswarm.py``; its buckets now come from ``reward_rule``."""
    from dagster_project.sim import kernelswarm
    from dagster_project.sim.swarm import reward_rule

    penalties = {reward_rule.NO_IMPROVEMENT, *reward_rule.PENALTY.values()}
    for value in penalties:
        bucket = reward_rule.reward_bucket(value)
        assert bucket == f"{value:g}" and bucket in reward_rule.BUCKET_ORDER
    assert reward_rule.reward_bucket(1.0) == reward_rule.BUCKET_ORDER[-1]
    source = inspect.getsource(kernelswarm)
    assert not any(f"{v:g}" in source for v in penalties), "a second home of the penalties"


def test_the_gpu_vocabulary_versions_every_asset_that_applies_it() -> None:
    """``gpus.py`` decides commit mentions, device names and gains attribution; it carries
    its own version, and every asset applying one of those rules carries it too."""
    from dagster_project import gpus
    from dagster_project.gains.pipeline import extractor_code_version
    from dagster_project.mining.versions import ASSET_RULES, RULE_MODULES

    assert RULE_MODULES["gpu_names"] is gpus
    users = {"mentions", "config_names"}
    for asset, rules in ASSET_RULES.items():
        if users & set(rules):
            assert "gpu_names" in rules, f"{asset} applies GPU names without their version"
    assert f"gpus-{gpus.RULES_VERSION}" in extractor_code_version(None)
    importers = [
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if "from dagster_project import gpus" in p.read_text()
    ]
    # the two miners and the gains mentions, each covered by a versioned rule above, and
    # the two modules that compose those versions
    assert sorted(importers) == [
        "gains/mentions.py",
        "gains/pipeline.py",
        "mining/commits/mentions.py",
        "mining/configs/names.py",
        "mining/versions.py",
    ], importers
