"""One home per rule and no import circles (issue 34), each with a guard that fails when a
second home or a circle comes back."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

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


# --- every row of ARCHITECTURE's "Where each rule lives" ---------------------------------

REPO = PACKAGE.parent


def _top_level_names(path: Path) -> set[str]:
    """Names a module binds at its top level by assignment or ``def`` (not by import)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _homes(name: str) -> list[str]:
    """Every module of the package and of ``assets/`` that defines ``name`` itself."""
    paths = [*PACKAGE.rglob("*.py"), *(REPO / "assets").rglob("*.py")]
    return sorted(p.relative_to(REPO).as_posix() for p in paths if name in _top_level_names(p))


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("ASSETS", "dagster_project/storage/lineage.py"),
        ("number", "dagster_project/report/numbers.py"),
        # tuned_configs' own share (9 %) is another rule with the same name
        (
            "TEST_FRACTION",
            "dagster_project/mining/commits/split.py dagster_project/mining/configs/split.py",
        ),
        ("DEFAULT_RULE", "dagster_project/mining/commits/perf_filter.py"),
        ("gate_threshold", "dagster_project/quality/suites.py"),
        ("OPEN_SOURCE", "dagster_project/mining/commits/license.py"),
        ("DEFAULT_SIM_SEED", "dagster_project/settings.py"),
        ("KERNELINFER_DEFAULT_SEED", "dagster_project/settings.py"),
        ("KERNELSWARM_DEFAULT_SEED", "dagster_project/settings.py"),
        ("load_llm_settings", "dagster_project/settings.py"),
        ("deployment_group", "dagster_project/mining/configs/split.py"),
        ("split_of", "dagster_project/mining/configs/split.py"),
        ("assign_temporal_split", "dagster_project/mining/commits/split.py"),
        ("pr_tasks_frame", "dagster_project/mining/commits/pr_tasks.py"),
        ("pr_patch_reward", "dagster_project/rewards/pr_patch.py"),
        ("side_overrides", "dagster_project/gains/extract/tables.py"),
        ("table_grids", "dagster_project/gains/extract/choose.py"),
        ("EXTRACTOR_VERSION", "dagster_project/gains/extract/choose.py"),
        ("role_of", "dagster_project/gains/extract/vocab.py"),
        ("reading", "dagster_project/gains/extract/vocab.py"),
        ("match_title", "dagster_project/mining/commits/perf_filter.py"),
        ("PENALTY", "dagster_project/sim/swarm/reward_rule.py"),
        ("VERIFICATION_VERSION", "dagster_project/sim/verification.py"),
        ("CENSUS_VERSION", "dagster_project/commit_exec/census.py"),
        ("JUDGE_VERSION", "dagster_project/commit_exec/device/judge.py"),
        ("MIN_EFFECT", "dagster_project/commit_exec/device/stats.py"),
        ("TERMS", "dagster_project/gpus.py"),
    ],
)
def test_each_rule_is_defined_in_its_one_home(name: str, home: str) -> None:
    """A rule's name defined a second time anywhere in the package is a second home."""
    assert _homes(name) == home.split()


def _literal_hits(value: str, *, skip: tuple[str, ...]) -> list[str]:
    paths = [*PACKAGE.rglob("*.py"), *(REPO / "assets").rglob("*.py")]
    return sorted(
        p.relative_to(REPO).as_posix()
        for p in paths
        if p.relative_to(REPO).as_posix() not in skip and value in p.read_text()
    )


def test_the_default_seeds_are_spelled_only_in_settings() -> None:
    from dagster_project import settings

    for seed in (
        settings.DEFAULT_SIM_SEED,
        settings.KERNELINFER_DEFAULT_SEED,
        settings.KERNELSWARM_DEFAULT_SEED,
    ):
        assert _literal_hits(str(seed), skip=("dagster_project/settings.py",)) == [], seed


def test_the_llm_settings_are_read_from_the_environment_only_in_settings() -> None:
    """Other modules may *name* ``KERNELHOUSE_LLM_*`` in help text, never read it."""
    offenders = []
    for p in [*PACKAGE.rglob("*.py"), *(REPO / "assets").rglob("*.py")]:
        if p.name == "settings.py" and p.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith(("KERNELHOUSE_LLM_", "HF_TOKEN"))
                and node.value.isupper()
            ):
                offenders.append(f"{p.relative_to(REPO)}: {node.value}")
    assert offenders == []


