"""Shared by ``develop.py`` and ``score.py``: the two rules compared, and the commits' evidence.

Title rule v7 is loaded from the commit that labelled round 7 (``V7_COMMIT``, before v8
existed), v8 is the package's own ``perf_filter``; both expose ``match_title``. Evidence is
read from the clones as the miner sees it (``find_perf_commits`` with the title rule
bypassed): each kernel-touching commit's subject, message body and candidate kernel files.
Nothing read here is stored.
"""

from __future__ import annotations

import csv
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))

import perf_filter_sample as pfs  # noqa: E402

from dagster_project.mining.commits import mine, perf_filter  # noqa: E402
from dagster_project.mining.commits.specs import DEFAULT_SPECS  # noqa: E402
from dagster_project.mining.git import GitRepo  # noqa: E402

#: The commit that added round 7's labels: its ``perf_filter.py`` is title rule v7.
V7_COMMIT = "ea39172"
PERF_FILTER = "dagster_project/mining/commits/perf_filter.py"
DEV_FILES = (pfs.OUT, HERE.parent / "title_round6" / "labels.csv")


def rule_v7() -> types.ModuleType:
    """Title rule v7 as it was when round 7 was labelled (checked: ``RULES_VERSION == "7"``)."""
    src = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{V7_COMMIT}:{PERF_FILTER}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    mod = types.ModuleType("perf_filter_v7")
    sys.modules[mod.__name__] = mod  # dataclasses resolve their module by name
    exec(compile(src, f"{V7_COMMIT}:{PERF_FILTER}", "exec"), mod.__dict__)
    assert mod.RULES_VERSION == "7", mod.RULES_VERSION
    return mod


def rules() -> dict[str, Any]:
    """``{"v7": match_title, "v8": match_title}`` (v8 = this checkout's rule)."""
    assert perf_filter.RULES_VERSION == "8", perf_filter.RULES_VERSION
    return {"v7": rule_v7().match_title, "v8": perf_filter.match_title}


def evidence() -> dict[str, dict[str, Any]]:
    """sha -> repo, subject, message body and candidate kernel files of every kernel-touching
    commit of the three clones (the title rule bypassed, as ``perf_filter_sample`` does)."""
    out: dict[str, dict[str, Any]] = {}
    original = mine.match_title
    mine.match_title = lambda subject, rule="mid": perf_filter.TitleMatch("any", "")
    try:
        for repo in pfs.SOURCES:
            df = mine.find_perf_commits(
                GitRepo(Path(pfs.source(repo))), DEFAULT_SPECS[repo], head="HEAD"
            )
            for d in df.select("repo", "sha", "subject", "message", "files").to_dicts():
                out[d["sha"]] = d
    finally:
        mine.match_title = original
    return out


def labelled(paths: tuple[Path, ...]) -> list[dict[str, str]]:
    """The labelled rows of ``paths`` (repo, sha, round, stratum, label, reason)."""
    return [r for p in paths for r in csv.DictReader(p.open())]
