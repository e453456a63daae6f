"""The runner's two process-wide modes: the warm-up shards' share of the card, and the
CPU-check patches (``COMMIT_EXEC_CPU_PATCH``), which must never switch on near a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dagster_project.commit_exec.device import runner
from dagster_project.commit_exec.device.runner import (
    CpuPatchRefused,
    cpu_patch_wanted,
    warm_memory_fraction,
)

ROOT = Path(__file__).resolve().parents[3]


def test_sharing_warm_up_processes_are_capped_to_their_share() -> None:
    assert warm_memory_fraction(True, 8) == pytest.approx(0.9 / 8)
    assert warm_memory_fraction(True, 2) == pytest.approx(0.45)
    # eight shards together stay under the card, leaving room for CUDA contexts
    assert 8 * (warm_memory_fraction(True, 8) or 1.0) < 1.0


def test_a_lone_or_timing_process_keeps_the_whole_card() -> None:
    assert warm_memory_fraction(True, 1) is None
    assert warm_memory_fraction(False, 8) is None
    assert warm_memory_fraction(False, 1) is None


def test_the_device_script_runs_sharing_warm_up_shards() -> None:
    """The cap only helps if the script's shards say they share (n > 1 in i/n)."""
    script = (ROOT / "benchmarks/device/commit_exec.sh").read_text()
    assert "COMMIT_EXEC_WARM=1 COMMIT_EXEC_SHARD=$i/" in script
    assert "COMMIT_EXEC_SHARD=$i/1 " not in script


def test_cpu_patch_is_off_unless_asked() -> None:
    assert cpu_patch_wanted({}, cuda_available=False) is False
    assert cpu_patch_wanted({"COMMIT_EXEC_CPU_PATCH": "0"}, cuda_available=True) is False


def test_cpu_patch_refuses_a_cuda_machine() -> None:
    env = {"COMMIT_EXEC_CPU_PATCH": "1", "TRITON_INTERPRET": "1"}
    with pytest.raises(CpuPatchRefused, match="CUDA"):
        cpu_patch_wanted(env, cuda_available=True)


def test_cpu_patch_refuses_without_the_interpreter() -> None:
    for interp in ({}, {"TRITON_INTERPRET": "0"}):
        with pytest.raises(CpuPatchRefused, match="TRITON_INTERPRET"):
            cpu_patch_wanted({"COMMIT_EXEC_CPU_PATCH": "1", **interp}, cuda_available=False)


def test_cpu_patch_applies_on_the_interpreter() -> None:
    env = {"COMMIT_EXEC_CPU_PATCH": "1", "TRITON_INTERPRET": "1"}
    assert cpu_patch_wanted(env, cuda_available=False) is True


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMMIT_EXEC", "TRITON"))}
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**env, "PYTHONPATH": path, "CUDA_VISIBLE_DEVICES": "", **extra}


def test_runner_process_refuses_the_patch_without_the_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    (tmp_path / "manifest.json").write_text(json.dumps({"rows": []}))
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", runner.__name__, str(tmp_path), str(out)],
        env=_env(COMMIT_EXEC_CPU_PATCH="1"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode != 0
    assert "CpuPatchRefused" in proc.stderr
    assert not out.exists() or out.read_text() == ""


def test_patched_autotune_runs_only_the_first_config(tmp_path: Path) -> None:
    """An autotuned kernel, a torch.cuda.device context, the H100's device queries, CUDA
    assertions, a bf16 ``tl.dot`` and float down-casts (both wrong in Triton 3.6's
    interpreter) under the interpreter."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    probe = tmp_path / "probe.py"
    probe.write_text(
        textwrap.dedent(
            """
            import torch, triton, triton.language as tl
            from dagster_project.commit_exec.device.runner import apply_cpu_patch
            apply_cpu_patch()
            seen = []

            @triton.autotune(
                configs=[triton.Config({"BLOCK": b}) for b in (16, 32, 64)], key=["n"]
            )
            @triton.jit
            def add_one(x_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

            x = torch.zeros(100)
            def grid(meta):
                seen.append(meta["BLOCK"])
                return (triton.cdiv(100, meta["BLOCK"]),)
            with torch.cuda.device(0):
                add_one[grid](x, 100)
            assert bool((x == 1).all()), x
            # files that query the device at import see the H100 the rows run on
            assert torch.cuda.get_device_capability() == (9, 0)
            assert torch.cuda.get_device_properties(torch.cuda.current_device()).warp_size == 32
            assert x.is_cuda  # launchers asserting CUDA inputs accept the check's tensors

            @triton.jit
            def bf16_dot(a_ptr, c_ptr, B: tl.constexpr):
                o = tl.arange(0, B)
                a = tl.load(a_ptr + o[:, None] * B + o[None, :])
                acc = tl.dot(a, a, tl.zeros((B, B), dtype=tl.float32))
                tl.store(c_ptr + o[:, None] * B + o[None, :], acc.to(tl.bfloat16))

            a = torch.randn(16, 16).to(torch.bfloat16)
            c = torch.empty(16, 16, dtype=torch.bfloat16)
            bf16_dot[(1,)](a, c, B=16)
            want = (a.float() @ a.float()).to(torch.bfloat16)
            assert torch.allclose(c.float(), want.float(), atol=2e-2, rtol=2e-2), c  # was 1e10

            @triton.jit
            def casts(x_ptr, f8_ptr, b16_ptr, B: tl.constexpr):
                o = tl.arange(0, B)
                v = tl.load(x_ptr + o)
                tl.store(f8_ptr + o, v.to(tl.float8e4nv))
                tl.store(b16_ptr + o, v.to(tl.bfloat16))

            v = torch.tensor([1.992, 0.498, 1000.0, -1000.0] + [1.0 + 2**-8 + 2**-20] * 4)
            f8 = torch.empty(8, dtype=torch.float8_e4m3fn)
            b16 = torch.empty(8, dtype=torch.bfloat16)
            casts[(1,)](v, f8, b16, B=8)
            # rounding up across a power of two carries (was 1.0, 0.25), fp8 saturates
            assert f8.float()[:4].tolist() == [2.0, 0.5, 448.0, -448.0], f8
            assert b16.float()[4].item() == 1.0 + 2**-7  # rounded to nearest, not truncated
            print("blocks", sorted(set(seen)))
            """
        )
    )
    proc = subprocess.run(
        [sys.executable, str(probe)],
        env=_env(TRITON_INTERPRET="1"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "blocks [16]" in proc.stdout


def test_the_timing_process_takes_rows_in_the_given_order() -> None:
    """TIME_ROWS sets the timing process's order (its time limit usually ends the list, so
    the rows a session most needs go first); unnamed rows keep the manifest's order."""
    rows = [{"id": i} for i in ("a", "b", "c", "d")]
    assert [r["id"] for r in runner.rows_in_order(rows, ["c", "a"])] == ["c", "a", "b", "d"]
    assert runner.rows_in_order(rows, None) == rows
    assert runner.rows_in_order(rows, []) == rows
