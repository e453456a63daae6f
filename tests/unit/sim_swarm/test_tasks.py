"""Task specs: coverage of the card, balance, ids, and a holdout disjoint from the episodes."""

from __future__ import annotations

from collections import Counter

import pytest

from dagster_project.settings import DEFAULT_SIM_SEED
from dagster_project.sim import kernelswarm as ks
from dagster_project.sim.hardware import GPU_IDS
from dagster_project.sim.swarm.spec import CARD_OPS, sim_op

CARD_NAMES = [
    "flash_decode",
    "swa_decode",
    "gemm_fp16",
    "int8_gemm",
    "fp8_gemm",
    "int4_gemv",
    "rmsnorm",
    "rope",
    "swiglu_act",
    "topk_sample",
    "nucleus_sample",
    "mamba_scan",
    "moe_scatter",
    "kv_append",
    "fused_qkv_rope",
    "triton_flash_decode",
    "triton_rmsnorm",
]


def test_card_op_names_map_to_14_cuda_and_3_triton() -> None:
    assert sorted(CARD_OPS) == sorted(CARD_NAMES)
    impls = Counter(impl for _op, impl in CARD_OPS.values())
    assert impls == {"cuda": 14, "triton": 3}
    assert CARD_OPS["fused_qkv_rope"] == ("fused_qkv_rope", "triton")
    assert sim_op("triton_rmsnorm") == "rmsnorm"


def test_default_build_covers_and_balances() -> None:
    specs, holdout = ks.build_swarm_tasks()
    ops = Counter(s.card_op for s in specs)
    assert set(ops) == set(CARD_NAMES) and max(ops.values()) - min(ops.values()) <= 1
    assert {s.task.gpu for s in specs} == set(GPU_IDS)
    for op in CARD_NAMES:
        gpus = Counter(s.task.gpu for s in specs if s.card_op == op)
        assert set(gpus) == set(GPU_IDS), op
    combos = [(s.task.op, s.task.impl, s.task.gpu, s.task.shape_items, s.task.dtype) for s in specs]
    assert len(set(combos)) == len(combos)
    assert len(holdout) == ks.DEFAULT_HOLDOUT == 170
    assert [s.index for s in specs] == list(range(len(specs)))


def test_holdout_is_disjoint_from_episodes() -> None:
    specs, holdout = ks.build_swarm_tasks()
    used = {(s.task.op, s.task.gpu, s.task.shape_items) for s in specs}
    held = {(t.op, t.gpu, t.shape_items) for t in holdout}
    assert used.isdisjoint(held)  # on the simulator op, so also across CUDA/Triton twins
    frame = ks.swarm_holdout_frame(holdout)
    assert frame.columns == ["op", "impl", "gpu", "arch", "dtype", "shape"]
    assert set(frame["op"]) == set(CARD_NAMES)


def test_episode_id_format() -> None:
    specs, _ = ks.build_swarm_tasks()
    s = specs[74]
    assert s.episode_id.startswith(f"{s.card_op}_{s.task.gpu}_")
    assert s.episode_id.endswith(f"_{s.scenario}_74")
    assert len({x.episode_id for x in specs}) == len(specs)


def test_shards_beyond_the_build_are_empty() -> None:
    assert ks.generate_swarm_shard(24) == []
    assert ks.generate_swarm_shard(3, n_episodes=150) == []
    with pytest.raises(ValueError):
        ks.generate_swarm_shard(-1)


def test_a_pool_larger_than_the_shape_space_fails_fast_naming_the_op() -> None:
    """Each (op, gpu, shape, dtype) is drawn at most once: asking for more than an op's
    shape set holds stops with an error instead of drawing forever (a 10x kernelswarm
    build used to hang here)."""
    import time

    from dagster_project.sim.tasks import PoolExhausted, build_pool

    t0 = time.monotonic()
    with pytest.raises(PoolExhausted, match="moe_scatter") as err:
        build_pool(1, 100_000, ops=("moe_scatter",), impls={"moe_scatter": "cuda"}, namespace="t")
    assert time.monotonic() - t0 < 30
    drawn = int(str(err.value).split("only ")[1].split(" ")[0])
    assert 400 < drawn < 100_000
    # exactly that many can be drawn, and they are unique
    pool = build_pool(1, drawn, ops=("moe_scatter",), impls={"moe_scatter": "cuda"}, namespace="t")
    assert len({(t.gpu, t.shape_items, t.dtype) for t in pool}) == drawn
    with pytest.raises(PoolExhausted):
        ks.build_swarm_tasks(DEFAULT_SIM_SEED, 24_000)
