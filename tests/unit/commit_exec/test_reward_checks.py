"""The shipped GPU reward test (``commit_exec.reward_checks``): appending a device session's
lines, and the direction rule against each row's published label (its first timed run)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import polars as pl
import pytest

from dagster_project.commit_exec import reward_checks as rc


def _runs(rows: list[tuple[str, str, float, bool]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "batch": [r[0] for r in rows],
            "id": [r[1] for r in rows],
            "status": ["executed"] * len(rows),
            "equivalent": [True] * len(rows),
            "graph_speedup": [r[2] for r in rows],
            "graph_significant": [r[3] for r in rows],
            "host_speedup": [None] * len(rows),
            "host_significant": [None] * len(rows),
        },
        schema_overrides={"host_speedup": pl.Float64, "host_significant": pl.Boolean},
    )


def _line(rid: str, edit: float, unchanged: float = 0.1, broken: float = -0.5) -> dict:
    return {
        "id": rid,
        "status": "ok",
        "speedup": 1.5,
        "ci": [1.4, 1.6],
        "significant": True,
        "oracle_edit_reward": edit,
        "unchanged_reward": unchanged,
        "broken_reward": broken,
    }


def _write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_append_writes_rows_and_refuses_a_batch_twice(tmp_path: Path) -> None:
    dest = tmp_path / "checks.csv"
    src = _write(tmp_path / "a.jsonl", [_line("r1", 0.4), _line("r2", 0.0)])
    assert rc.append("s1", src, "note", dest=dest) == 2
    rows = list(csv.DictReader(dest.open()))
    assert [r["id"] for r in rows] == ["r1", "r2"]
    assert rows[0]["side_by_side"] == "1" and rows[0]["reward_ci_hi"] == "1.6"
    with pytest.raises(rc.RewardCheckError, match="already holds batch s1"):
        rc.append("s1", src, "note", dest=dest)


def test_a_malformed_file_leaves_the_record_intact(tmp_path: Path) -> None:
    dest = tmp_path / "checks.csv"
    rc.append("s1", _write(tmp_path / "a.jsonl", [_line("r1", 0.4)]), "n", dest=dest)
    before = dest.read_text()
    bad = tmp_path / "b.jsonl"
    bad.write_text(json.dumps(_line("r2", 0.3)) + "\n{not json\n")
    with pytest.raises(rc.RewardCheckError, match="b.jsonl"):
        rc.append("s2", bad, "n", dest=dest)
    missing = _write(tmp_path / "c.jsonl", [{"id": "r3"}])
    with pytest.raises(rc.RewardCheckError, match="oracle_edit_reward"):
        rc.append("s3", missing, "n", dest=dest)
    assert dest.read_text() == before


def test_summary_counts_direction_only_for_significant_labels_and_alone_checks() -> None:
    runs = _runs(
        [
            ("s01-h100", "up", 1.5, True),  # the label run: the first timed session
            ("s02-h100", "up", 0.9, True),  # a re-measure, not a relabel
            ("s02-h100", "down", 0.8, True),
            ("s02-h100", "flat", 1.01, False),
            ("s02-h100", "shared", 2.0, True),
            ("s02-h100-check", "checkonly", 3.0, True),  # warm-up checks are not labels
        ]
    )
    row = {
        "reward_speedup": "1.2",
        "unchanged_reward": "0.1",
        "broken_reward": "-0.5",
        "reward_version": rc.REWARD_VERSION,
    }
    old = {**row, "reward_version": "0"}  # an earlier reward's check: reported, not counted
    checks = [
        {**old, "batch": "a0", "id": "shared", "oracle_edit_reward": "0.5", "side_by_side": "1"},
        {**row, "batch": "b1", "id": "up", "oracle_edit_reward": "0.4", "side_by_side": "1"},
        {**row, "batch": "b1", "id": "down", "oracle_edit_reward": "0.3", "side_by_side": "1"},
        {**row, "batch": "b1", "id": "flat", "oracle_edit_reward": "0.1", "side_by_side": "1"},
        {**row, "batch": "b0", "id": "shared", "oracle_edit_reward": "0.5", "side_by_side": "2"},
    ]
    s = rc.summary(runs, checks)
    assert s["significant_rows"] == 3  # up, down, shared
    assert s["tested_alone"] == 2 and s["consistent_alone"] == 1
    assert s["inconsistent"] == ["down"]  # a slowdown must earn less than no gain
    assert s["untested"] == ["shared"]  # tested only while sharing the card
    assert s["unchanged_no_gain"] == 5 and s["broken_error"] == 5
    assert s["earlier_rewards"] == {"0": {"tested": 1, "consistent": 1}}
    assert {b["batch"]: b["side_by_side"] for b in s["batches"]} == {"a0": 1, "b1": 1, "b0": 2}


def test_an_earlier_check_stands_only_where_the_oracle_edits_no_sibling() -> None:
    """Reward 3 changed only what a completion may edit (the row's siblings), so a reward-2
    check of a row whose oracle edit touches no sibling ran the very same files and counts;
    one whose oracle edits a sibling (or that did not record it) needs a reward-3 check."""
    runs = _runs([("s01-h100", i, 1.5, True) for i in ("plain", "multi", "unknown", "redone")])
    base = {
        "unchanged_reward": "0.1",
        "broken_reward": "-0.5",
        "side_by_side": "1",
        "reward_speedup": "1.4",
    }
    prev = rc.SAME_WITHOUT_SIBLING_EDITS[0]
    checks = [
        {
            **base,
            "batch": "p",
            "id": "plain",
            "oracle_edit_reward": "0.4",
            "reward_version": prev,
            "sibling_edits": "0",
        },
        {
            **base,
            "batch": "p",
            "id": "multi",
            "oracle_edit_reward": "0.1",
            "reward_version": prev,
            "sibling_edits": "1",
        },
        {
            **base,
            "batch": "p",
            "id": "unknown",
            "oracle_edit_reward": "0.4",
            "reward_version": prev,
            "sibling_edits": "",
        },
        {
            **base,
            "batch": "p",
            "id": "redone",
            "oracle_edit_reward": "0.1",
            "reward_version": prev,
            "sibling_edits": "1",
        },
        {
            **base,
            "batch": "n",
            "id": "redone",
            "oracle_edit_reward": "0.5",
            "reward_version": rc.REWARD_VERSION,
            "sibling_edits": "1",
        },
    ]
    s = rc.summary(runs, checks)
    assert s["tested_alone"] == 2 and s["consistent_alone"] == 2 and s["carried_over"] == 1
    assert s["untested"] == ["multi", "unknown"]


def test_the_shipped_record_reads_and_names_every_batch() -> None:
    s = rc.summary()
    batches = {b["batch"] for b in s["batches"]}
    assert {"s06-h100", "s07-h100", "s08-h100"} <= batches
    assert s["tested_alone"] + len(s["untested"]) == s["significant_rows"]


def test_the_record_reads_the_rewards_own_values() -> None:
    """``reward_checks`` repeats two reward values so that reading the record needs no
    rewards import (commit_exec never imports the rewards); they must not drift."""
    from dagster_project.rewards import commit_reward

    assert rc.NO_GAIN_REWARD == commit_reward.CORRECT_REWARD
    assert rc.ERROR_REWARD == commit_reward.ERROR_REWARD
    assert rc.REWARD_VERSION == commit_reward.REWARD_VERSION
