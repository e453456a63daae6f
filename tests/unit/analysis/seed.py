"""A small synthetic lake with the exact columns the analysis views read.

Values are seeded-random but deliberately uneven where a view aggregates (several repos,
GPUs, dtypes and kernels; null speedups, hardware, PR numbers and audit flags; config keys
missing on one side; months with gaps), so an aggregate computed the wrong way, or a null
handled the wrong way, gives a wrong number rather than a lucky right one.

The frames are kept on :class:`Seed` so each test computes its expected values in Python
from the same rows the lake was built from, never from DuckDB.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from dagster_project.storage.lake import Lake

#: This synthetic lake's own seed: the unevenness the views' tests rely on (a gain with no
#: hardware, months with gaps) was drawn at it. It was the simulated datasets' build seed
#: until stop 39 and is kept here on its own, since nothing simulated is read from it.
SEED = 20260

TUNED_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String(),
    "prompt": pl.String(),
    "best_config": pl.String(),
    "kernel": pl.String(),
    "kernel_source": pl.String(),
    "repo": pl.String(),
    "config_path": pl.String(),
    "device_name": pl.String(),
    "gpu": pl.String(),
    "dtype": pl.String(),
    "E": pl.Int64(),
    "N": pl.Int64(),
    "K": pl.Int64(),
    "block_shape": pl.List(pl.Int64()),
    "M": pl.Int64(),
    "triton_version": pl.String(),
    "candidate_models": pl.List(pl.String()),
    "default_config": pl.String(),
    "config_pr_url": pl.String(),
    "config_pr_gains": pl.String(),
    "speedup_vs_default": pl.Float64(),
    "split": pl.String(),
    "license": pl.String(),
    "snapshot_commit": pl.String(),
    "family": pl.String(),
    "is_down": pl.Boolean(),
    "config_pr_number": pl.Int64(),
    "split_group": pl.String(),
}

COMMITS_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String(),
    "repo": pl.String(),
    "sha": pl.String(),
    "pr_number": pl.Int64(),
    "pr_url": pl.String(),
    "title": pl.String(),
    "authored_at": pl.Datetime("us", "UTC"),
    "path": pl.String(),
    "language": pl.String(),
    "before_code": pl.String(),
    "after_code": pl.String(),
    "diff": pl.String(),
    "prompt": pl.String(),
    "models_mentioned": pl.List(pl.String()),
    "hardware_mentioned": pl.List(pl.String()),
    "speedup_claims": pl.List(pl.String()),
    "pr_body": pl.String(),
    "gains": pl.String(),
    "kernel_speedup": pl.Float64(),
    "e2e_speedup": pl.Float64(),
    "license": pl.String(),
    "license_before": pl.String(),
    "license_after": pl.String(),
    "touches_kernel_body": pl.Boolean(),
    "is_binding_file": pl.Boolean(),
    "lines_changed": pl.Int64(),
    "rule": pl.String(),
    "split": pl.String(),
    # issue 35: execution columns (commit_exec.columns)
    "equivalent": pl.Boolean(),
    "measured_kernel_speedup": pl.Float64(),
    "measured_kernel_speedup_ci_lo": pl.Float64(),
    "measured_kernel_speedup_ci_hi": pl.Float64(),
    "measured_host_speedup": pl.Float64(),
    "measured_host_speedup_ci_lo": pl.Float64(),
    "measured_host_speedup_ci_hi": pl.Float64(),
    "measured_kernel_significant": pl.Boolean(),
    "measured_host_significant": pl.Boolean(),
    "exec_claim_hardware": pl.String(),
    "exec_toolchain": pl.String(),
}

GAINS_SCHEMA: dict[str, pl.DataType] = {
    "gain_id": pl.String(),
    "repo": pl.String(),
    "pr_number": pl.Int64(),
    "idx": pl.Int64(),
    "primary": pl.Boolean(),
    "scope": pl.String(),
    "metric": pl.String(),
    "baseline": pl.Float64(),
    "optimized": pl.Float64(),
    "stated_speedup": pl.Float64(),
    "speedup": pl.Float64(),
    "unit": pl.String(),
    "higher_is_better": pl.Boolean(),
    "hardware": pl.String(),
    "model": pl.String(),
    "shape": pl.String(),
    "batch_size": pl.Int64(),
    "extractor": pl.String(),
    "extractor_version": pl.String(),
    "model_used": pl.String(),
    "baseline_verbatim": pl.Boolean(),
    "optimized_verbatim": pl.Boolean(),
    "audit_pass": pl.Boolean(),
    "published": pl.Boolean(),
    "source": pl.String(),
}

SESSIONS_SCHEMA: dict[str, pl.DataType] = {
    "session_id": pl.String(),
    "op": pl.String(),
    "impl": pl.String(),
    "gpu": pl.String(),
    "arch": pl.String(),
    "dtype": pl.String(),
    "shape": pl.String(),
    "baseline_ms": pl.Float64(),
    "best": pl.Struct({"step": pl.Int64(), "time_ms": pl.Float64(), "speedup": pl.Float64()}),
    "num_steps": pl.Int64(),
    "elapsed_s": pl.Int64(),
    "shard": pl.Int64(),
}

STEPS_SCHEMA: dict[str, pl.DataType] = {
    "session_id": pl.String(),
    "step": pl.Int64(),
    "tag": pl.String(),
    "kind": pl.String(),
    "status": pl.String(),
    "time_ms": pl.Float64(),
    "kept": pl.Boolean(),
    "t_elapsed_s": pl.Int64(),
}

SWARM_SCHEMA: dict[str, pl.DataType] = {
    "episode_id": pl.String(),
    "scenario": pl.String(),
    "op": pl.String(),
    "impl": pl.String(),
    "gpu": pl.String(),
    "n_agents": pl.Int64(),
    "num_messages": pl.Int64(),
    "elapsed_s": pl.Int64(),
    "speedup": pl.Float64(),
}

CALIBRATION_SCHEMA: dict[str, pl.DataType] = {
    "op": pl.String(),
    "source": pl.String(),
    "variant": pl.String(),
    "gpu": pl.String(),
    "status": pl.String(),
    "measured_ms": pl.Float64(),
    "predicted_ms": pl.Float64(),
    "ratio": pl.Float64(),
    "predicted_before_ms": pl.Float64(),
    "ratio_before": pl.Float64(),
}
CONFIG_KEYS = (
    "BLOCK_SIZE_M",
    "BLOCK_SIZE_N",
    "BLOCK_SIZE_K",
    "GROUP_SIZE_M",
    "num_warps",
    "num_stages",
)
GPUS = {
    "NVIDIA_H100_80GB_HBM3": "H100",
    "NVIDIA_A100-SXM4-80GB": "A100",
    "AMD_Instinct_MI300X": "MI300X",
    "": "H200",  # a file without a device name: not counted among the card's device names
}
KERNELS = {
    "vllm": ["fused_moe_kernel", "_w8a8_block_fp8_matmul"],
    "sglang": ["fused_moe_kernel", "_per_token_group_quant_fp8"],
}
DTYPES = ["bf16", "fp8_w8a8", "int8_w8a16"]


@dataclass(frozen=True)
class Seed:
    lake: Lake
    tuned: pl.DataFrame
    commits: pl.DataFrame
    gains: pl.DataFrame
    sessions: pl.DataFrame
    steps: pl.DataFrame
    holdout: pl.DataFrame
    swarm: pl.DataFrame
    calibration: pl.DataFrame


def _frame(rows: list[dict[str, Any]], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema, orient="row")


def tuned_configs(rng: random.Random) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    f_idx = 0
    for repo, kernels in KERNELS.items():
        for kernel in kernels:
            for device, gpu in GPUS.items():
                if rng.random() < 0.25:
                    continue  # coverage has holes, as in the real matrix
                dtype = rng.choice(DTYPES)
                f_idx += 1
                path = f"configs/E={8 * f_idx},N=14336,device_name={device},dtype={dtype}.json"
                pr = 3000 + f_idx if f_idx % 3 else None
                for m in sorted(rng.sample([1, 2, 16, 64, 256, 4096, 262144], 3)):
                    best = {
                        k: rng.choice([16, 32, 64, 128]) for k in CONFIG_KEYS if rng.random() < 0.9
                    }
                    default = (
                        None
                        if f_idx % 5 == 0
                        else {k: rng.choice([16, 64]) for k in CONFIG_KEYS if rng.random() < 0.85}
                    )
                    rows.append(
                        {
                            "id": f"{repo}:{f_idx}:{m}",
                            "prompt": f"Tune {kernel} on {gpu} for M={m}",
                            "best_config": json.dumps(best),
                            "kernel": kernel,
                            "kernel_source": "@triton.jit\ndef k(): pass\n",
                            "repo": repo,
                            "config_path": path,
                            "device_name": device,
                            "gpu": gpu,
                            "dtype": dtype,
                            "E": 8 * f_idx,
                            "N": 14336,
                            "K": None,
                            "block_shape": [128, 128] if dtype == "fp8_w8a8" else None,
                            "M": m,
                            "triton_version": "3.2.0",
                            "candidate_models": ["Mixtral-8x7B"],
                            "default_config": None if default is None else json.dumps(default),
                            "config_pr_url": f"https://github.com/x/{repo}/pull/{pr}"
                            if pr
                            else None,
                            "config_pr_gains": "[]" if pr else None,
                            "speedup_vs_default": round(rng.uniform(0.9, 3.0), 3)
                            if pr and rng.random() < 0.7
                            else None,
                            "split": "test" if f_idx % 4 == 0 else "train",
                            "license": "Apache-2.0",
                            "snapshot_commit": f"{repo}-head",
                            "family": "moe" if "moe" in kernel else "gemm",
                            "is_down": False,
                            "config_pr_number": pr,
                            "split_group": f"{repo}/{kernel}/{gpu}",
                        }
                    )
    return _frame(rows, TUNED_SCHEMA)


def kernel_commits(rng: random.Random) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    repos = ["vllm", "sglang", "flashinfer"]
    licences = ["Apache-2.0"] * 6 + ["BSD-3-Clause", "MIT", "BSD"]
    for i in range(34):
        repo = repos[i % 3]
        # 2023-04 … 2026-10 with gaps and repeats; the 15th at noon is the same month in
        # every time zone, so the result does not depend on DuckDB's TimeZone setting.
        month_index = rng.randrange(0, 43)
        year, month = 2023 + (3 + month_index) // 12, (3 + month_index) % 12 + 1
        pr = 5000 + i // 2 if i % 5 else None
        has_gain = rng.random() < 0.6
        ran = i % 3 == 0  # issue 35: every third row executed, equivalent
        graph, host = round(rng.uniform(0.8, 3.0), 3), round(rng.uniform(0.8, 2.0), 3)
        rows.append(
            {
                "id": f"{repo}:{i}",
                "repo": repo,
                "sha": f"{i:040x}",
                "pr_number": pr,
                "pr_url": f"https://github.com/x/{repo}/pull/{pr}" if pr else None,
                "title": f"[Perf] faster kernel {i}",
                "authored_at": datetime(year, month, 15, 12, 0, tzinfo=UTC),
                "path": f"csrc/k{i}.cu",
                "language": "CUDA",
                "before_code": "a",
                "after_code": "b",
                "diff": "-a\n+b\n",
                "prompt": "Optimise.\n" + "x" * rng.randrange(10, 3000),
                "models_mentioned": [],
                "hardware_mentioned": ["H100"],
                "speedup_claims": ["up to 2-3x faster"]
                if i % 6 == 0
                else ["25% better"]
                if i % 4 == 1
                else [],
                "pr_body": "body",
                "gains": "[]",
                "kernel_speedup": round(rng.uniform(1.0, 4.0), 3) if has_gain else None,
                "e2e_speedup": round(rng.uniform(1.0, 1.4), 3) if has_gain and i % 2 else None,
                "license": rng.choice(licences),
                "license_before": "Apache-2.0",
                "license_after": "Apache-2.0",
                "touches_kernel_body": True,
                "is_binding_file": False,
                "lines_changed": 2,
                "rule": "title",
                "split": "test" if i >= 30 else "train",
                "equivalent": ran,
                "measured_kernel_speedup": graph if ran else None,
                "measured_kernel_speedup_ci_lo": round(graph * 0.97, 3) if ran else None,
                "measured_kernel_speedup_ci_hi": round(graph * 1.03, 3) if ran else None,
                "measured_host_speedup": host if ran else None,
                "measured_host_speedup_ci_lo": round(host * 0.9, 3) if ran else None,
                "measured_host_speedup_ci_hi": round(host * 1.1, 3) if ran else None,
                "measured_kernel_significant": (abs(graph - 1) > 0.06) if ran else None,
                "measured_host_significant": (abs(host - 1) > 0.2) if ran else None,
                "exec_claim_hardware": "amd" if ran and i % 12 == 0 else None,
                "exec_toolchain": "H100; Triton 3.6.0" if ran else None,
            }
        )
    return _frame(rows, COMMITS_SCHEMA)


def pr_gains(rng: random.Random) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    for i in range(40):
        repo = ["vllm", "sglang", "flashinfer"][i % 3]
        is_pair = rng.random() < 0.75
        extractor = "llm" if i % 4 == 0 else "table"
        base = round(rng.uniform(1.0, 10.0), 2) if is_pair else None
        opt = round(base / rng.uniform(0.8, 3.0), 2) if base is not None else None
        speedup = (
            round(base / opt, 4)
            if base and opt
            else (round(rng.uniform(1.0, 2.0), 2) if i % 3 else None)
        )
        audit = (rng.random() < 0.8) if is_pair and i % 7 else None
        rows.append(
            {
                "gain_id": f"g{i}",
                "repo": repo,
                "pr_number": 3000 + i // 3,
                "idx": i % 3,
                "primary": i % 3 != 2,
                "scope": "kernel" if rng.random() < 0.6 else "e2e",
                "metric": rng.choice(["latency", "throughput"]),
                "baseline": base,
                "optimized": opt,
                "stated_speedup": None,
                "speedup": speedup,
                "unit": "ms",
                "higher_is_better": False,
                "hardware": rng.choice(["H100", "A100", "MI300X", None]),
                "model": None,
                "shape": None,
                "batch_size": None,
                "extractor": extractor,
                "extractor_version": "1",
                "model_used": rng.choice(["Qwen3-235B-A22B-Instruct-2507", "gpt-oss-120b"])
                if extractor == "llm"
                else None,
                "baseline_verbatim": True,
                "optimized_verbatim": True,
                "audit_pass": audit,
                # the publication policy withholds some audited values (gains/policy.py)
                "published": bool(audit) and rng.random() < 0.75,
                "source": "table:columns",
            }
        )
    return _frame(rows, GAINS_SCHEMA)


def kernelinfer(rng: random.Random) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    sessions: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    for s in range(7):
        sid = f"ki-{s:04d}"
        n = rng.randrange(30, 60)
        baseline = round(rng.uniform(0.5, 5.0), 4)
        best_ms = round(baseline / rng.uniform(1.5, 30.0), 4)
        sessions.append(
            {
                "session_id": sid,
                "op": rng.choice(["gemm_fp16", "rmsnorm", "flash_decode"]),
                "impl": "cuda",
                "gpu": rng.choice(["h100", "a100"]),
                "arch": "sm_90",
                "dtype": "fp16",
                "shape": json.dumps({"M": 4096, "N": 4096}),
                "baseline_ms": baseline,
                "best": {
                    "step": n - 1,
                    "time_ms": best_ms,
                    "speedup": round(baseline / best_ms, 2),
                },
                "num_steps": n,
                "elapsed_s": rng.randrange(3700, 17_700),
                "shard": s // 4,
            }
        )
        for i in range(n):
            status = rng.choices(["ok", "compile_error", "wrong_result"], [0.8, 0.15, 0.05])[0]
            steps.append(
                {
                    "session_id": sid,
                    "step": i,
                    "tag": "v",
                    "kind": "edit",
                    "status": status,
                    "time_ms": 1.0 if status == "ok" else None,
                    "kept": status == "ok",
                    "t_elapsed_s": 60 * i,
                }
            )
    holdout = pl.DataFrame({"task_id": [f"h{i}" for i in range(5)], "op": ["gemm_fp16"] * 5})
    return _frame(sessions, SESSIONS_SCHEMA), _frame(steps, STEPS_SCHEMA), holdout


def kernelswarm(rng: random.Random) -> pl.DataFrame:
    rows = []
    for e in range(9):
        impl = "triton" if e % 4 == 0 else "cuda"
        rows.append(
            {
                "episode_id": f"ks-{e:04d}",
                "scenario": rng.choice(["dispatch", "campaign"]),
                "op": rng.choice(["rmsnorm", "rope", "swiglu_act", "fp8_gemm"])
                if impl == "cuda"
                else "triton_rmsnorm",
                "impl": impl,
                "gpu": rng.choice(["h100", "h200", "a10"]),
                "n_agents": rng.randrange(3, 21),
                "num_messages": rng.randrange(20, 150),
                "elapsed_s": rng.randrange(3600, 18_000),
                "speedup": round(rng.uniform(1.0, 9.0), 2),
            }
        )
    return _frame(rows, SWARM_SCHEMA)


def calibration(rng: random.Random) -> pl.DataFrame:
    """sim.calibration rows: two ops, three sources, failed points without a ratio."""
    rows = []
    for i in range(23):
        op = ["rmsnorm", "gemm_fp16"][i % 2]
        source = ["cuda_template", "triton_template", "torch"][i % 3]
        status = "ok" if i % 7 else rng.choice(["wrong_result", "error"])
        meas = round(rng.uniform(0.005, 2.0), 5)
        pred = round(meas * rng.choice([0.3, 0.7, 1.0, 1.2, 1.6, 4.0]), 5)
        before = round(meas * rng.uniform(0.1, 5.0), 5)
        ok = status == "ok"
        rows.append(
            {
                "op": op,
                "source": source,
                "variant": f"v{i % 5}",
                "gpu": "h200",
                "status": status,
                "measured_ms": meas if ok else None,
                "predicted_ms": pred,
                "ratio": pred / meas if ok else None,
                "predicted_before_ms": before,
                "ratio_before": before / meas if ok else None,
            }
        )
    return _frame(rows, CALIBRATION_SCHEMA)


def measured_configs(rng: random.Random) -> pl.DataFrame:
    """datasets.measured_configs rows (the columns the analysis view reads): two kernels,
    one superseded table the view leaves out."""
    rows = [
        {
            "measured_on": "NVIDIA H200",
            "kernel": ["fused_moe_kernel", "_w8a8_block_fp8_matmul"][i % 2],
            "quant": ["bf16", "fp8_block"][i % 2],
            "measured_speedup_vs_default": round(rng.uniform(0.9, 2.0), 3),
            "tuned_within_noise_of_best": i % 3 != 0,
            "default_faster_beyond_noise": i % 5 == 0,
            "superseded_reason": "launch grid not the engine's" if i == 7 else None,
        }
        for i in range(12)
    ]
    schema = {
        "measured_on": pl.String,
        "kernel": pl.String,
        "quant": pl.String,
        "measured_speedup_vs_default": pl.Float64,
        "tuned_within_noise_of_best": pl.Boolean,
        "default_faster_beyond_noise": pl.Boolean,
        "superseded_reason": pl.String,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def build(root: Path) -> Seed:
    """Write every seeded table into a fresh lake under ``root`` (the sessions and steps
    as Parquet partitions behind views, as the real build stores them)."""
    rng = random.Random(SEED)
    lake = Lake(root / "lake.duckdb", str(root / "lake"))
    tuned, commits, gains = tuned_configs(rng), kernel_commits(rng), pr_gains(rng)
    sessions, steps, holdout = kernelinfer(rng)
    swarm = kernelswarm(rng)
    calib = calibration(rng)
    lake.replace_table("datasets", "tuned_configs", tuned)
    lake.replace_table("datasets", "kernel_commits", commits)
    lake.replace_table("derived", "pr_gains", gains)
    for shard, part in sessions.group_by("shard", maintain_order=True):
        ids = part["session_id"]
        lake.write_partition("kernelinfer_sessions", f"{shard[0]:03d}", part)
        lake.write_partition(
            "kernelinfer_steps", f"{shard[0]:03d}", steps.filter(pl.col("session_id").is_in(ids))
        )
    lake.refresh_view("sim", "kernelinfer_sessions")
    lake.refresh_view("sim", "kernelinfer_steps")
    lake.replace_table("sim", "kernelinfer_tasks_holdout", holdout)
    lake.replace_table("sim", "kernelswarm_episodes", swarm)
    lake.replace_table("sim", "calibration", calib)
    lake.replace_table("datasets", "measured_configs", measured_configs(rng))
    return Seed(lake, tuned, commits, gains, sessions, steps, holdout, swarm, calib)


# -- expected-value helpers (plain Python, independent of DuckDB) ------------------------------
def quantile_cont(values: list[float], q: float) -> float | None:
    """DuckDB's ``quantile_cont``: linear interpolation between closest ranks."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    pos = q * (len(xs) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: list[float]) -> float | None:
    return quantile_cont(values, 0.5)
