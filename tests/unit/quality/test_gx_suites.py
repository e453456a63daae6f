"""The GX layer: suites from JSON, column rules on pandas, cross-row rules on DuckDB,
failing rows in the result, and the lake left writable afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from dagster_project.quality.suites import SuiteError, load_suite, run_suite
from dagster_project.storage.lake import Lake

SUITE = {
    "name": "toy",
    "meta": {
        "kernelhouse": {
            "asset": "toy",
            "table": "datasets.toy",
            "blocking": True,
            "id_column": "id",
        }
    },
    "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}},
        {
            "type": "expect_column_values_to_be_in_set",
            "kwargs": {"column": "split", "value_set": ["train", "test"]},
        },
        {
            "type": "expect_column_values_to_be_in_set",
            "kwargs": {"column": "tile", "value_set": [16, 32, 64, 128, 256]},
        },
        {
            "type": "unexpected_rows_expectation",
            "description": "no group in both splits",
            "kwargs": {
                "unexpected_rows_query": "SELECT grp FROM {batch} WHERE split = 'test' "
                "INTERSECT SELECT grp FROM {batch} WHERE split = 'train'"
            },
        },
    ],
}


def _lake(tmp_path: Path, df: pl.DataFrame) -> Lake:
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))
    lake.replace_table("datasets", "toy", df)
    return lake


CLEAN = pl.DataFrame(
    {
        "id": [1, 2, 3, 4],
        "split": ["train", "train", "test", "test"],
        "grp": ["a", "a", "b", "c"],
        "tile": [16, 32, 64, 128],
    }
)


def test_clean_table_passes(tmp_path: Path) -> None:
    lake = _lake(tmp_path, CLEAN)
    res = run_suite(SUITE, lake.path)
    assert res.success, res.summary()
    assert len(res.outcomes) == 4 and res.rows == 4


def test_planted_violations_fail_with_rows(tmp_path: Path) -> None:
    bad = CLEAN.with_columns(
        split=pl.Series(["train", "train", "test", "valid"]),
        grp=pl.Series(["a", "b", "b", "c"]),  # b leaks across splits
        tile=pl.Series([16, 48, 64, 128]),  # 48 is not a power of two
    )
    lake = _lake(tmp_path, bad)
    res = run_suite(SUITE, lake.path)
    assert not res.success
    failed = {(o.type, o.column): o for o in res.failed}
    assert set(failed) == {
        ("expect_column_values_to_be_in_set", "split"),
        ("expect_column_values_to_be_in_set", "tile"),
        ("unexpected_rows_expectation", None),
    }
    assert failed[("expect_column_values_to_be_in_set", "tile")].sample == [{"id": 2, "tile": 48}]
    assert failed[("unexpected_rows_expectation", None)].sample == [{"grp": "b"}]
    assert failed[("unexpected_rows_expectation", None)].observed == 1
    # GX released the file: the lake is writable again in this process.
    lake.replace_table("datasets", "toy", CLEAN)


def test_mostly_threshold(tmp_path: Path) -> None:
    suite = {
        "name": "audit",
        "meta": {"kernelhouse": {"asset": "a", "table": "derived.g"}},
        "expectations": [
            {
                "type": "expect_column_values_to_be_in_set",
                "kwargs": {"column": "ok", "value_set": [True], "mostly": 0.988},
            }
        ],
    }
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))
    lake.replace_table("derived", "g", pl.DataFrame({"ok": [True] * 988 + [False] * 12}))
    assert run_suite(suite, lake.path).success
    lake.replace_table("derived", "g", pl.DataFrame({"ok": [True] * 987 + [False] * 13}))
    assert not run_suite(suite, lake.path).success


def test_malformed_suite_names_file(tmp_path: Path) -> None:
    p = tmp_path / "broken.json"
    p.write_text(json.dumps({"expectations": []}))
    with pytest.raises(SuiteError, match="broken.json"):
        load_suite(p)


def test_gate_threshold_read_from_suite_file(tmp_path: Path) -> None:
    from dagster_project.quality.suites import gate_threshold

    suite = {
        **SUITE,
        "meta": {
            "kernelhouse": {
                **SUITE["meta"]["kernelhouse"],
                "thresholds": {"c": {"share": 0.5, "bad": "x"}},
            }
        },
    }
    (tmp_path / "toy.json").write_text(json.dumps(suite))
    assert gate_threshold("toy", "c", "share", tmp_path) == 0.5
    with pytest.raises(
        SuiteError, match=r"toy\.json: meta\.kernelhouse\.thresholds\.c\.gone is missing"
    ):
        gate_threshold("toy", "c", "gone", tmp_path)
    with pytest.raises(SuiteError, match="toy.json.*must be a number"):
        gate_threshold("toy", "c", "bad", tmp_path)


def test_python_gates_read_their_thresholds_from_expectations() -> None:
    """The oracle gate's numbers are the suite file's (no literal in the asset)."""
    import assets.kernel_commits as kc

    suite = json.loads(
        (Path(__file__).parents[3] / "expectations" / "kernel_commits.json").read_text()
    )
    t = suite["meta"]["kernelhouse"]["thresholds"]["oracle_patch_reward"]
    assert (t["min_share_perfect"], t["low_score"]) == (
        kc.ORACLE_MIN_SHARE_PERFECT,
        kc.ORACLE_LOW_SCORE,
    )


def test_value_set_from_names_a_python_sequence(tmp_path: Path) -> None:
    ref = "dagster_project.mining.commits.license:OPEN_SOURCE"
    suite = {
        **SUITE,
        "expectations": [
            {
                "type": "expect_column_values_to_be_in_set",
                "kwargs": {"column": "l", "value_set_from": ref, "mostly": 1},
            }
        ],
    }
    p = tmp_path / "refs.json"
    p.write_text(json.dumps(suite))
    kwargs = load_suite(p)["expectations"][0]["kwargs"]
    assert list(kwargs) == ["column", "value_set", "mostly"]
    assert kwargs["value_set"] == ["Apache-2.0", "BSD-3-Clause", "BSD", "MIT"]
    suite["expectations"][0]["kwargs"]["value_set_from"] = "dagster_project.nowhere:X"
    p.write_text(json.dumps(suite))
    with pytest.raises(SuiteError, match=r"refs\.json: value_set_from .* does not resolve"):
        load_suite(p)
