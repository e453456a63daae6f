"""The code model (issue 36, item 3): features read from a kernel's own source, a ridge fit,
and cross-validation folds that never let a held-out session or op into the fit."""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import pytest

from dagster_project.sim import codemodel
from dagster_project.sim.measured import (
    Point,
    _components,
    cross_validate,
    folds,
    load_rows,
    model_points,
    render,
)
from dagster_project.sim.oracle import code_sha

NAIVE_CUDA = """
// for (int q = 0; q < 9; ++q) __expf(x) -- a comment, not code
__global__ void k(const float* __restrict__ W, const float* __restrict__ x, float* y) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (int k = 0; k < kK; ++k) {
        acc += W[int64_t(n) * kK + k] * __expf(x[k]);
    }
    y[n] = tanhf(acc);
}
"""

TILED_CUDA = """
__global__ void k(const float4* __restrict__ a, float* out) {
    __shared__ float tile[256];
    if (threadIdx.x == 0) {
        for (int t = 0; t < 8; ++t) bulk_g2s(tile + t, a + t, 16, bar);
    }
    __syncthreads();
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 ...");
    __syncthreads();
    atomicAdd(out, tile[threadIdx.x]);
}
"""

TRITON = """
@triton.jit
def k(x_ptr, y_ptr, N: tl.constexpr):  # tl.exp( in a comment
    acc = tl.zeros((64,), dtype=tl.float32)
    for i in range(0, N, 64):
        v = tl.load(x_ptr + i)
        acc += tl.exp(v)
    acc = tl.dot(acc, acc)
    tl.store(y_ptr, tl.sqrt(acc))
"""


def test_cuda_facts_count_code_not_comments() -> None:
    f = codemodel.code_facts(NAIVE_CUDA, "cuda")
    assert f["sfu_calls"] == 2  # __expf and tanhf; the commented __expf is not counted
    assert f["sfu_in_loop"] == 1  # only __expf sits inside the K loop
    assert f["strided_loop_loads"] == 1  # W[n * kK + k]: k is the loop counter
    assert f["tensor_core"] == 0 and f["barriers"] == 0 and f["shared_decl"] == 0
    assert f["vector_bytes"] == 2
    assert f["max_loop_depth"] == 1


def test_cuda_facts_see_tensor_cores_barriers_vectors_and_one_thread_bulk() -> None:
    f = codemodel.code_facts(TILED_CUDA, "cuda")
    assert f["tensor_core"] == 1
    assert f["barriers"] == 2
    assert f["shared_decl"] == 1
    assert f["vector_bytes"] == 16
    assert f["atomics"] == 1
    assert f["one_thread_bulk"] == 1
    assert f["strided_loop_loads"] == 0


def test_triton_facts() -> None:
    f = codemodel.code_facts(TRITON, "triton")
    assert f["sfu_calls"] == 2  # tl.exp, tl.sqrt; the comment's tl.exp( is not counted
    assert f["sfu_in_loop"] == 1
    assert f["tensor_core"] == 1
    assert f["max_loop_depth"] == 1


def test_ridge_recovers_a_linear_rule_and_clamps_to_the_training_range() -> None:
    x = [[float(i), float(i % 3)] for i in range(30)]
    y = [0.1 * a - 0.5 * b for a, b in x]
    m = codemodel.fit(x, y, penalty=1e-6)
    pred = m.predict([[10.0, 1.0], [1000.0, 0.0]])
    assert pred[0] == pytest.approx(0.5, abs=1e-3)
    assert pred[1] == pytest.approx(max(y))  # 100 would be an extrapolation: held at 2.9


def test_penalty_is_chosen_from_the_fixed_grid() -> None:
    x = [[float(i), float((7 * i) % 5)] for i in range(40)]
    y = [0.2 * a for a, _ in x]
    lam = codemodel.choose_penalty(x, y, [str(i % 8) for i in range(40)])
    assert lam == min(codemodel.PENALTIES)  # a noiseless rule wants the least shrinkage


