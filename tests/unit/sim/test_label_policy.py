"""The publication policy of modelled speedup labels (issue 36, 36o): measured labels always
publish, modelled ones only where the code model's cross-validated error is narrow enough,
the rest are ``unknown`` with the reason; the threshold is the figure its rule fits."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dagster_project.sim import label_policy as lp

GEMV = ("gemv", "cuda", "v1")


def _res(key: str, kernel: lp.KernelKey, fold: str, r: float, *labels: str) -> lp.Residual:
    return lp.Residual(key, kernel, fold, r, tuple((fold, role) for role in labels))


def test_a_rung_with_steady_residuals_is_narrower_than_one_with_wide_ones() -> None:
    steady = [_res(f"s{i}", GEMV, f"f{i}", 0.1 * (-1) ** i) for i in range(6)]
    wide = [_res(f"w{i}", ("gemv", "cuda", "v2"), f"g{i}", 1.5 * (-1) ** i) for i in range(6)]
    scales = lp.Scales(steady + wide)
    assert scales.kernel(GEMV) < 0.6 < 1.2 < scales.kernel(("gemv", "cuda", "v2"))
    # a rung nobody measured falls back to its op's scale, an op nobody measured to all's
    assert scales.kernel(("gemv", "cuda", "v9")) == pytest.approx(
        math.sqrt((sum(r.log_resid**2 for r in steady + wide) + lp.K * scales.all_ms) / (12 + 2))
    )
    assert scales.kernel(("rmsnorm", "cuda", "v1")) == pytest.approx(math.sqrt(scales.all_ms))
    assert scales.neighbours(GEMV) == 6
    # leaving a component out drops its residuals from every level
    assert lp.Scales(steady + wide, leave_out="w0").neighbours(GEMV) == 6
    assert lp.Scales(steady + wide, leave_out="f0").neighbours(GEMV) == 5


def test_measured_labels_always_publish_modelled_ones_only_when_narrow() -> None:
    scales = lp.Scales([_res(f"s{i}", GEMV, f"f{i}", 0.05 * (-1) ** i) for i in range(8)])
    far = lp.Scales([_res(f"s{i}", GEMV, f"f{i}", 2.0 * (-1) ** i) for i in range(8)])
    base = lp.KernelTime(GEMV, False, 4.0)
    best = lp.KernelTime(GEMV, False, 1.0)
    ok = lp.decide(scales, base, best, "h100")
    assert (ok.provenance, ok.speedup, ok.kind) == (lp.MODELLED, 4.0, "reliable")
    assert ok.stamp == f"modelled:label-policy-{lp.LABEL_POLICY_VERSION}"
    wide = lp.decide(far, base, best, "h100")
    assert (wide.provenance, wide.speedup, wide.kind) == (lp.UNKNOWN, None, "too wide")
    assert not wide.published and wide.scale is not None and wide.scale > lp.THRESHOLD
    # both kernels answered: published whatever the scales say
    measured = lp.decide(
        far, lp.KernelTime(GEMV, True, 4.0), lp.KernelTime(GEMV, True, 2.0), "h100"
    )
    assert (measured.provenance, measured.speedup, measured.scale) == (lp.MEASURED, 2.0, 0.0)
    # one kernel answered: only the other one's error counts
    half = lp.label_scale(far, lp.KernelTime(GEMV, True, 4.0), best)
    assert half == pytest.approx(far.kernel(GEMV))
    # a modelled kernel whose own rung no answer covers: its op's scale says nothing of it
    lone = lp.decide(scales, base, lp.KernelTime(("gemv", "cuda", "v7"), False, 1.0), "h100")
    assert (lone.provenance, lone.kind) == (lp.UNKNOWN, "no neighbours") and "best" in lone.reason
    assert lone.scale is not None and lone.scale <= lp.THRESHOLD  # narrow, still withheld
    assert lp.decide(None, base, best, "a100").kind == "no evidence"
    # the H200 has measured kernels but no residuals: the reason must not say "none measured"
    h200 = lp.decide(None, base, best, "h200")
    assert h200.kind == "no evidence" and "never cross-validated on h200" in h200.reason
    assert "measured" not in h200.reason
    assert lp.decide(scales, base, None, "h100").kind == "no best"
    assert lp.decide(scales, lp.KernelTime(GEMV, False, None), best, "h100").kind == "no time"
    one = lp.decide(far, base, base, "h100", best_is_baseline=True)
    assert (one.provenance, one.speedup) == (lp.MODELLED, 1.0)


def test_the_threshold_is_the_widest_scale_whose_wilson_bound_meets_the_target() -> None:
    # 40 narrow labels all within 2x, then 40 wide ones half within 2x
    scored = [(0.01 * i, True) for i in range(1, 41)] + [
        (1.0 + 0.01 * i, i % 2 == 0) for i in range(40)
    ]
    t = lp.fit_threshold(scored)
    assert 0.4 <= t < 1.1
    figs = lp.coverage(scored, t)
    assert figs["within_2x_published"] >= 0.9 and figs["coverage"] < 0.6
    assert lp.fit_threshold([(0.1, False)] * 10) == 0.0


def test_the_shipped_threshold_is_the_one_its_residuals_fit(tmp_path: Path) -> None:
    """``THRESHOLD`` is ``fit_threshold`` of the shipped residuals' cross-validated labels,
    rounded down, and the card's figures are those labels' (rerun
    ``benchmarks/device/sim_label_policy_fresh.py --fit`` and copy the threshold after
    shipping new residuals; a new rule is a new version)."""
    residuals = lp.read_residuals(lp.residuals_path("h100"))
    scored = [(s, ok) for s, ok, _sid in lp.cv_labels(residuals)]
    assert len(scored) >= 100
    assert math.floor(100 * lp.fit_threshold(scored)) / 100 == lp.THRESHOLD
    summary = lp.read_summary("h100")
    assert summary is not None
    assert summary["threshold"] == lp.THRESHOLD
    assert summary["label_policy_version"] == lp.LABEL_POLICY_VERSION
    assert summary["cv"] == lp.coverage(scored, lp.THRESHOLD)
    assert summary["cv"]["within_2x_published"] >= lp.TARGET
    # the file round-trips
    lp.write_residuals(tmp_path / "r.csv", residuals, "x")
    assert lp.read_residuals(tmp_path / "r.csv") == residuals


def test_a_tier_session_is_measured_and_without_answers_is_decided_by_its_scale() -> None:
    """The hook on a real regenerated session: with the shipped answers its label is the
    measured tier's; with none, the code model's times under the policy."""
    import csv

    from dagster_project.sim import codemodel
    from dagster_project.sim.kernelinfer import simulate_session
    from dagster_project.sim.measured import tier_path
    from dagster_project.sim.oracle import Oracle
    from dagster_project.sim.tasks import TaskSpec

    with tier_path("h100").open(newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if r["impl"] == "triton")
    # the task from its session id: <impl>_<op>-<gpu>-<shape>-<dtype>-s<seed>
    head, dtype, seed = row["session_id"].rsplit("-", 2)
    shape = head.removeprefix(f"{row['impl']}_{row['op']}-{row['session_gpu']}-")
    dims = tuple((k, int(v)) for k, v in (d.split("=") for d in shape.split(",")))
    task = TaskSpec(0, row["op"], row["impl"], row["session_gpu"], dtype, dims, int(seed[1:]))
    assert task.session_id == row["session_id"]
    session = simulate_session(task)
    # a real ridge fit with no correction: the roofline's own times for unmeasured steps
    n = len(codemodel.FEATURES)
    flat = codemodel.fit([[float(i == j) for j in range(n)] for i in range(n)], [0.0] * n, 1.0)
    model = codemodel.CodeModel(flat, codemodel.fit_offsets([], []))
    scales = lp.Scales(lp.read_residuals(lp.residuals_path("h100")))
    got = lp.session_label(session, "h100", Oracle("h100"), model, scales)
    assert got.provenance == lp.MEASURED
    assert got.speedup == pytest.approx(float(row["measured_speedup"]), rel=1e-3)
    blind = lp.session_label(session, "h100", Oracle("h100", {}), model, scales)
    assert blind.kind in ("reliable", "too wide", "no neighbours") and blind.scale is not None
    assert blind.published == (blind.kind == "reliable" and blind.scale <= lp.THRESHOLD)


def test_the_clean_test_scores_only_labels_with_a_kernel_timed_after_the_freeze() -> None:
    """``sim_label_policy_fresh.py``: a kernel timed at the freeze keeps its measured time,
    the fresh one is modelled; sessions timed wholly before the freeze are not scored."""
    import importlib.util

    path = Path(__file__).resolve().parents[3] / "benchmarks/device/sim_label_policy_fresh.py"
    spec = importlib.util.spec_from_file_location("sim_label_policy_fresh", path)
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)

    def row(key: str, ms: float, *uses: str) -> dict[str, str]:
        return {"key": key, "status": "ok", "ms": str(ms), "uses": " ".join(uses)}

    rows = [
        row("b1", 4.0, "s1@0:baseline"),
        row("x1", 1.0, "s1@3:best"),  # s1: both before the freeze
        row("b2", 4.0, "s2@0:baseline"),
        row("x2", 1.0, "s2@2:best"),  # s2: x2 timed after it
        row("b3", 9.0, "s3@0:baseline"),
        row("x3", 1.0, "s3@4:best"),  # s3: both after, modelled 2x off
    ]
    before = {"b1": 4.0, "x1": 1.0, "b2": 4.0}
    times = {"b1": 4.0, "x1": 1.0, "b2": 4.0, "x2": 1.1, "b3": 9.0, "x3": 2.5}
    scales = lp.Scales([_res(f"r{i}", GEMV, f"f{i}", 0.05 * (-1) ** i) for i in range(8)])
    labels = script._fresh_labels(rows, before, times, scales, dict.fromkeys(times, GEMV))
    assert [sid for sid, *_ in labels] == ["s2", "s3"]
    got = {sid: (d.provenance, mod, meas) for sid, d, mod, meas in labels}
    assert got["s2"] == (lp.MODELLED, pytest.approx(4.0 / 1.1), 4.0)
    figs = script._fresh_figures(labels, [0.1, 0.9])
    assert (figs["labels"], figs["published"], figs["within_2x_published"]) == (2, 2, 0.5)
    assert figs["step_median_abs_log_err"] == 0.5 and figs["step_within_2x"] == 0.5


def test_the_clean_test_scores_online_sessions_through_their_roles() -> None:
    """An online-tier kernel's answer row says only ``online``; its session role comes from
    the model's point (the roles file). A session whose kernels were both answered at the
    freeze is not scored; one with a kernel answered since is."""
    import importlib.util

    from dagster_project.sim.measured import Point

    path = Path(__file__).resolve().parents[3] / "benchmarks/device/sim_label_policy_fresh.py"
    spec = importlib.util.spec_from_file_location("sim_label_policy_fresh", path)
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)

    def point(key: str, ms: float, sid: str, step: int, role: str) -> Point:
        return Point(key, "gemv", "cuda", "v0", ((sid, step, role),), ms, ms)

    points = [
        point("ob", 4.0, "old~online", 0, "baseline"),
        point("ox", 1.0, "old~online", 3, "best"),
        point("nb", 8.0, "new~online", 0, "baseline"),
        point("nx", 2.0, "new~online", 5, "best"),
    ]
    rows = script._point_rows(points)
    assert rows[1]["uses"] == "old~online@3:best" and float(rows[1]["ms"]) == 1.0
    before = {"ob": 4.0, "ox": 1.0}  # the old session's answers were shipped at the freeze
    times = {"ob": 4.0, "ox": 1.0, "nb": 8.0, "nx": 2.5}
    scales = lp.Scales([_res(f"r{i}", GEMV, f"f{i}", 0.05 * (-1) ** i) for i in range(8)])
    labels = script._fresh_labels(rows, before, times, scales, dict.fromkeys(times, GEMV))
    assert [(sid, mod, meas) for sid, _d, mod, meas in labels] == [("new~online", 3.2, 4.0)]
