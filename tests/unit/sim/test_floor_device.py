"""The device-only floor (issue 36, 36r): what a measured device time is checked against.

Graph replay pays no host launch, so the floor a device time must clear has no launch term
and counts only the op's compulsory bytes. 322 of the online tier's 1,111 measured steps
were under the launch-inclusive floor; none may be under the device one. These tests fail
if the launch term creeps back into the device floor, if a shipped measurement is under
it (naming the op), or if ``check_session`` stops checking measured times."""

from __future__ import annotations

import csv
import json
import random
from dataclasses import replace
from importlib import resources
from typing import Any

import pytest

from dagster_project.sim.hardware import get_gpu
from dagster_project.sim.kernelinfer import (
    _baseline_params,
    build_tasks,
    check_session,
    simulate_session,
)
from dagster_project.sim.kernels import plan
from dagster_project.sim.ops import get_op
from dagster_project.sim.timing import (
    GRAPH_LAUNCH_US,
    device_floor_ms,
    floor_terms_ms,
    physical_floor_ms,
    predict,
    time_floor_ms,
)
from dagster_project.sim.variants import default_params, get_variant

H100 = get_gpu("h100")
ANSWER_FILES = ("h100_answers.csv", "h100_online_answers.csv")


def _kv_append_plan() -> tuple[Any, Any, dict[str, int], Any]:
    """One of the smallest kernels the H100 ran in the online tier: 4 tokens appended,
    1.29 µs per call under graph replay."""
    op = get_op("kv_append")
    shape = {"T": 4, "Hkv": 1, "D": 128, "page": 16}
    v = get_variant(op.family, "triton", "v2_vec_hints")
    kp = plan(op, shape, "bf16", H100, v, default_params(v, op, "bf16", shape, H100))
    return op, v, shape, kp


def test_the_device_floor_has_no_launch_term() -> None:
    op, _v, shape, kp = _kv_append_plan()
    floor = device_floor_ms(kp, H100, op, shape, "bf16")
    # launches do not move it; a launch-inclusive floor moves by the launch cost
    assert device_floor_ms(replace(kp, launches=7), H100, op, shape, "bf16") == floor
    assert physical_floor_ms(replace(kp, launches=7), H100, "triton") > physical_floor_ms(
        kp, H100, "triton"
    )
    # not even the device share of a launch (the H100 ran this kernel in 1.29 µs per call)
    assert floor < GRAPH_LAUNCH_US * 1e-3 / 10
    assert floor < 1.29e-3 < physical_floor_ms(kp, H100, "triton")
    # a plan that moves and computes nothing has a zero device floor
    empty = replace(kp, bytes=0.0, flops=0.0, sfu_ops=0.0)
    assert device_floor_ms(empty, H100, get_op("gemm_fp16"), {"M": 1, "N": 1, "K": 1}, "fp16") == 0


def test_the_floor_for_a_time_follows_what_the_time_includes() -> None:
    op, _v, shape, kp = _kv_append_plan()
    device = time_floor_ms(kp, H100, "triton", op, shape, "bf16", device=True)
    host = time_floor_ms(kp, H100, "triton", op, shape, "bf16", device=False)
    assert device == device_floor_ms(kp, H100, op, shape, "bf16")
    assert host == physical_floor_ms(kp, H100, "triton")
    assert device < host


@pytest.mark.parametrize(
    "op_name, impl, tag",
    [
        ("gemm_fp16", "cuda", "v0_naive"),
        ("mamba_step", "cuda", "v3_pipelined"),
        ("rmsnorm", "triton", "v2_multirow"),
        ("paged_kv_copy", "cuda", "v3_fused_ilp"),
        ("flash_prefill", "triton", "v2_pipelined"),
    ],
)
def test_a_modelled_time_clears_both_floors_and_the_device_floor_is_the_lower(
    op_name: str, impl: str, tag: str
) -> None:
    op = get_op(op_name)
    shape = op.sample(random.Random(5))
    dtype = [d for d in op.dtypes if d != "fp32"][0]
    try:
        v = get_variant(op.family, impl, tag)
    except KeyError:
        pytest.skip(f"{op_name} has no {impl} {tag}")
    pred = predict(op, shape, dtype, H100, v, default_params(v, op, dtype, shape, H100))
    device = device_floor_ms(pred.plan, H100, op, shape, dtype)
    assert device <= pred.floor_ms - pred.launch_ms + 1e-12
    assert pred.time_ms >= pred.floor_ms * (1 - 1e-9)
    assert pred.device_ms >= device


def _answers() -> list[dict[str, str]]:
    base = resources.files("dagster_project.sim") / "data" / "measured"
    rows: list[dict[str, str]] = []
    for name in ANSWER_FILES:
        with (base / name).open() as f:
            rows += [r for r in csv.DictReader(f) if r["status"] == "ok" and r["ms"]]
    return rows


def test_no_shipped_h100_measurement_is_under_its_device_floor() -> None:
    """Every timed ok answer (the evidence file's and the online tier's: 2,535 device
    times) clears the device floor; a failure names the op and the term that binds."""
    under: list[str] = []
    rows = _answers()
    assert len(rows) > 2000
    for a in rows:
        op, shape = get_op(a["op"]), json.loads(a["shape"])
        v = get_variant(op.family, a["impl"], a["variant"])
        params = json.loads(a["params"]) or default_params(v, op, a["dtype"], shape, H100)
        kp = plan(op, shape, a["dtype"], H100, v, params)
        if float(a["ms"]) < device_floor_ms(kp, H100, op, shape, a["dtype"]) * (1 - 2e-3):
            terms = floor_terms_ms(kp, H100, op, shape, a["dtype"])
            bound = max(terms, key=lambda k: terms[k])
            under.append(f"{a['op']} {a['impl']} {a['variant']} {shape}: {a['ms']} ms < {bound}")
    assert under == []


def _small_h100_session() -> dict[str, Any]:
    tasks = [
        t
        for t in build_tasks()[0]
        if t.gpu == "h100" and t.op == "kv_append" and t.shape["T"] <= 64
    ]
    return simulate_session(tasks[0])


def test_check_session_holds_a_measured_time_to_the_device_floor_only() -> None:
    s = _small_h100_session()
    assert check_session(s) == []
    op, gpu = get_op(s["op"]), get_gpu(s["gpu"])
    step = next(t for t in s["trace"] if t["status"] == "ok")
    v = get_variant(op.family, s["impl"], step["tag"])
    params = step["params"] if step["kind"] != "baseline" else _baseline_params(s, v)
    kp = plan(op, s["shape"], s["dtype"], gpu, v, params)
    device = device_floor_ms(kp, gpu, op, s["shape"], s["dtype"])
    host = physical_floor_ms(kp, gpu, s["impl"])
    # a measured device time under the launch-inclusive floor but over the device one is fine
    step["measured_ms"] = (device + host) / 2
    assert check_session(s) == []
    # one under the device floor is impossible: the violation names the op
    step["measured_ms"] = device * 0.9
    (violation,) = check_session(s)
    assert "(kv_append) measured_ms" in violation and "device-only" in violation