def _pt(key: str, op: str, sessions: tuple[str, ...], feat: float, err: float) -> Point:
    uses = tuple((s, i, "step") for i, s in enumerate(sessions))
    return Point(key, op, "cuda", "v0_naive", uses, 1.0, math.exp(err), (feat, 1.0))


def test_session_folds_keep_linked_sessions_together() -> None:
    pts = [
        _pt("a", "gemm", ("s1",), 0.0, 0.0),
        _pt("b", "gemm", ("s1", "s2"), 0.0, 0.0),  # one kernel two sessions wrote
        _pt("c", "gemm", ("s2",), 0.0, 0.0),
        _pt("d", "gemv", ("s3",), 0.0, 0.0),
    ]
    comps = _components(pts)
    assert comps[0] == comps[1] == comps[2] != comps[3]
    assert sorted(len(t) for _, t in folds(pts, "session")) == [1, 3]


@pytest.mark.parametrize("by", ["session", "op"])
def test_folds_never_leak_a_held_out_session_or_op_into_the_fit(by: str) -> None:
    pts = model_points(load_rows("h100"), "h100")
    assert len(pts) > 100
    seen: set[int] = set()
    for train, test in folds(pts, by):
        assert not set(train) & set(test)
        seen |= set(test)
        if by == "session":
            held = {s for i in test for s, _, _ in pts[i].uses}
            assert not held & {s for i in train for s, _, _ in pts[i].uses}
        else:
            assert not {pts[i].op for i in test} & {pts[i].op for i in train}
    assert seen == set(range(len(pts)))  # every kernel is held out exactly once


def test_held_out_prediction_does_not_see_its_own_target() -> None:
    # a feature that equals the target lets an in-sample fit look perfect; out of sample,
    # the op held out is the only one with targets near 3, which its training never saw
    pts = [_pt(f"k{i}", f"op{i % 4}", (f"s{i}",), 0.1 * (i % 4), -0.1 * (i % 4)) for i in range(40)]
    pts += [_pt(f"z{i}", "op_far", (f"t{i}",), 3.0, -3.0) for i in range(5)]
    held, _ = cross_validate(pts, "op", "code")
    far = [p for p in held if p.op == "op_far"]
    # clamped to the training range (0 .. 0.3): far from the true correction of 3
    assert all(abs(p.log_err) > 2.5 for p in far)


def test_render_regenerates_the_answered_kernel() -> None:
    # the shipped answers' code_sha is the measured source; rendering from the answer's
    # own fields gives it back up to comment and guard wording the generator changed since
    rows = [r for r in load_rows("h100") if r["status"] == "ok" and r["ms"]][:20]
    for r in rows:
        code = render(r)
        assert r["op"] in code or r["op"].split("_")[0] in code
        assert code_sha(code) != "" and len(code) > 200


def test_unmeasured_steps_take_the_code_model_time_measured_ones_their_answer() -> None:
    from dagster_project.sim.kernelinfer import build_tasks, simulate_session
    from dagster_project.sim.measured import CODE_MODELLED, fit_code_model, step_times
    from dagster_project.sim.oracle import Answer, Oracle, answer_key

    pts = model_points(load_rows("h100"), "h100", code=True)
    model = fit_code_model(pts)
    task = next(t for t in build_tasks()[0] if t.impl == "triton" and t.gpu == "h100")
    s = simulate_session(task)
    code0 = s["messages"][2]["content"]
    key = answer_key(code0, s["shape"], s["dtype"], "h100")
    ans = Answer(key, s["op"], s["impl"], s["trace"][0]["tag"], "ok", 0.123, 1.0, 0.0, "", "")
    times = step_times(s, "h100", Oracle("h100", {key: ans}), model)
    assert times[0] == (0.123, "measured")
    ran = [i for i, t in enumerate(s["trace"]) if t["time_ms"] is not None and i > 0]
    assert ran and all(times[i][1] in (CODE_MODELLED, "measured") for i in ran)
    coded = [times[i][0] for i in ran if times[i][1] == CODE_MODELLED]
    assert coded and all(ms is not None and ms > 0 for ms in coded)
    # with no answers at all, step 0 is timed by the code model too
    assert step_times(s, "h100", Oracle("h100", {}), model)[0][1] == CODE_MODELLED


