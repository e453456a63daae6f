"""Speedup labels with their evidence at the row (issue 36, 36p): a session whose baseline
and best were timed on its GPU is labelled ``measured:<gpu>``, one the policy refuses is
``unknown`` with the reason and no figure, a modelled label always carries its error
scale, and the columns reach the lake and the export."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from dagster_project.sim import codemodel
from dagster_project.sim import label_columns as lc
from dagster_project.sim import label_policy as lp
from dagster_project.sim.kernelinfer import session_frames, simulate_session
from dagster_project.sim.measured import tier_path
from dagster_project.sim.oracle import Oracle
from dagster_project.sim.tasks import TaskSpec


def _tier_task(gpu: str | None = None) -> tuple[TaskSpec, dict[str, str]]:
    """The task of the first Triton session of the shipped measured tier (on ``gpu``
    instead of its own when given) and its tier row."""
    with tier_path("h100").open(newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if r["impl"] == "triton")
    # <impl>_<op>-<gpu>-<shape>-<dtype>-s<seed>
    head, dtype, seed = row["session_id"].rsplit("-", 2)
    shape = head.removeprefix(f"{row['impl']}_{row['op']}-{row['session_gpu']}-")
    dims = tuple((k, int(v)) for k, v in (d.split("=") for d in shape.split(",")))
    task = TaskSpec(
        0, row["op"], row["impl"], gpu or row["session_gpu"], dtype, dims, int(seed[1:])
    )
    return task, row


@pytest.fixture(scope="module")
def tier() -> tuple[dict[str, Any], dict[str, str]]:
    task, row = _tier_task()
    session = simulate_session(task)
    assert session["session_id"] == row["session_id"]
    return session, row


def _flat_model() -> codemodel.CodeModel:
    """A real ridge fit with no correction: the roofline's own times for unmeasured steps
    (the shipped fit takes seconds; what is tested here does not depend on it)."""
    n = len(codemodel.FEATURES)
    flat = codemodel.fit([[float(i == j) for j in range(n)] for i in range(n)], [0.0] * n, 1.0)
    return codemodel.CodeModel(flat, codemodel.fit_offsets([], []))


def _scales(session: dict[str, Any], resid: float) -> lp.Scales:
    """Residuals of ``resid`` on the session's own baseline and best rungs."""
    keys = {
        (session["op"], session["impl"], session["trace"][i]["tag"])
        for i in (0, session["best"]["step"])
    }
    return lp.Scales(
        [
            lp.Residual(f"{k}{i}", k, f"f{i}", resid * (-1) ** i)
            for k in sorted(keys)
            for i in range(4)
        ]
    )


def test_a_measured_session_is_labelled_measured_on_its_gpu(tier) -> None:
    session, row = tier
    before = json.dumps(session, sort_keys=True)
    ev = lc.Evidence("h100", Oracle("h100"), _flat_model(), lp.shipped_scales("h100"))
    cols = lc.session_columns(session, ev)
    assert json.dumps(session, sort_keys=True) == before  # the generator's row is untouched
    assert cols["speedup_provenance"] == "measured:h100"
    assert cols["speedup_label"] == pytest.approx(float(row["measured_speedup"]), rel=1e-3)
    assert cols["speedup_unknown_reason"] is None and cols["speedup_error_scale"] is None
    steps, best = cols["trace"], session["best"]["step"]
    assert steps[0]["timing"] == steps[best]["timing"] == "measured"
    ratio = steps[0]["measured_ms"] / steps[best]["measured_ms"]
    assert ratio == pytest.approx(cols["speedup_label"], rel=1e-3)
    for t, s in zip(session["trace"], steps, strict=True):
        assert s["timing"] in ("measured", "modelled", None)
        assert (s["measured_ms"] is not None) == (s["timing"] == "measured")
        if t["time_ms"] is None and s["measured_ms"] is None:
            assert s["timing"] is None
    # the same session without its answers is no longer measured
    blind = lc.session_columns(
        session, lc.Evidence("h100", Oracle("h100", {}), _flat_model(), None)
    )
    assert not blind["speedup_provenance"].startswith("measured")
    assert {s["timing"] for s in blind["trace"]} <= {"modelled", None}


def test_a_refused_label_is_unknown_with_its_reason(tier) -> None:
    session, _row = tier
    wide = lc.Evidence("h100", Oracle("h100", {}), _flat_model(), _scales(session, 2.0))
    cols = lc.session_columns(session, wide)
    assert cols["speedup_provenance"] == "unknown" and cols["speedup_label"] is None
    assert cols["speedup_unknown_reason"].startswith("too wide")
    assert cols["speedup_error_scale"] is None
    # a GPU with no answers and no residuals: no evidence, and no code-model times
    task, _ = _tier_task("a100")
    other = simulate_session(task)
    ev = lc.shipped_evidence("a100")
    assert ev.oracle is None and ev.model is None and ev.scales is None
    got = lc.session_columns(other, ev)
    if other["best"]["step"] not in (None, 0):
        assert got["speedup_provenance"] == "unknown" and got["speedup_label"] is None
        assert got["speedup_unknown_reason"].startswith("no evidence")
    assert all(s["measured_ms"] is None for s in got["trace"])


