"""Small synthetic lakes with the publish inputs' exact columns.

Values are random but seeded, and varied where the card aggregates them (several GPUs,
dtypes, kernels, languages, licences, missing gains), so that a statistic computed the
wrong way shows up as a wrong number. The simulated sessions are built as card-format dicts
and stored through the simulator's own ``session_frames``, so the lake has exactly the
schema the real build writes and the dicts are the expected export rows.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from dagster_project.commit_exec.columns import attach_execution, empty_runs
from dagster_project.mining.commits.task_kind import attach_task_kind
from dagster_project.sim.kernelinfer import session_frames
from dagster_project.storage.lake import Lake

GPUS = {
    "NVIDIA_H100_80GB_HBM3": "H100",
    "NVIDIA_A100-SXM4-80GB": "A100",
    "AMD_Instinct_MI300X": "MI300X",
}
DTYPES = ["bf16", "fp8_w8a8", "int8_w8a16"]
KERNELS = {"vllm": ["fused_moe_kernel", "_w8a8_block_fp8_matmul"], "sglang": ["fused_moe_kernel"]}

LICENSES = {
    "vllm": {"LICENSE": b"Apache License 2.0 (vllm fixture)\n"},
    "sglang": {"LICENSE": b"Apache License 2.0 (sglang fixture)\n"},
    "flashinfer": {
        "LICENSE": b"Apache License 2.0 (flashinfer fixture)\n",
        "NOTICE": b"FlashInfer NOTICE\n",
    },
}

REWARD_MODULE = (
    '"""Fixture reward module."""\n\n\n'
    "def patch_reward(completion, before_code, after_code):\n    return 0.0\n"
)


def new_lake(root: Path) -> Lake:
    return Lake(root / "lake.duckdb", str(root / "lake"))


# -- kernel-opt-rl ---------------------------------------------------------------------------
def tuned_configs_frame(rng: random.Random) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    files = []
    for repo, kernels in KERNELS.items():
        for kernel in kernels:
            for device in GPUS:
                files.append((repo, kernel, device, rng.choice(DTYPES)))
    for f_idx, (repo, kernel, device, dtype) in enumerate(files):
        split = "test" if f_idx % 4 == 3 else "train"
        e, n = rng.choice([(8, 14336), (64, 1536), (256, 2048)])
        path = f"configs/E={e},N={n},device_name={device},dtype={dtype}.json"
        pr = f"https://github.com/x/{repo}/pull/{100 + f_idx}" if f_idx % 3 else None
        gains = (
            json.dumps([{"scope": "kernel", "baseline": 2.0, "optimized": 1.0, "speedup": 2.0}])
            if pr and f_idx % 2
            else (json.dumps([]) if pr else None)
        )
        for m in rng.sample([1, 2, 4, 16, 64, 256, 1024, 4096, 65536], 4):
            speedup = (
                round(rng.uniform(0.95, 2.5), 3)
                if gains and gains != "[]" and rng.random() < 0.7
                else None
            )
            rows.append(
                {
                    "id": f"{repo}:{path}:{m}",
                    "prompt": f"Tune {kernel} for {device} M={m}",
                    "best_config": json.dumps({"BLOCK_SIZE_M": 64, "num_warps": 4}),
                    "kernel": kernel,
                    "kernel_source": "@triton.jit\ndef k(): pass\n",
                    "repo": repo,
                    "config_path": path,
                    "loaded_at_runtime": m != 1,
                    "not_loaded_reason": "not opened by the lookup" if m == 1 else None,
                    # Every fifth file repeats an earlier file's table (issue 41).
                    "copied_from": "configs/original.json" if f_idx % 5 == 4 else None,
                    "device_name": device,
                    "gpu": GPUS[device],
                    "dtype": dtype,
                    "E": e,
                    "N": n,
                    "K": None,
                    "block_shape": "[128,128]" if dtype == "fp8_w8a8" else None,
                    "M": m,
                    "triton_version": rng.choice(["3.1.0", "3.2.0"]),
                    "candidate_models": rng.sample(
                        ["Mixtral-8x7B", "DeepSeek-V3", "Qwen3-30B-A3B"], 2
                    ),
                    "default_config": json.dumps({"BLOCK_SIZE_M": 16, "num_warps": 4}),
                    "config_pr_url": pr,
                    "config_pr_gains": gains,
                    "speedup_vs_default": speedup,
                    "split": split,
                    "license": "Apache-2.0",
                    "snapshot_commit": f"{repo}-head",
                }
            )
    schema = {
        "id": pl.String,
        "prompt": pl.String,
        "best_config": pl.String,
        "kernel": pl.String,
        "kernel_source": pl.String,
        "repo": pl.String,
        "config_path": pl.String,
        "loaded_at_runtime": pl.Boolean,
        "not_loaded_reason": pl.String,
        "copied_from": pl.String,
        "device_name": pl.String,
        "gpu": pl.String,
        "dtype": pl.String,
        "E": pl.Int64,
        "N": pl.Int64,
        "K": pl.Int64,
        "block_shape": pl.String,
        "M": pl.Int64,
        "triton_version": pl.String,
        "candidate_models": pl.List(pl.String),
        "default_config": pl.String,
        "config_pr_url": pl.String,
        "config_pr_gains": pl.String,
        "speedup_vs_default": pl.Float64,
        "split": pl.String,
        "license": pl.String,
        "snapshot_commit": pl.String,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def kernel_commits_frame(rng: random.Random) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    start = datetime(2023, 4, 3, 12, 0)
    languages = [("CUDA", ".cu"), ("C++", ".cpp"), ("Triton", ".py")]
    for i in range(26):
        repo = ["vllm", "sglang", "flashinfer"][i % 3]
        pr_number = 5000 + i // 2 if i % 5 else None
        language, ext = languages[i % 3]
        has_gains = i % 3 == 0
        licence = "BSD-3-Clause" if i in (4, 9) else ("MIT" if i == 13 else "Apache-2.0")
        rows.append(
            {
                "id": f"{repo}:{i}",
                "repo": repo,
                "sha": f"{i // 2:040x}",
                "pr_number": pr_number,
                "pr_url": f"https://github.com/x/{repo}/pull/{pr_number}" if pr_number else None,
                "title": f"[Perf] speed up kernel {i}",
                "rule": "core" if i % 3 else "broad",
                "authored_at": start + timedelta(days=47 * i),
                "path": f"csrc/kernel_{i}{ext}",
                "language": language,
                "before_code": "int a;\n" * (i + 1),
                "after_code": "int b;\n" * (i + 1),
                "diff": "-int a;\n+int b;\n",
                "prompt": "Optimise this kernel.\n" + "x" * (100 * i),
                "models_mentioned": ["Llama-3-8B"] if i % 2 else [],
                "hardware_mentioned": ["H100"],
                "speedup_claims": ["1.5x"] if i % 4 == 0 else [],
                "pr_body": "Benchmarks: before 2 ms, after 1 ms",
                "gains": json.dumps([{"scope": "kernel", "speedup": 2.0}]) if has_gains else "[]",
                "kernel_speedup": round(rng.uniform(1.0, 4.0), 3) if has_gains else None,
                "e2e_speedup": round(rng.uniform(1.0, 1.3), 3)
                if has_gains and i % 2 == 0
                else None,
                "license": licence,
                "split": "test" if i >= 22 else "train",
                "touches_kernel_body": i % 2 == 0,
                "is_binding_file": i % 7 == 0,
                "hardware_from_code": ["H100"] if i % 2 else [],
                "touches_cpu_kernel": i % 9 == 0,
                "reverted_by": "f" * 40 if i == 5 else None,
                "duplicate_of": f"vllm:{i - 1}" if i == 6 else None,
            }
        )
    schema = {
        "id": pl.String,
        "repo": pl.String,
        "sha": pl.String,
        "pr_number": pl.Int64,
        "pr_url": pl.String,
        "title": pl.String,
        "rule": pl.String,
        "authored_at": pl.Datetime("us"),
        "path": pl.String,
        "language": pl.String,
        "before_code": pl.String,
        "after_code": pl.String,
        "diff": pl.String,
        "prompt": pl.String,
        "models_mentioned": pl.List(pl.String),
        "hardware_mentioned": pl.List(pl.String),
        "speedup_claims": pl.List(pl.String),
        "pr_body": pl.String,
        "gains": pl.String,
        "kernel_speedup": pl.Float64,
        "e2e_speedup": pl.Float64,
        "license": pl.String,
        "split": pl.String,
        "touches_kernel_body": pl.Boolean,
        "is_binding_file": pl.Boolean,
        "hardware_from_code": pl.List(pl.String),
        "touches_cpu_kernel": pl.Boolean,
        "reverted_by": pl.String,
        "duplicate_of": pl.String,
    }
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    # The execution census of every row (the real rule, on these rows' code), no run, and
    # each row's task_kind by the real rule (issue 41).
    return attach_task_kind(attach_execution(frame, empty_runs()))


def repo_heads_frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "repo": ["flashinfer", "sglang", "vllm"],
            "source": [
                "/home/someone/flashinfer",
                "https://github.com/sgl-project/sglang",
                "/srv/vllm",
            ],
            "ref": ["HEAD"] * 3,
            "head_sha": ["f" * 40, "5" * 40, "a1b2c3d4" * 5],
            "head_date": [
                "2026-10-20T08:00:00+00:00",
                "2026-10-21T09:30:00+00:00",
                "2026-10-19T17:45:00+00:00",
            ],
            "commit_count": [3100, 9800, 21000],
            "partial_clone": [True, True, True],
            "action": ["fetch"] * 3,
            "fetched_at": ["2026-10-22T00:00:00Z"] * 3,
        }
    )


def build_kernel_opt_rl_lake(lake: Lake, seed: int = 7) -> None:
    rng = random.Random(seed)
    lake.replace_table("datasets", "tuned_configs", tuned_configs_frame(rng))
    lake.replace_table("datasets", "kernel_commits", kernel_commits_frame(rng))
    lake.replace_table("raw", "repo_heads", repo_heads_frame())


# -- kernelinfer -------------------------------------------------------------------------------
def _hms(seconds: int) -> str:
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def make_session(i: int, rng: random.Random) -> dict[str, Any]:
    """One card-format session dict (what the export must write back, field for field)."""
    op, impl, shape = rng.choice(
        [
            ("swiglu_act", "cuda", {"M": 256, "N": 5632}),
            ("topk_sample", "triton", {"B": 8 * (i + 1), "V": 50257}),
            ("rmsnorm", "cuda", {"M": 64 * (i + 1), "N": 4096}),
        ]
    )
    gpu, arch = rng.choice([("h100", "sm_90a"), ("a10", "sm_86"), ("rtx_5090", "sm_120")])
    dtype = rng.choice(["fp16", "bf16"])
    baseline = round(rng.uniform(0.05, 1.0), 4)
    n_steps = rng.randint(3, 7)
    trace = [
        {
            "step": 0,
            "tag": "v0_scalar",
            "kind": "baseline",
            "params": {},
            "status": "ok",
            "time_ms": baseline,
            "kept": True,
        }
    ]
    best_ms, best_step, t = baseline, 0, 0
    messages = [
        {"role": "system", "content": "You are a kernel optimiser. Reply with kernel source only."},
        {"role": "user", "content": f"Task: {op} on {gpu} {shape} {dtype}"},
        {"role": "assistant", "content": "__global__ void k() {}"},
    ]
    t += rng.randint(300, 900)
    messages.append({"role": "user", "content": f"[t+{_hms(t)}] RESULT ok baseline {baseline} ms"})
    for step in range(1, n_steps):
        status = rng.choice(["ok", "ok", "ok", "compile_error", "wrong_result"])
        time_ms = round(best_ms * rng.uniform(0.5, 1.1), 4) if status == "ok" else None
        kept = time_ms is not None and time_ms < best_ms
        if kept:
            best_ms, best_step = time_ms, step
        trace.append(
            {
                "step": step,
                "tag": f"v{step}_tiled",
                "kind": "variant" if step % 2 else "tune",
                "params": {"BLOCK": 64 * step, "num_warps": 4},
                "status": status,
                "time_ms": time_ms,
                "kept": kept,
            }
        )
        t += rng.randint(300, 1800)
        messages.append({"role": "assistant", "content": f"__global__ void k{step}() {{}}"})
        messages.append({"role": "user", "content": f"[t+{_hms(t)}] RESULT {status}"})
    session_id = f"{impl}_{op}-{gpu}-{','.join(f'{k}={v}' for k, v in shape.items())}-{dtype}-s{i}"
    return {
        "session_id": session_id,
        "op": op,
        "impl": impl,
        "gpu": gpu,
        "arch": arch,
        "dtype": dtype,
        "shape": shape,
        "signature": f"{op}(x[M,N] {dtype}) -> y[M,N] {dtype}",
        "desc": f"y = {op}(x)",
        "objective": "minimize latency_ms",
        "baseline_ms": baseline,
        "best": {"step": best_step, "time_ms": best_ms, "speedup": round(baseline / best_ms, 2)},
        "attempts": {
            "kept": sum(1 for s in trace[1:] if s["kept"]),
            "reverted": sum(1 for s in trace[1:] if not s["kept"]),
            "errors": sum(1 for s in trace if s["status"] != "ok"),
            "rebench": 0,
        },
        "elapsed_s": t,
        "elapsed_hms": _hms(t),
        "num_steps": len(trace),
        "trace": trace,
        "messages": messages,
    }


def holdout_frame(n: int) -> pl.DataFrame:
    rows = [
        {
            "task_id": f"task-{i:03d}",
            "op": "flash_decode",
            "impl": "cuda",
            "gpu": "h200",
            "arch": "sm_90a",
            "dtype": "fp16",
            "shape": json.dumps({"B": 4 * (i + 1), "H": 32, "S": 4096, "D": 128}),
            "signature": "flash_decode(q[B,H,D] fp16, …) -> o[B,H,D] fp16",
            "desc": "softmax(q·Kᵀ/√d)·V over a paged cache",
            "objective": "minimize latency_ms",
            "prompt": f"Write a fast flash_decode kernel (task {i})",
        }
        for i in range(n)
    ]
    return pl.DataFrame(rows)


def build_kernelinfer_lake(
    lake: Lake, shard_sizes: tuple[int, ...] = (4, 3, 2), seed: int = 11
) -> list[list[dict[str, Any]]]:
    """Sessions in shards (one Parquet partition each); returns the session dicts per shard."""
    rng = random.Random(seed)
    shards: list[list[dict[str, Any]]] = []
    counter = 0
    for shard, size in enumerate(shard_sizes):
        sessions = []
        for _ in range(size):
            sessions.append(make_session(counter, rng))
            counter += 1
        frame, _steps = session_frames(sessions, shard=shard)
        lake.write_partition("kernelinfer_sessions", f"{shard:03d}", frame)
        shards.append(sessions)
    lake.refresh_view("sim", "kernelinfer_sessions")
    lake.replace_table("sim", "kernelinfer_tasks_holdout", holdout_frame(5))
    return shards


# -- kernelswarm -------------------------------------------------------------------------------
_AGENT = pl.Struct(
    {
        "id": pl.String,
        "role": pl.String,
        "skill": pl.Float64,
        "tries": pl.Int64,
        "kept": pl.Int64,
        "best_ms": pl.Float64,
    }
)
_MESSAGE = pl.Struct(
    {
        "kind": pl.String,
        "role": pl.String,
        "sender": pl.String,
        "to": pl.String,
        "content": pl.String,
        "params": pl.String,
        "status": pl.String,
        "time_ms": pl.Float64,
        "reward": pl.Float64,
    }
)


def make_episode(i: int, rng: random.Random) -> dict[str, Any]:
    n_agents = rng.randint(2, 6)
    agents = [
        {
            "id": f"a{j:02d}",
            "role": "worker",
            "skill": round(rng.uniform(0.5, 1.0), 2),
            "tries": 3,
            "kept": 1,
            "best_ms": 0.01,
        }
        for j in range(1, n_agents + 1)
    ]
    messages = [
        {
            "kind": "plan",
            "role": "lead",
            "sender": "lead",
            "to": None,
            "content": "split by variant",
            "params": None,
            "reward": None,
        },
        {
            "kind": "dispatch",
            "role": "lead",
            "sender": "lead",
            "to": "a01",
            "content": "try tiled",
            "params": None,
            "reward": None,
        },
        {
            "kind": "candidate",
            "role": "agent",
            "sender": "a01",
            "to": None,
            "content": "__global__ void k() {}",
            "params": json.dumps({"BLOCK": 128}),
            "reward": None,
        },
        {
            "kind": "result",
            "role": "env",
            "sender": "env",
            "to": "a01",
            "content": "ok 0.01 ms",
            "params": None,
            # the real schema's result status and time (issue 39's reward table reads both)
            "status": "unverified" if i % 5 == 0 else "ok",
            "time_ms": 0.01,
            "reward": -0.05 if i % 5 == 0 else 0.5,
        },
        {
            "kind": "verdict",
            "role": "lead",
            "sender": "lead",
            "to": None,
            "content": "done",
            "params": None,
            "status": "improved",
            "time_ms": None,
            "reward": 0.25,
        },
    ]
    for m in messages:
        m.setdefault("status", None)
        m.setdefault("time_ms", None)
    baseline = round(rng.uniform(0.1, 1.0), 4)
    best = round(baseline / rng.uniform(2, 60), 5)
    return {
        "episode_id": f"flash_decode_h100_B={i}_dispatch_{i}",
        "scenario": rng.choice(["dispatch", "parallel_sweep", "pipeline", "campaign"]),
        "n_agents": n_agents,
        "op": rng.choice(["flash_decode", "rmsnorm", "triton_rmsnorm"]),
        "impl": "cuda" if i % 4 else "triton",
        "gpu": rng.choice(["h100", "a100"]),
        "arch": "sm_90a",
        "dtype": "fp16",
        "shape": json.dumps({"B": i + 1, "H": 32}),
        "baseline_ms": baseline,
        "best_ms": best,
        "speedup": round(baseline / best, 2),
        "elapsed_s": rng.randint(3600, 18000),
        "agents": agents,
        "num_messages": len(messages),
        "messages": messages,
    }


def build_kernelswarm_lake(lake: Lake, episodes: int = 130, seed: int = 5) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = [make_episode(i, rng) for i in range(episodes)]
    schema = {
        "episode_id": pl.String,
        "scenario": pl.String,
        "n_agents": pl.Int64,
        "op": pl.String,
        "impl": pl.String,
        "gpu": pl.String,
        "arch": pl.String,
        "dtype": pl.String,
        "shape": pl.String,
        "baseline_ms": pl.Float64,
        "best_ms": pl.Float64,
        "speedup": pl.Float64,
        "elapsed_s": pl.Int64,
        "agents": pl.List(_AGENT),
        "num_messages": pl.Int64,
        "messages": pl.List(_MESSAGE),
    }
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    lake.write_partition("kernelswarm_episodes", "000", frame)
    lake.refresh_view("sim", "kernelswarm_episodes")
    holdout = holdout_frame(3).select("task_id", "op", "impl", "gpu", "arch", "dtype", "shape")
    lake.replace_table("sim", "kernelswarm_tasks_holdout", holdout)
    return rows