def test_boosted_trees_fit_a_step_and_nested_folds_pick_the_learner_that_fits() -> None:
    x = [[float(i % 10), float(i % 7)] for i in range(60)]
    step = [2.0 if a >= 5 else 0.0 for a, _ in x]
    b = codemodel.fit_boosted(x, step)
    assert b.predict([[8.0, 0.0]])[0] == pytest.approx(2.0, abs=0.05)
    assert b.predict([[1.0, 0.0]])[0] == pytest.approx(0.0, abs=0.05)
    assert b.predict([[99.0, 0.0]])[0] <= max(step)  # clamped to the training range
    groups = [str(i % 12) for i in range(60)]
    assert isinstance(codemodel.fit_model(x, step, groups), codemodel.Boosted)
    line = [0.3 * a - 0.1 * c for a, c in x]
    assert isinstance(codemodel.fit_model(x, line, groups), codemodel.Ridge)


def test_shipped_figures_match_the_shipped_answers_and_reach_the_card(tmp_path: Path) -> None:
    from dagster_project.publish import export_kernelinfer
    from dagster_project.sim.measured import (
        error_summary,
        read_timing_model_summary,
        speedup_pairs,
    )
    from tests.unit.publish import lakes

    summary = read_timing_model_summary("h100")
    assert summary is not None
    rows = load_rows("h100")
    # rerun benchmarks/device/sim_oracle_report.py after shipping new answers
    assert summary["answers"] == len(rows)
    assert summary["codemodel_version"] == codemodel.CODEMODEL_VERSION
    pts = model_points(rows, "h100")
    raw = error_summary(pts)["all"]
    assert summary["raw"]["kernels"] == raw["n"]
    assert summary["raw"]["median_abs_log_err"] == raw["median_abs_log_err"]
    assert summary["raw"]["sessions"] == len(speedup_pairs(pts))

    lake = lakes.new_lake(tmp_path / "lake")
    lakes.build_kernelinfer_lake(lake, shard_sizes=(2,))
    readme = (export_kernelinfer(lake, tmp_path / "out").out_dir / "README.md").read_text()
    flat = " ".join(readme.split())
    assert f"median absolute log error of {summary['raw']['median_abs_log_err']} (" in flat
    by_op = summary["code_held_out_by_op"]["median_abs_log_err"]
    assert f"{summary['code_held_out_by_session']['median_abs_log_err']} / {by_op}" in flat
    assert "they are in sample" in flat  # the folds chose the model: the card says so
    fresh = summary.get("fresh")
    if fresh is not None:  # sim_codemodel_fresh.py --write: the clean test of this version
        assert fresh["codemodel_version"] == codemodel.CODEMODEL_VERSION
        assert f"shipped at {fresh['before']} and scored on the {fresh['kernels']} kernels" in flat
        assert f"log error {fresh['code_steps']['median_abs_log_err']} (raw model" in flat


def test_offsets_shrink_a_group_toward_zero_by_its_size() -> None:
    keys = [("gemv", "cuda", "v0")] * 2 + [("gemv", "cuda", "v1")] * 4 + [("rope", "cuda", "v0")]
    resid = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -0.5]
    off = codemodel.fit_offsets(keys, resid)
    k = codemodel.K_OP
    assert off.op[("gemv", "cuda")] == pytest.approx(6 / (6 + k))
    left = 1.0 - 6 / (6 + k)  # what the op offset leaves to each rung
    assert off.rung[("gemv", "cuda", "v0")] == pytest.approx(2 * left / (2 + codemodel.K_RUNG))
    assert off.of(("gemv", "cuda", "v1")) < 1.0  # never the whole residual of few kernels
    assert off.of(("rope", "cuda", "v0")) < 0
    assert off.of(("unseen_op", "cuda", "v0")) == 0.0  # a held-out op gets no offset


