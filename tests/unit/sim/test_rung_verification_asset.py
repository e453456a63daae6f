"""sim_rung_verification: a fresh build writes sim.rung_verification from the shipped
evidence (no GPU, no nvcc), and the session check blocks a best kernel that is not a
verified rung."""

from __future__ import annotations

import copy
from pathlib import Path

import dagster as dg

from assets.simulated import sim_rung_verification
from dagster_project.sim.kernelinfer import check_session, simulate_session
from dagster_project.sim.tasks import TaskSpec
from dagster_project.sim.verification import verification_rows
from dagster_project.storage.lake import Lake
from dagster_project.wiring.resources import LakeResource


def test_asset_writes_every_rung_row(kh_home: Path) -> None:
    res = dg.materialize(
        [sim_rung_verification], resources={"lake": LakeResource(home=str(kh_home))}
    )
    assert res.success
    lake = Lake(kh_home / "lake.duckdb", str(kh_home / "lake"))
    df = lake.read_table("sim", "rung_verification")
    assert df.height == len(verification_rows())
    for col in ("op", "impl", "variant", "family", "status", "compile_status", "mismatch"):
        assert col in df.columns
    wrong = df.filter(
        (df["op"] == "flash_decode")
        & (df["variant"] == "v4_wgmma_tma")
        & (df["family"] == "sm_90a")
    )
    assert wrong["status"].to_list() == ["wrong"]
    md = res.asset_materializations_for_node("sim_rung_verification")[0].metadata
    assert md["dagster/row_count"].value == df.height
    assert md["verified"].value + md["wrong"].value + md["unverified"].value == df.height


def test_session_check_blocks_an_unverified_best_kernel() -> None:
    task = TaskSpec(0, "rmsnorm", "cuda", "h100", "bf16", (("T", 2048), ("H", 4096)), 5)
    s = simulate_session(task, 7)
    assert check_session(s) == []
    assert s["best"]["step"] is not None
    bad = copy.deepcopy(s)
    step = bad["best"]["step"]
    bad["trace"][step]["status"] = "unverified"
    assert any("not a verified ok" in v for v in check_session(bad))
