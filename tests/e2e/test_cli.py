"""The CLI end to end, as a user runs it: `kernelhouse build` on the fixture repos in a
temporary KERNELHOUSE_HOME, then `kernelhouse sql` / `status` over the result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXE = str(Path(sys.executable).with_name("kernelhouse"))


def _kh(
    *args: str, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [EXE, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def test_build_then_sql(use_engine_repos, kh_home: Path) -> None:
    res = _kh("build")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "kernelhouse build" in res.stdout
    q = _kh(
        "sql", "SELECT repo, commit_count FROM raw.repo_heads ORDER BY repo", "--format", "json"
    )
    assert q.returncode == 0, q.stderr
    rows = json.loads(q.stdout)
    assert [r["repo"] for r in rows] == ["flashinfer", "sglang", "vllm"]
    assert all(r["commit_count"] > 3 for r in rows)
    # The README's first example query: without PR bodies it has no rows, and says why.
    q = _kh("sql", "SELECT scope, prs FROM analysis.gains_by_kernel_gpu", env={"COLUMNS": "300"})
    assert q.returncode == 0, q.stderr
    assert "no rows: derived.pr_gains has no rows; gains not extracted" in q.stdout + q.stderr
    st = _kh(
        "status", env={"GITHUB_TOKEN": "ghp_statusNeverShowsMe", "KERNELHOUSE_GPU_BATCH_ROWS": "40"}
    )
    assert st.returncode == 0 and "repo_clone" in st.stdout
    # the configuration table: what the run would use, secrets only as set/unset
    conf = {
        ln.split("│")[1].strip(): ln.split("│")[2].strip()
        for ln in st.stdout.splitlines()
        if ln.count("│") == 3
    }
    assert conf["KERNELHOUSE_GPU_BATCH_ROWS"] == "40" and conf["GITHUB_TOKEN"] == "set"
    assert "ghp_statusNeverShowsMe" not in st.stdout + st.stderr
    # Nothing changed since the build: the refresh only fetches (GitHub and the Hub are
    # unreachable here, so their observers have nothing to look at).
    rf = _kh("refresh")
    assert rf.returncode == 0, rf.stdout + rf.stderr
    assert "repo_clone[vllm]" in rf.stdout and "tuned_configs" not in rf.stdout
    assert "3 ran," in rf.stderr, rf.stderr


def test_sql_is_read_only_and_reports_errors(use_engine_repos, kh_home: Path) -> None:
    assert _kh("build", "--select", "repo_clone").returncode == 0
    bad = _kh("sql", "DROP TABLE raw.repo_heads")
    assert bad.returncode == 1 and "error" in bad.stderr
    assert _kh(
        "sql", "SELECT count(*) AS n FROM raw.repo_heads", "-f", "csv"
    ).stdout.splitlines() == ["n", "3"]
    sql_file = kh_home / "q.sql"
    sql_file.write_text("SELECT repo FROM raw.repo_heads WHERE repo = 'vllm'")
    out = kh_home / "out.parquet"
    assert _kh("sql", str(sql_file), "--format", "parquet", "-o", str(out)).returncode == 0
    import polars as pl

    assert pl.read_parquet(out)["repo"].to_list() == ["vllm"]


def test_bad_source_fails_fast_and_writes_nothing(kh_home: Path, tmp_path: Path) -> None:
    res = _kh("build", env={"KERNELHOUSE_VLLM_SOURCE": str(tmp_path / "missing-vllm")})
    assert res.returncode == 1
    assert "KERNELHOUSE_VLLM_SOURCE" in res.stderr
    assert not (kh_home / "lake.duckdb").exists(), "nothing partial may be left in the lake"


def test_unwritable_home_fails_fast(tmp_path: Path) -> None:
    f = tmp_path / "not-a-dir"
    f.write_text("x")
    res = _kh("build", env={"KERNELHOUSE_HOME": str(f)})
    assert res.returncode == 1 and "KERNELHOUSE_HOME" in res.stderr


def test_offline_build_builds_what_it_can_and_says_how_to_finish(kh_home: Path) -> None:
    """Offline (issue 34): the build exits 0 with everything that needs no repository
    (simulated sets, the shipped H200 measurements, the analysis views over what exists),
    names every skipped asset with its reason and the one command that completes the lake;
    the commands that read a missing table say which build step creates it."""
    env = {
        f"KERNELHOUSE_{r}_SOURCE": f"https://127.0.0.1:9/{r.lower()}.git"
        for r in ("VLLM", "SGLANG", "FLASHINFER")
    }
    res = _kh("build", env={**env, "COLUMNS": "400"})
    text = res.stdout + res.stderr
    assert res.returncode == 0, text
    for r in ("VLLM", "SGLANG", "FLASHINFER"):
        assert f"KERNELHOUSE_{r}_SOURCE" in text
    assert "local clone" in text
    after = text[text.index("skipped (") :].splitlines()[1:]
    skipped = dict(ln.strip().split(": ", 1) for ln in after if ln.startswith("  "))
    for name in ("tuned_configs", "kernel_commits", "pr_gains", "repo_clone[vllm]"):
        assert name in skipped, text
    assert all(("offline" in why) for why in skipped.values()), skipped
    assert "to complete the lake" in text and "kernelhouse refresh" in text
    assert "KERNELHOUSE_VLLM_SOURCE=<local clone or URL>" in text
    # Everything that does not need the repositories still built.
    q = _kh("sql", "SELECT count(*) AS n FROM sim.kernelinfer_sessions", "-f", "csv", env=env)
    assert q.returncode == 0 and q.stdout.splitlines() == ["n", "40"], q.stderr
    q = _kh("sql", "SELECT count(*) AS n FROM datasets.measured_configs", "-f", "csv", env=env)
    assert q.returncode == 0 and int(q.stdout.splitlines()[1]) > 2000, q.stderr
    q = _kh("sql", "SELECT count(*) AS n FROM analysis.card_kernelinfer", "-f", "csv", env=env)
    assert q.returncode == 0, q.stderr
    # A missing table: the build step that creates it, never DuckDB's "Catalog Error".
    for args in (
        ("sql", "SELECT count(*) FROM datasets.kernel_commits"),
        ("sql", "SELECT * FROM analysis.gains_by_kernel_gpu"),
        ("stats", "kernel-opt-rl"),
    ):
        q = _kh(*args, env={**env, "COLUMNS": "400"})
        said = " ".join((q.stdout + q.stderr).split())
        assert q.returncode == 1 and "Catalog Error" not in said, said
        assert "not built yet" in said and "kernelhouse refresh" in said, said
    for args in (("status",), ("report", "-f", "md")):
        q = _kh(*args, env=env)
        assert q.returncode == 0 and "Catalog Error" not in q.stdout + q.stderr, q.stderr
    report = (kh_home / "exports" / "report.md").read_text()
    assert "Catalog Error" not in report and "step kernel_commits" in report


def test_repeated_select_options_add_up(kh_home: Path) -> None:
    # Two --select options build both selections (a second one used to replace the first).
    res = _kh("build", "--select", "sim_tasks", "--select", "moe_model_shapes")
    assert res.returncode == 0, res.stdout + res.stderr
    built = {ln.split("│")[1].strip() for ln in res.stdout.splitlines() if ln.count("│") == 4}
    assert {"sim_tasks", "moe_model_shapes"} <= built, res.stdout
    assert _kh("build", "--select", "sim_tasks", "--select", "no_such_asset").returncode == 1
