"""The upstream tuners' search spaces, pruned only by configs that cannot launch, the
stratified exhaustive subset, its plans, and ingestion of their results (issue 38).

The space sizes are our own reading of the tuning scripts at the snapshots (vLLM
``28be48fa944d``, SGLang ``30cb848d4b45``), written out as numbers; a planner that drifts
from them fails here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from dagster_project.rewards import measured
from dagster_project.rewards.gpu import run_batch as rb
from dagster_project.rewards.gpu import space as sp
from dagster_project.rewards.gpu.neighbours import Candidate, candidates
from dagster_project.rewards.gpu.spec import MeasureRow, normalise_config
from dagster_project.storage.lake import Lake
from tests.unit.test_execution_reward import Killed, make_lake, mm_row, moe_row, runner_measure


def _moe(**over: Any) -> MeasureRow:
    base = dict(M=1, E=256, top_k=8, N=256, K=7168)
    return moe_row(**{**base, **over})


@pytest.mark.parametrize(
    ("row", "size"),
    [
        # 5 BM x 4 BN x 3 BK x 4 GROUP x 2 warps x 4 stages
        (_moe(), 1920),
        (_moe(repo="sglang"), 1920),
        (_moe(dtype="fp8_w8a8"), 1920),
        # vLLM, fp8 block [128, 128]: BK and BN multiples of 128 -> BK {128, 256}, BN {128, 256}
        (_moe(dtype="fp8_w8a8", block_shape=[128, 128]), 640),
        # SGLang: BK divides 128 -> BK {64, 128}
        (_moe(repo="sglang", dtype="fp8_w8a8", block_shape=[128, 128]), 1280),
        # block-fp8 matmul tuners: BK {64, 128}, both dividing 128
        (mm_row(), 1280),
        (mm_row(repo="vllm", kernel="_w8a8_triton_block_scaled_mm"), 1280),
    ],
)
def test_tuner_space_sizes(row: MeasureRow, size: int) -> None:
    configs = sp.tuner_configs(row)
    assert len(configs) == size
    assert len({json.dumps(c, sort_keys=True) for c in configs}) == size
    assert all(normalise_config(c)[0] == c for c in configs)


def tile_of(pid: np.ndarray, num_pid_m: int, num_pid_n: int, group: int, moe: bool) -> Any:
    """Which output tile each program computes, by the kernels' grouped ordering (our
    own statement of it; the MoE kernels take ``pid % num_pid_in_group`` before the
    modulo, the block-fp8 matmuls take ``pid`` itself)."""
    in_group = group * num_pid_n
    first = (pid // in_group) * group
    size = np.minimum(num_pid_m - first, group)
    pid_m = first + ((pid % in_group) % size if moe else pid % size)
    pid_n = (pid % in_group) // size
    return np.stack([pid_m, pid_n])


@pytest.mark.parametrize("moe", [True, False])
@pytest.mark.parametrize("num_pid_m", [1, 3, 8, 20])
def test_group_sizes_at_or_above_the_row_blocks_launch_alike(moe: bool, num_pid_m: int) -> None:
    """The aliasing rule: every GROUP_SIZE_M >= the row blocks maps programs to tiles
    exactly as GROUP_SIZE_M = row blocks does; a smaller one (of the space) does not."""
    num_pid_n = 7
    pid = np.arange(num_pid_m * num_pid_n)
    ref = tile_of(pid, num_pid_m, num_pid_n, num_pid_m, moe)
    for g in (1, 16, 32, 64):
        same = np.array_equal(tile_of(pid, num_pid_m, num_pid_n, g, moe), ref)
        assert same == (g >= num_pid_m or num_pid_m == 1 or (g == 1 and num_pid_n == 1))


def test_launch_aliases_follow_the_engines() -> None:
    base = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 128, "GROUP_SIZE_M": 32, "num_warps": 4}
    cfg = {**base, "BLOCK_SIZE_K": 256, "num_stages": 3}
    vllm = _moe(dtype="fp8_w8a8", block_shape=[128, 128])
    sglang = _moe(repo="sglang", dtype="fp8_w8a8", block_shape=[128, 128])
    k128 = {**cfg, "BLOCK_SIZE_K": 128}
    assert sp.launch_key(vllm, cfg) == sp.launch_key(vllm, k128)  # vLLM caps BK at 128
    assert sp.launch_key(sglang, cfg) != sp.launch_key(sglang, k128)
    # M=1, 8 pairs: vLLM's no-sort path has 8 row blocks, so GROUP 16/32/64 are one launch
    assert sp.row_blocks(vllm, cfg) == (8, 8)
    g16, g64 = {**cfg, "GROUP_SIZE_M": 16}, {**cfg, "GROUP_SIZE_M": 64}
    assert sp.launch_key(vllm, g16) == sp.launch_key(vllm, g64)
    assert sp.launch_key(vllm, g16) != sp.launch_key(vllm, {**cfg, "GROUP_SIZE_M": 1})
    big = _moe(M=4096)  # hundreds of row blocks: every GROUP differs
    assert sp.launch_key(big, g16) != sp.launch_key(big, g64)


def test_exhaustive_space_lists_each_launch_once_and_prunes_only_the_impossible() -> None:
    row = _moe(M=64, repo="sglang")
    space = sp.exhaustive_space(row)
    labels = [c.label for c in space.candidates]
    usual = [c.label for c in candidates(row.best_config, row.default_config)]
    assert labels[: len(usual)] == usual and labels[:2] == ["tuned", "default"]
    assert len(set(labels)) == len(labels) and len(usual) > 10
    keys = [sp.launch_key(row, normalise_config(c.config)[0]) for c in space.candidates]
    extra = keys[len(usual) :]  # the space's own: distinct from each other and the table's
    assert len(set(extra)) == len(extra) and not set(extra) & set(keys[: len(usual)])
    assert all(lab.startswith("s:") for lab in labels[len(usual) :])
    assert len(space.candidates) == len(usual) + space.tuner_size - space.aliases - space.pruned
    assert space.name.startswith("sglang:") and "30cb848d4b45" in space.name
    # bf16: BM 256 + BN 256 at BK 256, 5 stages needs >= 4 x 512 x 256 x 2 bytes
    huge = {"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 256, "GROUP_SIZE_M": 1}
    assert sp.cannot_launch(row, {**huge, "num_warps": 8, "num_stages": 5})
    assert not sp.cannot_launch(row, {**huge, "BLOCK_SIZE_K": 64, "num_stages": 2})
    assert space.pruned == 432  # the bf16 grid's configs over the bound
    assert all(not sp.cannot_launch(row, c.config) for c in space.candidates[len(usual) :])


def test_no_config_that_ran_exceeds_the_shared_memory_bound() -> None:
    """Over every shipped result, the pruning bound never exceeds the sm_90 limit for a
    config that ran (so pruning drops only configs that cannot launch)."""
    df = measured.read_shipped(measured.shipped_batches()).filter(pl.col("status") == "ok")
    cfg = pl.col("config").str.json_decode(
        pl.Struct({k: pl.Int64() for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")})
    )
    stages = pl.col("config").str.json_path_match("$.num_stages").cast(pl.Int64).fill_null(3)
    bk = cfg.struct.field("BLOCK_SIZE_K")
    vllm_moe_block = (
        (pl.col("repo") == "vllm") & (pl.col("kernel") == "fused_moe_kernel")
    ) & pl.col("block_shape").is_not_null()
    bk = pl.when(vllm_moe_block).then(pl.min_horizontal(bk, 128)).otherwise(bk)
    width = pl.when(pl.col("quant") == "bf16").then(2).otherwise(1)
    bound = (
        pl.max_horizontal(stages - 1, 1)
        * (cfg.struct.field("BLOCK_SIZE_M") + cfg.struct.field("BLOCK_SIZE_N"))
        * bk
        * width
    )
    worst = df.select(bound.max()).item()
    assert df.height > 30_000 and 0 < worst <= sp.SMEM_LIMIT_SM90


def _pool() -> list[MeasureRow]:
    rows = []
    for repo, kernel in (("vllm", "fused_moe_kernel"), ("sglang", "_w8a8_block_fp8_matmul")):
        for n in (256, 512, 1024):
            for M in (1, 2, 16, 64, 512, 4096):
                make = moe_row if kernel == "fused_moe_kernel" else mm_row
                rows.append(make(id=f"{repo}-{n}-{M}", repo=repo, kernel=kernel, N=n, M=M))
    return rows


def test_stratified_subset_covers_families_and_the_m_range() -> None:
    rows = _pool()
    pick = sp.select_exhaustive(rows, 8, seed=7)
    assert pick == sp.select_exhaustive(rows, 8, seed=7)  # deterministic
    assert {sp.family(r)[0] for r in pick[:2]} == {"vllm", "sglang"}  # round-robin
    for fam in {sp.family(r) for r in pick}:
        ms = [r.M for r in pick if sp.family(r) == fam]
        assert ms[:2] == [1, 4096]  # the smallest and the largest M first
        assert len({r.N for r in pick if sp.family(r) == fam}) >= 3  # shapes cycled
    assert len(sp.select_exhaustive(rows, 100, seed=7)) == len(rows)
    others = [sp.select_exhaustive(rows, 8, seed=s) for s in range(8, 12)]
    assert any([r.id for r in o] != [r.id for r in pick] for o in others)


def test_plan_parts_and_estimate() -> None:
    rows = [mm_row(id=f"mm-{M}", M=M) for M in (1, 64, 4096)]
    items = [(r, sp.exhaustive_space(r)) for r in sp.plan_order(rows)]
    est = sp.estimate(items)
    assert est.rows == 3 and est.candidates == sum(len(s.candidates) for _, s in items)
    assert 0 < est.variants <= est.candidates
    assert est.device_s == max(est.candidates / 22.5, est.variants / 18.0)
    parts = sp.split_parts(items, part_s=1.0)  # a part is at least one row
    assert [len(p) for p in parts] == [1, 1, 1]
    assert len(sp.split_parts(items, part_s=1e9)) == 1


def _tiny_exhaustive_line(row: MeasureRow, n: int) -> dict[str, Any]:
    """The first ``n - 1`` candidates of the row's plan line (its usual table) and its
    first space config, stamped as a whole space of ``n`` (a tiny fixture of what the
    plan writer emits)."""
    full = sp.exhaustive_space(row)
    first_s = next(c for c in full.candidates if c.label.startswith("s:"))
    tiny = sp.Space(full.name, (*full.candidates[: n - 1], first_s), full.tuner_size, 0, 0)
    return sp.exhaustive_line(row, tiny)


def test_exhaustive_and_skewed_results_ingest_as_their_own_columns(tmp_path: Path) -> None:
    """Through a real lake: an exhaustive plan line's results mark its table exhaustive
    (optimum, regrets), a partly measured space does not, and the same row timed under
    skewed routing is a table of its own (routing column)."""
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))  # no tuned_configs needed
    moe, mm = moe_row(id="moe-16", M=16, gpu="NVIDIA H200"), mm_row(id="mm-16", M=16)
    skewed = {**moe.to_json(), "routing": "zipf:0.5"}
    skewed["candidates"] = [{"label": "tuned", "config": moe.best_config}]
    plan, skew_plan = tmp_path / "exhaustive.jsonl", tmp_path / "skew.jsonl"
    lines = [_tiny_exhaustive_line(moe, 4), _tiny_exhaustive_line(mm, 4)]
    plan.write_text("".join(json.dumps(d) + "\n" for d in lines))
    skew_plan.write_text(json.dumps(skewed) + "\n")
    items = rb.read_batch(plan)
    assert [len(it.cands) for it in items] == [4, 4]
    assert items[0].row.extra["space_size"] == 4
    assert rb.read_batch(skew_plan)[0].row.routing == "zipf:0.5"
    both = tmp_path / "both.jsonl"
    both.write_text(plan.read_text() + skew_plan.read_text())
    with pytest.raises(ValueError, match="batch of its own"):
        rb.read_batch(both)
    out, skew_out = tmp_path / "out.jsonl", tmp_path / "skew-out.jsonl"
    times = {"tuned": 10.0, "default": 12.0}
    for p, o in ((plan, out), (skew_plan, skew_out)):
        rb.run_batch(p, o, measure=runner_measure(times), env={"device": "NVIDIA H200"})
    # drop one space candidate of the matmul row: its space is then not complete
    kept = [r for r in rb.read_results(out) if not (r["row_id"] == mm.id and r["index"] == 3)]
    out.write_text("".join(json.dumps(r) + "\n" for r in kept))
    measured.ingest_results(lake, [out, skew_out])
    ds = lake.read_table("datasets", "measured_configs")
    got = {(r["id"], r["routing"]): r for r in ds.to_dicts()}
    assert set(got) == {(moe.id, "uniform"), (moe.id, "zipf:0.5"), (mm.id, "uniform")}
    full = got[(moe.id, "uniform")]
    assert full["exhaustive"] is True and full["space_size"] == 4
    assert full["exhaustive_space"].startswith("vllm:benchmarks/kernels/benchmark_moe.py")
    assert full["tuned_regret_vs_optimum"] == pytest.approx(0.0)  # others ran at 20 us
    assert full["n_neighbours"] == 1 and full["n_candidates"] == 4  # not the 's:' config
    assert full["default_regret_vs_optimum"] == pytest.approx(0.2)
    part = got[(mm.id, "uniform")]
    assert part["exhaustive"] is False and part["n_space_measured"] == 3
    assert part["tuned_regret_vs_optimum"] is None
    skew = got[(moe.id, "zipf:0.5")]
    assert skew["exhaustive"] is False and skew["n_candidates"] == 1
    raw = lake.read_table("raw", "measured_configs")
    assert set(raw["routing"]) == {"uniform", "zipf:0.5"}


def test_space_candidates_are_launchable_batch_candidates() -> None:
    row = _moe(M=2, dtype="fp8_w8a8", block_shape=[128, 128])
    space = sp.exhaustive_space(row)
    # vLLM block fp8: 640 configs, BK 256 aliases BK 128, GROUP >= 16 alias at 16 pairs
    assert space.tuner_size == 640 and space.aliases > 320
    line = sp.exhaustive_line(row, space)
    assert line["extra"]["exhaustive_space"] == space.name
    assert [Candidate(c["label"], c["config"]) for c in line["candidates"]] == list(
        space.candidates
    )


def test_plan_writer_script_writes_resumable_parts(tmp_path: Path) -> None:
    """``benchmarks/device/gpu_exhaustive_plan.py`` on a tiny batch file: stratified rows,
    parts in the batch format with the space stamps, and the skew pair of batches."""
    from benchmarks.device import gpu_exhaustive_plan as plan

    src = tmp_path / "rows.jsonl"
    h100 = "NVIDIA H100"
    rows = [moe_row(id=f"h100-{M}", M=M, gpu=h100, moe_gemms="up") for M in (1, 8, 64)]
    rows += [mm_row(id="h100-mm", gpu=h100), moe_row(id="h200-x", gpu="NVIDIA H200")]
    src.write_text("".join(json.dumps(r.to_json()) + "\n" for r in rows))
    out = tmp_path / "plans"
    argv = ["--gpu", "h100", "--rows", "3", "--from", str(src), "--out", str(out)]
    assert plan.main(["exhaustive", *argv, "--part-s", "1"]) == 0
    parts = sorted(out.glob("exhaustive-h100-p*.jsonl.xz"))
    items = [it for p in parts for it in rb.read_batch(p)]
    assert len(parts) == 3 and {it.row.id for it in items} == {"h100-1", "h100-64", "h100-mm"}
    for it in items:
        assert len(it.cands) == it.row.extra["space_size"] > 100
        assert it.row.extra["exhaustive_space"] == sp.space_for(it.row).name
    assert plan.main(["skew", *argv]) == 0
    uni, zipf = (rb.read_batch(out / f"skew-h100-{n}.jsonl.xz") for n in ("uniform", "zipf"))
    assert [it.row.id for it in uni] == [it.row.id for it in zipf]
    assert {it.row.kind for it in uni} == {"moe"} and len(uni) == 3
    assert {it.row.routing for it in zipf} == {"zipf:0.5"}
    assert [c.label for c in uni[0].cands] == [c.label for c in zipf[0].cands]


def test_pending_resumes_a_cut_plan_from_the_shipped_tables(tmp_path: Path) -> None:
    """A call cut mid-row, packed and shipped: ``pending`` keeps the unfinished row and the
    untouched one, drops the finished one, and keeps each kept line as planned."""
    from benchmarks.device import gpu_exhaustive_plan as plan

    h100 = "NVIDIA H100"
    rows = [moe_row(id="done", gpu=h100), mm_row(id="cut", gpu=h100), moe_row(id="new", gpu=h100)]
    inp, out = tmp_path / "h100-a.jsonl", tmp_path / "out.jsonl"
    inp.write_text("".join(json.dumps(r.to_json()) + "\n" for r in rows))
    first = len(rb.read_batch(inp)[0].cands)
    with pytest.raises(Killed):
        measure = runner_measure({}, kill_after=first + 2)
        rb.run_batch(inp, out, measure=measure, env={"device": "NVIDIA H100 80GB HBM3"})
    (tmp_path / "data" / "h100").mkdir(parents=True)
    measured.pack_batch([out], tmp_path / "data" / "h100" / "batch-001.parquet")
    argv = ["pending", str(inp), "--gpu", "h100", "--shipped", str(tmp_path / "data")]
    assert plan.main([*argv, "--out", str(tmp_path / "plans")]) == 0
    kept = rb.read_batch(tmp_path / "plans" / "h100-a-pending.jsonl.xz")
    assert [it.row.id for it in kept] == ["cut", "new"]
    assert kept[0].row.to_json() == rows[1].to_json()
    # shipped on another GPU only: nothing counts as done for the H100
    argv[3] = "h200"
    assert plan.main([*argv, "--out", str(tmp_path / "h200")]) == 0
    assert len(rb.read_batch(tmp_path / "h200" / "h100-a-pending.jsonl.xz")) == 3


def test_shipped_rows_take_their_source_by_hash(tmp_path: Path) -> None:
    from dagster_project.rewards.gpu.source import source_hash

    lake = make_lake(tmp_path)
    batch, _ = measured.plan_batch(lake, 4, order="files", m_per_file=2)
    inp, out = tmp_path / "b.jsonl", tmp_path / "out.jsonl"
    measured.write_batch(batch, inp)
    rb.run_batch(inp, out, measure=runner_measure({}), env={"device": "NVIDIA H200"})
    (tmp_path / "data" / "h200").mkdir(parents=True)
    measured.pack_batch([out], tmp_path / "data" / "h200" / "batch-001.parquet")
    moe_src = next(r.kernel_source for r in batch if r.kind == "moe")
    got = measured.shipped_rows({source_hash(moe_src): moe_src}, tmp_path / "data")
    want = {r.id: r for r in batch if r.kind == "moe"}
    assert {r.id for r in got} == set(want) and len(want) == 2
    for r in got:
        w = want[r.id]
        assert (r.kernel_source, r.M, r.K, r.top_k, r.best_config) == (
            w.kernel_source,
            w.M,
            w.K,
            w.top_k,
            w.best_config,
        )
        assert r.problem_error() is None and r.routing == "uniform"


def test_skew_report_counts_changed_winners(tmp_path: Path) -> None:
    """``gpu_skew_report.pairs`` on two tiny batches of one row: the winner changes under
    skew beyond noise, and keeping the uniform winner costs its skewed time over the
    skewed best; a row timed under one routing only gives no pair."""
    from benchmarks.device import gpu_skew_report as report

    row = moe_row(id="moe-5", gpu="NVIDIA H200")
    lonely = moe_row(id="moe-6", M=6, gpu="NVIDIA H200")
    uni, skw = tmp_path / "u.jsonl", tmp_path / "s.jsonl"
    uni.write_text(json.dumps(row.to_json()) + "\n" + json.dumps(lonely.to_json()) + "\n")
    skw.write_text(json.dumps({**row.to_json(), "routing": "zipf:0.5"}) + "\n")
    outs = []
    skew_times = {"tuned": 15.0, "BLOCK_SIZE_N*2": 9.0}
    for plan, times in ((uni, {"tuned": 10.0, "default": 12.0}), (skw, skew_times)):
        out = plan.with_suffix(".out.jsonl")
        rb.run_batch(plan, out, measure=runner_measure(times), env={"device": "NVIDIA H200"})
        outs.append(out)
    raw = measured.merge_results(measured.read_result_files(outs))
    (pair,) = report.pairs(raw)
    assert pair.row_id == "moe-5" and pair.changed_raw and pair.changed_beyond_noise
    # the uniform winner (tuned, 10 us) takes 15 us under skew, where BN*2 takes 9
    assert pair.regret_uniform_best == pytest.approx(15 / 9 - 1)
    assert "100.0%" in report.summary([pair])


def test_prediction_tasks_score_against_the_exhaustive_optimum(tmp_path: Path) -> None:
    """A table whose space is complete is scored on the space's own session: an older,
    faster neighbour timing of the same row does not set its best time; a partial table
    keeps every candidate."""
    from dagster_project.rewards.predict import tasks_from_frame

    row = moe_row(id="moe-5", gpu="NVIDIA H200")
    old_plan, new_plan = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old_plan.write_text(json.dumps(row.to_json()) + "\n")  # tuned, default, neighbours
    new_plan.write_text(json.dumps(_tiny_exhaustive_line(row, 3)) + "\n")
    outs = []
    for plan, times in ((old_plan, {"BLOCK_SIZE_N*2": 1.0}), (new_plan, {"tuned": 8.0})):
        out = plan.with_suffix(".out.jsonl")
        rb.run_batch(plan, out, measure=runner_measure(times), env={"device": "NVIDIA H200"})
        outs.append(out)
    (task,) = tasks_from_frame(measured.merge_results(measured.read_result_files(outs)))
    assert task.exhaustive and task.t_best == 8.0 and len(task.candidates) == 3
    (partial,) = tasks_from_frame(measured.merge_results(measured.read_result_files(outs[:1])))
    assert not partial.exhaustive and partial.t_best == 1.0


def test_a_lake_from_before_the_routing_column_still_builds(tmp_path: Path) -> None:
    """raw.measured_configs written without the issue-38 columns: the dataset rebuild
    adds them (null: uniform, not exhaustive) instead of failing."""
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))
    old_schema = {
        c: t
        for c, t in measured.RAW_SCHEMA.items()
        if c not in ("routing", "exhaustive_space", "space_size")
    }
    row = {c: None for c in old_schema}
    row.update(row_id="r1", label="tuned", status="ok", t_us=3.0, config="{}", cand_index=0)
    row.update(measured_on="NVIDIA H200", kernel="fused_moe_kernel", M=1)
    lake.replace_rows(
        "raw", "measured_configs", pl.DataFrame([row], schema=old_schema), "row_id", []
    )
    assert measured.build_measured_dataset(lake) == 1
    (got,) = lake.read_table("datasets", "measured_configs").to_dicts()
    assert got["routing"] == "uniform" and got["exhaustive"] is False


def test_remeasure_report_agrees_within_spread_and_flags_a_moved_winner() -> None:
    """``rewards.remeasure`` (``benchmarks/gpu_remeasure_report.py`` prints it): a
    candidate within the two spreads agrees, one outside does not, and a row whose first
    winner lost the second session has the regret of that winner."""
    from dagster_project.rewards import remeasure as rep

    def frame(times: dict[str, float], spread: float) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "row_id": ["r"] * len(times),
                "label": list(times),
                "cand_index": list(range(len(times))),
                "t_us": list(times.values()),
                "spread": [spread] * len(times),
                "status": ["ok"] * len(times),
                "kernel": ["k"] * len(times),
                "M": [1] * len(times),
            }
        )

    first = frame({"tuned": 10.0, "default": 12.0, "n1": 11.0}, 0.02)
    second = frame({"tuned": 10.3, "default": 12.0, "n1": 9.0}, 0.02)
    j = rep.compare(first, second)
    agree = dict(zip(j["label"], j["agree"], strict=True))
    assert agree == {"tuned": True, "default": True, "n1": False}
    row = rep.per_row(j).row(0, named=True)
    assert row["same_winner"] is False
    assert abs(row["winner_regret"] - (10.3 / 9.0 - 1)) < 1e-12
    assert row["within_spread"] is False
    summary = rep.summary(first, second)
    assert summary is not None
    assert (summary["rows"], summary["candidates"], summary["agree"]) == (1, 3, 2)
    assert summary["same_winner"] == 0 and summary["winner_within_spread"] == 0
    assert rep.summary(first, second.with_columns(pl.lit("other").alias("row_id"))) is None


def test_measured_card_renders_the_shipped_remeasure() -> None:
    """The measured_configs card's repeatability table is the shipped re-measure batches'
    figures (read with the domain function), and says so when there is none."""
    from dagster_project.publish import exploits
    from dagster_project.publish.cards import render_card
    from dagster_project.rewards import remeasure

    class AnyStats(dict):  # type: ignore[type-arg]
        def __getattr__(self, name: str) -> object:
            return 1

    rows = remeasure.summaries()
    assert rows, "the package ships at least one re-measure batch (h100/remeasure-001)"
    base = {"s": AnyStats(), "by_kernel": [], "load_path": "./measured_configs"}
    base.update(exploits.card_context())
    card = render_card("measured_configs.md.j2", {}, {**base, "repeats": rows})
    line = next(ln for ln in card.splitlines() if ln.startswith(f"| {rows[0]['gpu']} |"))
    assert f"| {rows[0]['candidates']:,} |" in line and f"| {rows[0]['agree']:,} |" in line
    empty = render_card("measured_configs.md.j2", {}, {**base, "repeats": []})
    assert "No second device session" in empty
