"""Runner lines -> shipped Parquet -> kernel_commits columns and lake tables, on a GPU-less
machine; the claims view on a real DuckDB; the shipped batches' invariants."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project.commit_exec import ingest
from dagster_project.commit_exec.columns import attach_execution
from dagster_project.commit_exec.device import stats
from dagster_project.commit_exec.tables import metadata
from sql import load_sql

CHAIN = {
    "gpu": "NVIDIA H100 80GB HBM3",
    "driver": "580.1",
    "cuda": "13.0",
    "torch": "2.11.0",
    "triton": "3.6.0",
}


def _timing(before: float, after: float) -> dict:
    sb = [before * (1 + 0.01 * (i % 3)) for i in range(9)]
    sa = [after * (1 + 0.01 * (i % 3)) for i in range(9)]
    scope = {
        "before_us": before,
        "after_us": after,
        "speedup": before / after,
        "ci_lo": 0,
        "ci_hi": 0,
        "p": 0.0,
        "samples_before": sb,
        "samples_after": sa,
    }
    return {"sets": 8, "set_bytes": 1000, "graph": scope, "host": dict(scope)}


def _shape(role: str, before: float, after: float, ok: bool = True) -> dict:
    check = {"ok": ok, "max_abs_err": 0.0 if ok else 3.0, "worst": "o", "why": "" if ok else "o: 9"}
    return {
        "role": role,
        "shape": f"{role}[n=1]",
        "equivalent": ok,
        "after_vs_before": check,
        "before_vs_reference": {"ok": True},
        "timing": _timing(before, after),
    }


def _line(rid: str, sha: str, shapes: list[dict], status: str = "executed") -> str:
    return json.dumps(
        {
            "id": rid,
            "repo": "vllm",
            "sha": sha,
            "path": "vllm/x.py",
            "spec": "s",
            "status": status,
            "equivalent": all(s["equivalent"] for s in shapes),
            "shapes": shapes,
            "toolchain": CHAIN,
            "harness_version": "1",
            "seconds": 3.0,
        }
    )


def _lines() -> list[str]:
    fast = [_shape("named", 20.0, 10.0) for _ in range(4)] + [
        _shape("random", 20.0, 10.0),
        _shape("control_aa", 10.0, 10.0),
    ]
    wrong = [_shape("named", 20.0, 10.0), _shape("random", 20.0, 10.0, ok=False)]
    return [_line("r1", "a" * 40, fast), _line("r2", "b" * 40, wrong, "not_equivalent")]


def test_frames_compute_row_speedups_from_samples(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(_lines()) + "\n")
    ingest.write_batch("s01", results, tmp_path)
    runs, shapes = ingest.shipped(tmp_path)
    r1 = runs.filter(pl.col("id") == "r1").row(0, named=True)
    assert r1["graph_speedup"] == pytest.approx(2.0, rel=1e-6)
    assert r1["graph_ci_lo"] <= 2.0 <= r1["graph_ci_hi"]
    assert r1["control_kind"] == "before_vs_before"
    assert r1["control_graph_ci_lo"] <= 1.0 <= r1["control_graph_ci_hi"]
    assert r1["shapes_checked"] == 5
    assert r1["gpu"] == CHAIN["gpu"]
    assert shapes.filter(pl.col("id") == "r1").height == 12  # 6 shapes x 2 scopes
    meta = metadata(runs, shapes)
    assert meta["executed_rows"] == 1


def test_attach_execution_labels_only_equivalent_rows(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(_lines()) + "\n")
    ingest.write_batch("s01", results, tmp_path)
    runs, _ = ingest.shipped(tmp_path)
    code = "import triton\n"
    rows = pl.DataFrame(
        {
            "id": ["r1", "r2", "r3"],
            "repo": ["vllm"] * 3,
            "sha": ["a" * 40, "b" * 40, "c" * 40],
            "path": ["vllm/x.py"] * 3,
            "language": ["Triton", "Triton", "CUDA"],
            "title": ["x", "y", "z"],
            "before_code": [code] * 3,
            "after_code": [code] * 3,
        }
    )
    out = attach_execution(rows, runs).sort("id")
    assert out["exec_status"].to_list() == [
        "executed",
        "not_equivalent",
        "needs_cuda_extension_build",
    ]
    assert out["executed"].to_list() == [True, False, False]
    assert out["measured_kernel_speedup"][0] == pytest.approx(2.0, rel=1e-6)
    assert out["measured_kernel_speedup"][1] is None  # no evidence where outputs differ
    assert "H100" in out["exec_toolchain"][0]


def test_claims_view_parses_claims_and_flags_reproduction() -> None:
    con = duckdb.connect()
    con.execute("CREATE SCHEMA datasets")
    con.execute(
        """CREATE TABLE datasets.kernel_commits AS SELECT * FROM (VALUES
        ('r1', 'vllm', 'a', 'p', 't', ['2-5x speedup'], NULL::DOUBLE, NULL::DOUBLE, TRUE,
         4.0, 3.5, 4.5, 1.2, 1.1, 1.3, TRUE, TRUE, NULL, 'tc'),
        ('r2', 'vllm', 'b', 'p', 't', ['25% better'], 1.3, NULL, TRUE,
         1.0, 0.98, 1.02, 1.0, 0.9, 1.1, FALSE, FALSE, 'amd', 'tc'),
        ('r3', 'vllm', 'c', 'p', 't', []::VARCHAR[], NULL, NULL, FALSE,
         NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
        ) t(id, repo, sha, path, title, speedup_claims, kernel_speedup, e2e_speedup, equivalent,
            measured_kernel_speedup, measured_kernel_speedup_ci_lo, measured_kernel_speedup_ci_hi,
            measured_host_speedup, measured_host_speedup_ci_lo, measured_host_speedup_ci_hi,
            measured_kernel_significant, measured_host_significant,
            exec_claim_hardware, exec_toolchain)"""
    )
    rows = con.execute(
        load_sql("analysis/claims_vs_measured") + " ORDER BY id, claim_source, scope"
    ).fetchall()
    cols = [d[0] for d in con.description]
    got = [dict(zip(cols, r, strict=True)) for r in rows]
    r1 = [g for g in got if g["id"] == "r1"]
    assert {g["claim_value"] for g in r1} == {5.0}
    assert {(g["scope"], g["reproduces"]) for g in r1} == {("graph", True), ("host", False)}
    r2 = [g for g in got if g["id"] == "r2" and g["claim_source"] == "text"]
    assert r2[0]["claim_value"] == pytest.approx(1.25)
    assert {g["hardware"] for g in r2} == {"amd"}
    assert not [g for g in got if g["id"] == "r3"]  # not equivalent: no measurement


def test_shipped_batches_hold_their_invariants() -> None:
    runs, shapes = ingest.shipped()
    if runs.is_empty():
        pytest.skip("no batch shipped yet")
    assert runs["gpu"].null_count() == 0 and runs["triton"].null_count() == 0
    executed = runs.filter(pl.col("status") == "executed")
    assert (executed["shapes_checked"] >= 5).all()
    assert executed["equivalent"].all()
    assert set(shapes["id"].unique()) <= set(runs["id"].unique())


def test_label_run_is_first_executed_else_latest() -> None:
    from dagster_project.commit_exec.columns import first_runs

    runs = pl.DataFrame(
        {
            "batch": ["s01", "s02", "s03", "s01", "s02"],
            "id": ["a", "a", "a", "b", "b"],
            "status": ["run_error", "executed", "executed", "run_error", "load_error"],
            "graph_speedup": [None, 1.5, 1.6, None, None],
        }
    )
    got = {r["id"]: (r["batch"], r["status"]) for r in first_runs(runs).iter_rows(named=True)}
    assert got == {"a": ("s02", "executed"), "b": ("s02", "load_error")}


def test_label_run_prefers_a_timed_run_over_an_untimed_check() -> None:
    from dagster_project.commit_exec.columns import first_runs

    runs = pl.DataFrame(
        {
            "batch": ["s02-check", "s02", "s03-check"],
            "id": ["a", "a", "c"],
            "status": ["executed", "executed", "executed"],
            "graph_speedup": [None, 1.4, None],
        }
    )
    got = {
        r["id"]: (r["batch"], r["graph_speedup"]) for r in first_runs(runs).iter_rows(named=True)
    }
    assert got == {"a": ("s02", 1.4), "c": ("s03-check", None)}


def test_shared_check_oom_is_a_harness_error_not_a_verdict() -> None:
    oom = json.loads(_line("r3", "c" * 40, [], "run_error"))
    oom["error"] = "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    other = dict(oom, id="r4", error="AttributeError: no attribute 'x'")
    lines = [json.dumps(oom), json.dumps(other)]
    shared, _ = ingest.frames("s02-check", lines, shared_check=True)
    alone, _ = ingest.frames("s02", lines)
    assert shared["status"].to_list() == ["harness_error", "run_error"]
    assert shared["error"][0] == ingest.SHARED_OOM
    assert alone["status"].to_list() == ["run_error", "run_error"]


def test_shipped_figures_follow_todays_rule(tmp_path: Path) -> None:
    """A batch whose stored row figures follow an older rule (a 1.03x CI flagged
    significant under the 2% floor, pooled shapes) reads back re-derived from its per-shape
    samples by today's label rule and floor."""
    from dagster_project.commit_exec.device.stats import significant

    runs, shapes = ingest.frames("s09", _lines())
    fresh = runs
    runs = runs.drop("label_version").with_columns(  # stored before label rule 2
        graph_speedup=pl.Series([1.035, None]),
        graph_ci_lo=pl.Series([1.03, None]),
        graph_ci_hi=pl.Series([1.04, None]),
        graph_significant=pl.Series([True, None]),
    )
    runs.write_parquet(tmp_path / "s09.runs.parquet")
    shapes.write_parquet(tmp_path / "s09.shapes.parquet")
    got, _ = ingest.shipped(tmp_path)
    for col in ("graph_speedup", "graph_ci_lo", "graph_ci_hi", "host_speedup"):
        assert got[col].to_list() == fresh[col].to_list(), col
    pairs = zip(got["graph_ci_lo"], got["graph_ci_hi"], strict=True)
    assert got["graph_significant"].to_list() == [significant(lo, hi) for lo, hi in pairs]
    assert got["graph_significant"][0] is True  # 2x on samples, whatever was stored
    assert got["label_version"].to_list() == [stats.LABEL_VERSION] * 2


def test_the_random_shape_is_not_pooled_into_the_label(tmp_path: Path) -> None:
    """stats.LABEL_ROLES: a row's speedup is read over its named shapes; the random
    held-out shape keeps its own figure (pooled, it moved labels with every draw)."""
    shapes = [_shape("named", 20.0, 10.0) for _ in range(4)] + [_shape("random", 10.0, 20.0)]
    results = tmp_path / "results.jsonl"
    results.write_text(_line("r1", "a" * 40, shapes) + "\n")
    ingest.write_batch("s01", results, tmp_path)
    r1 = ingest.shipped(tmp_path)[0].row(0, named=True)
    assert r1["graph_speedup"] == pytest.approx(2.0, rel=1e-6)  # pooled it was 2^(3/5)
    assert r1["heldout_graph_speedup"] == pytest.approx(0.5, rel=1e-6)
    assert r1["label_version"] == stats.LABEL_VERSION


def _blocked_timing(before: float, after: float, shifts: list[float]) -> dict:
    """A harness-6 scope: 6 blocks of 4 samples, each block's level shifted."""
    sb = [before * (1 + s) * (1 + 0.002 * i) for s in shifts for i in range(4)]
    sa = [after * (1 - s) * (1 + 0.002 * i) for s in shifts for i in range(4)]
    scope = {"speedup": before / after, "samples_before": sb, "samples_after": sa, "block_size": 4}
    return {"sets": 8, "set_bytes": 1000, "blocks": 6, "graph": scope, "host": dict(scope)}


def test_harness6_blocks_give_the_row_interval_and_ship_their_block_size(tmp_path: Path) -> None:
    # Block levels 1 % apart: the row's interval comes from the blocks (wide enough to hold
    # 1.0 for the A/A control), and the shapes table records the block size.
    shifts = [0.01, -0.01, 0.005, -0.005, 0.0, 0.01]
    shapes = [
        {**_shape("named", 20.0, 10.0), "timing": _blocked_timing(20.0, 10.0, shifts)},
        {**_shape("control_aa", 10.0, 10.0), "timing": _blocked_timing(10.0, 10.0, shifts)},
    ]
    path = tmp_path / "r.jsonl"
    path.write_text(_line("r6", "c" * 40, shapes) + "\n")
    runs, table = ingest.frames("s06-h100", path.read_text().splitlines())
    row = runs.row(0, named=True)
    assert 1.9 < row["graph_speedup"] < 2.1 and row["graph_significant"]
    assert row["control_graph_ci_lo"] <= 1.0 <= row["control_graph_ci_hi"]
    assert set(table.drop_nulls("scope")["block_size"].to_list()) == {4}


def test_relabel_stores_todays_rule_once_and_keeps_the_samples(tmp_path: Path) -> None:
    """A batch stored under label rule 1 (pooled figures, no label_version) is rewritten
    by ``relabel`` with the figures ``shipped`` would derive; the shapes file is untouched
    and a second pass rewrites nothing."""
    shapes = [_shape("named", 20.0, 10.0) for _ in range(4)] + [_shape("random", 10.0, 20.0)]
    results = tmp_path / "results.jsonl"
    results.write_text(_line("r1", "a" * 40, shapes) + "\n")
    runs_p, shapes_p = ingest.write_batch("s01", results, tmp_path)
    old = pl.read_parquet(runs_p).drop("label_version").with_columns(graph_speedup=pl.lit(1.5))
    old.write_parquet(runs_p)
    derived, _ = ingest.shipped(tmp_path)
    evidence = shapes_p.read_bytes()
    assert ingest.relabel(tmp_path) == [runs_p]
    stored = pl.read_parquet(runs_p)
    assert stored["graph_speedup"][0] == pytest.approx(2.0, rel=1e-6)
    assert stored["graph_speedup"][0] == derived["graph_speedup"][0]
    assert stored["label_version"][0] == stats.LABEL_VERSION
    assert shapes_p.read_bytes() == evidence
    assert ingest.relabel(tmp_path) == []


def test_shipped_block_batches_store_todays_label_figures() -> None:
    """The harness-6 batches in the package carry the figures today's rule derives from
    their samples (harness <= 5 ones too, by the same code; they take ~15 s to re-derive,
    so the fast ones stand for them here)."""
    for runs_p in sorted(ingest.DATA_DIR.glob("*.runs.parquet")):
        runs = pl.read_parquet(runs_p)
        assert (runs["label_version"] == stats.LABEL_VERSION).all(), runs_p.name
        shapes = pl.read_parquet(runs_p.with_name(runs_p.name.replace(".runs.", ".shapes.")))
        if "block_size" not in shapes.columns or shapes["block_size"].is_null().all():
            continue
        again = ingest._current_speedups(runs, shapes)
        cols = [f"{s}_{k}" for s in ingest.SCOPES for k in ("speedup", "ci_lo", "ci_hi")]
        for col in cols:  # equal up to float rounding (Python versions' statistics differ)
            got, want = again[col].to_list(), runs[col].to_list()
            assert [x is None for x in got] == [x is None for x in want], (runs_p.name, col)
            pairs = [(g, w) for g, w in zip(got, want, strict=True) if g is not None]
            assert all(g == pytest.approx(w, rel=1e-9) for g, w in pairs), (runs_p.name, col)