def _op_pt(key: str, op: str, i: int, err: float) -> Point:
    # two kernels per session (baseline and best of one), so a session fold holds two
    uses = ((f"s-{op}-{i // 2}", i % 2, "step"),)
    return Point(key, op, "cuda", "v1", uses, 1.0, math.exp(err), (float(i % 3),))


def test_op_offsets_help_held_out_sessions_never_held_out_ops() -> None:
    # op "slow" runs 1.5 log-units slower than modelled whatever its feature says: the
    # features cannot see it, the measured kernels of the same op can
    pts = [_op_pt(f"a{i}", f"op{i % 3}", i, -0.1 * (i % 3)) for i in range(12)]
    pts += [_op_pt(f"z{i}", "slow", i, -0.1 * (i % 3) - 1.5) for i in range(6)]

    def slow_err(by: str, method: str) -> float:
        held, _ = cross_validate(pts, by, method)
        return max(abs(p.log_err) for p in held if p.op == "slow")

    assert slow_err("session", "code") < 0.5 < slow_err("session", "learner")
    # leaving the op out, its offset is gone with it: as wrong as the learner alone
    assert slow_err("op", "code") == pytest.approx(slow_err("op", "learner"), abs=1e-9)
    assert slow_err("op", "code") > 1.0


def test_pairs_never_mix_measuring_gpus_and_features_carry_the_gpu() -> None:
    from dagster_project.sim.measured import speedup_pairs

    uses_b, uses_t = (("s1", 0, "baseline"),), (("s1", 3, "best"),)
    pts = [
        Point("b1", "gemv", "cuda", "v0", uses_b, 4.0, 2.0, (), "h100"),
        Point("t1", "gemv", "cuda", "v2", uses_t, 1.0, 1.0, (), "h100"),
        Point("b2", "gemv", "cuda", "v0", uses_b, 3.0, 2.0, (), "h200"),
    ]
    pairs = speedup_pairs(pts)
    assert [(q.session_id, q.gpu, q.measured) for q in pairs] == [("s1", "h100", 4.0)]
    row = next(r for r in load_rows("h100") if r["status"] == "ok" and r["ms"])
    (on_h100,) = model_points([row], "h100", code=True)
    (on_h200,) = model_points([row], "h200", code=True)
    assert on_h200.gpu == "h200" and on_h100.gpu == "h100"
    bw = codemodel.FEATURES.index("gpu_bw_tbs")
    assert on_h200.features[bw] > on_h100.features[bw]


SERIAL_CUDA = """
constexpr int kV = 50257;
__global__ void scan(const float* p, int* token) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    float mass = 0.0f;
    for (int i = 0; i < kV; ++i) mass += p[row * kV + i];
    for (int j = threadIdx.x; j < kV; j += blockDim.x) token[j] = 0;  // strided: not serial
    cub::DeviceSegmentedRadixSort::SortPairsDescending(nullptr, 0, p, p, token, token, 1, 1);
}
"""


def test_serial_loops_and_sorts_are_read_from_the_source() -> None:
    # a one-thread-per-row walk over the vocabulary: its trip count from the constexpr size;
    # a loop that starts at the thread's index is shared by the block, not serial
    c = codemodel.code_facts(SERIAL_CUDA, "cuda")
    assert c["serial_trip"] == 50257.0
    assert c["sort_scan"] == 1.0
    assert codemodel.code_facts(TILED_CUDA, "cuda")["serial_trip"] == 8.0  # literal bound
    assert codemodel.code_facts(NAIVE_CUDA, "cuda")["serial_trip"] == 0.0  # kK unresolved
    t = codemodel.code_facts(TRITON.replace("acc += tl.exp(v)", "acc += tl.cumsum(v, 0)"), "triton")
    assert t["sort_scan"] == 1.0 and t["serial_trip"] == 0.0