def test_assets_take_their_deps_only_from_the_lineage_declaration() -> None:
    """``deps=`` in an asset decorator is ``lineage.deps(<the asset>)``, never a list."""
    for p in (REPO / "assets").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "deps":
                call = node.value
                assert isinstance(call, ast.Call) and ast.unparse(call.func).endswith(
                    "lineage.deps"
                ), f"{p.name}: deps={ast.unparse(call)}"


def test_gate_thresholds_live_in_the_suites() -> None:
    """The Python check's numbers come from ``expectations/kernel_commits.json``."""
    from dagster_project.quality.suites import gate_threshold

    values = {
        key: gate_threshold("kernel_commits", "oracle_patch_reward", key)
        for key in ("min_share_perfect", "low_score")
    }
    check_sides = [
        p
        for p in [*PACKAGE.rglob("*.py"), *(REPO / "assets").rglob("*.py")]
        if "oracle_patch_reward" in p.read_text()
    ]
    assert check_sides, "the check moved: follow it here"
    for p in check_sides:
        for value in values.values():
            assert repr(value) not in p.read_text(), (p, value)


def test_the_licence_value_sets_come_from_the_licence_rule() -> None:
    import json

    from dagster_project.mining.commits.license import OPEN_SOURCE

    suite = (REPO / "expectations" / "kernel_commits.json").read_text()
    assert "value_set_from" in suite
    assert not any(f'"{lic}"' in suite for lic in OPEN_SOURCE), "a licence list in the suite"
    json.loads(suite)


def test_cli_report_and_cards_format_numbers_through_the_one_formatter() -> None:
    """A whole number's thousands separator spelled in a format spec (``:,``) is a second
    formatter (the report printed ``1726`` under ``19,287``)."""
    for rel in ("cli/app.py", "report/document.py", "publish/cards.py"):
        tree = ast.parse((PACKAGE / rel).read_text())
        specs = [
            ast.unparse(n.format_spec)
            for n in ast.walk(tree)
            if isinstance(n, ast.FormattedValue) and n.format_spec is not None
        ]
        # fixed-precision decimals (``,.2f``) are the cards' other, deliberate format
        whole = {"f','", "f',d'", "f',.0f'"}
        assert not [s for s in specs if s in whole], (rel, specs)


# --- a versioned rule's code cannot change under the same version -------------------------

#: rule -> (its version constant, the files whose code is the rule). The fingerprint is the
#: code without docstrings and comments; mined rules are guarded by their output instead
#: (``tests/unit/commits/test_golden.py``).
VERSIONED = {
    "exec_census": ("commit_exec.census:CENSUS_VERSION", ("commit_exec/census.py",)),
    "judge": (
        "commit_exec.device.judge:JUDGE_VERSION",
        ("commit_exec/device/judge.py", "commit_exec/device/stats.py"),
    ),
    "rung_verification": ("sim.verification:VERIFICATION_VERSION", ("sim/verification.py",)),
    "swarm_rewards": ("sim.swarm.spec:SWARM_VERSION", ("sim/swarm/reward_rule.py",)),
    "gains_extractor": (
        "gains.extract.choose:EXTRACTOR_VERSION",
        tuple(f"gains/extract/{p.name}" for p in sorted((PACKAGE / "gains/extract").glob("*.py"))),
    ),
    # issue 40: which audited measurements are published (evidence classes are the audit's)
    "gains_policy": ("gains.policy:POLICY_VERSION", ("gains/policy.py", "gains/audit.py")),
    # issue 39: when a simulated engineer stops (session lengths of both datasets)
    "stop_rule": ("sim.stop_rule:STOP_RULE_VERSION", ("sim/stop_rule.py",)),
    # issue 36: which simulated speedup labels are published as modelled (label provenance)
    "label_policy": ("sim.label_policy:LABEL_POLICY_VERSION", ("sim/label_policy.py",)),
    # issue 36: which online sessions the build publishes and how they are labelled
    "online_tier": ("sim.online_tier:ONLINE_TIER_VERSION", ("sim/online_tier.py", "sim/online.py")),
    # issue 37: what the reward defences accept (stamped on every exploit-suite result)
    "reward_guard": (
        "rewards.guard:GUARD_VERSION",
        tuple(f"rewards/guard/{p.name}" for p in sorted((PACKAGE / "rewards/guard").glob("*.py"))),
    ),
}