def test_no_modelled_label_without_an_error_scale(tier) -> None:
    session, _row = tier
    narrow = lc.Evidence("h100", Oracle("h100", {}), _flat_model(), _scales(session, 0.05))
    cols = lc.session_columns(session, narrow)
    assert cols["speedup_provenance"] == f"modelled:label-policy-{lp.LABEL_POLICY_VERSION}"
    assert cols["speedup_label"] is not None and cols["speedup_unknown_reason"] is None
    assert 0 < cols["speedup_error_scale"] <= lp.THRESHOLD
    # nothing beat the baseline: 1 by definition, with a scale of 0
    one = lp.decide(None, lp.KernelTime(("x", "cuda", "v1"), False, 2.0), None, "a100")
    assert lc.label_fields(one, "a100")["speedup_provenance"] == "unknown"
    base = lp.KernelTime(("x", "cuda", "v1"), False, 2.0)
    same = lc.label_fields(lp.decide(None, base, base, "a100", best_is_baseline=True), "a100")
    assert (same["speedup_label"], same["speedup_error_scale"]) == (1.0, 0.0)
    with pytest.raises(ValueError, match="without an error scale"):
        lc.label_fields(lp.LabelDecision(lp.MODELLED, 2.0, None, "reliable: x"), "h100")
    # the shard's blocking check holds every labelled row to the same
    row = {**session, **{k: v for k, v in cols.items() if k != "trace"}}
    assert lc.label_violations(row) == []
    assert lc.label_violations({**row, "speedup_error_scale": None}) == [
        f"{session['session_id']}: {row['speedup_provenance']} label with error scale None"
    ]
    assert lc.label_violations({**row, "speedup_provenance": "unknown"})
    assert lc.label_violations(dict(session)) == [
        f"{session['session_id']}: no speedup label was attached"
    ]


@pytest.fixture(scope="module")
def labelled_export(tier, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list, Path]:
    """Two labelled copies of the tier session (measured on the H100; on an A100's evidence:
    unknown) in a one-shard lake, exported."""
    from dagster_project.publish import export_kernelinfer
    from tests.unit.publish import lakes

    session, _row = tier
    root = tmp_path_factory.mktemp("labelled")
    sessions = [json.loads(json.dumps(session)) for _ in range(2)]
    sessions[1]["session_id"] += "-copy"
    ev = lc.Evidence("h100", Oracle("h100"), _flat_model(), lp.shipped_scales("h100"))
    for s, e in zip(sessions, (ev, lc.shipped_evidence("a100")), strict=True):
        cols = lc.session_columns(s, e)
        for step, extra in zip(s["trace"], cols.pop("trace"), strict=True):
            step.update(extra)
        s.update(cols)
    sdf, tdf = session_frames(sessions, shard=0)
    assert sdf["speedup_provenance"].to_list()[0] == "measured:h100"
    assert tdf.filter(tdf["timing"] == "measured").height >= 2
    lake = lakes.new_lake(root)
    lake.write_partition("kernelinfer_sessions", "000", sdf)
    lake.refresh_view("sim", "kernelinfer_sessions")
    lake.replace_table("sim", "kernelinfer_tasks_holdout", lakes.holdout_frame(2))
    return export_kernelinfer(lake, root / "out"), sessions, root


def test_the_columns_reach_the_lake_and_the_export(tier, labelled_export) -> None:
    session, _row = tier
    report, sessions, _root = labelled_export
    rows = [json.loads(x) for x in (report.out_dir / "sessions.jsonl").read_text().splitlines()]
    first = next(r for r in rows if r["session_id"] == session["session_id"])
    assert first["speedup_provenance"] == "measured:h100" and first["speedup_label"] > 0
    assert [v for s in sessions for v in lc.label_violations(s)] == []
    assert lc.label_violations({**sessions[0], "trace": [dict(t) for t in session["trace"]]})
    assert first["best"] == session["best"]  # kept as it was
    assert first["trace"][0]["timing"] == "measured" and first["trace"][0]["measured_ms"] > 0
    labels = report.stats["labels"]
    assert labels["sessions"]["measured"] == 1 and sum(labels["sessions"].values()) == 2
    readme = (report.out_dir / "README.md").read_text()
    assert "Use `speedup_label` as the reward" in readme
    assert "| speedup labels | 1 measured," in readme
    fresh = (report.stats["label_policy"] or {}).get("fresh")
    if fresh:  # the clean test's held-out figures, with their Wilson bound
        assert f"{fresh['within_2x']} of {fresh['published']} within 2x" in readme
        assert f"Wilson lower bound {fresh['wilson_lower']:.2f}" in readme


def test_datasets_reads_the_columns_with_the_cards_types(labelled_export) -> None:
    import datasets

    report, _sessions, root = labelled_export
    loaded = datasets.load_dataset(
        str(report.out_dir), split="train", cache_dir=str(root / "hf-cache")
    )
    assert loaded.features["speedup_label"].dtype == "float64"
    assert loaded.features["speedup_error_scale"].dtype == "float64"
    assert sorted(loaded["speedup_provenance"]) == ["measured:h100", "unknown"]
    assert {t["timing"] for r in loaded for t in r["trace"]} <= {"measured", "modelled", None}
