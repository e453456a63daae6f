"""kernelinfer / kernelswarm exports: the cards' JSONL layout, exact row shapes, stats, cards."""

from __future__ import annotations

import ast
import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from dagster_project.publish import (
    KERNELINFER,
    KERNELSWARM,
    CompileValidation,
    ExportError,
    export_kernelinfer,
    kernelinfer_stats,
)
from dagster_project.publish import simulated as module
from dagster_project.publish.cards import parse_front_matter
from dagster_project.publish.simulated import card_comparison
from dagster_project.sim.kernelinfer import CARD_STATS as KERNELINFER_CARD
from tests.unit.publish import lakes
from tests.unit.publish.conftest import SimExport

# The kernelinfer card's row format, in its order (sim-datasets.md lists the same names).
KERNELINFER_FIELDS = [
    "session_id",
    "op",
    "impl",
    "gpu",
    "arch",
    "dtype",
    "shape",
    "signature",
    "desc",
    "objective",
    "baseline_ms",
    "best",
    # issue 36 (36p): the label with its evidence (sim/label_columns.py)
    "speedup_label",
    "speedup_provenance",
    "speedup_unknown_reason",
    "speedup_error_scale",
    "attempts",
    "elapsed_s",
    "elapsed_hms",
    "num_steps",
    "trace",
    "messages",
]
KERNELSWARM_FIELDS = [
    "episode_id",
    "scenario",
    "n_agents",
    "op",
    "impl",
    "gpu",
    "arch",
    "dtype",
    "shape",
    "baseline_ms",
    "best_ms",
    "speedup",
    "elapsed_s",
    "agents",
    "num_messages",
    "messages",
]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _as_shipped(session: dict[str, Any]) -> dict[str, Any]:
    """A simulator session as the export ships it: ``shape`` and each step's ``params``
    as the JSON text the lake stores (``session_frames``), the label columns (null where
    none were attached), everything else unchanged."""
    labels = {k: session.get(k) for k in KERNELINFER_FIELDS if k.startswith("speedup_")}
    return {
        **session,
        **labels,
        "shape": json.dumps(session["shape"]),
        "trace": [
            {
                **t,
                "params": json.dumps(t["params"], sort_keys=True),
                "timing": t.get("timing"),
                "measured_ms": t.get("measured_ms"),
            }
            for t in session["trace"]
        ],
    }


# -- kernelinfer -------------------------------------------------------------------------------
def test_kernelinfer_layout(infer_export: SimExport) -> None:
    out = infer_export.report.out_dir
    assert sorted(p.name for p in (out / "batches").iterdir()) == [
        "batch_000.jsonl",
        "batch_001.jsonl",
        "batch_002.jsonl",
    ]
    assert {p.name for p in out.iterdir()} == {
        "batches",
        "sessions.jsonl",
        "tasks_holdout.jsonl",
        "stats.json",
        "README.md",
    }
    merged = b"".join((out / "batches" / f"batch_{i:03d}.jsonl").read_bytes() for i in range(3))
    assert (out / "sessions.jsonl").read_bytes() == merged
    assert infer_export.report.rows == {
        "batches/batch_000.jsonl": 4,
        "batches/batch_001.jsonl": 3,
        "batches/batch_002.jsonl": 2,
        "sessions.jsonl": 9,
        "tasks_holdout.jsonl": 5,
    }


def test_kernelinfer_rows_are_the_card_rows(infer_export: SimExport) -> None:
    rows = _lines(infer_export.report.out_dir / "sessions.jsonl")
    assert all(list(r) == KERNELINFER_FIELDS for r in rows)
    assert KERNELINFER.fields == tuple(KERNELINFER_FIELDS)
    # Field for field what the simulator produced; shape and params as JSON text.
    assert rows == [_as_shipped(r) for r in infer_export.rows]
    first = rows[0]
    assert json.loads(first["shape"]) == infer_export.rows[0]["shape"]
    assert isinstance(first["best"], dict)
    assert list(first["best"]) == ["step", "time_ms", "speedup"]
    assert list(first["attempts"]) == ["kept", "reverted", "errors", "rebench"]
    assert first["trace"][0]["kind"] == "baseline" and first["trace"][0]["params"] == "{}"
    assert all(list(m) == ["role", "content"] for m in first["messages"])
    # Batch NNN holds shard NNN.
    batch_1 = {
        r["session_id"] for r in _lines(infer_export.report.out_dir / "batches/batch_001.jsonl")
    }
    shard_1 = set(
        infer_export.lake.query("SELECT session_id FROM sim.kernelinfer_sessions WHERE shard = 1")[
            "session_id"
        ]
    )
    assert batch_1 == shard_1