#: rule -> (version, fingerprint) as last recorded. Re-record with
#: ``KH_UPDATE_RULE_PINS=1 pytest tests/unit/test_rule_homes.py`` *after* bumping the
#: version when the rule's output changes (a refactor that keeps output may re-record alone).
PINS_FILE = Path(__file__).with_name("rule_pins.json")


def _code(text: str) -> str:
    """A module's source lines without its docstrings, full-line comments and blank lines.

    Text, not ``ast.dump``/``ast.unparse``: both change between Python 3.11 and 3.13 (the
    f-string grammar of 3.12), and CI pins on 3.11 and checks on 3.13. The docstrings'
    line ranges come from the tree, whose positions are the same on every version."""
    tree = ast.parse(text)
    drop: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            drop.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    kept = (line.rstrip() for i, line in enumerate(text.splitlines(), 1) if i not in drop)
    return "\n".join(line for line in kept if line and not line.lstrip().startswith("#"))


def _fingerprint(files: tuple[str, ...]) -> str:
    import hashlib

    digest = hashlib.sha256()
    for rel in files:
        digest.update(rel.encode() + _code((PACKAGE / rel).read_text()).encode())
    return digest.hexdigest()[:16]


def _version(ref: str) -> str:
    import importlib

    module, attr = ref.split(":")
    return str(getattr(importlib.import_module(f"dagster_project.{module}"), attr))


def test_a_versioned_rule_changes_only_with_its_version() -> None:
    import json
    import os

    current = {
        rule: [_version(ref), _fingerprint(files)] for rule, (ref, files) in VERSIONED.items()
    }
    if os.environ.get("KH_UPDATE_RULE_PINS"):
        PINS_FILE.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    pinned = json.loads(PINS_FILE.read_text())
    for rule, (version, fingerprint) in current.items():
        old_version, old_fingerprint = pinned[rule]
        assert (version, fingerprint) == (old_version, old_fingerprint), (
            f"{rule}: the code of {VERSIONED[rule][1]} changed under version {version} "
            f"(pinned {old_version}): bump {VERSIONED[rule][0]} if its output changes, then "
            "re-record with KH_UPDATE_RULE_PINS=1"
            if version == old_version
            else f"{rule}: version {version} is new: re-record with KH_UPDATE_RULE_PINS=1"
        )


def test_the_pin_guard_notices_code_not_prose() -> None:
    """The fingerprint ignores docstrings and comments but not code: the guard can fail."""
    text = (PACKAGE / VERSIONED["judge"][1][0]).read_text()
    reworded = text.replace('"""The equivalence rule', '"""The equivalence rule, reworded', 1)
    assert reworded != text and _code(reworded) == _code(text)
    assert _code(text + "\n# a comment\n") == _code(text)
    assert _code(text.replace('return "run_error", False', 'return "executed", True')) != _code(
        text
    )


def test_no_import_runs_back_up_the_layers() -> None:
    """The seven back-arrows issue 34 closed stay closed: each pair is (lower layer, a
    higher one it must not import). The moves: source-setting helpers into ``settings``,
    lineage tags into ``execution.policy``, the GX check factory into ``wiring.checks``,
    the commit execution reward into ``rewards.commit_reward``, the oracle reward check
    into ``rewards.oracle_check``, and the definitions a worker loads named by the CLI
    (``execution.runs.load_definitions``)."""
    never = [
        ("dagster_project.settings", "dagster_project."),
        ("dagster_project.execution.", "dagster_project.definitions"),
        ("dagster_project.wiring.", "dagster_project.execution."),
        ("dagster_project.wiring.", "dagster_project.quality.factory"),
        ("dagster_project.commit_exec.", "dagster_project.rewards"),
        ("dagster_project.mining.", "dagster_project.rewards"),
        ("dagster_project.quality.", "dagster_project.wiring"),
    ]
    graph = _graph()
    broken = sorted(
        f"{src} -> {dst}"
        for src, deps in graph.items()
        for low, high in never
        if src == low or src.startswith(low)
        for dst in deps
        if dst.startswith(high) and not (src == "dagster_project.settings" and dst == src)
    )
    assert broken == []
