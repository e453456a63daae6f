"""Golden fingerprints of the mined output: changed output needs a rule-version bump.

Every mined asset's ``code_version`` is the versions of the rules it applies
(``dagster_project.mining.versions``); a refresh re-mines only when one of them changes.
So a rule edit that changes output but forgets its ``RULES_VERSION`` bump would leave old
rows in every existing lake. This test mines the fixture repositories (commits and
configs), fingerprints each asset's output and compares with ``golden_mined.json``:

* same versions, other output -> fails: bump the RULES_VERSION of the rule you changed;
* other versions -> fails until the golden is re-recorded for them.

Re-record with ``KH_UPDATE_GOLDEN=1 pytest tests/unit/commits/test_golden.py``. A change
of the fixture repositories themselves also changes the fingerprints: re-record in the
same commit (the message then names the assets whose input changed).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import polars as pl
import pytest

from dagster_project.mining.commits import DEFAULT_SPECS, mine_repo
from dagster_project.mining.commits.lake_sync import assemble_kernel_commits
from dagster_project.mining.configs import (
    attribute_config_prs,
    build_tuned_configs,
    discover_config_files,
    extract_kernel_sources,
    load_model_shapes_snapshot,
    read_config_entries,
)
from dagster_project.mining.configs.entries import BlobCache
from dagster_project.mining.git import GitRepo
from dagster_project.mining.versions import asset_code_version
from tests.unit.commits.conftest import ENGINES, PerfRepo
from tests.unit.configs.conftest import build_config_repo

GOLDEN = Path(__file__).with_name("golden_mined.json")


def _fingerprint(df: pl.DataFrame) -> str:
    """Order-independent content hash (JSON of sorted rows; stable across polars versions)."""
    cols = sorted(c for c in df.columns if df.schema[c] != pl.Object)
    rows = sorted(json.dumps(r, default=str, sort_keys=True) for r in df.select(cols).to_dicts())
    h = hashlib.sha256("\x1f".join(cols).encode())
    for r in rows:
        h.update(r.encode())
    return h.hexdigest()[:16]


def _mined(perf_repos: dict[str, PerfRepo], config_root: Path) -> dict[str, pl.DataFrame]:
    commits, rows, excluded = [], [], []
    for e in ENGINES:
        c, r, x = mine_repo(GitRepo(perf_repos[e].path), DEFAULT_SPECS[e], head="HEAD")
        commits.append(c.drop("files"))
        rows.append(r)
        excluded.append(x)
    c_all, r_all = pl.concat(commits), pl.concat(rows, how="vertical_relaxed")
    assembled, _ = assemble_kernel_commits(r_all, c_all)
    files, entries, attrs, kernels, snapshot = [], [], [], [], {}
    for e in ("vllm", "sglang"):
        repo = build_config_repo(config_root / e, e).repo
        f = discover_config_files(repo, e, "HEAD", cache=BlobCache())
        files.append(f)
        entries.append(read_config_entries(repo, f, cache=BlobCache()))
        attrs.append(attribute_config_prs(repo, e, "HEAD", f["path"].to_list()))
        kernels.append(extract_kernel_sources(repo, e, "HEAD"))
        snapshot[e] = repo.head("HEAD")
    f_all, en_all, at_all = pl.concat(files), pl.concat(entries), pl.concat(attrs)
    k_all = pl.concat(kernels)
    tuned = build_tuned_configs(
        f_all, en_all, at_all, k_all, load_model_shapes_snapshot(), snapshot
    )
    # Shas, blob ids, times and row ids are deterministic: the fixture fixes dates and authors.
    return {
        "perf_commits": c_all,
        "kernel_commit_files": r_all,
        "kernel_commit_excluded": pl.concat(excluded, how="vertical_relaxed"),
        "kernel_commits": assembled,
        "config_files": f_all,
        "config_entries": en_all,
        "config_attribution": at_all,
        "kernel_sources": k_all,
        "tuned_configs": tuned,
    }


ASSET_OF = {"kernel_commit_excluded": "kernel_commit_files"}


def test_mined_output_changes_only_with_a_version_bump(perf_repos, tmp_path_factory) -> None:
    mined = _mined(perf_repos, tmp_path_factory.mktemp("golden-configs"))
    current = {
        name: {
            "version": asset_code_version(ASSET_OF.get(name, name)),
            "fingerprint": _fingerprint(df),
            "rows": df.height,
        }
        for name, df in mined.items()
    }
    if os.environ.get("KH_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
        pytest.skip("golden re-recorded")
    golden = json.loads(GOLDEN.read_text())
    problems = []
    for name, now in current.items():
        old = golden.get(name)
        if old is None:
            problems.append(f"{name}: not in the golden; re-record it")
        elif old["version"] == now["version"] and old["fingerprint"] != now["fingerprint"]:
            problems.append(
                f"{name}: output changed ({old['rows']} -> {now['rows']} rows) but its "
                f"rules version is still {now['version']!r}: bump RULES_VERSION of the "
                "rule you changed (mining/versions.py lists them), then re-record"
            )
        elif old["version"] != now["version"]:
            problems.append(
                f"{name}: rules {old['version']!r} -> {now['version']!r}; re-record "
                "the golden (KH_UPDATE_GOLDEN=1)"
            )
    assert not problems, "\n".join(problems)