def test_rung_offset_weighs_the_measured_kernels_of_like_launch_most() -> None:
    # one rung, measured at a small and a large launch, missing in opposite directions
    n = len(codemodel.FEATURES)
    at = codemodel.FEATURES.index("log_device_ms")

    def row(v: float) -> list[float]:
        r = [0.0] * n
        r[at] = v
        return r

    x = [row(-3.0)] * 3 + [row(3.0)] * 3
    keys = [("gemv", "cuda", "v2")] * 6
    off = codemodel.fit_offsets(keys, [1.0] * 3 + [-1.0] * 3, x)
    assert off.of(keys[0]) == pytest.approx(0.0)  # no launch given: the plain (zero) mean
    small, large = off.of(keys[0], row(-3.0)), off.of(keys[0], row(3.0))
    assert small > 0.5 and large < -0.5 and small == pytest.approx(-large)
    # rows that are not FEATURES rows (toy fits): every kernel of the rung weighs the same
    plain = codemodel.fit_offsets(keys, [1.0] + [0.0] * 5, [[0.0]] * 6)
    assert plain.of(keys[0], [5.0]) == pytest.approx(plain.of(keys[0]))


def test_serial_total_sums_every_pass_of_a_one_thread_walk() -> None:
    # a one-thread-per-row sampler walks its row once per pass: max, sum, draw (1.3.0)
    code = SERIAL_CUDA.replace(
        "    for (int j = threadIdx.x;",
        "    float top = 0.0f;\n    for (int i = 0; i < kV; ++i) top = fmaxf(top, p[i]);\n"
        "    for (int i = 0; i < 8; i++) mass -= top;\n    for (int j = threadIdx.x;",
    )
    c = codemodel.code_facts(code, "cuda")
    assert c["serial_trip"] == 50257.0  # the longest walk, as 1.2.0 read it
    assert (c["serial_total"], c["serial_loops"]) == (2 * 50257.0 + 8, 3.0)
    assert codemodel.code_facts(TRITON, "triton")["serial_total"] == 0.0  # no per-thread loops


def test_program_facts_charge_a_small_grid_one_sms_share_of_bandwidth() -> None:
    from types import SimpleNamespace

    from dagster_project.sim.hardware import get_gpu

    h100 = get_gpu("h100")

    def facts(grid: int) -> dict[str, float]:
        plan = SimpleNamespace(grid=grid, bytes=1.2e9, flops=0.0)
        return codemodel._program_facts(SimpleNamespace(plan=plan, device_ms=0.5), h100)

    few, many = facts(4), facts(8)
    assert few["log_sm_share_over_model"] - many["log_sm_share_over_model"] == pytest.approx(
        math.log(2)
    )
    assert few["log_bytes_per_program"] > many["log_bytes_per_program"]
    # 4 programs of 300 MB each at one SM's share (~25 GB/s): ~12 ms against a 0.5 ms model
    assert few["log_sm_share_over_model"] > math.log(10)


def test_pair_rows_pair_a_sessions_baseline_and_best_only() -> None:
    uses = [
        (("s1", 0, "baseline"),),
        (("s1", 1, "step"),),
        (("s1", 4, "best"), ("s2", 0, "baseline"), ("s2", 0, "best")),
        (("s3", 0, "baseline"),),  # its best is not among the rows
    ]
    assert codemodel.pair_rows(uses) == [(0, 2)]  # s2's best is its baseline: no pair


