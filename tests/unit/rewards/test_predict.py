"""The config-prediction benchmark (issue 38): tasks, splits, regret, baselines."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from dagster_project.rewards import measured, predict
from dagster_project.rewards.predict import Pick, Task

TUNED = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1}
BIG_M = {**TUNED, "BLOCK_SIZE_M": 64}
DEFAULT = {**TUNED, "BLOCK_SIZE_N": 128, "GROUP_SIZE_M": 8}


def _line(
    row_id: str, label: str, i: int, cfg: dict[str, int], t: float | None, **over: Any
) -> dict[str, Any]:
    base: dict[str, Any] = {
        "row_id": row_id,
        "label": label,
        "cand_index": i,
        "config": json.dumps(cfg, sort_keys=True),
        "status": "ok" if t is not None else "out_of_resources",
        "t_us": t,
        "kernel": "fused_moe_kernel",
        "repo": "vllm",
        "quant": "bf16",
        "M": 64,
        "N": 512,
        "K": 2048,
        "E": 64,
        "top_k": 8,
        "n_shared": 0,
        "moe_gemms": "both",
        "device": "NVIDIA H200",
        "spread": 0.01,
    }
    return {**base, **over}


def _table(row_id: str, times: dict[str, float | None], **over: Any) -> list[dict[str, Any]]:
    cfgs = {"tuned": TUNED, "default": DEFAULT, "BLOCK_SIZE_M*4": BIG_M}
    return [_line(row_id, lab, i, cfgs[lab], t, **over) for i, (lab, t) in enumerate(times.items())]


def _tasks(lines: list[dict[str, Any]]) -> list[Task]:
    schema = measured.RAW_SCHEMA
    df = pl.DataFrame([{c: r.get(c) for c in schema} for r in lines], schema=schema, orient="row")
    return predict.tasks_from_frame(measured.merge_results(df))


def test_regret_scores_the_pick_against_the_best_known_time_and_penalises_failures() -> None:
    (task,) = _tasks(_table("r", {"tuned": 10.0, "default": 12.5, "BLOCK_SIZE_M*4": None}))
    assert task.t_best == 10.0 and task.t_worst == 12.5
    assert predict.regret(task, Pick(task.index_of("tuned"))) == (0.0, False)
    assert predict.regret(task, Pick(task.index_of("default"))) == (0.25, False)
    # a config that did not run costs the slowest time that ran, and counts as failed
    assert predict.regret(task, Pick(task.index_of("BLOCK_SIZE_M*4"))) == (0.25, True)


def test_tables_with_one_ok_candidate_and_superseded_tables_are_not_tasks() -> None:
    one = _table("one", {"tuned": 10.0, "default": None})
    # launched on 1.1.0's uncapped grid (M=1: 8 pairs < E=64): superseded, not a task
    wrong = _table("wrong", {"tuned": 10.0, "default": 11.0}, M=1, repo="sglang")
    for line in wrong:
        line["details"] = json.dumps({"grid": [[1], [1]]})
    assert [
        t.row_id for t in _tasks([*one, *wrong, *_table("ok", {"tuned": 1.0, "default": 2.0})])
    ] == ["ok"]


def test_held_out_shape_keeps_every_m_of_a_shape_together_and_is_deterministic() -> None:
    lines = []
    for n in (256, 512, 1024, 2048, 4096, 8192, 14336, 28672):
        for m in (1, 16, 256):
            lines += _table(f"n{n}m{m}", {"tuned": 10.0, "default": 12.0}, N=n, M=m)
    tasks = _tasks(lines)
    split = predict.splits(tasks)[0]
    assert split.name == "held_out_shape" and split.test and split.train
    held = {t.shape_key for t in split.test}
    assert not held & {t.shape_key for t in split.train}
    assert len(split.test) == 3 * len(held)  # every M of a held-out shape
    assert [t.row_id for t in predict.splits(tasks)[0].test] == [t.row_id for t in split.test]


def test_held_out_gpu_split_and_same_shape_transfer_both_ways() -> None:
    """With tables of two GPUs there is one split per direction; the same shape on the
    other GPU transfers its fastest config (here BLOCK_SIZE_M*4 on the H200)."""
    h200 = _table("a", {"tuned": 10.0, "default": 12.0, "BLOCK_SIZE_M*4": 8.0})
    h100 = _table(
        "b", {"tuned": 10.0, "default": 12.0, "BLOCK_SIZE_M*4": 9.0}, device="NVIDIA H100 80GB HBM3"
    )
    tasks = _tasks([*h200, *h100])
    names = [s.name for s in predict.splits(tasks)]
    assert "held_out_gpu:NVIDIA H100 -> NVIDIA H200" in names
    assert "held_out_gpu:NVIDIA H200 -> NVIDIA H100" in names
    split = next(s for s in predict.splits(tasks) if s.name.endswith("-> NVIDIA H100"))
    pick = predict.same_shape_other_gpu(split.train)(split.test[0])
    assert split.test[0].candidates[pick.index].label == "BLOCK_SIZE_M*4" and not pick.fallback
    scores = {s.predictor: s for s in predict.benchmark(tasks) if s.split == split.name}
    assert scores["same_shape_other_gpu"].mean_regret == 0.0
    assert abs(scores["tuned"].mean_regret - (10.0 / 9.0 - 1)) < 1e-12
    # on the shape split the cross-GPU predictor does not apply
    assert all(
        s.predictor != "same_shape_other_gpu"
        for s in predict.benchmark(tasks)
        if s.split == "held_out_shape"
    )


def test_ridge_learns_that_larger_m_tiles_win_at_large_batches() -> None:
    """Train: BLOCK_SIZE_M*4 wins at M >= 256 and loses at small M; the model picks it
    for an unseen large M and keeps the tuned config for an unseen small M."""
    lines = []
    for m in (1, 2, 4, 8, 16, 512, 1024, 2048, 4096, 8192):
        big = 6.0 if m >= 256 else 15.0
        lines += _table(f"m{m}", {"tuned": 10.0, "default": 12.0, "BLOCK_SIZE_M*4": big}, M=m)
    model = predict.ridge(_tasks(lines))
    test = _tasks(
        [
            *_table("big", {"tuned": 10.0, "default": 12.0, "BLOCK_SIZE_M*4": 6.0}, M=3072),
            *_table("small", {"tuned": 10.0, "default": 12.0, "BLOCK_SIZE_M*4": 15.0}, M=3),
        ]
    )
    picks = {t.row_id: t.candidates[model(t).index].label for t in test}
    assert picks == {"big": "BLOCK_SIZE_M*4", "small": "tuned"}


def test_knn_moves_takes_a_move_its_neighbours_gain_by_and_else_keeps_tuned() -> None:
    """Neighbours of large M gain by BLOCK_SIZE_M*4, those of small M lose by it: an
    unseen large M takes the move, an unseen small M keeps the tuned config; a
    duplicate re-measurement of a candidate counts once (the newest)."""
    lines = []
    for m in (1, 2, 4, 8, 16, 512, 1024, 2048, 4096, 8192):
        big = 6.0 if m >= 256 else 15.0
        lines += _table(f"m{m}", {"tuned": 10.0, "default": 12.0, "BLOCK_SIZE_M*4": big}, M=m)
    model = predict.knn_moves(_tasks(lines), k=3)
    test = _tasks(
        [
            *_table("big", {"tuned": 10.0, "default": 12.0, "BLOCK_SIZE_M*4": 6.0}, M=3072),
            *_table("small", {"tuned": 10.0, "default": 12.0, "BLOCK_SIZE_M*4": 15.0}, M=3),
        ]
    )
    picks = {t.row_id: t.candidates[model(t).index].label for t in test}
    assert picks == {"big": "BLOCK_SIZE_M*4", "small": "tuned"}
    # a later re-measurement of the tuned config replaces the first (one per label)
    first = _table("big", {"tuned": 10.0, "default": 12.0}, M=3072)
    (task,) = _tasks([*first, *_table("big", {"tuned": 9.0}, M=3072)])
    assert [(c.label, c.t_us) for c in task.candidates] == [("tuned", 9.0), ("default", 12.0)]


def test_the_benchmark_runs_over_the_shipped_tables() -> None:
    """The command's data: every shipped table that is not superseded, every baseline
    scored on the held-out-shape split, regrets non-negative."""
    tasks = predict.shipped_tasks()
    assert len(tasks) > 1000
    scores = [s for s in predict.benchmark(tasks) if s.split == "held_out_shape"]
    assert {s.predictor for s in scores} == {
        "tuned",
        "default",
        "nearest_shape",
        "ridge",
        "knn_moves",
    }
    assert all(s.n > 100 and 0 <= s.mean_regret <= s.p90_regret * 10 for s in scores)