def test_kernelinfer_holdout(infer_export: SimExport) -> None:
    rows = _lines(infer_export.report.out_dir / "tasks_holdout.jsonl")
    assert len(rows) == 5
    # The task spec only: the lake's prompt column stays in the lake.
    assert all(
        list(r)
        == [
            "task_id",
            "op",
            "impl",
            "gpu",
            "arch",
            "dtype",
            "shape",
            "signature",
            "desc",
            "objective",
        ]
        for r in rows
    )
    assert all(isinstance(json.loads(r["shape"]), dict) for r in rows)
    assert [r["task_id"] for r in rows] == sorted(r["task_id"] for r in rows)


def test_kernelinfer_loads_with_datasets(infer_export: SimExport, hf_cache: Path) -> None:
    import datasets

    out = infer_export.report.out_dir
    ds = datasets.load_dataset(
        "json", data_files=str(out / "sessions.jsonl"), split="train", cache_dir=str(hf_cache)
    )
    assert ds.num_rows == len(infer_export.rows)
    assert ds.column_names == KERNELINFER_FIELDS
    batches = datasets.load_dataset(
        "json",
        data_files=str(out / "batches" / "batch_*.jsonl"),
        split="train",
        cache_dir=str(hf_cache),
    )
    assert batches.num_rows == ds.num_rows
    # The card's `configs:` make the folder itself loadable, without the merged duplicate.
    default = datasets.load_dataset(str(out), split="train", cache_dir=str(hf_cache))
    assert sorted(default["session_id"]) == sorted(r["session_id"] for r in infer_export.rows)
    holdout = datasets.load_dataset(
        str(out), "tasks_holdout", split="test", cache_dir=str(hf_cache)
    )
    assert holdout.num_rows == 5
    # The card's TRL snippet, up to the trainer (TRL is not a dependency): the filtered
    # `messages` column is the conversational format SFTTrainer takes as it is.
    train = default.filter(lambda s: s["best"] is not None).select_columns(["messages"])
    assert train.num_rows == sum(1 for r in infer_export.rows if r["best"] is not None) > 0
    for row in train:
        roles = [m["role"] for m in row["messages"]]
        assert set(roles) <= {"system", "user", "assistant"} and "assistant" in roles
        assert all(isinstance(m["content"], str) and m["content"] for m in row["messages"])
    readme = (out / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert any("SFTTrainer" in b for b in blocks)
    for block in blocks:
        ast.parse(block)


def test_kernelinfer_stats_json(infer_export: SimExport) -> None:
    rows = infer_export.rows
    stats = json.loads((infer_export.report.out_dir / "stats.json").read_text())
    steps = [t for r in rows for t in r["trace"]]
    speedups = [r["best"]["speedup"] for r in rows]
    assert stats["sessions"] == len(rows)
    assert stats["steps"] == len(steps) == sum(r["num_steps"] for r in rows)
    assert stats["mean_steps"] == pytest.approx(statistics.mean(r["num_steps"] for r in rows))
    assert stats["mean_speedup"] == pytest.approx(statistics.mean(speedups))
    assert stats["median_speedup"] == pytest.approx(statistics.median(speedups))
    assert stats["max_hours"] == pytest.approx(max(r["elapsed_s"] for r in rows) / 3600)
    assert stats["unique_combos"] == len(
        {(r["op"], r["gpu"], json.dumps(r["shape"]), r["dtype"]) for r in rows}
    )
    statuses: dict[str, int] = {}
    for t in steps:
        statuses[t["status"]] = statuses.get(t["status"], 0) + 1
    assert stats["step_statuses"] == statuses
    assert {c["value"]: c["sessions"] for c in stats["coverage"]["gpu"]} == {
        g: sum(1 for r in rows if r["gpu"] == g) for g in {r["gpu"] for r in rows}
    }
    assert stats["holdout_tasks"] == 5
    assert stats["provenance"]["compile_validation"]["rate"] == pytest.approx(37 / 40)
    # The report carries the same dict the card was rendered from.
    assert stats == json.loads(json.dumps(infer_export.report.stats))
    fresh = kernelinfer_stats(infer_export.lake)
    assert {k: stats[k] for k in fresh} == json.loads(json.dumps(fresh))


def test_a_deviation_within_five_percent_needs_no_reason() -> None:
    rows = card_comparison(
        "kernelinfer", {"mean_steps": 100.0, "steps": 10.0}, {"mean_steps": 104.0, "steps": 20}
    )
    assert rows[0]["why"] == "within 5%" and rows[0]["deviation"] == pytest.approx(0.04)
    assert rows[1]["why"] == "sessions × mean_steps: see both"


def stats_of(export: SimExport) -> dict[str, Any]:
    return export.report.stats


def test_kernelinfer_card(infer_export: SimExport) -> None:
    readme = (infer_export.report.out_dir / "README.md").read_text()
    meta = parse_front_matter(readme)
    assert meta["license"] == "mit"
    assert "synthetic-data" in meta["tags"]
    assert "Simulated data" in readme and "roofline-style performance model" in readme
    # the generator's kernels were executed and compiled for the labels (issue 39)
    assert "never compiled or ran" not in readme
    assert "executed against an fp32 reference" in readme
    assert f"| best kernel | {stats_of(infer_export)['null_best_sessions']:,} sessions" in readme
    assert '`best["step"] is not None`' not in readme and 's["best"]["step"] is not None' in readme
    assert "| `unverified` |" in readme and "whatever the dtype or implementation" in readme
    # every figure of the original card is compared, a deviation past 5% with its reason
    rows = {r["figure"]: r for r in stats_of(infer_export)["card_comparison"]}
    assert set(rows) == set(KERNELINFER_CARD)
    assert rows["sessions"]["why"].startswith("the build's size")  # 9 fixture sessions
    assert rows["mean_hours"]["why"] == "not explained yet"
    assert f"| `sessions` | 1,899 | {stats_of(infer_export)['sessions']:,} |" in readme
    assert "37 of 40 sampled candidate kernels\n(92.5%) compiled with nvcc 13.0" in readme
    stats = infer_export.report.stats
    assert f"| sessions | {stats['sessions']:,} (" in readme
    for status, n in stats["step_statuses"].items():
        assert f"{n:,} {status}" in readme
    assert "| generator_version | `1.0.0` |" in readme


def test_kernelinfer_card_without_compile_check(tmp_path: Path) -> None:
    lake = lakes.new_lake(tmp_path / "lake")
    lakes.build_kernelinfer_lake(lake, shard_sizes=(2,))
    report = export_kernelinfer(lake, tmp_path / "out")
    readme = (report.out_dir / "README.md").read_text()
    assert "none was run for this build" in readme
    assert report.stats["provenance"]["compile_validation"] is None


def test_kernelinfer_failure_keeps_previous_export(
    infer_export: SimExport, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "kernelinfer"
    export_kernelinfer(infer_export.lake, out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    calls = {"n": 0}
    real_write = module._write_ndjson

    def write_then_die(reader: Any, fh: Any) -> int:
        calls["n"] += 1
        if calls["n"] > 2:
            raise OSError("disk full")
        return real_write(reader, fh)

    monkeypatch.setattr(module, "_write_ndjson", write_then_die)
    with pytest.raises(OSError, match="disk full"):
        export_kernelinfer(infer_export.lake, out)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".kernelinfer.lock", "kernelinfer"]


def test_empty_simulation_is_not_exported(tmp_path: Path) -> None:
    lake = lakes.new_lake(tmp_path / "lake")
    lakes.build_kernelinfer_lake(lake, shard_sizes=(1,))
    with lake.connect() as con:
        con.execute(
            "CREATE OR REPLACE TABLE sim.empty AS SELECT * FROM sim.kernelinfer_sessions LIMIT 0"
        )
        con.execute("CREATE OR REPLACE VIEW sim.kernelinfer_sessions AS SELECT * FROM sim.empty")
    with pytest.raises(ExportError, match="no sessions"):
        export_kernelinfer(lake, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_json_text_that_is_not_json_is_reported(tmp_path: Path) -> None:
    lake = lakes.new_lake(tmp_path / "lake")
    lakes.build_kernelinfer_lake(lake, shard_sizes=(2,))
    with lake.connect() as con:
        con.execute(
            "CREATE OR REPLACE TABLE sim.broken AS SELECT * REPLACE "
            "(CASE WHEN session_id = (SELECT max(session_id) FROM sim.kernelinfer_sessions) "
            "THEN 'M=1' ELSE shape END AS shape) FROM sim.kernelinfer_sessions"
        )
        con.execute("CREATE OR REPLACE VIEW sim.kernelinfer_sessions AS SELECT * FROM sim.broken")
    with pytest.raises(ExportError, match=r"1 row\(s\) hold text that is not JSON in shape"):
        export_kernelinfer(lake, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_compile_validation_must_be_a_rate() -> None:
    with pytest.raises(ValueError):
        CompileValidation(checked=3, compiled=4)


# -- kernelswarm -------------------------------------------------------------------------------
def test_kernelswarm_layout_and_rows(swarm_export: SimExport) -> None:
    out = swarm_export.report.out_dir
    assert swarm_export.report.rows == {
        "batches/batch_000.jsonl": 100,
        "batches/batch_001.jsonl": 30,
        "episodes.jsonl": 130,
        "tasks_holdout.jsonl": 3,
    }
    assert {p.name for p in out.iterdir()} == {
        "batches",
        "episodes.jsonl",
        "tasks_holdout.jsonl",
        "stats.json",
        "README.md",
    }
    rows = _lines(out / "episodes.jsonl")
    assert all(list(r) == KERNELSWARM_FIELDS for r in rows)
    assert KERNELSWARM.fields == tuple(KERNELSWARM_FIELDS)
    for got, want in zip(rows, swarm_export.rows, strict=True):
        assert got["episode_id"] == want["episode_id"]
        assert got["shape"] == want["shape"]  # JSON text, as stored
        assert got["agents"] == want["agents"]
        # Every message has every key (null where its kind has none); params JSON text.
        assert got["messages"] == want["messages"]
    assert json.loads(rows[0]["messages"][2]["params"]) == {"BLOCK": 128}
    assert rows[0]["messages"][0]["reward"] is None


def test_kernelswarm_stats_and_card(swarm_export: SimExport, hf_cache: Path) -> None:
    import datasets

    out = swarm_export.report.out_dir
    rows = swarm_export.rows
    stats = json.loads((out / "stats.json").read_text())
    assert stats["episodes"] == len(rows)
    assert stats["messages"] == sum(r["num_messages"] for r in rows)
    assert stats["mean_agents"] == pytest.approx(statistics.mean(r["n_agents"] for r in rows))
    kinds: dict[str, int] = {}
    for r in rows:
        for m in r["messages"]:
            kinds[m["kind"]] = kinds.get(m["kind"], 0) + 1
    assert stats["message_kinds"] == kinds
    assert {s["scenario"]: s["episodes"] for s in stats["by_scenario"]} == {
        sc: sum(1 for r in rows if r["scenario"] == sc) for sc in {r["scenario"] for r in rows}
    }
    readme = (out / "README.md").read_text()
    assert parse_front_matter(readme)["license"] == "mit"
    assert "Simulated data" in readme and "never compiled or ran" not in readme
    assert f"| episodes | {len(rows):,} in " in readme
    # every rewarded (kind, status) of the rows is in the card's reward table, counted
    rewarded: dict[tuple[str, str], int] = {}
    for r in rows:
        for m in r["messages"]:
            if m["kind"] in ("result", "verify", "verdict"):
                key = (m["kind"], m["status"] or "")
                rewarded[key] = rewarded.get(key, 0) + 1
    assert {(x["kind"], x["status"]): x["messages"] for x in stats["rewards"]} == rewarded
    for (kind, status), n in rewarded.items():
        assert f"| `{kind}` | `{status}` | {n:,} |" in readme
    assert "| `result` | `unverified` (it ran" in readme and "a take-back" in readme
    ds = datasets.load_dataset(str(out), split="train", cache_dir=str(hf_cache))
    assert ds.num_rows == len(rows)