def test_the_pair_loss_fits_a_sessions_speedup_not_only_its_kernels() -> None:
    # feature 0 = baselines, 1 = bests; paired baselines run as modelled (0), unpaired ones
    # 2 log-units slow: the kernel loss puts baselines at their mean (1), the pair loss pulls
    # them toward what their sessions' speedups say (0)
    x = [[0.0]] * 20 + [[1.0]] * 10
    y = [0.0] * 10 + [2.0] * 10 + [0.0] * 10
    pairs = [(i, 20 + i) for i in range(10)]
    plain = codemodel.fit_boosted(x, y, pairs, pair_weight=0.0).predict([[0.0], [1.0]])
    paired = codemodel.fit_boosted(x, y, pairs, pair_weight=5.0).predict([[0.0], [1.0]])
    assert plain[0] - plain[1] == pytest.approx(1.0, abs=0.05)
    assert paired[0] - paired[1] < plain[0] - plain[1] - 0.2


def test_shipped_online_roles_name_answered_kernels_of_listed_sessions() -> None:
    import csv

    from dagster_project.sim.measured import online_roles, online_roles_path
    from dagster_project.sim.online import read_online
    from dagster_project.sim.oracle import online_answers_path

    with online_roles_path("h100").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    listed = {r["session_id"] for r in read_online("h100")}
    assert rows and {r["session_id"] for r in rows} <= listed
    keys = {r["key"] for r in load_rows("h100")}
    with online_answers_path("h100").open(newline="") as fh:
        keys |= {r["key"] for r in csv.DictReader(fh)}
    assert all(r["baseline_key"] in keys and r["best_key"] in keys for r in rows)
    roles = online_roles("h100")
    assert sum(len(v) for v in roles.values()) == 2 * len(rows)
    assert all(sid.endswith("~online") for v in roles.values() for sid, _s, _r in v)


def test_dev_cv_scores_a_sessions_speedup_by_its_two_kernels_errors() -> None:
    """``benchmarks/codemodel_dev_cv.py``: a speedup's log error is the baseline's error less
    the best's, and an online session is told apart from the evidence session of its task."""
    import importlib.util

    path = Path(__file__).resolve().parents[3] / "benchmarks/codemodel_dev_cv.py"
    spec = importlib.util.spec_from_file_location("codemodel_dev_cv", path)
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = script  # its dataclass looks its module up
    try:
        spec.loader.exec_module(script)
    finally:
        del sys.modules[spec.name]
    held = [
        Point("b", "gemv", "cuda", "v0", (("s", 0, "baseline"), ("s~online", 0, "baseline")),
              8.0, 4.0),
        Point("x", "gemv", "cuda", "v2", (("s", 5, "best"),), 1.0, 2.0),
        Point("y", "gemv", "cuda", "v3", (("s~online", 2, "best"),), 1.0, 1.0),
    ]  # fmt: skip
    got = {e.sid: e for e in script.session_errors(held)}
    assert got["s"].source == "evidence" and got["s~online"].source == "online"
    assert got["s"].log_ratio == pytest.approx(math.log(0.5) - math.log(2.0))  # 4x under
    assert got["s"].measured == 8.0
    assert script._share(list(got.values())) == "1/2 (50.0%)"  # the online one: 2x, within


def test_methods_together_and_over_processes_give_each_methods_own_result() -> None:
    from dagster_project.sim.measured import cross_validate_methods

    # real ops and rungs: the per-rung fit reads their levels
    rungs = (("gemv_fp16", "v0_scalar"), ("rope", "v1_coalesced"), ("gemm_fp16", "v2_mma_sync"))
    pts = [
        dataclasses.replace(
            _op_pt(f"a{i}", rungs[i % 3][0], i, -0.1 * (i % 4) + 0.05 * i), variant=rungs[i % 3][1]
        )
        for i in range(24)
    ]
    methods = ("rung", "ridge", "learner", "code")
    for by in ("session", "op"):
        alone = {m: cross_validate(pts, by, m) for m in methods}
        assert cross_validate_methods(pts, by, methods) == alone
        assert cross_validate_methods(pts, by, methods, jobs=2) == alone
    with pytest.raises(ValueError, match="not 'forest'"):
        cross_validate_methods(pts, "op", ("code", "forest"))
