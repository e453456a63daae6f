"""The CLI end to end, as a user runs it: `kernelhouse build` on the fixture repos in a
temporary KERNELHOUSE_HOME, then its exports loaded with `datasets` and `kernelhouse sql` /
`status` / `refresh` over the result.

One whole CLI build serves both the export check and the query commands (each whole build
costs CI about a minute and a half on two cores; the export check used to pay for its own)."""

from __future__ import annotations

import json
import os
import re
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


def _assert_exports_load(exports: Path, cache: str, res: subprocess.CompletedProcess) -> None:
    """Every export of the small build loads with `datasets`. The kernelswarm build has two
    batch files (130 episodes: batches follow episode ids, which start with the op, so the
    files hold different ops); ``tests/unit/publish/test_exports_load.py`` covers more
    shards per dataset, and the full-size check is recorded in ``benchmarks/RESULTS.md``."""
    import datasets
    import pyarrow.parquet as pq

    for name in ("kernel-opt-rl", "kernelinfer", "kernelswarm", "measured_configs"):
        assert (exports / name).is_dir(), f"{name} missing\n{res.stdout}\n{res.stderr}"

    def load(*args: str, **kwargs: str) -> datasets.Dataset:
        return datasets.load_dataset(*args, cache_dir=cache, **kwargs)

    swarm = exports / "kernelswarm"
    ops = [
        {json.loads(line)["op"] for line in p.read_text().splitlines()}
        for p in sorted((swarm / "batches").glob("batch_*.jsonl"))
    ]
    assert len(ops) == 2 and ops[0] != ops[1]
    assert load(str(swarm), split="train").num_rows == 130
    assert load(str(swarm), "tasks_holdout", split="test").num_rows > 0
    assert load("json", data_files=str(swarm / "episodes.jsonl"), split="train").num_rows == 130
    infer = exports / "kernelinfer"
    n = sum(1 for _ in (infer / "sessions.jsonl").open())
    assert load(str(infer), split="train").num_rows == n == 40
    assert load(str(infer), "tasks_holdout", split="test").num_rows > 0
    assert load("json", data_files=str(infer / "sessions.jsonl"), split="train").num_rows == n
    opt = exports / "kernel-opt-rl"
    counts = {}
    for subset in ("tuned_configs", "kernel_commits", "pr_tasks"):
        counts[subset] = {split: load(str(opt), subset, split=split) for split in ("train", "test")}
        assert sum(ds.num_rows for ds in counts[subset].values()) > 0
    # pr_tasks (issue 41) holds every kernel_commits row once, as a file of its commit's task
    for split in ("train", "test"):
        files = counts["pr_tasks"][split]["files"]
        assert sum(len(f) for f in files) == counts["kernel_commits"][split].num_rows
    # measured_configs holds the H200 rows of tuned configs this build has; the fixture
    # repos' configs match none, and `datasets` refuses an empty split by design
    # ("corresponds to no data"), so an empty file is checked for its schema instead.
    (parquet,) = (exports / "measured_configs").glob("*.parquet")
    if pq.ParquetFile(parquet).metadata.num_rows:
        assert load(str(exports / "measured_configs"), split="train").num_rows > 0
    else:
        assert pq.read_schema(parquet).names


def test_build_exports_load_then_sql(
    use_engine_repos, kh_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 130 episodes (two kernelswarm shards, two batch files) for every command below: the
    # refresh must see the sizes the build used, or the shards' code version would differ.
    # Two worker processes: partitions run side by side, as on a 2-core machine.
    monkeypatch.setenv("KERNELHOUSE_SIM_EPISODES", "130")
    res = _kh("build", "--workers", "2")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "kernelhouse build" in res.stdout
    _assert_exports_load(kh_home / "exports", str(tmp_path / "hf-cache"), res)
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


def test_sql_is_read_only_and_reports_errors(kh_home: Path) -> None:
    # The table written through the lake itself: what `sql` does is the point here (the
    # whole build of test_build_exports_load_then_sql queries a built raw.repo_heads), not
    # cloning three repos.
    import polars as pl

    from dagster_project.storage.lake import Lake

    lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))
    lake.replace_table(
        "raw", "repo_heads", pl.DataFrame({"repo": ["flashinfer", "sglang", "vllm"]})
    )
    bad = _kh("sql", "DROP TABLE raw.repo_heads")
    assert bad.returncode == 1 and "error" in bad.stderr
    assert _kh(
        "sql", "SELECT count(*) AS n FROM raw.repo_heads", "-f", "csv"
    ).stdout.splitlines() == ["n", "3"]
    sql_file = kh_home / "q.sql"
    sql_file.write_text("SELECT repo FROM raw.repo_heads WHERE repo = 'vllm'")
    out = kh_home / "out.parquet"
    assert _kh("sql", str(sql_file), "--format", "parquet", "-o", str(out)).returncode == 0
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
    # Two kernelswarm shards (100 + 30 episodes), for the status check at the end.
    env["KERNELHOUSE_SIM_EPISODES"] = "130"
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
    _assert_status_sums_partitions_and_names_offline_sources(_kh("status", env=env))


def _status_row(stdout: str, asset: str) -> list[str]:
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 2 and cells[1] == asset:
            return cells[1:-1]
    raise AssertionError(f"no status row for {asset}:\n{stdout}")


def _assert_status_sums_partitions_and_names_offline_sources(
    st: subprocess.CompletedProcess,
) -> None:
    """`kernelhouse status` as a user reads it, on the offline build (whose own build would
    cost CI another minute): rows summed over partitions, the latest result of every
    check, unreachable sources and missing PR bodies in words."""
    assert st.returncode == 0, st.stderr
    asset, group, when, rows, parts, checks = _status_row(st.stdout, "kernelswarm_episodes")
    assert rows == "130" and parts.startswith("2/"), (rows, parts)  # not the last shard's 30
    assert re.search(
        r"episode_invariants: (passed|failed) in \d+ of 2 latest shard runs", checks
    ), checks
    assert _status_row(st.stdout, "tuned_configs")[2] == "never"
    text = " ".join(st.stderr.split())
    assert "KERNELHOUSE_VLLM_SOURCE='https://127.0.0.1:9/vllm.git' cannot be reached now" in text
    assert "a build skips vllm's clone" in text
    # The conftest points GitHub at a port nothing listens on.
    assert (
        "The GitHub API (http://127.0.0.1:9) is unreachable: PR bodies come from the cache only"
        in text
    )


def test_repeated_select_options_add_up(kh_home: Path) -> None:
    # Two --select options build both selections (a second one used to replace the first).
    res = _kh("build", "--select", "sim_tasks", "--select", "moe_model_shapes")
    assert res.returncode == 0, res.stdout + res.stderr
    built = {ln.split("│")[1].strip() for ln in res.stdout.splitlines() if ln.count("│") == 4}
    assert {"sim_tasks", "moe_model_shapes"} <= built, res.stdout
    assert _kh("build", "--select", "sim_tasks", "--select", "no_such_asset").returncode == 1
