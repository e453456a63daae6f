"""Every ``sql/analysis`` view is created on the seeded lake and returns what the seed rows
say it should. Expected values are computed here in plain Python from the seed frames,
never with DuckDB, so a wrong GROUP BY, join or null rule in a view fails its test.

``test_every_view_has_a_test`` keeps it that way: a new view file without a
``test_<view>`` function below fails the suite.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import polars as pl
import pytest

from dagster_project.report.analysis import ViewReport
from sql import analysis_views
from tests.unit.analysis.seed import CONFIG_KEYS, Seed, median, quantile_cont


# -- helpers ------------------------------------------------------------------------------------
def _view(seeded: Seed, views: ViewReport, name: str) -> pl.DataFrame:
    assert name in views.created, f"analysis.{name} was not created: {views.skipped.get(name)}"
    return seeded.lake.query(f'SELECT * FROM analysis."{name}"')


def _approx(value: Any) -> Any:
    return pytest.approx(value, rel=1e-9, abs=1e-9) if isinstance(value, float) else value


def _key(row: dict[str, Any], cols: Iterable[str]) -> tuple[str, ...]:
    return tuple("" if row[c] is None else str(row[c]) for c in cols)


def _assert_rows(actual: pl.DataFrame, expected: list[dict[str, Any]], key: list[str]) -> None:
    """Same rows (order-insensitive, by ``key``), same columns, floats approximately."""
    got = sorted(actual.to_dicts(), key=lambda r: _key(r, key))
    want = sorted(expected, key=lambda r: _key(r, key))
    assert [set(r) for r in got[:1]] == [set(r) for r in want[:1]]
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want, strict=True):
        assert g == {k: _approx(v) for k, v in w.items()}, (g, w)


def _group(
    rows: Iterable[dict[str, Any]], key: Callable[[dict[str, Any]], tuple]
) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        out[key(r)].append(r)
    return out


def _card(df: pl.DataFrame, *, strict_double: bool = True) -> dict[str, float | None]:
    """metric -> ours, after checking the card views' shared column convention
    (metric, card DOUBLE, ours DOUBLE, note).

    ``strict_double=False`` accepts any numeric ``card``: card_kernel_opt_rl.sql starts its
    UNION with the literal ``19287.0``, which DuckDB types DECIMAL(11,1), not DOUBLE.
    """
    assert df.columns == ["metric", "card", "ours", "note"]
    assert df.schema["ours"] == pl.Float64
    assert df.schema["card"] == pl.Float64 if strict_double else df.schema["card"].is_numeric()
    assert df["metric"].n_unique() == df.height
    assert df["card"].null_count() == 0
    return dict(zip(df["metric"].to_list(), df["ours"].to_list(), strict=True))


def _nonnull(values: Iterable[Any]) -> list[Any]:
    return [v for v in values if v is not None]


# -- the views --------------------------------------------------------------------------------
def test_every_view_is_created(views: ViewReport) -> None:
    names = [name for name, _ in analysis_views()]
    assert views.skipped == {}
    assert views.created == sorted(names)


def test_every_view_has_a_test() -> None:
    module = sys.modules[__name__]
    missing = [n for n, _ in analysis_views() if not callable(getattr(module, f"test_{n}", None))]
    assert missing == [], f"views without a test in {__name__}: {missing}"


def test_calibration_error(seeded: Seed, views: ViewReport) -> None:
    rows = [
        r for r in seeded.calibration.to_dicts() if r["status"] == "ok" and r["ratio"] is not None
    ]
    expected = []
    for (op, source), grp in _group(rows, lambda r: (r["op"], r["source"])).items():
        errs = [abs(math.log(r["ratio"])) for r in grp]
        errs_b = [abs(math.log(r["ratio_before"])) for r in grp]
        expected.append(
            {
                "op": op,
                "source": source,
                "points": len(grp),
                "median_ratio": median([r["ratio"] for r in grp]),
                "median_abs_log_err": median(errs),
                "share_within_1_5x": sum(e <= math.log(1.5) for e in errs) / len(grp),
                "median_abs_log_err_before": median(errs_b),
                "share_within_1_5x_before": sum(e <= math.log(1.5) for e in errs_b) / len(grp),
            }
        )
    _assert_rows(_view(seeded, views, "calibration_error"), expected, ["op", "source"])


def test_audit_rate(seeded: Seed, views: ViewReport) -> None:
    pairs = [
        r
        for r in seeded.gains.to_dicts()
        if r["baseline"] is not None and r["optimized"] is not None
    ]
    expected = []
    for (extractor, model), rows in _group(
        pairs, lambda r: (r["extractor"], r["model_used"] or "-")
    ).items():
        passed = sum(1 for r in rows if r["audit_pass"] is True)
        expected.append(
            {
                "extractor": extractor,
                "model": model,
                "pairs": len(rows),
                "passed": passed,
                "pass_pct": round(100.0 * passed / len(rows), 2),
            }
        )
    assert len(expected) >= 3  # table plus two LLM models: the grouping is exercised
    _assert_rows(_view(seeded, views, "audit_rate"), expected, ["extractor", "model"])


def test_card_kernel_opt_rl(seeded: Seed, views: ViewReport) -> None:
    tc, kc = seeded.tuned.to_dicts(), seeded.commits.to_dicts()
    speed = _nonnull(r["speedup_vs_default"] for r in tc)
    ks, es = _nonnull(r["kernel_speedup"] for r in kc), _nonnull(r["e2e_speedup"] for r in kc)
    years = [r["authored_at"].year for r in kc]
    expected = {
        "tuned_configs rows": len(tc),
        "tuned_configs train rows": sum(r["split"] == "train" for r in tc),
        "tuned_configs test rows": sum(r["split"] == "test" for r in tc),
        "tuned config files": len({r["repo"] + r["config_path"] for r in tc}),
        "GPUs (device names)": len({r["device_name"] for r in tc if r["device_name"]}),
        "kernels": len({r["kernel"] for r in tc}),
        "min M": min(r["M"] for r in tc),
        "max M": max(r["M"] for r in tc),
        "config rows with speedup_vs_default": len(speed),
        "median speedup_vs_default": median(speed),
        "kernel_commits rows": len(kc),
        "kernel_commits train rows": sum(r["split"] == "train" for r in kc),
        "kernel_commits test rows": sum(r["split"] == "test" for r in kc),
        "kernel_commits PRs": len(
            {(r["repo"], r["pr_number"]) for r in kc if r["pr_number"] is not None}
        ),
        "Apache-2.0 rows": sum(r["license"] == "Apache-2.0" for r in kc),
        "BSD rows": sum(r["license"] in ("BSD-3-Clause", "BSD") for r in kc),
        "MIT rows": sum(r["license"] == "MIT" for r in kc),
        "first year": min(years),
        "last year": max(years),
        "rows with kernel_speedup": len(ks),
        "median kernel_speedup": median(ks),
        "rows with e2e_speedup": len(es),
        "median prompt chars": median([float(len(r["prompt"])) for r in kc]),
    }
    ours = _card(_view(seeded, views, "card_kernel_opt_rl"), strict_double=False)
    assert set(ours) == set(expected)
    assert ours == {k: pytest.approx(float(v)) for k, v in expected.items()}


def test_card_kernelinfer(seeded: Seed, views: ViewReport) -> None:
    s, st = seeded.sessions.to_dicts(), seeded.steps.to_dicts()
    hours = [r["elapsed_s"] / 3600.0 for r in s]
    expected = {
        "sessions": len(s),
        "total steps": len(st),
        "mean steps per session": sum(r["num_steps"] for r in s) / len(s),
        "mean hours": sum(hours) / len(hours),
        "min hours": min(hours),
        "max hours": max(hours),
        "mean speedup": sum(r["best"]["speedup"] for r in s) / len(s),
        "ok steps": sum(r["status"] == "ok" for r in st),
        "compile_error steps": sum(r["status"] == "compile_error" for r in st),
        "wrong_result steps": sum(r["status"] == "wrong_result" for r in st),
        "holdout tasks": seeded.holdout.height,
    }
    df = _view(seeded, views, "card_kernelinfer")
    ours = _card(df)
    assert ours == {k: pytest.approx(float(v)) for k, v in expected.items()}
    card = dict(zip(df["metric"], df["card"], strict=True))
    assert card["sessions"] == 1899 and card["mean speedup"] == pytest.approx(13.4)
    assert (
        card["ok steps"] + card["compile_error steps"] + card["wrong_result steps"]
        == card["total steps"]
    )
    assert card["holdout tasks"] == 195


def test_card_kernelswarm(seeded: Seed, views: ViewReport) -> None:
    e = seeded.swarm.to_dicts()
    expected = {
        "episodes": len(e),
        "messages": sum(r["num_messages"] for r in e),
        "mean messages per episode": sum(r["num_messages"] for r in e) / len(e),
        "mean agents per episode": sum(r["n_agents"] for r in e) / len(e),
        "ops": len({r["op"] for r in e}),
        "CUDA ops": len({r["op"] for r in e if r["impl"] == "cuda"}),
        "Triton ops": len({r["op"] for r in e if r["impl"] == "triton"}),
        "GPUs": len({r["gpu"] for r in e}),
        "min hours": min(r["elapsed_s"] for r in e) / 3600.0,
        "max hours": max(r["elapsed_s"] for r in e) / 3600.0,
    }
    ours = _card(_view(seeded, views, "card_kernelswarm"))
    assert ours == {k: pytest.approx(float(v)) for k, v in expected.items()}


def test_config_coverage(seeded: Seed, views: ViewReport) -> None:
    expected = [
        {
            "gpu": gpu,
            "dtype": dtype,
            "kernel": kernel,
            "files": len({r["config_path"] for r in rows}),
            "rows": len(rows),
            "min_m": min(r["M"] for r in rows),
            "max_m": max(r["M"] for r in rows),
        }
        for (gpu, dtype, kernel), rows in _group(
            seeded.tuned.to_dicts(), lambda r: (r["gpu"], r["dtype"], r["kernel"])
        ).items()
    ]
    df = _view(seeded, views, "config_coverage")
    _assert_rows(df, expected, ["gpu", "dtype", "kernel"])
    assert df["files"].to_list() == sorted(df["files"].to_list(), reverse=True)


def test_gains_by_kernel_gpu(seeded: Seed, views: ViewReport) -> None:
    primary = [
        r
        for r in seeded.gains.to_dicts()
        if r["primary"] and r["published"] is True and r["speedup"] is not None
    ]
    # the seed has audit-failed and audited-but-withheld primaries: neither reaches the view
    assert any(
        r["primary"] and r["audit_pass"] is not True and r["speedup"] is not None
        for r in seeded.gains.to_dicts()
    )
    assert any(
        r["primary"] and r["audit_pass"] is True and not r["published"] and r["speedup"]
        for r in seeded.gains.to_dicts()
    )
    expected = []
    for (repo, scope, hw, metric), rows in _group(
        primary, lambda r: (r["repo"], r["scope"], r["hardware"] or "?", r["metric"])
    ).items():
        sp = [r["speedup"] for r in rows]
        expected.append(
            {
                "repo": repo,
                "scope": scope,
                "hardware": hw,
                "metric": metric,
                "measurements": len(rows),
                "prs": len({r["pr_number"] for r in rows}),
                "median_speedup": median(sp),
                "p10": quantile_cont(sp, 0.1),
                "p90": quantile_cont(sp, 0.9),
            }
        )
    assert any(e["hardware"] == "?" for e in expected)  # unknown hardware is kept, labelled
    df = _view(seeded, views, "gains_by_kernel_gpu")
    _assert_rows(df, expected, ["repo", "scope", "hardware", "metric"])
    assert df["measurements"].to_list() == sorted(df["measurements"].to_list(), reverse=True)


def test_rows_per_month(seeded: Seed, views: ViewReport) -> None:
    expected = [
        {
            "repo": repo,
            "month": month,
            "rows": len(rows),
            "prs": len({r["pr_number"] for r in rows if r["pr_number"] is not None}),
            "test_rows": sum(r["split"] == "test" for r in rows),
        }
        for (repo, month), rows in _group(
            seeded.commits.to_dicts(), lambda r: (r["repo"], r["authored_at"].strftime("%Y-%m"))
        ).items()
    ]
    df = _view(seeded, views, "rows_per_month")
    _assert_rows(df, expected, ["repo", "month"])
    order = [(r["month"], r["repo"]) for r in df.iter_rows(named=True)]
    assert order == sorted(order)


def test_speedup_distribution(seeded: Seed, views: ViewReport) -> None:
    columns = {
        "kernel_commits.kernel_speedup": seeded.commits["kernel_speedup"].to_list(),
        "kernel_commits.e2e_speedup": seeded.commits["e2e_speedup"].to_list(),
        "tuned_configs.speedup_vs_default": seeded.tuned["speedup_vs_default"].to_list(),
    }
    expected = []
    for what, values in columns.items():
        v = _nonnull(values)
        expected.append(
            {
                "what": what,
                "n": len(v),
                "median": median(v),
                "p10": quantile_cont(v, 0.1),
                "p90": quantile_cont(v, 0.9),
            }
        )
    _assert_rows(_view(seeded, views, "speedup_distribution"), expected, ["what"])


def test_speedup_values(seeded: Seed, views: ViewReport) -> None:
    expected = [
        {
            "source": "derived.pr_gains",
            "repo": r["repo"],
            "pr_number": r["pr_number"],
            "scope": r["scope"],
            "gpu": r["hardware"],
            "kernel": None,
            "speedup": r["speedup"],
        }
        for r in seeded.gains.to_dicts()
        if r["primary"] and r["published"] is True and r["speedup"] is not None
    ]
    expected += [
        {
            "source": "datasets.tuned_configs",
            "repo": r["repo"],
            "pr_number": r["config_pr_number"],
            "scope": "config",
            "gpu": r["gpu"],
            "kernel": r["kernel"],
            "speedup": r["speedup_vs_default"],
        }
        for r in seeded.tuned.to_dicts()
        if r["speedup_vs_default"] is not None
    ]
    for col, scope in (("kernel_speedup", "kernel"), ("e2e_speedup", "e2e")):
        expected += [
            {
                "source": "datasets.kernel_commits",
                "repo": r["repo"],
                "pr_number": r["pr_number"],
                "scope": scope,
                "gpu": None,
                "kernel": None,
                "speedup": r[col],
            }
            for r in seeded.commits.to_dicts()
            if r[col] is not None
        ]
    df = _view(seeded, views, "speedup_values")
    assert df.schema["speedup"] == pl.Float64
    _assert_rows(df, expected, ["source", "repo", "pr_number", "scope", "gpu", "kernel", "speedup"])


def test_tuned_speedup_by_kernel_gpu(seeded: Seed, views: ViewReport) -> None:
    rows_with = [r for r in seeded.tuned.to_dicts() if r["speedup_vs_default"] is not None]
    expected = []
    for (kernel, gpu), rows in _group(rows_with, lambda r: (r["kernel"], r["gpu"])).items():
        sp = [r["speedup_vs_default"] for r in rows]
        expected.append(
            {
                "kernel": kernel,
                "gpu": gpu,
                "rows": len(rows),
                "files": len({(r["repo"], r["config_path"]) for r in rows}),
                "prs": len(
                    {
                        (r["repo"], r["config_pr_number"])
                        for r in rows
                        if r["config_pr_number"] is not None
                    }
                ),
                "median_speedup": median(sp),
                "p10": quantile_cont(sp, 0.1),
                "p90": quantile_cont(sp, 0.9),
                "max_speedup": max(sp),
            }
        )
    df = _view(seeded, views, "tuned_speedup_by_kernel_gpu")
    _assert_rows(df, expected, ["kernel", "gpu"])
    assert df["rows"].to_list() == sorted(df["rows"].to_list(), reverse=True)


def test_tuned_vs_default(seeded: Seed, views: ViewReport) -> None:
    acc: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(
        lambda: {"diff": [], "log": []}
    )
    for r in seeded.tuned.to_dicts():
        if r["default_config"] is None:
            continue
        best, default = json.loads(r["best_config"]), json.loads(r["default_config"])
        for k in CONFIG_KEYS:
            b, d = best.get(k), default.get(k)
            cell = acc[(r["repo"], r["kernel"], k)]
            cell["diff"].append(0.0 if b == d else 1.0)  # a key missing on one side differs
            if b is not None and d:
                cell["log"].append(abs(math.log2(b / d)))
    expected = [
        {
            "repo": repo,
            "kernel": kernel,
            "key": key,
            "rows": len(cell["diff"]),
            "share_different": sum(cell["diff"]) / len(cell["diff"]),
            "mean_abs_log2_ratio": sum(cell["log"]) / len(cell["log"]) if cell["log"] else None,
        }
        for (repo, kernel, key), cell in acc.items()
    ]
    df = _view(seeded, views, "tuned_vs_default")
    _assert_rows(df, expected, ["repo", "kernel", "key"])
    order = [(r["repo"], r["kernel"], r["key"]) for r in df.iter_rows(named=True)]
    assert order == sorted(order)


def test_measured_speedup_by_kernel(seeded: Seed, views: ViewReport) -> None:
    rows = [
        r
        for r in seeded.lake.read_table("datasets", "measured_configs").to_dicts()
        if r["superseded_reason"] is None
    ]
    expected = []
    for (gpu, kernel, quant), grp in _group(
        rows, lambda r: (r["measured_on"], r["kernel"], r["quant"])
    ).items():
        speedups = [r["measured_speedup_vs_default"] for r in grp]
        expected.append(
            {
                "gpu": gpu,
                "kernel": kernel,
                "quant": quant,
                "rows": len(grp),
                "median_speedup_vs_default": median(speedups),
                "p10_speedup_vs_default": quantile_cont(speedups, 0.1),
                "p90_speedup_vs_default": quantile_cont(speedups, 0.9),
                "share_tuned_within_noise_of_best": sum(
                    r["tuned_within_noise_of_best"] for r in grp
                )
                / len(grp),
                "share_default_faster_beyond_noise": sum(
                    r["default_faster_beyond_noise"] for r in grp
                )
                / len(grp),
            }
        )
    assert sum(e["rows"] for e in expected) == 11  # the superseded table is left out
    _assert_rows(
        _view(seeded, views, "measured_speedup_by_kernel"), expected, ["gpu", "kernel", "quant"]
    )


def _claim_value(text: str) -> float | None:
    """The claim parser of claims_vs_measured.sql, in Python: the largest 'Nx' factor or
    1 + the largest 'N%' / 100, whichever is larger."""
    import re

    xs = [float(v) for v in re.findall(r"(\d+(?:\.\d+)?)\s*[xX×]", text)]
    pct = [1 + float(v) / 100 for v in re.findall(r"(\d+(?:\.\d+)?)\s*%", text)]
    vals = [max(xs)] if xs else []
    vals += [max(pct)] if pct else []
    return max(vals) if vals else None


def _claims(r: dict[str, Any]) -> list[tuple[str, str | None, float | None]]:
    out: list[tuple[str, str | None, float | None]] = []
    for c in r["speedup_claims"] or []:
        value = _claim_value(c)
        if value is not None:
            out.append(("text", c, value))
    if r["kernel_speedup"] is not None:
        out.append(("pr_kernel", None, r["kernel_speedup"]))
    if r["e2e_speedup"] is not None:
        out.append(("pr_e2e", None, r["e2e_speedup"]))
    return out or [("none", None, None)]


def test_claims_vs_measured(seeded: Seed, views: ViewReport) -> None:
    """Issue 35: every claim of an equivalent executed row beside both measured scopes."""
    expected = []
    for r in seeded.commits.to_dicts():
        if not r["equivalent"]:
            continue
        for source, text, value in _claims(r):
            for scope, col, sig in (
                ("graph", "measured_kernel_speedup", "measured_kernel_significant"),
                ("host", "measured_host_speedup", "measured_host_significant"),
            ):
                measured = r[col]
                expected.append(
                    {
                        "id": r["id"],
                        "repo": r["repo"],
                        "sha": r["sha"],
                        "path": r["path"],
                        "title": r["title"],
                        "claim_source": source,
                        "claim_text": text,
                        "claim_value": value,
                        "scope": scope,
                        "measured": measured,
                        "measured_ci_lo": r[f"{col}_ci_lo"],
                        "measured_ci_hi": r[f"{col}_ci_hi"],
                        "significant": r[sig],
                        "hardware": r["exec_claim_hardware"] or "match",
                        "exec_toolchain": r["exec_toolchain"],
                        "reproduces": None
                        if value is None or measured is None
                        else value / 2 <= measured <= value * 2,
                    }
                )
    assert {e["claim_source"] for e in expected} >= {"text", "none"}
    _assert_rows(
        _view(seeded, views, "claims_vs_measured"), expected, ["id", "claim_source", "scope"]
    )
